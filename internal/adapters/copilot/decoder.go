package copilot

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// files is what the decoder uses of the Invocation's runs.CLIFiles, its
// only access to the file system: reading the session's record as it
// goes, and reading and removing the run's usage file once the process
// has exited.
type files interface {
	ReadFile(name string) ([]byte, error)
	Remove(name string) error
}

// decoder maps one run's JSONL to events and remembers what Finish needs
// to classify the run.
type decoder struct {
	inv   runs.Invocation
	files files

	// sessionID is the run's session: the --session-id the command gave,
	// until the result line says otherwise.
	sessionID string
	model     string
	// started is set once session.started was emitted: the CLI got as
	// far as taking the prompt.
	started bool
	// open holds the tool calls started and not yet completed, in order;
	// seen every tool call started.
	open []string
	seen map[string]bool
	// text is the last non-empty assistant message: the run's result.
	text  string
	turns int
	// retries counts assistant.turn_retry lines.
	retries int

	// result is set by the result line, the last one of a prompt that
	// ran to its end.
	result   bool
	exitCode int
	// aborted is set by an abort line: the CLI was interrupted.
	aborted     bool
	abortReason string
	// sessionErr is the last session.error; failure the last
	// model.call_failure; compaction is set when a request was retried
	// because the prompt was too long.
	sessionErr *wireData
	failure    *wireData
	compaction bool

	// unbilled are the model requests (apiCallId) the lines named whose
	// usage record was not read yet, billed those read; live is their
	// sum (live.go).
	unbilled map[string]bool
	billed   map[string]bool
	live     runs.Usage
	misses   int
}

func newDecoder(inv runs.Invocation, f files) *decoder {
	session := inv.RunID
	if inv.Spec.ResumeSessionID != "" {
		session = inv.Spec.ResumeSessionID
	}
	return &decoder{inv: inv, files: f, sessionID: session, model: inv.Spec.Model, seen: map[string]bool{},
		unbilled: map[string]bool{}, billed: map[string]bool{}}
}

// Decode implements runs.Decoder.
func (d *decoder) Decode(line []byte) []runs.Event {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	var l wireLine
	if err := lenient(line, &l); err != nil {
		return []runs.Event{runs.Unparsed(line, "invalid JSON: "+err.Error())}
	}
	var data wireData
	if len(l.Data) > 0 && !bytes.Equal(l.Data, []byte("null")) {
		if err := lenient(l.Data, &data); err != nil {
			return []runs.Event{runs.Unparsed(line, "data: "+err.Error())}
		}
	}
	evs, known := d.event(&l, &data, line)
	switch l.Type {
	case "assistant.message", "tool.execution_start", "tool.execution_complete", "assistant.turn_end", "assistant.idle":
		// The usage record precedes the message; a later line finds
		// one that was not yet written.
		evs = append(evs, d.liveUsage()...)
	}
	if !known {
		if l.Ephemeral {
			// Transient progress of a kind the adapter does not know;
			// the durable events tell the story.
			return nil
		}
		if l.Type == "" {
			return []runs.Event{runs.Unparsed(line, "no type field")}
		}
		return []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown type %q", l.Type))}
	}
	for i := range evs {
		if evs[i].Type != runs.EventAgentUnparsed && evs[i].SessionID == "" {
			evs[i].SessionID = d.sessionID
		}
	}
	return evs
}

