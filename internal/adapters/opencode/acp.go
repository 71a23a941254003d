package opencode

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// sessionCommand builds `opencode acp --pure` for a run whose
// Spec.Session(): interactive, or asking for approvals. The prompt goes
// as turn 1's session/prompt, so there is no stdin payload.
func (a *Adapter) sessionCommand(inv runs.Invocation, perm runs.Permission) (runs.Command, error) {
	s := inv.Spec
	if s.ResumeSessionID != "" && !s.Interactive {
		return runs.Command{}, runs.Unsupported(Name, runs.FieldResumeSessionID,
			"a run with approvals, MCP servers or attachments resumes a session only when it is interactive "+
				"(ACP session/load is verified for interactive runs)")
	}
	for name, m := range s.MCPServers {
		if m.Remote() == (m.Command != "") {
			return runs.Command{}, runs.Invalid(runs.FieldMCPServers, fmt.Sprintf("server %q must have either a command or a url", name))
		}
	}
	// The values travel on stdin, in session/new.
	secrets := acp.MCPSecrets(s.MCPServers)
	args := []string{"acp", "--pure"}
	args = append(args, a.extraArgs...)
	pass := append([]string(nil), credentialEnv...)
	for _, name := range homeEnvRefs(inv.FilesOrNone(), inv.Home) {
		if !slices.Contains(pass, name) {
			pass = append(pass, name)
		}
	}
	env := append([]string(nil), phoneHome...)
	env = append(env, "OPENCODE_PERMISSION="+sessionPermission(perm, s.Asks()))
	if inv.Home != "" {
		env = append(env, "OPENCODE_CONFIG_DIR="+sessionConfigDir(inv.Home))
	}
	return runs.Command{Args: args, Env: env, PassEnv: pass, Secrets: secrets}, nil
}

// readTools are OpenCode's permissions of tools that change nothing:
// with approvals they run without asking.
const readTools = `"read":"allow","glob":"allow","grep":"allow","list":"allow","todoread":"allow","todowrite":"allow",` +
	`"webfetch":"allow","websearch":"allow","codesearch":"allow","lsp":"allow","skill":"allow"`

// askPermissionEnv is OPENCODE_PERMISSION for a run with approvals, per
// level: every permission asks ("*", which covers bash, edit and write,
// task and every MCP tool), but the read-only tools, and what the level
// forbids is denied without asking. OpenCode takes the last rule that
// matches, so the order of the keys matters.
var askPermissionEnv = map[runs.Permission]string{
	runs.ReadOnly:       `{"*":"ask",` + readTools + `,"edit":"deny","bash":"deny","external_directory":"deny"}`,
	runs.WorkspaceWrite: `{"*":"ask",` + readTools + `,"external_directory":"deny"}`,
	runs.Full:           `{"*":"ask",` + readTools + `,"external_directory":"allow"}`,
}

// sessionPermission is OPENCODE_PERMISSION for a Session run: the
// one-shot mapping without approvals (with "ask" nowhere, so OpenCode
// never sends a permission request), askPermissionEnv with them.
func sessionPermission(perm runs.Permission, asks bool) string {
	if asks {
		return askPermissionEnv[perm]
	}
	return permissionEnv[perm]
}

// sessionProfile is OpenCode's ACP, as verified with 1.18.33 (doc.go).
// rec reads OpenCode's store, where each turn's whole bill is.
func sessionProfile(inv runs.Invocation, bills *storeLog) acp.Profile {
	oneShot := newDecoder(inv)
	servers := acp.MCPServers(inv.Spec.MCPServers)
	names, namer := toolNames(), newMCPNamer(inv.Spec.MCPServers)
	return acp.Profile{
		Agent:      Name,
		MCPServers: servers,
		// OpenCode names an MCP tool "<server>_<tool>" in its first
		// tool_call's title (demo_reverse_text).
		MCPTool: func(tc acp.ToolCall) (string, string, bool) { return namer.split(names(tc)) },
		// A run that names MCP servers means their tools to run; should
		// the operator's configuration make them ask, they are allowed
		// when the run does not ask for approvals.
		AllowMCP: true,
		// Without approvals nothing is set to ask; should the operator's
		// configuration set a permission to ask, it is refused, as `run`
		// refuses it.
		RefuseAll: !inv.Spec.Asks(),
		// The prompt result holds the last model request's usage only;
		// the store has every request's, priced (doc.go, Usage of a
		// Session run).
		TurnBill: bills.turnBill,
		// A resumed session's earlier turns are in the store already.
		SessionLoaded: bills.loaded,
		UsageSoFar:    bills.usageSoFar,
		Steering:      acp.SteerMerges,
		DenyEndsTurn:  true,
		ToolName:      names,
		ClassifyError: func(method string, e *acp.RPCError) *runs.RunError {
			return classifyRPC(oneShot, method, e)
		},
		ClassifyExit: func(exit runs.Exit, stderr []byte) *runs.RunError {
			if exit.Signal != "" {
				return nil // the core's process_killed
			}
			return oneShot.classifyExit(exit, stripANSI(string(stderr)))
		},
	}
}

