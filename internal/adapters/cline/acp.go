package cline

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// The ACP session modes of 3.0.65 (session/new's modes).
const (
	modePlan = "plan" // explores and plans, changes nothing
)

// sessionCommand builds `cline --acp` for a run whose Spec.Session():
// interactive, or asking for approvals. The prompt goes as turn 1's
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
		TurnUsage:     usage.turnUsage,
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
	if e.Code == codeImagesRefused && msg == sessionImagesRefusal {
		return runs.NewRunError(runs.FlagRejected, msg, "send images in a one-shot run")
	}
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
	if sessionID == "" || strings.ContainsAny(sessionID, "/\\") || sessionID == "." || sessionID == ".." {
		return runs.Usage{}, false, nil
	}
	b, err := s.files.ReadFile(sessionPath(s.home, sessionID))
	if err != nil {
		return runs.Usage{}, false, []runs.Event{runs.Warning("usage_unavailable", "cannot read cline's session record: "+err.Error())}
	}
	var rec struct {
		Metadata struct {
			Usage *wireUsage `json:"usage"`
		} `json:"metadata"`
	}
	if json.Unmarshal(b, &rec) != nil || rec.Metadata.Usage == nil {
		return runs.Usage{}, false, []runs.Event{runs.Warning("usage_unavailable", "cline's session record has no usage")}
	}
	total := normalize(*rec.Metadata.Usage)
	turn := total.Sub(s.last)
	s.last = total
	return turn, true, nil
}

// configOption is one session/set_config_option the run needs.
type configOption struct {
	id    string
	value any
}

// newSessionDecoder returns the ACP client of the Session run inv.
func newSessionDecoder(inv runs.Invocation) runs.Session {
	core := acp.NewDecoder(inv, sessionProfile(inv, &sessionUsage{files: inv.FilesOrNone(), home: inv.Home}))
	var opts []configOption
	if m := inv.Spec.Model; m != "" {
		// `cline --acp` ignores providers.json's model and CLINE_MODEL
		// and sends gpt-4o until the model option is set.
		opts = append(opts, configOption{"model", m})
	} else if p, ok := readProviders(inv.FilesOrNone(), inv.Home); ok && p.Model != "" {
		opts = append(opts, configOption{"model", p.Model})
	}
	if !inv.Spec.Asks() && inv.Spec.Permission != runs.ReadOnly {
		opts = append(opts, configOption{"auto_approve", true})
	}
	return &sessionDecoder{Decoder: core, inv: inv, options: opts, asked: map[string]string{}, allowed: map[string]bool{}}
}

// sessionDecoder is acp.Decoder wrapped so that the run's options are
// set before turn 1: once session/new is answered, it holds back what
// the core writes (turn 1's session/prompt) and sends
// session/set_config_option for each, one at a time; the held prompt
// goes once Cline accepted them all. A refused option fails turn 1 with
// Cline's error and ends the session.
type sessionDecoder struct {
	*acp.Decoder
	inv runs.Invocation

	mu      sync.Mutex
	options []configOption // still to send, in order
	waiting string         // the id of the option request awaiting its answer
	current string         // the option it sets
	holding bool           // the core's output is held back
	held    bytes.Buffer
	out     bytes.Buffer
	failed  bool
	n       int
	// session is the session's id, from session/new's answer.
	session string
	// refusing is the id of the request whose answer ends the turn of
	// a message with images (Send).
	refusing string
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
func (d *sessionDecoder) allowRemembered(raw []byte) bool {
	var r permissionRequest
	if json.Unmarshal(raw, &r) != nil || r.Method != "session/request_permission" || len(r.ID) == 0 {
		return false
	}
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

// noteApprovals remembers each approval.requested's call.
func (d *sessionDecoder) noteApprovals(raw []byte, evs []runs.Event) {
	var r permissionRequest
	for _, ev := range evs {
		a, ok := ev.Data.(runs.ApprovalRequestedData)
		if !ok || ev.Type != runs.EventApprovalRequested || len(d.asked) >= maxRemembered {
			continue
		}
		if r.Method == "" && json.Unmarshal(raw, &r) != nil {
			return
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
// session/prompt (sessionImagesRefusal), so a message with images never
// reaches Cline: its turn starts, and fails at once. The wrapper holds
// the turn's prompt back and asks Cline something it refuses (an unknown
// config option), whose answer wakes the decoder; the held prompt then
// gets the refusal as its error answer, which ends the turn.
func (d *sessionDecoder) Send(text string, images []runs.Image, steer bool) error {
	if len(images) == 0 {
		return d.Decoder.Send(text, nil, steer)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.holding || d.refusing != "" || d.session == "" {
		return runs.Unsupported(Name, runs.FieldAttachments, sessionImagesRefusal)
	}
	if err := d.Decoder.Send(text, nil, steer); err != nil {
		return err
	}
	d.holding = true
	d.n++
	d.refusing = optionID + strconv.Itoa(d.n)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": d.refusing, "method": "session/set_config_option",
		"params": map[string]any{"sessionId": d.session, "configId": "agentgate-images", "value": "refused"}})
	d.out.Write(append(b, '\n'))
	return nil
}

// codeImagesRefused is the code of the error answer the wrapper gives a
// prompt with images.
const codeImagesRefused = -32099

// refuseImages answers the held prompt of a message with images with
// the refusal, which fails its turn; the prompt never goes to Cline.
func (d *sessionDecoder) refuseImages() []runs.Event {
	d.refusing, d.holding = "", false
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	first, _, _ := bytes.Cut(d.held.Bytes(), []byte("\n"))
	d.held.Reset()
	if json.Unmarshal(first, &p) != nil || len(p.ID) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.ID,
		"error": map[string]any{"code": codeImagesRefused, "message": sessionImagesRefusal}})
	return d.Decoder.Decode(b)
}

// Finish implements runs.Decoder, and removes the run's MCP settings
// file, which holds the servers' secrets.
func (d *sessionDecoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	out := d.Decoder.Finish(exit, stderrTail)
	out.Events = append(out.Events, removeMCPSettings(d.inv)...)
	return out
}

var _ runs.Session = (*sessionDecoder)(nil)

// optionID prefixes the ids of the wrapper's own requests: strings, so
// that they never meet the core's numeric ids.
const optionID = "agentgate-config-"

// line is what the wrapper reads of a line from the CLI.
type line struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		SessionID string `json:"sessionId"`
	} `json:"result"`
	Error *acp.RPCError `json:"error"`
}

