package copilot

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// sessionPermissionArgs maps a permission level onto the flags of a
// Session run that asks for approvals. The tools are not pre-approved, so
// that the CLI asks for every call that can change something; what the
// level allows beyond the working directory (paths, URLs) is granted on
// the command line, so that the CLI does not ask for it. See doc.go.
var sessionPermissionArgs = map[runs.Permission][]string{
	runs.ReadOnly:       {"--deny-tool=write"},
	runs.WorkspaceWrite: nil,
	runs.Full:           {"--allow-all-paths", "--allow-all-urls"},
}

// sessionCommand builds `copilot --acp` for a run whose Spec.Session():
// interactive, or asking for approvals. The prompt goes as turn 1's
// session/prompt, so there is no stdin payload; tokens come from the
// prompt results, so there is no usage file.
func (a *Adapter) sessionCommand(inv runs.Invocation, perm runs.Permission) (runs.Command, error) {
	s := inv.Spec
	if s.ResumeSessionID != "" && !s.Interactive {
		return runs.Command{}, runs.Unsupported(Name, runs.FieldResumeSessionID,
			"a run with approvals resumes a session only when it is interactive (ACP session/load is verified for interactive runs)")
	}
	args := []string{"--acp"}
	args = append(args, phoneHome...)
	if s.Model != "" {
		args = append(args, "--model="+s.Model)
	}
	if s.Effort != "" {
		if !slices.Contains(efforts, s.Effort) {
			return runs.Command{}, runs.Unsupported(Name, runs.FieldEffort, "copilot accepts "+strings.Join(efforts, ", "))
		}
		args = append(args, "--reasoning-effort="+s.Effort)
	}
	if s.Asks() {
		args = append(args, sessionPermissionArgs[perm]...)
	} else {
		// approvals "never": what a one-shot run of the level allows.
		args = append(args, permissionArgs[perm]...)
	}
	margs, err := mcpArgs(s.MCPServers, perm == runs.ReadOnly && !s.Asks())
	if err != nil {
		return runs.Command{}, err
	}
	args = append(args, margs...)
	args = append(args, a.extraArgs...)
	return runs.Command{
		Args:    args,
		Env:     append([]string(nil), noPhoneHomeEnv...),
		PassEnv: append([]string(nil), credentialEnv...),
		Secrets: mcpSecrets(s.MCPServers),
	}, nil
}

// newSessionDecoder returns the ACP client of a Session run, with
// Copilot's profile (verified with 1.0.102, doc.go) and what the profile
// cannot say: the CLI's notices, and edits reported twice.
func newSessionDecoder(inv runs.Invocation) *sessionDecoder {
	perm := adapterkit.Permission(inv.Spec.Permission)
	d := &sessionDecoder{inv: inv, oneShot: newDecoder(inv, inv.FilesOrNone()), created: map[string]bool{}, diffs: map[string]string{},
		mcpCalls: map[string]mcpCall{}}
	// Without approvals nobody answers: whatever the CLI still asks for
	// is beyond what the level pre-approved, and is refused, as a
	// one-shot run refuses it. read_only forbids everything the CLI asks
	// for (it asks for every shell command, ls included).
	refuse := !inv.Spec.Asks() || perm == runs.ReadOnly
	d.Decoder = acp.NewDecoder(inv, acp.Profile{
		Agent:     Name,
		RefuseAll: refuse,
		Counting:  acp.Cumulative,
		ReadUsage: readSessionUsage,
		// The prompt result's usage comes at the end of the turn; the
		// session's record has every request's as it goes (live.go).
		UsageSoFar: d.usageSoFar,
		Steering:   acp.SteerCancels,
		// reject_once fails the call and ends the turn, with no further
		// model request.
		DenyEndsTurn: true,
		ToolName:     d.toolName,
		MCPTool:      d.mcpTool,
		// A run that asks for nothing and names an MCP server means its
		// tools to run.
		AllowMCP:      !inv.Spec.Asks(),
		Update:        d.update,
		ClassifyError: d.classifyRPC,
		ClassifyExit: func(exit runs.Exit, stderr []byte) *runs.RunError {
			return d.oneShot.classifyNoResult(exit, string(stderr))
		},
	})
	return d
}