// toolNames returns a Profile.ToolName that names a call after the title
// of its first tool_call, which OpenCode sets to the tool's name ("bash",
// "edit", "demo_reverse_text") while the call is pending; later updates
// and the permission request title it after its input ("touch
// made.txt").
func toolNames() func(tc acp.ToolCall) string {
	names := map[string]string{}
	return func(tc acp.ToolCall) string {
		if n, ok := names[tc.ToolCallID]; ok {
			return n
		}
		if tc.Title == "" || len(names) >= maxNamedTools {
			return ""
		}
		names[tc.ToolCallID] = tc.Title
		return tc.Title
	}
}

// maxNamedTools bounds the names toolNames keeps: far above the calls of
// any real session, so that hostile input cannot grow it for ever.
const maxNamedTools = 1 << 14

// acpUsage is the usage of a session/prompt result.
type acpUsage struct {
	Usage *struct {
		InputTokens       int64 `json:"inputTokens"`
		OutputTokens      int64 `json:"outputTokens"`
		ThoughtTokens     int64 `json:"thoughtTokens"`
		CachedReadTokens  int64 `json:"cachedReadTokens"`
		CachedWriteTokens int64 `json:"cachedWriteTokens"`
	} `json:"usage"`
}

// readSessionUsage reads a prompt result's usage, the turn's last model
// request's: the fallback of the store, and a check on it.
func readSessionUsage(result json.RawMessage) (runs.Usage, bool) {
	var r acpUsage
	if err := json.Unmarshal(result, &r); err != nil || r.Usage == nil {
		return runs.Usage{}, false
	}
	u := r.Usage
	return runs.Usage{
		InputTokens:      u.InputTokens + u.CachedReadTokens + u.CachedWriteTokens,
		CacheReadTokens:  u.CachedReadTokens,
		CacheWriteTokens: u.CachedWriteTokens,
		OutputTokens:     u.OutputTokens + u.ThoughtTokens,
		ReasoningTokens:  u.ThoughtTokens,
	}, true
}

// newSessionDecoder returns the ACP client of the Session run inv, which
// reads the turns' usage through rec; checkImages refuses the images of
// a message that the model would not get. OpenCode's ACP takes the model
// and the effort only as session config options (`opencode acp` has no
// --model or --variant): they are set before turn 1, which a refusal
// fails, so that no turn runs on a model the run did not ask for.
func newSessionDecoder(inv runs.Invocation, rec records, checkImages func(runs.Invocation) error) runs.Session {
	bills := newStoreLog(rec)
	p := sessionProfile(inv, bills)
	if m := inv.Spec.Model; m != "" {
		p.ConfigOptions = append(p.ConfigOptions, acp.ConfigOption{ID: "model", Value: m})
	}
	if e := inv.Spec.Effort; e != "" {
		p.ConfigOptions = append(p.ConfigOptions, acp.ConfigOption{ID: "effort", Value: e})
	}
	return &givenSession{Session: acp.NewDecoder(inv, p), inv: inv, checkImages: checkImages, bills: bills}
}

// givenSession is a Session run's client that refuses a message's images
// the model would not get, and adds the running turn's cost so far to
// the usage.updated the core emits during a turn.
type givenSession struct {
	runs.Session
	inv         runs.Invocation
	checkImages func(runs.Invocation) error
	bills       *storeLog
}