// event maps one line; known is false for a type the decoder does not
// know.
func (d *decoder) event(l *wireLine, data *wireData, line []byte) (evs []runs.Event, known bool) {
	switch l.Type {
	case "session.start", "session.resume":
		if data.SessionID != "" {
			d.sessionID = data.SessionID
		}
		return d.start(data.Model), true
	case "session.tools_updated":
		return d.start(data.Model), true
	case "user.message":
		return d.start(""), true
	case "assistant.turn_start":
		d.turns++
		return nil, true
	case "assistant.message_delta":
		if data.DeltaContent == "" {
			return nil, true
		}
		return []runs.Event{runs.NewEvent(runs.EventMessageDelta, runs.MessageData{MessageID: data.MessageID, Text: data.DeltaContent})}, true
	case "assistant.message":
		return d.message(data), true
	case "tool.execution_start":
		if data.ToolCallID == "" || d.seen[data.ToolCallID] {
			return nil, true
		}
		return []runs.Event{d.toolStarted(data.ToolCallID, data.ToolName, data.Arguments, data.wireMCP)}, true
	case "tool.execution_complete":
		return d.toolCompleted(data), true
	case "assistant.turn_retry":
		return d.retry(data), true
	case "model.call_failure":
		d.failure = data
		return nil, true
	case "session.error":
		d.sessionErr = data
		return nil, true
	case "session.info":
		switch data.InfoType {
		case "model_retry", "cancellation":
			// Said again by assistant.turn_retry, and by abort.
			return nil, true
		}
		return []runs.Event{runs.Warning(cmp.Or(data.InfoType, "info"), data.Message)}, true
	case "session.warning":
		return []runs.Event{runs.Warning(cmp.Or(data.WarningType, "warning"), data.Message)}, true
	case "abort":
		d.aborted, d.abortReason = true, data.Reason
		return nil, true
	case "result":
		d.result = true
		if l.SessionID != "" {
			d.sessionID = l.SessionID
		}
		if l.ExitCode != nil {
			d.exitCode = *l.ExitCode
		}
		return nil, true
	case "session.mcp_server_status_changed":
		return d.mcpStatus(data), true
	case "subagent.started", "subagent.completed", "subagent.selected", "subagent.deselected", "subagent.configured":
		// The task tool's call, started and completed, tells it.
		return nil, true
	case "subagent.failed":
		return []runs.Event{subagentFailed(data)}, true
	case "session.skills_loaded", "session.mcp_servers_loaded", "session.mcp_server_tools_loaded", "session.background_tasks_changed",
		"assistant.turn_end", "assistant.idle", "assistant.message_start", "assistant.reasoning_delta",
		"assistant.reasoning", "assistant.tool_call_delta", "model.call_start", "model.call_finished",
		"model.call_final_result", "tool.execution_partial_result", "agent.interrupted":
		// Progress the events above already tell: the reasoning and
		// tool calls are repeated by assistant.message, turn ends by
		// the next turn, the end of the prompt by result.
		return nil, true
	}
	return nil, false
}

// start emits session.started once, at the first line that shows the CLI
// took the prompt.
func (d *decoder) start(model string) []runs.Event {
	if model != "" {
		d.model = model
	}
	if d.started {
		return nil
	}
	d.started = true
	return []runs.Event{runs.NewEvent(runs.EventSessionStarted, runs.SessionStartedData{
		SessionID: d.sessionID, Model: d.model, Tools: []string{},
	})}
}

// message maps an assistant message: its reasoning, its text and the tool
// calls it asks for, in that order.
func (d *decoder) message(data *wireData) []runs.Event {
	if data.Model != "" {
		d.model = data.Model
	}
	d.noteCall(data.APICallID)
	var evs []runs.Event
	if data.ReasoningText != "" || data.ReasoningOpaque != "" {
		vis := runs.VisibilityFull
		switch {
		case data.ReasoningText == "":
			vis = runs.VisibilityRedacted
		case data.ReasoningBlocks != nil && data.ReasoningBlocks.Provider == "openai-responses":
			// The Responses API shows a summary of the reasoning.
			vis = runs.VisibilitySummary
		}
		evs = append(evs, runs.NewEvent(runs.EventReasoningCompleted, runs.ReasoningData{Text: data.ReasoningText, Visibility: vis}))
	}
	if data.Content != "" {
		d.text = data.Content
		evs = append(evs, runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{MessageID: data.MessageID, Text: data.Content}))
	}
	for _, tr := range data.ToolRequests {
		if tr.ToolCallID == "" || d.seen[tr.ToolCallID] {
			continue
		}
		evs = append(evs, d.toolStarted(tr.ToolCallID, tr.Name, tr.Arguments, tr.wireMCP))
	}
	return evs
}

func (d *decoder) toolStarted(id, name string, args json.RawMessage, mcp wireMCP) runs.Event {
	d.seen[id] = true
	d.open = append(d.open, id)
	input := args
	if len(bytes.TrimSpace(input)) == 0 || !json.Valid(input) {
		input = json.RawMessage("{}")
	}
	server, tool := d.mcpTool(name, mcp)
	return runs.NewEvent(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: id, Name: name, Input: input,
		MCPServer: server, MCPTool: tool})
}

// mcpTool names the run's MCP server and the tool's own name for a call
// of an MCP tool, from the names the CLI gives, or else from the tool's
// name ("demo-reverse_text"); both empty for a built-in tool, or a server
// that is not the run's (the operator's own, in the CLI's home).
func (d *decoder) mcpTool(name string, mcp wireMCP) (server, tool string) {
	servers := d.inv.Spec.MCPServers
	if _, ok := servers[mcp.MCPServerName]; ok && mcp.MCPToolName != "" {
		return mcp.MCPServerName, mcp.MCPToolName
	}
	if s, t, ok := splitMCP(name, servers); ok {
		return s, t
	}
	return "", ""
}

