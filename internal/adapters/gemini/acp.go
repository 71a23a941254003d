package gemini

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// The ACP session modes of 0.61.0 (session/new's modes.availableModes).
const (
	modeDefault  = "default"  // asks for run_shell_command, write_file, replace, …
	modeAutoEdit = "autoEdit" // edit tools unasked, confined to the workspace
	modeYolo     = "yolo"     // every tool unasked
)

// sessionModes maps a permission level to the ACP mode of a Session run
// that does not ask for approvals, as approvalModes does for one-shot
// runs. Whatever the mode still asks for is refused without asking
// (Profile.RefuseAll): what headless -p does by not registering the tool.
var sessionModes = map[runs.Permission]string{
	runs.ReadOnly:       modeDefault,
	runs.WorkspaceWrite: modeAutoEdit,
	runs.Full:           modeYolo,
}

// sessionCommand builds `gemini --acp` for a run whose Spec.Session():
// interactive, or asking for approvals. The prompt goes as turn 1's
// session/prompt, so there is no stdin payload.
func (a *Adapter) sessionCommand(inv runs.Invocation, perm runs.Permission) (runs.Command, error) {
	s := inv.Spec
	if s.ResumeSessionID != "" {
		return runs.Command{}, runs.Unsupported(Name, runs.FieldResumeSessionID,
			"a run that is interactive, asks for approvals, or is given mcp_servers or attachments runs over ACP and cannot resume a session: gemini 0.61.0's ACP session/load erases a session loaded in the minute it began")
	}
	args := []string{"--acp"}
	if s.Model != "" {
		args = append(args, "--model="+s.Model)
	}
	// workspace_write without approvals lets the shell run unasked, as in
	// a one-shot run. With approvals the policy is left out: it would let
	// the shell run without asking.
	if perm == runs.WorkspaceWrite && !s.Asks() {
		args = append(args, "--policy="+policyPath(inv.Home))
	}
	args = append(args, a.extraArgs...)
	return runs.Command{
		Args:    args,
		Env:     append([]string(nil), fixedEnv...),
		PassEnv: append([]string(nil), credentialEnv...),
		// session/new carries the MCP servers' env and header values.
		Secrets: acp.MCPSecrets(s.MCPServers),
	}, nil
}

// sessionProfile is Gemini's ACP, as verified with 0.61.0 (doc.go). fs
// reads the CLI's chat recording, where each turn's whole usage is.
func sessionProfile(inv runs.Invocation, fs files) acp.Profile {
	perm := adapterkit.Permission(inv.Spec.Permission)
	mode := sessionModes[perm]
	refuse := true
	if inv.Spec.Asks() {
		mode = modeDefault
		// read_only forbids everything that asks: refuse it without
		// asking the client.
		refuse = perm == runs.ReadOnly
	}
	oneShot := newDecoder(inv)
	log := newChatLog(fs, inv.Home, inv.Dir)
	return acp.Profile{
		Agent:     Name,
		Mode:      mode,
		RefuseAll: refuse,
		// The prompt result lacks cached and thought tokens; the chat
		// recording has them (doc.go). The session's cwd is inv.Dir.
		TurnUsage:  log.turnUsage,
		UsageSoFar: log.soFar,
		Steering:   acp.SteerCancels,
		// The model gets "…was canceled by the user." and goes on.
		DenyEndsTurn: false,
		ToolName:     sessionToolName,
		ToolInput:    sessionToolInput,
		// Gemini streams thought summaries ("**subject**\ndescription"),
		// not the thinking itself.
		Reasoning:     runs.VisibilitySummary,
		ClassifyError: classifyRPC,
		ClassifyExit: func(exit runs.Exit, stderr []byte) *runs.RunError {
			return oneShot.classifyNoResult(exit, string(stderr))
		},
		Update: dropModeUpdate,
		// The run's MCP servers, per session; their tools are offered
		// as mcp_<server>_<tool>. A run without approvals means them to
		// run: the modes but yolo ask for every MCP tool.
		MCPServers: acp.MCPServers(inv.Spec.MCPServers),
		MCPTool:    func(tc acp.ToolCall) (string, string, bool) { return sessionMCPTool(tc, inv.Spec.MCPServers) },
		AllowMCP:   !inv.Spec.Asks(),
	}
}

// mcpServerTitle ends the title 0.61.0 gives a call of an MCP tool:
// "reverse_text (demo MCP Server)".
const mcpServerTitle = " MCP Server)"