// sessionToolName names a call after Copilot's tool where its ACP kind
// says which: execute is the bash tool. The other kinds (edit, read,
// search, …) stand for several tools each and keep the kind.
func sessionToolName(tc acp.ToolCall) string {
	if tc.Kind == "execute" {
		return "bash"
	}
	return ""
}

// mcpCall is a call of one of the run's MCP tools: the CLI's name for it
// and the server and tool it splits into.
type mcpCall struct{ name, server, tool string }

// noteMCP keeps the MCP calls the CLI announces. Its tool_call names the
// tool as the model sees it, "demo-reverse_text" (kind other); the
// permission request that follows has only the tool's own title,
// "reverse_text", which names no server (verified with 1.0.102).
func (d *sessionDecoder) noteMCP(raw json.RawMessage) {
	var tc acp.ToolCall
	if json.Unmarshal(raw, &tc) != nil || tc.ToolCallID == "" {
		return
	}
	if _, ok := d.mcpCalls[tc.ToolCallID]; ok {
		return
	}
	if server, tool, ok := splitMCP(tc.Title, d.inv.Spec.MCPServers); ok {
		d.mcpCalls[tc.ToolCallID] = mcpCall{name: tc.Title, server: server, tool: tool}
	}
}

// mcpTool implements acp.Profile.MCPTool.
func (d *sessionDecoder) mcpTool(tc acp.ToolCall) (server, tool string, ok bool) {
	if c, ok := d.mcpCalls[tc.ToolCallID]; ok {
		return c.server, c.tool, true
	}
	return splitMCP(tc.Title, d.inv.Spec.MCPServers)
}

// toolName implements acp.Profile.ToolName: an MCP tool keeps the CLI's
// name for it, as a one-shot run reports it.
func (d *sessionDecoder) toolName(tc acp.ToolCall) string {
	if c, ok := d.mcpCalls[tc.ToolCallID]; ok {
		return c.name
	}
	return sessionToolName(tc)
}

// sessionDecoder is the ACP client with Copilot's profile, and what the
// profile's hooks cannot do on their own:
//
//   - Copilot reports a failed model request, its retries and some tool
//     results as agent_message_chunk text of its own, "Error: …" and
//     "Info: …", and then answers the prompt end_turn. A notice is a
//     chunk that starts a message with one of those prefixes; an Info
//     becomes a warning, an Error fails the turn, classified from its
//     text (doc.go).
//   - An edit's diff comes in the pending tool_call and again in its
//     completion: file.changed is reported once, with the completion.
//   - The Outcome carries the session's usage for a later resume
//     (Finish).
type sessionDecoder struct {
	*acp.Decoder
	inv     runs.Invocation
	oneShot *decoder

	// inMessage: the update before was an agent_message_chunk, so a
	// chunk continues the model's text and is no notice.
	inMessage bool
	// turnErr is the Error notice of the running turn; lastErr the
	// error of the last turn that ended, where a notice failed it.
	turnErr  string
	lastErr  *runs.RunError
	lastTurn bool // a turn ended
	// created holds the tool call id and path of each diff from "";
	// diffs each edit's unified diff, by tool call id.
	created map[string]bool
	diffs   map[string]string
	// mcpCalls are the calls of the run's MCP tools, by tool call id.
	mcpCalls map[string]mcpCall
	// lastUsage is the last usage.updated, turnBase the one that ended
	// the last turn: the session's usage before the running turn.
	lastUsage, turnBase runs.Usage
}

// usageSoFar implements acp.Profile.UsageSoFar: the running turn's usage
// so far is the session's record's sum, every request of the session
// (a Session run never resumes one), less what the turns before it were
// billed.
func (d *sessionDecoder) usageSoFar(sessionID string) (runs.Usage, bool) {
	path := sessionRecordPath(d.inv.Home, sessionID)
	if path == "" {
		return runs.Usage{}, false
	}
	raw, err := d.oneShot.files.ReadFile(path)
	if err != nil || len(raw) > maxSessionRecord {
		return runs.Usage{}, false
	}
	total, ok := recordedUsage(raw, nil)
	if !ok {
		return runs.Usage{}, false
	}
	return sub(total, d.turnBase), true
}

var _ runs.Session = (*sessionDecoder)(nil)

