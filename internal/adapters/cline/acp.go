package cline

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// The ACP session modes of 3.0.65 (session/new's modes).
const (
	modePlan = "plan" // explores and plans, changes nothing
)

// sessionCommand builds `cline --acp` for a run over ACP (overACP):
// interactive, asking for approvals, or resuming a session. The prompt goes as turn 1's
// session/prompt. `cline --acp` refuses session/new without
// CLINE_API_KEY ("Authentication required") and then sends that value
// as the key, so it is the provider's key; CLINE_PROVIDER makes it use
// providers.json's openai-compatible entry.
func (a *Adapter) sessionCommand(inv runs.Invocation) (runs.Command, error) {
	env := append([]string(nil), fixedEnv...)
	// session/new carries the MCP servers' env and header values.
	// The MCP settings file carries the servers' env and header values.
	secrets := acp.MCPSecrets(inv.Spec.MCPServers)
	env = append(env, mcpEnv(inv)...)
	p, _ := readProviders(inv.FilesOrNone(), inv.Home)
	if p.ID != "" {
		env = append(env, "CLINE_PROVIDER="+p.ID)
	}
	if p.Key != "" {
		// Command's Env comes after PassEnv and wins: the file's key is
		// the gateway's CLINE_API_KEY, which PrepareHome and Preflight
		// write there.
		env = append(env, KeyEnv+"="+p.Key)
		secrets = append(secrets, p.Key)
	}
	return runs.Command{
		Args:    []string{"--acp"},
		Env:     env,
		PassEnv: append([]string(nil), credentialEnv...),
		Secrets: secrets,
	}, nil
}

// sessionProfile is Cline's ACP, as verified with 3.0.65 (doc.go).
func sessionProfile(inv runs.Invocation, usage *sessionUsage) acp.Profile {
	mode := "" // act, Cline's default
	if inv.Spec.Permission == runs.ReadOnly {
		mode = modePlan
	}
	return acp.Profile{
		Agent: Name,
		Mode:  mode,
		// Every tool asks unless auto_approve is set, which the wrapper
		// does for a run without approvals; what still asks is refused.
		RefuseAll: !inv.Spec.Asks(),
		// No usage on the wire: the session's record has it.
		TurnUsage: usage.turnUsage,
		// A loaded session's record counts its earlier turns already.
		SessionLoaded: usage.loaded,
		Steering:      acp.SteerCancels,
		DenyEndsTurn:  false,
		ToolName:      sessionToolName,
		ClassifyError: classifyRPC,
		MCPServers:    acp.MCPServers(inv.Spec.MCPServers),
		MCPTool:       func(tc acp.ToolCall) (string, string, bool) { return mcpTool(tc, inv.Spec.MCPServers) },
		// A run that names MCP servers means their tools to run: one
		// that asks for no approvals has them allowed once each where
		// Cline still asks (mode plan).
		AllowMCP: !inv.Spec.Asks(),
		ClassifyExit: func(exit runs.Exit, stderr []byte) *runs.RunError {
			if exit.Signal != "" {
				return nil // the core's process_killed
			}
			return runs.NewRunError(runs.AgentCrashed,
				fmt.Sprintf("cline exited with code %d", exit.Code)+orEmpty(": ", lastLines(string(stderr), 3)), hintCrash)
		},
	}
}

// sessionToolName is the tool's name from the title Cline gives a call,
// "<tool>: <summary>" ("run_commands: echo hello > out.txt").
func sessionToolName(tc acp.ToolCall) string {
	if name, _, ok := strings.Cut(tc.Title, ":"); ok && name != "" && !strings.Contains(name, " ") {
		return name
	}
	return cmp.Or(tc.Kind, tc.Title)
}

// mcpTool is Profile.MCPTool: the call's tool name, from its title, is
// Cline's name of an MCP tool (mcpToolName).
func mcpTool(tc acp.ToolCall, servers map[string]runs.MCPServer) (server, tool string, ok bool) {
	return mcpToolName(sessionToolName(tc), servers)
}

// ACP's "authentication required" code, which 3.0.65 answers
// session/new with when CLINE_API_KEY is missing.
const rpcAuthRequired = -32000