// sessionMCPTool tells a call of a tool of the run's MCP servers: its id
// starts with the tool's name, mcp_<server>_<tool>; a call without one
// is read from its title, "<tool> (<server> MCP Server)".
func sessionMCPTool(tc acp.ToolCall, servers map[string]runs.MCPServer) (server, tool string, ok bool) {
	if len(servers) == 0 {
		return "", "", false
	}
	if server, tool, ok = acp.SplitMCPName(sessionToolName(tc), "mcp_", "_", servers); ok {
		return server, tool, true
	}
	head, found := strings.CutSuffix(tc.Title, mcpServerTitle)
	if !found {
		return "", "", false
	}
	tool, server, found = strings.Cut(head, " (")
	if _, known := servers[server]; !found || !known || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// modeUpdatePrefix starts the text 0.61.0 sends as an agent message
// chunk when session/set_mode changes the mode ("[MODE_UPDATE] autoEdit",
// from its approval-mode handler): a notice of the CLI's own, not the
// model's answer.
const modeUpdatePrefix = "[MODE_UPDATE] "

// dropModeUpdate implements acp.Profile.Update: it swallows the mode
// notice, and leaves every other update to the core.
func dropModeUpdate(kind string, update json.RawMessage) ([]runs.Event, bool) {
	if kind != "agent_message_chunk" {
		return nil, false
	}
	var u struct {
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(update, &u) != nil || u.Content.Type != "text" || !strings.HasPrefix(u.Content.Text, modeUpdatePrefix) {
		return nil, false
	}
	return nil, true
}

// sessionToolName reads the tool's name from the call id, which Gemini
// builds as <tool>__<tool>_<millis>_<n> ("run_shell_command__run_shell_command_1796104388809_0").
func sessionToolName(tc acp.ToolCall) string {
	if name, _, ok := strings.Cut(tc.ToolCallID, "__"); ok && name != "" {
		return name
	}
	return ""
}

// sessionToolInput is an edit call's input: 0.61.0 sends write_file and
// replace with no rawInput, a title naming the file relative to the cwd
// ("Writing to a.txt", "a.txt: old => new") and the change itself as diff
// content, which the default input (title, kind, content text) drops.
// The client deciding on the edit gets the diffs: each file's path, as
// the CLI sends it (absolute), and its old and new text (the old text is
// empty for a new file). Other calls keep the default (nil).
func sessionToolInput(tc acp.ToolCall) json.RawMessage {
	type change struct {
		Path    string  `json:"path"`
		OldText *string `json:"old_text,omitempty"`
		NewText string  `json:"new_text"`
	}
	var changes []change
	for _, c := range tc.Content {
		if c.Type == "diff" && c.Path != "" && c.NewText != nil {
			changes = append(changes, change{Path: c.Path, OldText: c.OldText, NewText: *c.NewText})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	b, err := json.Marshal(struct {
		Title   string   `json:"title,omitempty"`
		Kind    string   `json:"kind,omitempty"`
		Changes []change `json:"changes"`
	}{tc.Title, tc.Kind, changes})
	if err != nil {
		return nil
	}
	return b
}

// acpResult is what the adapter reads of a session/prompt result:
// _meta.quota.token_count, the turn's sums of promptTokenCount (cached
// included) and candidatesTokenCount (thoughts excluded). 0.61.0 counts
// neither cached nor thought tokens there (see doc.go): it is the
// fallback of the chat recording, and a check on it.
type acpResult struct {
	Meta *struct {
		Quota *struct {
			TokenCount *struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"token_count"`
		} `json:"quota"`
	} `json:"_meta"`
}

// readSessionUsage reads a prompt result's usage; ok is false when it
// has none (a cancelled turn's, an error answer's nil).
func readSessionUsage(result json.RawMessage) (runs.Usage, bool) {
	var r acpResult
	if err := json.Unmarshal(result, &r); err != nil || r.Meta == nil || r.Meta.Quota == nil || r.Meta.Quota.TokenCount == nil {
		return runs.Usage{}, false
	}
	tc := r.Meta.Quota.TokenCount
	return runs.Usage{InputTokens: bound(tc.InputTokens), OutputTokens: bound(tc.OutputTokens)}, true
}

// ACP's "authentication required" error code, which 0.61.0 answers
// session/new with when it has no key.
const rpcAuthRequired = -32000

// classifyRPC implements acp.Profile.ClassifyError. A failed model call
// answers session/prompt with the HTTP status as the code and the API's
// error body, quoted, as the message (a 429 is rewritten to "Rate limit
// exceeded. Try again later."); a missing key answers session/new with
// -32000.
func classifyRPC(method string, e *acp.RPCError) *runs.RunError {
	msg := cmp.Or(e.Text(), "gemini answered "+method+" with an error")
	if e.Code == rpcAuthRequired || strings.Contains(strings.ToLower(msg), "api key is missing") {
		return runs.NewRunError(runs.NotAuthenticated, msg, hintAuth)
	}
	f := apiFailureOf(msg, runs.Exit{}, "")
	if f.status == 0 && (strings.Contains(msg, " is not found") || strings.Contains(msg, "NOT_FOUND")) {
		// 0.61.0 answers a model the API does not know with code 500
		// and the API's sentence alone ("models/x is not found for API
		// version v1beta…"): a 404, not a transient failure.
		f.status = 404
	}
	if f.status == 0 && e.Code >= 400 && e.Code <= 599 {
		f.status = e.Code
	}
	return classifyAPI(f, msg)
}
