package qwen

import (
	"cmp"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// The ACP session modes of 0.24.4 (session/new's modes.availableModes).
// The CLI's own default, "auto", is never used: before a risky tool it
// asks the model itself whether to allow it, a request of its own that no
// usage chunk reports.
const (
	modePlan     = "plan"      // analyse only: no edits, no shell commands
	modeDefault  = "default"   // asks for every edit and shell command
	modeAutoEdit = "auto-edit" // edits unasked, shell commands ask
	modeYolo     = "yolo"      // every tool unasked
)

// sessionModes maps a permission level to the mode of a run that does
// not ask for approvals. workspace_write runs in yolo: auto-edit would
// ask for every shell command, which a run without approvals refuses;
// what confines it to the workspace is the gateway's sandbox.
var sessionModes = map[runs.Permission]string{
	runs.ReadOnly:       modePlan,
	runs.WorkspaceWrite: modeYolo,
	runs.Full:           modeYolo,
}

// sessionMode is the mode of a run, and whether whatever it still asks
// for is refused without asking the client.
func sessionMode(s runs.Spec) (mode string, refuseAll bool) {
	perm := adapterkit.Permission(s.Permission)
	if !s.Asks() {
		return sessionModes[perm], true
	}
	if perm == runs.ReadOnly {
		// Nothing read_only forbids is asked about: plan refuses it.
		return modePlan, true
	}
	return modeDefault, false
}

// sessionProfile is Qwen Code's ACP, as verified with 0.24.4 (doc.go).
// t keeps the turn's usage, which the CLI reports per model request.
func sessionProfile(inv runs.Invocation, t *tally) acp.Profile {
	mode, refuse := sessionMode(inv.Spec)
	servers := inv.Spec.MCPServers
	return acp.Profile{
		Agent:      Name,
		Mode:       mode,
		RefuseAll:  refuse,
		TurnUsage:  t.turnUsage,
		UsageSoFar: t.soFar,
		// A second session/prompt would cancel the running turn: steered
		// messages go through the mid-turn queue instead (session.go).
		Steering: acp.SteerCancels,
		// The model gets the refusal as the tool's result and goes on.
		DenyEndsTurn:  false,
		ToolName:      t.toolName,
		ClassifyError: classifyRPC,
		ClassifyExit:  classifyExit,
		Update:        t.update,
		MCPServers:    acp.MCPServers(servers),
		// Qwen Code offers an MCP tool as mcp__<server>__<tool>.
		MCPTool: func(tc acp.ToolCall) (string, string, bool) {
			return acp.SplitMCPName(t.toolName(tc), "mcp__", "__", servers)
		},
		AllowMCP: !inv.Spec.Asks(),
	}
}

// tally adds up the usage Qwen Code reports after every model request,
// in an empty agent_message_chunk's _meta.usage, and remembers each tool
// call's name. Its methods are Profile hooks, which the Decoder calls
// under its lock, one at a time.
type tally struct {
	turn  runs.Usage // the running turn's so far
	any   bool       // the running turn reported usage
	names map[string]string
}

func newTally() *tally { return &tally{names: map[string]string{}} }

// maxNamedTools bounds the names a tally keeps: far above the calls of
// any real session, so that hostile input cannot grow it for ever.
const maxNamedTools = 1 << 14

// toolMeta is what the adapter reads of a tool_call: its name.
type toolMeta struct {
	ToolCallID string `json:"toolCallId"`
	Meta       *struct {
		ToolName string `json:"toolName"`
	} `json:"_meta"`
}

// chunkMeta is what the adapter reads of an agent_message_chunk: its
// text, and the usage of the model request it ends.
type chunkMeta struct {
	Content *struct {
		Text string `json:"text"`
	} `json:"content"`
	Meta *struct {
		Usage *wireUsage `json:"usage"`
	} `json:"_meta"`
}

// wireUsage is one model request's usage as 0.24.4 reports it, the
// API's figures renamed: input (prompt_tokens) includes cached tokens,
// output (completion_tokens) includes thought tokens
// (completion_tokens_details.reasoning_tokens).
type wireUsage struct {
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	ThoughtTokens    int64 `json:"thoughtTokens"`
	CachedReadTokens int64 `json:"cachedReadTokens"`
}

// normalized is u in the gateway's convention: input includes cache
// reads, output includes reasoning.
func (u wireUsage) normalized() runs.Usage {
	return runs.Usage{
		InputTokens:     max(u.InputTokens, 0),
		CacheReadTokens: max(u.CachedReadTokens, 0),
		OutputTokens:    max(u.OutputTokens, 0),
		ReasoningTokens: max(u.ThoughtTokens, 0),
	}
}

// update implements acp.Profile.Update. It takes the usage of a message
// chunk, and swallows the chunk when it carries no text (the usage
// report alone); it notes a tool call's name. Everything else is the
// core's.
func (t *tally) update(kind string, update json.RawMessage) ([]runs.Event, bool) {
	switch kind {
	case "tool_call":
		var m toolMeta
		if json.Unmarshal(update, &m) == nil && m.Meta != nil && m.Meta.ToolName != "" && m.ToolCallID != "" &&
			len(t.names) < maxNamedTools {
			t.names[m.ToolCallID] = m.Meta.ToolName
		}
	case "agent_message_chunk":
		var m chunkMeta
		if json.Unmarshal(update, &m) != nil || m.Meta == nil || m.Meta.Usage == nil {
			return nil, false
		}
		t.turn = t.turn.Add(m.Meta.Usage.normalized())
		t.any = true
		return nil, m.Content == nil || m.Content.Text == ""
	}
	return nil, false
}

// turnUsage implements acp.Profile.TurnUsage: the sum of the turn's
// reports, which then starts again from zero.
func (t *tally) turnUsage(string, json.RawMessage) (runs.Usage, bool, []runs.Event) {
	u, ok := t.turn, t.any
	t.turn, t.any = runs.Usage{}, false
	return u, ok, nil
}

// soFar implements acp.Profile.UsageSoFar.
func (t *tally) soFar(string) (runs.Usage, bool) { return t.turn, t.any }

// toolName implements acp.Profile.ToolName: the name the CLI gives the
// tool in the tool_call's _meta.toolName ("run_shell_command"), else the
// call's kind.
func (t *tally) toolName(tc acp.ToolCall) string {
	if n, ok := t.names[tc.ToolCallID]; ok {
		return n
	}
	return tc.Kind
}

// ACP's "authentication required" code, which 0.24.4 answers session/new
// with when it has no key.
const rpcAuthRequired = -32000

// leadingStatus reads the HTTP status that starts the details of a
// failed prompt's error: "401 Incorrect API key provided".
var leadingStatus = regexp.MustCompile(`^(\d{3})\b`)

// rpcErrorData is the data of 0.24.4's -32603 answer to a failed prompt.
type rpcErrorData struct {
	Details string `json:"details"`
}

// classifyRPC implements acp.Profile.ClassifyError. A failed model
// request answers session/prompt either with its HTTP status as the code
// (a 429: "Rate limit exceeded. Try again later.") or with -32603
// "Internal error" and the status leading data.details ("401 Incorrect
// API key provided", "500 …"); a missing key answers session/new with
// -32000.
func classifyRPC(method string, e *acp.RPCError) *runs.RunError {
	var data rpcErrorData
	_ = json.Unmarshal(e.Data, &data)
	msg := cmp.Or(strings.TrimSpace(data.Details), e.Text(), "qwen answered "+method+" with an error")
	if e.Code == rpcAuthRequired {
		return runs.NewRunError(runs.NotAuthenticated, msg, hintAuth)
	}
	status := 0
	if e.Code >= 400 && e.Code <= 599 {
		status = e.Code
	}
	if status == 0 {
		if m := leadingStatus.FindStringSubmatch(strings.TrimSpace(data.Details)); m != nil {
			status, _ = strconv.Atoi(m[1])
		}
	}
	if status == 0 {
		if m := apiErrorStatus.FindStringSubmatch(msg); m != nil {
			status, _ = strconv.Atoi(m[1])
		}
	}
	return classifyStatus(status, msg)
}

// apiErrorStatus finds the status in the CLI's own wording of a failed
// request, "[API Error: 401 Incorrect API key provided]".
var apiErrorStatus = regexp.MustCompile(`API Error: (\d{3})\b`)

// classifyStatus is the class of a model API failure with status (0:
// unknown) and the CLI's message.
func classifyStatus(status int, msg string) *runs.RunError {
	lower := strings.ToLower(msg)
	if strings.Contains(lower, "context length") || strings.Contains(lower, "maximum context") {
		return runs.NewRunError(runs.ContextExceeded, msg, hintContext)
	}
	class, ok := adapterkit.StatusClass(status)
	if !ok {
		return runs.NewRunError(runs.APIError, msg, hintAPI)
	}
	switch class {
	case runs.NotAuthenticated:
		return runs.NewRunError(class, msg, hintAuth)
	case runs.RateLimited:
		return runs.NewRunError(class, msg, hintRate)
	case runs.TransientAPIError:
		return runs.NewRunError(class, msg, hintTransient)
	}
	return runs.NewRunError(class, msg, hintAPI)
}