// classifyRPC implements acp.Profile.ClassifyError: a failed model call
// answers session/prompt with the API's message.
func classifyRPC(method string, e *acp.RPCError) *runs.RunError {
	msg := cmp.Or(e.Text(), "cline answered "+method+" with an error")
	if e.Code == rpcAuthRequired && strings.Contains(strings.ToLower(msg), "authentication required") {
		return runs.NewRunError(runs.NotAuthenticated, msg, hintAuth)
	}
	return classifyMessage(msg, "")
}

// sessionUsage reads the turns' usage from Cline's session record, whose
// metadata.usage is the session's so far.
type sessionUsage struct {
	files runs.CLIFiles
	home  string
	last  runs.Usage
}

// turnUsage implements acp.Profile.TurnUsage: the record's usage less
// the previous turn's.
func (s *sessionUsage) turnUsage(sessionID string, _ json.RawMessage) (runs.Usage, bool, []runs.Event) {
	total, evs := s.read(sessionID)
	if total == nil {
		return runs.Usage{}, false, evs
	}
	turn := total.Sub(s.last)
	s.last = *total
	return turn, true, nil
}

// loaded implements acp.Profile.SessionLoaded: the record's usage of a
// loaded session is its earlier runs', which the first turn here must
// not be billed.
func (s *sessionUsage) loaded(sessionID string) []runs.Event {
	total, evs := s.read(sessionID)
	if total != nil {
		s.last = *total
	}
	return evs
}

// read is the session's usage so far from its record, nil with a
// warning when it cannot be read.
func (s *sessionUsage) read(sessionID string) (*runs.Usage, []runs.Event) {
	if sessionID == "" || strings.ContainsAny(sessionID, "/\\") || sessionID == "." || sessionID == ".." {
		return nil, nil
	}
	b, err := s.files.ReadFile(sessionPath(s.home, sessionID))
	if err != nil {
		return nil, []runs.Event{runs.Warning("usage_unavailable", "cannot read cline's session record: "+err.Error())}
	}
	var rec struct {
		Metadata struct {
			Usage *wireUsage `json:"usage"`
		} `json:"metadata"`
	}
	if json.Unmarshal(b, &rec) != nil || rec.Metadata.Usage == nil {
		return nil, []runs.Event{runs.Warning("usage_unavailable", "cline's session record has no usage")}
	}
	total := normalize(*rec.Metadata.Usage)
	return &total, nil
}

// newSessionDecoder returns the ACP client of the Session run inv. The
// run's model and, for a run without approvals, auto_approve are
// session config options, set before turn 1.
func newSessionDecoder(inv runs.Invocation) runs.Session {
	p := sessionProfile(inv, &sessionUsage{files: inv.FilesOrNone(), home: inv.Home})
	if m := inv.Spec.Model; m != "" {
		// `cline --acp` ignores providers.json's model and CLINE_MODEL
		// and sends gpt-4o until the model option is set.
		p.ConfigOptions = append(p.ConfigOptions, acp.ConfigOption{ID: "model", Value: m})
	} else if pr, ok := readProviders(inv.FilesOrNone(), inv.Home); ok && pr.Model != "" {
		p.ConfigOptions = append(p.ConfigOptions, acp.ConfigOption{ID: "model", Value: pr.Model})
	}
	if !inv.Spec.Asks() && inv.Spec.Permission != runs.ReadOnly {
		// 3.0.65 takes a boolean option only with its type, which the
		// core sends.
		p.ConfigOptions = append(p.ConfigOptions, acp.ConfigOption{ID: "auto_approve", Value: true})
	}
	return &sessionDecoder{Decoder: acp.NewDecoder(inv, p), inv: inv, asked: map[string]string{}, allowed: map[string]bool{}}
}

// sessionDecoder is acp.Decoder wrapped for what Cline does of its own:
// it asks again for a call the client allowed for the session, it drops
// a prompt's images, and its run's MCP settings file is the gateway's to
// remove.
type sessionDecoder struct {
	*acp.Decoder
	inv runs.Invocation

	mu  sync.Mutex
	out bytes.Buffer // the wrapper's own answers
	// asked maps an open approval's id to its call's key (tool and
	// input); allowed holds the keys the client allowed for the
	// session. Cline 3.0.65 asks again for the same call after
	// allow_always (verified), so the wrapper answers such a request
	// itself.
	asked   map[string]string
	allowed map[string]bool
}