// Decode implements runs.Decoder.
func (d *sessionDecoder) Decode(raw []byte) []runs.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	var l line
	if json.Unmarshal(raw, &l) != nil {
		return d.Decoder.Decode(raw)
	}
	var id string
	if json.Unmarshal(l.ID, &id) == nil && strings.HasPrefix(id, optionID) && l.Method == "" {
		if id == d.refusing {
			return d.refuseImages()
		}
		if id != d.waiting {
			return nil
		}
		d.waiting = ""
		if l.Error != nil {
			return d.refused(l.Error)
		}
		return d.next()
	}
	if l.Method == "session/request_permission" && d.allowRemembered(raw) {
		return nil
	}
	evs := d.Decoder.Decode(raw)
	if l.Method == "session/request_permission" {
		d.noteApprovals(raw, evs)
	}
	if l.Method == "" && l.Result != nil && d.session == "" {
		d.session = l.Result.SessionID
	}
	if l.Method == "" && l.Result != nil && l.Result.SessionID != "" && len(d.options) > 0 && !d.holding && !d.failed {
		// session/new answered: the core has written what follows it.
		d.holding = true
		out, _ := d.Decoder.Pending()
		d.held.Write(out)
		evs = append(evs, d.next()...)
	}
	return evs
}

// next sends the next option, or releases the held output once every
// option was accepted.
func (d *sessionDecoder) next() []runs.Event {
	if len(d.options) == 0 {
		d.holding = false
		d.out.Write(d.held.Bytes())
		d.held.Reset()
		return nil
	}
	o := d.options[0]
	d.options = d.options[1:]
	d.n++
	d.waiting, d.current = optionID+strconv.Itoa(d.n), o.id
	params := map[string]any{"sessionId": d.sessionID(), "configId": o.id, "value": o.value}
	if _, ok := o.value.(bool); ok {
		// 3.0.65 refuses a boolean value without its type ("Invalid
		// params": expected string).
		params["type"] = "boolean"
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": d.waiting, "method": "session/set_config_option", "params": params})
	d.out.Write(append(b, '\n'))
	return nil
}

// sessionID is the session's, from the held output's first request.
func (d *sessionDecoder) sessionID() string {
	var p struct {
		Params struct {
			SessionID string `json:"sessionId"`
		} `json:"params"`
	}
	first, _, _ := bytes.Cut(d.held.Bytes(), []byte("\n"))
	_ = json.Unmarshal(first, &p)
	return p.Params.SessionID
}

// refused fails turn 1 with Cline's answer to an option: the core gets
// it as the held request's error answer.
func (d *sessionDecoder) refused(e *acp.RPCError) []runs.Event {
	d.failed, d.holding = true, false
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	first, _, _ := bytes.Cut(d.held.Bytes(), []byte("\n"))
	d.held.Reset()
	if json.Unmarshal(first, &p) != nil || len(p.ID) == 0 {
		return nil
	}
	msg := fmt.Sprintf("cline refused the run's %s: %s", d.current, cmp.Or(e.Text(), "no message"))
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.ID, "error": map[string]any{"code": e.Code, "message": msg}})
	return d.Decoder.Decode(b)
}

// Pending implements runs.Conversation: the wrapper's own requests
// first, then the core's, held back while options are being set.
func (d *sessionDecoder) Pending() ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out, done := d.Decoder.Pending()
	if d.holding {
		d.held.Write(out)
		out = nil
	}
	if d.out.Len() > 0 {
		out = append(bytes.Clone(d.out.Bytes()), out...)
		d.out.Reset()
	}
	return out, done || d.failed
}