// update implements acp.Profile.Update: it takes the notices out of the
// model's text. It runs under the core's lock, within Decode.
func (d *sessionDecoder) update(kind string, raw json.RawMessage) ([]runs.Event, bool) {
	cont := d.inMessage
	d.inMessage = kind == "agent_message_chunk"
	if kind == "tool_call" || kind == "tool_call_update" {
		d.noteEdit(raw)
		d.noteMCP(raw)
	}
	if kind != "agent_message_chunk" || cont {
		return nil, false
	}
	var u struct {
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(raw, &u) != nil || u.Content.Type != "text" {
		return nil, false
	}
	text := u.Content.Text
	switch {
	case strings.HasPrefix(text, noticeError):
		d.inMessage = false
		if d.turnErr == "" {
			d.turnErr = strings.TrimSpace(strings.TrimPrefix(text, noticeError))
		}
		return nil, true
	case strings.HasPrefix(text, noticeInfo):
		d.inMessage = false
		msg := strings.TrimSpace(strings.TrimPrefix(text, noticeInfo))
		code := "info"
		if strings.Contains(msg, "Retrying") {
			code = "model_retry"
		}
		return []runs.Event{runs.Warning(code, msg)}, true
	}
	return nil, false
}

// noteEdit remembers what the core's file.changed lacks of an edit: that
// a diff from "" is a new file (the create tool), and the edit's unified
// diff, which the completion's rawOutput.detailedContent holds.
func (d *sessionDecoder) noteEdit(raw json.RawMessage) {
	var u struct {
		ToolCallID string `json:"toolCallId"`
		Content    []struct {
			Type    string  `json:"type"`
			Path    string  `json:"path"`
			OldText *string `json:"oldText"`
		} `json:"content"`
		RawOutput *struct {
			DetailedContent string `json:"detailedContent"`
		} `json:"rawOutput"`
	}
	if json.Unmarshal(raw, &u) != nil || u.ToolCallID == "" {
		return
	}
	for _, c := range u.Content {
		if c.Type == "diff" && c.OldText != nil && *c.OldText == "" {
			d.created[u.ToolCallID+"\x00"+c.Path] = true
		}
	}
	if u.RawOutput != nil && strings.Contains(u.RawOutput.DetailedContent, "diff --git") {
		d.diffs[u.ToolCallID] = strings.TrimLeft(u.RawOutput.DetailedContent, "\n")
	}
}

// The prefixes of Copilot's notices in agent_message_chunk.
const (
	noticeError = "Error: "
	noticeInfo  = "Info: "
)

// Decode implements runs.Decoder.
func (d *sessionDecoder) Decode(line []byte) []runs.Event {
	return d.fix(d.Decoder.Decode(line))
}

// fix applies what the notices say to the turn that ends in evs, and
// keeps an edit's file.changed for its completion.
func (d *sessionDecoder) fix(evs []runs.Event) []runs.Event {
	completed := map[string]*runs.ToolCallCompletedData{}
	for _, ev := range evs {
		if c, ok := ev.Data.(runs.ToolCallCompletedData); ok && ev.Type == runs.EventToolCallCompleted {
			completed[c.ID] = &c
		}
	}
	out := evs[:0]
	for _, ev := range evs {
		switch data := ev.Data.(type) {
		case runs.FileChangedData:
			if ev.Type != runs.EventFileChanged || data.ToolCallID == "" {
				break
			}
			c := completed[data.ToolCallID]
			if c == nil {
				continue // the pending call's preview
			}
			data.Status = "completed"
			if c.IsError {
				data.Status = "failed"
			}
			if d.created[data.ToolCallID+"\x00"+data.Path] {
				data.Kind = runs.ChangeAdd
			}
			data.Diff = d.diffs[data.ToolCallID]
			delete(d.created, data.ToolCallID+"\x00"+data.Path)
			ev.Data = data
		case runs.UsageData:
			d.lastUsage = data.Usage
		case runs.TurnCompletedData:
			if ev.Type != runs.EventTurnCompleted {
				break
			}
			d.turnBase = d.lastUsage
			d.lastTurn, d.lastErr = true, nil
			if d.turnErr != "" && data.Status == runs.Succeeded {
				data.Status, data.StopReason, data.Error = runs.Failed, "error", classifyNotice(d.turnErr)
				d.lastErr = data.Error
				ev.Data = data
			}
			d.turnErr, d.inMessage = "", false
			clear(d.diffs)
			clear(d.created)
		}
		out = append(out, ev)
	}
	return out
}

// Finish implements runs.Decoder. A session run that starts a new
// session has the session's usage so far as its own, the sum of its
// turns; it is reported as SessionUsage too, so that the supervisor
// records it and a one-shot run that resumes the session (whose usage
// file counts the whole session) is billed only for its own part. A
// loaded session's earlier usage is not known here (the prompt results
// count this process's requests only), so its SessionUsage is left out:
// the supervisor would otherwise take the earlier total for this run's
// and bill it nothing.
func (d *sessionDecoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	out := d.Decoder.Finish(exit, stderrTail)
	ended := false
	for _, ev := range out.Events {
		ended = ended || ev.Type == runs.EventTurnCompleted
	}
	if !ended && d.lastErr != nil && out.Status == runs.Succeeded {
		out.Status, out.StopReason, out.Error = runs.Failed, "error", d.lastErr
	}
	if out.Model == "" {
		out.Model = d.inv.Spec.Model
	}
	if out.SessionID != "" && d.inv.Spec.ResumeSessionID == "" {
		u := out.Usage
		out.SessionUsage = &u
	}
	return out
}

// noticeStatusRE finds the HTTP status in an Error notice: "… (HTTP
// 401).", "… Last error: 429 Rate limit …", "400 Invalid request …".
var noticeStatusRE = regexp.MustCompile(`(?:\(HTTP |Last error: |^)([1-5]\d\d)\b`)

// classifyNotice classifies the text of an Error notice as the one-shot
// decoder classifies session.error.
func classifyNotice(msg string) *runs.RunError {
	status := 0
	if m := noticeStatusRE.FindStringSubmatch(msg); m != nil {
		status, _ = strconv.Atoi(m[1])
	}
	lower := strings.ToLower(msg)
	byStatus, _ := adapterkit.StatusClass(status)
	switch {
	case strings.Contains(lower, "authentication failed") || byStatus == runs.NotAuthenticated:
		return runs.NewRunError(runs.NotAuthenticated, msg, hintProvider)
	case byStatus == runs.RateLimited || strings.Contains(lower, "rate limit"):
		return runs.NewRunError(runs.RateLimited, msg, hintRate)
	case strings.Contains(lower, "too long"), strings.Contains(lower, "context") && (strings.Contains(lower, "length") || strings.Contains(lower, "window")):
		return runs.NewRunError(runs.ContextExceeded, msg, hintContext)
	case byStatus == runs.TransientAPIError:
		return runs.NewRunError(runs.TransientAPIError, msg, hintTransient)
	}
	return runs.NewRunError(runs.APIError, msg, hintAPI)
}

// rpcAuthRequired is ACP's "authentication required" code, which 1.0.102
// answers session/new with when it has neither a login nor a provider.
const rpcAuthRequired = -32000

// classifyRPC implements acp.Profile.ClassifyError.
func (d *sessionDecoder) classifyRPC(method string, e *acp.RPCError) *runs.RunError {
	msg := cmp.Or(e.Text(), "copilot answered "+method+" with an error")
	if e.Code == rpcAuthRequired || strings.Contains(strings.ToLower(msg), "authentication required") {
		return runs.NewRunError(runs.NotAuthenticated, msg, fmt.Sprintf(hintLogin, cmp.Or(d.inv.Home, "<home>")))
	}
	return classifyNotice(msg)
}

// acpUsage is the usage of a session/prompt result. It is the session's
// so far, not the turn's (doc.go).
type acpUsage struct {
	Usage *struct {
		InputTokens       int64 `json:"inputTokens"`
		OutputTokens      int64 `json:"outputTokens"`
		ThoughtTokens     int64 `json:"thoughtTokens"`
		CachedReadTokens  int64 `json:"cachedReadTokens"`
		CachedWriteTokens int64 `json:"cachedWriteTokens"`
	} `json:"usage"`
}

// readSessionUsage implements acp.Profile.ReadUsage.
func readSessionUsage(result json.RawMessage) (runs.Usage, bool) {
	var r acpUsage
	if err := json.Unmarshal(result, &r); err != nil || r.Usage == nil {
		return runs.Usage{}, false
	}
	u := r.Usage
	return runs.Usage{
		InputTokens: u.InputTokens, CacheReadTokens: u.CachedReadTokens, CacheWriteTokens: u.CachedWriteTokens,
		OutputTokens: u.OutputTokens, ReasoningTokens: u.ThoughtTokens,
	}, true
}