// maxRemembered bounds asked and allowed against hostile input.
const maxRemembered = 1 << 12

// permissionRequest is what the wrapper reads of a
// session/request_permission.
type permissionRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ToolCall struct {
			Title    string          `json:"title"`
			RawInput json.RawMessage `json:"rawInput"`
		} `json:"toolCall"`
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	} `json:"params"`
}

// callKey identifies a call for allow_session: its title, which names
// the tool and summarizes the input, and its input.
func callKey(title string, input json.RawMessage) string {
	return title + "\x00" + string(compactJSON(input))
}

// allowRemembered answers a permission request for a call the client
// allowed for the session with the request's allow_once option; ok is
// false when the request is not one.
func (d *sessionDecoder) allowRemembered(r permissionRequest) bool {
	if !d.allowed[callKey(r.Params.ToolCall.Title, r.Params.ToolCall.RawInput)] {
		return false
	}
	for _, o := range r.Params.Options {
		if o.Kind == "allow_once" || o.Kind == "allow_always" {
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.ID,
				"result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": o.OptionID}}})
			d.out.Write(append(b, '\n'))
			return true
		}
	}
	return false
}

// noteApprovals remembers the call of each approval.requested of r.
func (d *sessionDecoder) noteApprovals(r permissionRequest, evs []runs.Event) {
	for _, ev := range evs {
		a, ok := ev.Data.(runs.ApprovalRequestedData)
		if !ok || ev.Type != runs.EventApprovalRequested || len(d.asked) >= maxRemembered {
			continue
		}
		d.asked[a.ID] = callKey(r.Params.ToolCall.Title, r.Params.ToolCall.RawInput)
	}
}

// Answer implements runs.Session, and remembers a call allowed for the
// session.
func (d *sessionDecoder) Answer(id string, dec runs.Decision, message string) error {
	if err := d.Decoder.Answer(id, dec, message); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if key, ok := d.asked[id]; ok && dec == runs.AllowSession && len(d.allowed) < maxRemembered {
		d.allowed[key] = true
	}
	delete(d.asked, id)
	return nil
}

// Send implements runs.Session. 3.0.65 keeps only the text of a
// session/prompt (sessionImagesRefusal), so a message with images is
// refused rather than sent without them; the agent's Interaction says
// so, and the supervisor refuses such a message before it gets here.
func (d *sessionDecoder) Send(text string, images []runs.Image, steer bool) error {
	if len(images) > 0 {
		return runs.Unsupported(Name, runs.FieldAttachments, sessionImagesRefusal)
	}
	return d.Decoder.Send(text, nil, steer)
}

// Finish implements runs.Decoder, and removes the run's MCP settings
// file, which holds the servers' secrets.
func (d *sessionDecoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	out := d.Decoder.Finish(exit, stderrTail)
	out.Events = append(out.Events, removeMCPSettings(d.inv)...)
	return out
}

var _ runs.Session = (*sessionDecoder)(nil)

// Decode implements runs.Decoder: a permission request for a call
// allowed for the session is answered here, every other line is the
// core's.
func (d *sessionDecoder) Decode(raw []byte) []runs.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r permissionRequest
	if json.Unmarshal(raw, &r) != nil || r.Method != "session/request_permission" || len(r.ID) == 0 {
		return d.Decoder.Decode(raw)
	}
	if d.allowRemembered(r) {
		return nil
	}
	evs := d.Decoder.Decode(raw)
	d.noteApprovals(r, evs)
	return evs
}

// Pending implements runs.Conversation: the wrapper's own answers first,
// then the core's.
func (d *sessionDecoder) Pending() ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out, done := d.Decoder.Pending()
	if d.out.Len() > 0 {
		out = append(bytes.Clone(d.out.Bytes()), out...)
		d.out.Reset()
	}
	return out, done
}