// Decode implements runs.Decoder. A usage.updated in a batch without
// turn.completed is one the core emitted during the turn, from
// Profile.UsageSoFar, which carries the cost of the turns before only;
// the store's price of the turn so far, read with that usage, is added,
// so that max_budget_usd sees a long turn's cost before it ends. Decode
// is called from one goroutine, and the core reads the store under its
// lock within the call.
func (g *givenSession) Decode(line []byte) []runs.Event {
	evs := g.Session.Decode(line)
	cost, ok := g.bills.takeCostSoFar()
	if !ok || cost <= 0 {
		return evs
	}
	for _, ev := range evs {
		if ev.Type == runs.EventTurnCompleted {
			return evs
		}
	}
	for i := range evs {
		if d, isUsage := evs[i].Data.(runs.UsageData); isUsage && evs[i].Type == runs.EventUsageUpdated {
			sum := cost
			if d.CostUSD != nil {
				sum += *d.CostUSD
			}
			d.CostUSD = &sum
			evs[i].Data = d
		}
	}
	return evs
}

// Send implements runs.Session. Images go as ACP image blocks after the
// text, when the model's configuration declares image input.
func (g *givenSession) Send(text string, images []runs.Image, steer bool) error {
	if len(images) > 0 && g.checkImages != nil {
		inv := g.inv
		inv.Images = images
		if err := g.checkImages(inv); err != nil {
			return err
		}
	}
	return g.Session.Send(text, images, steer)
}

// rpcErrorData is the data of OpenCode's error answer to a failed
// session/prompt: {"service":"session","errorName":"APIError"}. The
// message is "Internal error: " and the error's message (for an
// APIError the API's own, "Incorrect API key provided"): the HTTP status
// and isRetryable that `run` prints are not in it.
type rpcErrorData struct {
	ErrorName string `json:"errorName"`
}

// ACP's "authentication required" code, which OpenCode answers for a
// ProviderAuthError.
const rpcAuthRequired = -32000

// Phrases of the model APIs' error messages, by class, for an APIError
// that comes without its status.
var (
	authPhrases      = []string{"api key", "api_key", "unauthorized", "authentication", "not authenticated", "permission denied", "forbidden"}
	ratePhrases      = []string{"rate limit", "rate_limit", "too many requests", "quota"}
	transientPhrases = []string{"server had an error", "overloaded", "internal server error", "bad gateway", "service unavailable",
		"gateway timeout", "timed out", "timeout", "econnrefused", "connection refused", "unable to connect", "socket"}
	contextPhrases = []string{"context length", "context_length", "maximum context", "too many tokens"}
)

// classifyRPC implements acp.Profile.ClassifyError. OpenCode names the
// error (data.errorName) but, over ACP, drops the HTTP status an
// APIError carries in `run`: the class of an APIError is then read from
// the API's message, which is less certain than the status (doc.go).
func classifyRPC(d *decoder, method string, e *acp.RPCError) *runs.RunError {
	msg := cmp.Or(strings.TrimSpace(strings.TrimPrefix(e.Message, "Internal error:")), "opencode answered "+method+" with an error")
	var data rpcErrorData
	_ = json.Unmarshal(e.Data, &data)
	if e.Code == rpcAuthRequired {
		return runs.NewRunError(runs.NotAuthenticated, msg, hintAuth)
	}
	switch data.ErrorName {
	case "APIError", "UnknownError", "":
		lower := strings.ToLower(msg)
		switch {
		case hasAny(lower, contextPhrases):
			return runs.NewRunError(runs.ContextExceeded, msg, hintContext)
		case hasAny(lower, ratePhrases):
			return runs.NewRunError(runs.RateLimited, msg, hintRate)
		case hasAny(lower, authPhrases):
			return runs.NewRunError(runs.NotAuthenticated, msg, hintAuth)
		case hasAny(lower, transientPhrases):
			return runs.NewRunError(runs.TransientAPIError, msg, hintTransient)
		}
		if data.ErrorName == "" {
			return runs.NewRunError(runs.AgentCrashed, msg, hintCrash)
		}
		return runs.NewRunError(runs.APIError, msg, hintAPI)
	}
	// Every other name is the one-shot decoder's to classify.
	return d.classify(&wireError{Name: data.ErrorName, Data: &wireErrorData{Message: msg}})
}

func hasAny(s string, phrases []string) bool {
	for _, p := range phrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