func (d *decoder) toolCompleted(data *wireData) []runs.Event {
	if data.ToolCallID == "" {
		return nil
	}
	d.close(data.ToolCallID)
	var te wireToolError
	if len(data.Error) > 0 {
		if lenient(data.Error, &te) != nil || te.Message == "" {
			// An error that is not {message, code}: keep it as it is.
			te.Message = string(data.Error)
		}
	}
	out := te.Message
	if data.Result != nil && data.Result.Content != "" {
		out = data.Result.Content
	}
	failed := data.Success == nil || !*data.Success
	evs := d.fileChanges(data, failed)
	evs = append(evs, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
		ID: data.ToolCallID, Output: out, IsError: failed,
	}))
	if te.Code == "denied" {
		evs = append(evs, runs.Warning("permission_denied", fmt.Sprintf("tool call %s was denied: %s", data.ToolCallID, te.Message)))
	}
	return evs
}

// fileChanges maps the fileEdits of a file tool's result to file.changed,
// with the result's diff when it edited one file. A path inside the run's
// directory is made relative to it.
func (d *decoder) fileChanges(data *wireData, failed bool) []runs.Event {
	var evs []runs.Event
	status := "completed"
	if failed {
		status = "failed"
	}
	for _, fe := range data.FileEdits {
		if fe.Path == "" {
			continue
		}
		kind := runs.ChangeUpdate
		switch fe.Kind {
		case "create":
			kind = runs.ChangeAdd
		case "delete":
			kind = runs.ChangeDelete
		}
		path := fe.Path
		if rel, ok := strings.CutPrefix(path, strings.TrimSuffix(d.inv.Dir, "/")+"/"); ok && d.inv.Dir != "" && rel != "" {
			path = rel
		}
		fc := runs.FileChangedData{Path: path, Kind: kind, Status: status, ToolCallID: data.ToolCallID}
		if len(data.FileEdits) == 1 && data.Result != nil {
			fc.Diff = strings.TrimLeft(data.Result.DetailedContent, "\n")
		}
		evs = append(evs, runs.NewEvent(runs.EventFileChanged, fc))
	}
	return evs
}

// retry maps assistant.turn_retry: the CLI retries a failed model
// request. Its reason is rate_limit, transient_auth_error, api_error,
// streaming_error or forced_compaction (a prompt too long).
func (d *decoder) retry(data *wireData) []runs.Event {
	d.retries++
	status := 0
	if d.failure != nil {
		status = d.failure.StatusCode
	}
	if data.Reason == "forced_compaction" {
		d.compaction = true
	}
	if data.Reason == "rate_limit" {
		return []runs.Event{runs.NewEvent(runs.EventRateLimit, runs.RateLimitData{
			Attempt: d.retries, Status: status, Error: data.Reason,
		})}
	}
	msg := fmt.Sprintf("the model request failed (%s", cmp.Or(data.Reason, "unknown"))
	if status != 0 {
		msg += fmt.Sprintf(", status %d", status)
	}
	return []runs.Event{runs.Warning("model_retry", msg+fmt.Sprintf("); retry %d", d.retries))}
}

// close marks a tool call completed.
func (d *decoder) close(id string) {
	for i, o := range d.open {
		if o == id {
			d.open = append(d.open[:i], d.open[i+1:]...)
			return
		}
	}
}

// subagentFailed is a warning inside the task tool call whose subagent
// failed; the call's own completion follows.
func subagentFailed(data *wireData) runs.Event {
	var msg string
	if json.Unmarshal(data.Error, &msg) != nil || msg == "" {
		msg = "no reason given"
	}
	ev := runs.Warning("subagent_failed", cmp.Or(data.AgentDisplayName, "subagent")+" failed: "+msg)
	ev.ParentToolCallID = data.ToolCallID
	return ev
}

// mcpStatus warns of an MCP server of the run that did not connect: the
// CLI goes on without its tools, and the model is not told why. It says
// pending, then connected (verified with 1.0.102); any other status is
// taken for a failure.
func (d *decoder) mcpStatus(data *wireData) []runs.Event {
	switch data.Status {
	case "", "pending", "connected", "connecting":
		return nil
	}
	return []runs.Event{runs.Warning("mcp_server_failed", fmt.Sprintf("MCP server %q is %s: its tools are not offered to the model",
		clip.Text(data.ServerName, 100), clip.Text(data.Status, 40)))}
}
