package acpbridge

import (
	"encoding/json"
	"strings"
)

// The gateway's event types the bridge reads.
const (
	evMessageDelta      = "message.delta"
	evReasoningDelta    = "reasoning.delta"
	evToolCallStarted   = "tool_call.started"
	evToolCallCompleted = "tool_call.completed"
	evPlanUpdated       = "plan.updated"
	evApprovalRequested = "approval.requested"
	evApprovalResolved  = "approval.resolved"
	evTurnStarted       = "turn.started"
	evTurnCompleted     = "turn.completed"
	evRunCompleted      = "run.completed"
)

// update is one ACP SessionUpdate: its sessionUpdate discriminator and
// the fields of that variant.
type update map[string]any

// toolCall is what the bridge keeps of a started tool call, for the
// permission request that may follow it.
type toolCall struct {
	Title    string
	Kind     string
	RawInput json.RawMessage
}

// updateOf maps one event to the session/update it becomes, and keeps a
// started tool call in tools (by its id). Events with no ACP counterpart
// (usage, warnings, the run's own lifecycle) map to nothing: ok is false.
func updateOf(ev Event, tools map[string]toolCall) (update, bool) {
	switch ev.Type {
	case evMessageDelta, evReasoningDelta:
		var d struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.Text == "" {
			return nil, false
		}
		kind := "agent_message_chunk"
		if ev.Type == evReasoningDelta {
			kind = "agent_thought_chunk"
		}
		return update{"sessionUpdate": kind, "content": textBlock(d.Text)}, true
	case evToolCallStarted:
		var d struct {
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.ID == "" {
			return nil, false
		}
		tc := toolCall{Title: toolTitle(d.Name, d.Input), Kind: toolKind(d.Name), RawInput: d.Input}
		tools[d.ID] = tc
		u := update{"sessionUpdate": "tool_call", "toolCallId": d.ID, "title": tc.Title, "kind": tc.Kind, "status": "pending"}
		if len(d.Input) > 0 && json.Valid(d.Input) {
			u["rawInput"] = d.Input
		}
		return u, true
	case evToolCallCompleted:
		var d struct {
			ID      string `json:"id"`
			Output  string `json:"output"`
			IsError bool   `json:"is_error"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.ID == "" {
			return nil, false
		}
		status := "completed"
		if d.IsError {
			status = "failed"
		}
		u := update{"sessionUpdate": "tool_call_update", "toolCallId": d.ID, "status": status}
		if d.Output != "" {
			u["content"] = []any{map[string]any{"type": "content", "content": textBlock(d.Output)}}
		}
		return u, true
	case evPlanUpdated:
		var d struct {
			Steps []struct {
				Step   string `json:"step"`
				Status string `json:"status"`
			} `json:"steps"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			return nil, false
		}
		entries := make([]any, 0, len(d.Steps))
		for _, s := range d.Steps {
			entries = append(entries, map[string]any{"content": s.Step, "priority": "medium", "status": planStatus(s.Status)})
		}
		return update{"sessionUpdate": "plan", "entries": entries}, true
	}
	return nil, false
}

func textBlock(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// planStatus keeps the three statuses both sides share; anything else
// is pending.
func planStatus(s string) string {
	switch s {
	case "pending", "in_progress", "completed":
		return s
	}
	return "pending"
}

// toolKind is ACP's ToolKind of a tool, by the names the five CLIs give
// their tools; an editor picks its icon by it.
func toolKind(name string) string {
	n := strings.ToLower(name)
	switch {
	case containsAny(n, "think", "todo", "plan"): // before "write": TodoWrite
		return "think"
	case containsAny(n, "bash", "shell", "exec", "command", "run_"):
		return "execute"
	case containsAny(n, "write", "edit", "patch", "replace", "create"):
		return "edit"
	case containsAny(n, "delete", "remove"):
		return "delete"
	case containsAny(n, "move", "rename"):
		return "move"
	case containsAny(n, "grep", "glob", "search", "find", "list", "ls"):
		return "search"
	case containsAny(n, "read", "view", "cat"):
		return "read"
	case containsAny(n, "fetch", "web", "url"):
		return "fetch"
	}
	return "other"
}

func containsAny(s string, parts ...string) bool {
	for _, p := range parts {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// maxTitleBytes bounds the part of a tool's input shown in its title.
const maxTitleBytes = 120

// toolTitle is the tool's name and the input field a person reads first
// (the command, the path, the pattern, the URL), on one line.
func toolTitle(name string, input json.RawMessage) string {
	var fields map[string]any
	if json.Unmarshal(input, &fields) != nil {
		return name
	}
	for _, key := range []string{"command", "cmd", "file_path", "path", "filePath", "pattern", "url", "query", "description"} {
		s, ok := fields[key].(string)
		if !ok || strings.TrimSpace(s) == "" {
			continue
		}
		s = strings.Join(strings.Fields(s), " ")
		if len(s) > maxTitleBytes {
			s = strings.ToValidUTF8(s[:maxTitleBytes], "") + "…"
		}
		return name + ": " + s
	}
	return name
}

// permissionOptions are the ACP options of an approval's decisions:
// allow (allow_once), allow_session (allow_always) and deny
// (reject_once), those the approval offers, in that order.
func permissionOptions(offered []string) []any {
	known := []struct{ decision, name, kind string }{
		{"allow", "Allow", "allow_once"},
		{"allow_session", "Allow for this session", "allow_always"},
		{"deny", "Deny", "reject_once"},
	}
	var out []any
	for _, k := range known {
		for _, o := range offered {
			if o == k.decision {
				out = append(out, map[string]any{"optionId": k.decision, "name": k.name, "kind": k.kind})
				break
			}
		}
	}
	return out
}

// decisionOf is the gateway's decision for the editor's answer to a
// permission request: the option it selected, and deny for a cancelled
// request or an option the bridge never offered.
func decisionOf(result json.RawMessage) string {
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if json.Unmarshal(result, &r) != nil || r.Outcome.Outcome != "selected" {
		return "deny"
	}
	switch r.Outcome.OptionID {
	case "allow", "allow_session":
		return r.Outcome.OptionID
	}
	return "deny"
}
