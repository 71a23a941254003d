package acp

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// ProtocolVersion is the ACP version the client speaks.
const ProtocolVersion = 1

// phase is where the session is.
type phase int

const (
	phaseInit    phase = iota // initialize sent
	phaseNew                  // session/new sent
	phaseLoad                 // session/load sent: the agent replays the session's history
	phaseMode                 // session/set_mode sent
	phaseOptions              // the Profile's session/set_config_option being sent
	phaseReady                // the session is up: a turn runs or it is idle
	phaseFailed               // the handshake failed; nothing more is sent
)

// The purposes of the client's requests, by id.
const (
	reqInitialize = iota
	reqNew
	reqLoad
	reqMode
	reqOption
	reqPrompt
)

// Decoder is the ACP client of one run: a runs.Session over the CLI's
// stdio. It is safe for the supervisor's use: every method takes one
// lock, so Interrupt may come from another goroutine.
type Decoder struct {
	mu  sync.Mutex
	inv runs.Invocation
	p   Profile

	out    bytes.Buffer
	nextID int64
	// sent maps the ids of the client's requests awaiting an answer to
	// their purpose.
	sent map[int64]int

	phase     phase
	options   int // how many of the Profile's config options were sent
	sessionID string
	model     string

	// turn is the running turn, nil while idle.
	turn *turnState
	// closing: Close was called; stopping: Interrupt was. Either ends the
	// conversation once no turn runs.
	closing, stopping bool

	// approvals are the pending permission requests by approval id.
	approvals map[string]*approval
	approvalN int

	// tools are the tool calls started and not completed, by id, in
	// order of start; denied holds those a client denied.
	tools  []string
	named  map[string]string // tool call id → name given in tool_call.started
	denied map[string]bool

	// The run so far.
	turns      int
	usage      runs.Usage
	cost       *float64   // the turns' cost so far, nil while none reported one
	lastCum    runs.Usage // Cumulative: the last session figure read
	lastStatus runs.State
	lastStop   string
	lastResult string
	lastErr    *runs.RunError
	failErr    *runs.RunError // the handshake's failure
}

// turnState is one turn while it runs.
type turnState struct {
	// prompts are the ids of the turn's session/prompt requests not yet
	// answered (more than one only after a merged steer).
	prompts []int64
	// cancelled: session/cancel was sent (interrupt or deny_and_stop).
	cancelled bool
	// text and thought stream since the last boundary; result is the
	// last message completed in the turn.
	text, thought strings.Builder
	result        string
	// reported is the run's usage last emitted during the turn
	// (Profile.UsageSoFar).
	reported runs.Usage
}

// approval is one pending session/request_permission.
type approval struct {
	rpcID      json.RawMessage
	toolCallID string
	options    []permissionOption
	// withdrawn: the client answered it cancelled on an interrupt; it is
	// reported withdrawn when the turn ends.
	withdrawn bool
}

// NewDecoder returns the ACP client of the run inv, for the CLI p
// describes. Its Open starts the session and turn 1 with the Spec's
// prompt.
func NewDecoder(inv runs.Invocation, p Profile) *Decoder {
	return &Decoder{
		inv: inv, p: p, nextID: 1, sent: map[int64]int{},
		approvals: map[string]*approval{}, named: map[string]string{}, denied: map[string]bool{},
	}
}

var _ runs.Session = (*Decoder)(nil)

// Open implements runs.Conversation: the initialize request. session/new,
// session/set_mode and turn 1's session/prompt follow, each once the one
// before was answered.
func (d *Decoder) Open() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.p.ClientVersion
	if v == "" {
		v = "1"
	}
	// fs and terminal are advertised false: the CLI then uses its own
	// tools, which run in its process tree, where the supervisor can
	// take them.
	d.request(methodInitialize, reqInitialize, initializeParams{
		ProtocolVersion: ProtocolVersion, ClientInfo: &clientInfo{Name: "agentgate", Version: v},
	})
	return d.take()
}

// Pending implements runs.Conversation. done is true once the
// conversation is over: the handshake failed, or Close or Interrupt came
// and no turn runs.
func (d *Decoder) Pending() ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.take(), d.done()
}

func (d *Decoder) done() bool {
	return d.phase == phaseFailed || (d.closing || d.stopping) && d.turn == nil && d.phase == phaseReady
}

// take returns and clears what is to be written.
func (d *Decoder) take() []byte {
	if d.out.Len() == 0 {
		return nil
	}
	b := bytes.Clone(d.out.Bytes())
	d.out.Reset()
	return b
}

// Interrupt implements runs.Conversation: session/cancel of the running
// turn, with the cancelled outcome for every pending approval as ACP
// requires. The conversation then ends when the prompt answers. With no
// turn running there is nothing to ask: nil, and the supervisor goes on
// to signals.
func (d *Decoder) Interrupt() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopping = true
	if d.turn == nil || d.turn.cancelled || d.sessionID == "" {
		return nil
	}
	d.cancelTurn()
	return d.take()
}

// cancelTurn writes session/cancel and withdraws every pending approval.
func (d *Decoder) cancelTurn() {
	d.turn.cancelled = true
	for _, id := range sortedKeys(d.approvals) {
		if a := d.approvals[id]; !a.withdrawn {
			a.withdrawn = true
			d.respond(a.rpcID, permissionOutcome{Outcome: outcome{Outcome: "cancelled"}})
		}
	}
	d.notify(methodCancel, cancelParams{SessionID: d.sessionID})
}

// Answer implements runs.Session. The option is picked by kind:
// allow → allow_once, allow_session → allow_always, deny → reject_once
// (the cancelled outcome where the CLI offers none), deny_and_stop →
// reject_once, then session/cancel. ACP has no field for message: it is
// not passed on.
func (d *Decoder) Answer(id string, dec runs.Decision, message string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.approvals[id]
	if !ok || a.withdrawn {
		return fmt.Errorf("approval %s: %w", id, runs.ErrNotFound)
	}
	var res permissionOutcome
	switch dec {
	case runs.Allow, runs.AllowSession:
		kind := kindAllowOnce
		if dec == runs.AllowSession {
			kind = kindAllowAlways
		}
		opt, ok := pick(a.options, kind)
		if !ok {
			return fmt.Errorf("approval %s: %s offers no %s option: %w", id, d.agent(), kind, runs.ErrInvalid)
		}
		res.Outcome = outcome{Outcome: "selected", OptionID: opt}
	case runs.Deny, runs.DenyAndStop:
		res.Outcome = outcome{Outcome: "cancelled"}
		if opt, ok := pick(a.options, kindRejectOnce); ok {
			res.Outcome = outcome{Outcome: "selected", OptionID: opt}
		}
	default:
		return fmt.Errorf("decision %q: %w", dec, runs.ErrInvalid)
	}
	delete(d.approvals, id)
	d.respond(a.rpcID, res)
	if dec == runs.Deny || dec == runs.DenyAndStop {
		d.denied[a.toolCallID] = true
	}
	if dec == runs.DenyAndStop && d.turn != nil && !d.turn.cancelled {
		d.cancelTurn()
	}
	return nil
}

// Send implements runs.Session: another session/prompt. While idle it
// starts the next turn; with steer during a turn it joins the running
// turn where the CLI merges prompts (Profile.Steering), and is refused
// where a second prompt would cancel the running one.
func (d *Decoder) Send(text string, images []runs.Image, steer bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.phase != phaseReady:
		return runs.Conflict(runs.ConflictRunEnded, "the session is not up")
	case d.closing || d.stopping:
		return runs.Conflict(runs.ConflictClosing, "the session is closing")
	case d.turn == nil:
		d.turn = &turnState{}
	case !steer:
		return runs.Conflict(runs.ConflictNoTurn, "a turn is running: the message must wait for its end")
	case d.p.Steering != SteerMerges:
		return runs.Unsupported(d.agent(), runs.FieldInteractive, "a second prompt cancels the running turn: this agent cannot steer")
	case d.turn.cancelled:
		return runs.Conflict(runs.ConflictNoTurn, "the running turn is being cancelled")
	}
	d.prompt(text, images)
	return nil
}

// InterruptTurn implements runs.Session: session/cancel. The prompt then
// answers cancelled, which ends the turn as cancelled.
func (d *Decoder) InterruptTurn() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.turn == nil || d.sessionID == "" {
		return runs.Conflict(runs.ConflictNoTurn, "no turn is running")
	}
	if !d.turn.cancelled {
		d.cancelTurn()
	}
	return nil
}

// Close implements runs.Session.
func (d *Decoder) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closing = true
}

// prompt sends a session/prompt of the running turn: the text, then an
// image block for each image.
func (d *Decoder) prompt(text string, images []runs.Image) {
	blocks := []ContentBlock{{Type: "text", Text: text}}
	for _, im := range images {
		blocks = append(blocks, ContentBlock{Type: "image", MimeType: im.MediaType, Data: base64.StdEncoding.EncodeToString(im.Data)})
	}
	id := d.request(methodPrompt, reqPrompt, promptParams{SessionID: d.sessionID, Prompt: blocks})
	d.turn.prompts = append(d.turn.prompts, id)
}

func (d *Decoder) request(method string, purpose int, params any) int64 {
	id := d.nextID
	d.nextID++
	d.sent[id] = purpose
	d.write(outRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	return id
}

func (d *Decoder) notify(method string, params any) {
	d.write(outRequest{JSONRPC: "2.0", Method: method, Params: params})
}

func (d *Decoder) respond(id json.RawMessage, result any) {
	d.write(outResponse{JSONRPC: "2.0", ID: id, Result: result})
}

func (d *Decoder) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written is built here from strings and numbers.
		panic(fmt.Sprintf("acp: marshal %T: %v", v, err))
	}
	d.out.Write(b)
	d.out.WriteByte('\n')
}

// Decode implements runs.Decoder.
func (d *Decoder) Decode(line []byte) []runs.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return []runs.Event{runs.Unparsed(line, "not JSON: "+err.Error())}
	}
	var evs []runs.Event
	switch {
	case m.hasID() && m.Method != "":
		evs = d.agentRequest(&m, line)
	case m.hasID():
		evs = d.response(&m, line)
	case m.Method == methodUpdate && d.phase == phaseLoad:
		// The history of a loaded session, replayed: its events are
		// the earlier turns', already in the run's log.
		return nil
	case m.Method == methodUpdate:
		evs = d.sessionUpdate(&m, line)
	case m.Method != "":
		evs = []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown notification %q", m.Method))}
	default:
		evs = []runs.Event{runs.Unparsed(line, "neither a request, a response nor a notification")}
	}
	for i := range evs {
		if evs[i].Type != runs.EventAgentUnparsed && evs[i].SessionID == "" {
			evs[i].SessionID = d.sessionID
		}
	}
	return evs
}

// response handles the answer to one of the client's requests.
func (d *Decoder) response(m *message, line []byte) []runs.Event {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	purpose, ok := d.sent[id]
	if err != nil || !ok {
		return []runs.Event{runs.Unparsed(line, "a response to no request of the client")}
	}
	delete(d.sent, id)
	switch purpose {
	case reqInitialize:
		if m.Error != nil {
			return d.fail(methodInitialize, m.Error)
		}
		return d.openSession(m.Result)
	case reqNew:
		if m.Error != nil {
			return d.fail(methodSessionNew, m.Error)
		}
		var r sessionNewResult
		if err := json.Unmarshal(m.Result, &r); err != nil || r.SessionID == "" {
			return d.fail(methodSessionNew, &RPCError{Message: "session/new answered no sessionId"})
		}
		return d.sessionUp(r.SessionID, r.Models)
	case reqLoad:
		if m.Error != nil {
			return d.failWith(d.loadError(m.Error))
		}
		// The answer carries no sessionId: the session is the one asked for.
		var r sessionLoadResult
		_ = json.Unmarshal(m.Result, &r)
		var loaded []runs.Event
		if d.p.SessionLoaded != nil {
			loaded = d.p.SessionLoaded(d.inv.Spec.ResumeSessionID)
		}
		// sessionUp's first event is session.started.
		evs := d.sessionUp(d.inv.Spec.ResumeSessionID, r.Models)
		return append(append([]runs.Event{evs[0]}, loaded...), evs[1:]...)
	case reqMode:
		if m.Error != nil {
			return d.fail(methodSetMode, m.Error)
		}
		return d.nextOption()
	case reqOption:
		if m.Error != nil {
			o := d.p.ConfigOptions[d.options-1]
			return d.fail(methodSetConfigOption, &RPCError{Code: m.Error.Code, Data: m.Error.Data,
				Message: fmt.Sprintf("%s refused the run's %s: %s", d.agent(), o.ID, cmp.Or(m.Error.Text(), "no message"))})
		}
		return d.nextOption()
	case reqPrompt:
		return d.promptAnswered(id, m)
	}
	return nil
}

// openSession answers initialize: session/load of the Spec's
// ResumeSessionID when it has one (and the agent can load sessions),
// else session/new.
func (d *Decoder) openSession(result json.RawMessage) []runs.Event {
	cwd := cmp.Or(d.p.Cwd, d.inv.Dir)
	servers := d.p.MCPServers
	if servers == nil {
		servers = []json.RawMessage{}
	}
	resume := d.inv.Spec.ResumeSessionID
	if resume == "" {
		d.phase = phaseNew
		d.request(methodSessionNew, reqNew, sessionNewParams{Cwd: cwd, MCPServers: servers})
		return nil
	}
	var r initializeResult
	if err := json.Unmarshal(result, &r); err != nil || !r.AgentCapabilities.LoadSession {
		return d.failWith(runs.NewRunError(runs.APIError, fmt.Sprintf(
			"%s does not offer loadSession in its initialize answer: session %s cannot be resumed", d.agent(), resume), ""))
	}
	d.phase = phaseLoad
	d.request(methodSessionLoad, reqLoad, sessionLoadParams{SessionID: resume, Cwd: cwd, MCPServers: servers})
	return nil
}

// sessionUp reports the session started (new or loaded) and goes on to
// the mode, the config options and turn 1.
func (d *Decoder) sessionUp(id string, models *sessionModels) []runs.Event {
	d.sessionID = id
	if models != nil {
		d.model = models.CurrentModelID
	}
	evs := []runs.Event{runs.NewEvent(runs.EventSessionStarted, runs.SessionStartedData{
		SessionID: d.sessionID, Model: d.model, Tools: []string{},
	})}
	if d.p.Mode != "" {
		d.phase = phaseMode
		d.request(methodSetMode, reqMode, setModeParams{SessionID: d.sessionID, ModeID: d.p.Mode})
		return evs
	}
	return append(evs, d.nextOption()...)
}

// nextOption sends the Profile's next config option, or turn 1 once the
// CLI accepted them all.
func (d *Decoder) nextOption() []runs.Event {
	if d.options == len(d.p.ConfigOptions) {
		return d.startFirstTurn()
	}
	o := d.p.ConfigOptions[d.options]
	d.options++
	d.phase = phaseOptions
	p := setConfigOptionParams{SessionID: d.sessionID, ConfigID: o.ID, Value: o.Value}
	if _, ok := o.Value.(bool); ok {
		p.Type = "boolean"
	}
	d.request(methodSetConfigOption, reqOption, p)
	return nil
}

// startFirstTurn sends turn 1, the Spec's prompt, unless the run was
// interrupted during the handshake.
func (d *Decoder) startFirstTurn() []runs.Event {
	d.phase = phaseReady
	if d.stopping {
		return nil
	}
	d.turn = &turnState{}
	d.prompt(d.inv.Spec.Prompt, d.inv.Images)
	return nil
}

// fail ends a session whose handshake failed: turn 1, which the
// supervisor started, fails with the classified error.
func (d *Decoder) fail(method string, e *RPCError) []runs.Event {
	return d.failWith(d.classify(method, e))
}

// loadError classifies an error answer to session/load: as the profile
// says when that is telling (a login, a rate limit), else the session
// could not be loaded (session_not_found), whatever model-API wording
// a generic classification would give it.
func (d *Decoder) loadError(e *RPCError) *runs.RunError {
	if re := d.classify(methodSessionLoad, e); re.Class != runs.APIError {
		return re
	}
	return runs.NewRunError(runs.SessionNotFound, fmt.Sprintf("%s could not load session %s: %s",
		d.agent(), d.inv.Spec.ResumeSessionID, cmp.Or(e.Text(), "no message")),
		"the session's files were not kept, or it was recorded in another directory (cwd)")
}

// failWith ends a session whose handshake failed: turn 1, which the
// supervisor started, fails with re.
func (d *Decoder) failWith(re *runs.RunError) []runs.Event {
	d.phase = phaseFailed
	d.failErr = re
	d.turns++
	d.lastStatus, d.lastErr = runs.Failed, d.failErr
	return []runs.Event{runs.NewEvent(runs.EventTurnCompleted, runs.TurnCompletedData{
		Status: runs.Failed, Error: d.failErr,
	})}
}

func (d *Decoder) classify(method string, e *RPCError) *runs.RunError {
	if d.p.ClassifyError != nil {
		if re := d.p.ClassifyError(method, e); re != nil {
			return re
		}
	}
	return runs.NewRunError(runs.APIError, fmt.Sprintf("%s answered %s with error %d: %s", d.agent(), method, e.Code, cmp.Or(e.Text(), "no message")), "")
}

// promptAnswered ends the turn once every prompt of it answered.
func (d *Decoder) promptAnswered(id int64, m *message) []runs.Event {
	t := d.turn
	if t == nil {
		return nil
	}
	i := indexOf(t.prompts, id)
	if i < 0 {
		return nil
	}
	t.prompts = append(t.prompts[:i], t.prompts[i+1:]...)
	if len(t.prompts) > 0 {
		// A merged steer: the turn ends with the last prompt's answer.
		return nil
	}
	evs := d.boundary()
	evs = append(evs, d.closeTools("the turn ended before the tool call returned")...)
	for _, aid := range sortedKeys(d.approvals) {
		evs = append(evs, runs.NewEvent(runs.EventApprovalResolved, runs.ApprovalResolvedData{
			ID: aid, Decision: runs.Deny, Reason: runs.ResolvedWithdrawn,
		}))
		delete(d.approvals, aid)
	}
	data := runs.TurnCompletedData{Result: t.result}
	if m.Error != nil {
		data.Status, data.StopReason, data.Error = runs.Failed, "error", d.classify(methodPrompt, m.Error)
	} else {
		var r promptResult
		_ = json.Unmarshal(m.Result, &r)
		data.StopReason = r.StopReason
		switch r.StopReason {
		case "end_turn":
			data.Status = runs.Succeeded
		case "cancelled":
			data.Status = runs.Cancelled
			data.Error = runs.NewRunError(runs.Interrupted, "the turn was interrupted", "")
		case "max_tokens":
			data.Status = runs.Failed
			data.Error = runs.NewRunError(runs.ContextExceeded, d.agent()+" stopped the turn: the model reached its output token limit", "")
		case "max_turn_requests":
			data.Status = runs.Failed
			data.Error = runs.NewRunError(runs.MaxTurns, d.agent()+" stopped the turn: too many model requests in one turn", "")
		case "refusal":
			data.Status = runs.Failed
			data.Error = runs.NewRunError(runs.Refused, "the model refused to go on", "")
		default:
			data.Status = runs.Failed
			data.Error = runs.NewRunError(runs.AgentCrashed, fmt.Sprintf("%s ended the turn with stop reason %q", d.agent(), r.StopReason), "")
		}
		if !d.billed() {
			if u, ok := d.readUsage(m.Result); ok {
				data.Usage = u
			}
		}
	}
	if d.billed() {
		var result json.RawMessage
		if m.Error == nil {
			result = m.Result
		}
		b := d.turnBill(result)
		data.Usage, data.CostUSD = b.Usage, b.CostUSD
		evs = append(evs, b.Events...)
	}
	d.usage = d.usage.Add(data.Usage)
	d.addCost(data.CostUSD)
	evs = append(evs, runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: d.usage, CostUSD: d.costSoFar()}))
	d.turns++
	d.lastStatus, d.lastStop, d.lastResult, d.lastErr = data.Status, data.StopReason, data.Result, data.Error
	d.turn = nil
	return append(evs, runs.NewEvent(runs.EventTurnCompleted, data))
}

// billed is whether the profile reads each turn's bill itself
// (TurnBill or TurnUsage) instead of the prompt result's usage.
func (d *Decoder) billed() bool { return d.p.TurnBill != nil || d.p.TurnUsage != nil }

// turnBill is the turn's own usage and cost from Profile.TurnBill or
// TurnUsage, and the events they give; the usage is zero unless known.
func (d *Decoder) turnBill(result json.RawMessage) Bill {
	var b Bill
	if d.p.TurnBill != nil {
		b = d.p.TurnBill(d.sessionID, result)
	} else {
		b.Usage, b.OK, b.Events = d.p.TurnUsage(d.sessionID, result)
	}
	if !b.OK {
		b.Usage = runs.Usage{}
	}
	b.Usage = clampUsage(b.Usage)
	if b.CostUSD != nil && !(*b.CostUSD >= 0 && *b.CostUSD <= maxCostUSD) {
		// NaN, negative or absurd: no cost rather than a wrong one.
		b.CostUSD = nil
	}
	return b
}

// maxCostUSD bounds one turn's cost, far above any real one, so that
// sums stay finite.
const maxCostUSD = 1e9

// addCost adds a turn's cost to the run's.
func (d *Decoder) addCost(c *float64) {
	if c == nil {
		return
	}
	sum := *c
	if d.cost != nil {
		sum += *d.cost
	}
	d.cost = &sum
}

// costSoFar is a copy of the run's cost so far, nil while no turn
// reported one.
func (d *Decoder) costSoFar() *float64 {
	if d.cost == nil {
		return nil
	}
	c := *d.cost
	return &c
}

// readUsage is the turn's own usage from a prompt result.
func (d *Decoder) readUsage(result json.RawMessage) (runs.Usage, bool) {
	if d.p.ReadUsage == nil || len(result) == 0 {
		return runs.Usage{}, false
	}
	u, ok := d.p.ReadUsage(result)
	if !ok {
		return runs.Usage{}, false
	}
	u = clampUsage(u)
	if d.p.Counting != Cumulative {
		return u, true
	}
	if u.IsZero() {
		// A cancelled turn may report nothing: the session figure has
		// not gone back to zero.
		return runs.Usage{}, true
	}
	turn := runs.Usage{
		InputTokens:      max(u.InputTokens-d.lastCum.InputTokens, 0),
		CacheReadTokens:  max(u.CacheReadTokens-d.lastCum.CacheReadTokens, 0),
		CacheWriteTokens: max(u.CacheWriteTokens-d.lastCum.CacheWriteTokens, 0),
		OutputTokens:     max(u.OutputTokens-d.lastCum.OutputTokens, 0),
		ReasoningTokens:  max(u.ReasoningTokens-d.lastCum.ReasoningTokens, 0),
	}
	d.lastCum = u
	return turn, true
}

// agentRequest answers a request from the agent.
func (d *Decoder) agentRequest(m *message, line []byte) []runs.Event {
	if m.Method != methodRequestPermission {
		// fs/* and terminal/* were advertised false; anything else is
		// unknown. An error answer, so that the CLI never waits.
		d.write(outResponse{JSONRPC: "2.0", ID: m.ID, Error: &RPCError{Code: codeMethodNotFound, Message: "method not supported by this client: " + m.Method}})
		return []runs.Event{runs.Warning("acp_unsupported_request", fmt.Sprintf("%s asked for %s, which the gateway does not offer; it was answered with an error", d.agent(), m.Method))}
	}
	var p permissionParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		d.respond(m.ID, permissionOutcome{Outcome: outcome{Outcome: "cancelled"}})
		return []runs.Event{runs.Unparsed(line, "session/request_permission params: "+err.Error()), runs.Warning("acp_permission_refused",
			"a permission request the gateway could not read was refused")}
	}
	if d.turn == nil || d.turn.cancelled {
		// Nobody can answer it: no turn runs, or it is being cancelled.
		d.respond(m.ID, permissionOutcome{Outcome: outcome{Outcome: "cancelled"}})
		return nil
	}
	evs := d.startTool(p.ToolCall)
	server, _, isMCP := d.mcpTool(p.ToolCall)
	if d.p.RefuseAll && d.p.AllowMCP && isMCP {
		if opt, ok := pick(p.Options, kindAllowOnce); ok {
			d.respond(m.ID, permissionOutcome{Outcome: outcome{Outcome: "selected", OptionID: opt}})
			return evs
		}
	}
	if d.p.RefuseAll {
		res := outcome{Outcome: "cancelled"}
		if opt, ok := pick(p.Options, kindRejectOnce); ok {
			res = outcome{Outcome: "selected", OptionID: opt}
		}
		d.respond(m.ID, permissionOutcome{Outcome: res})
		d.denied[p.ToolCall.ToolCallID] = true
		return append(evs, runs.Warning("approval_refused", fmt.Sprintf(
			"%s asked to run %s (%s), which the run's permission level does not allow without approvals; it was refused",
			d.agent(), d.toolName(p.ToolCall), clip.Text(p.ToolCall.Title, 200))))
	}
	d.approvalN++
	id := "acp-" + strconv.Itoa(d.approvalN)
	d.approvals[id] = &approval{rpcID: bytes.Clone(m.ID), toolCallID: p.ToolCall.ToolCallID, options: p.Options}
	opts := []runs.Decision{}
	if _, ok := pick(p.Options, kindAllowOnce); ok {
		opts = append(opts, runs.Allow)
	}
	if _, ok := pick(p.Options, kindAllowAlways); ok {
		opts = append(opts, runs.AllowSession)
	}
	opts = append(opts, runs.Deny, runs.DenyAndStop)
	return append(evs, runs.NewEvent(runs.EventApprovalRequested, runs.ApprovalRequestedData{
		ID: id, ToolCallID: p.ToolCall.ToolCallID, Tool: d.toolName(p.ToolCall), Input: d.toolInput(p.ToolCall),
		MCPServer: server, Options: opts,
	}))
}

// sessionUpdate maps a session/update notification.
func (d *Decoder) sessionUpdate(m *message, line []byte) []runs.Event {
	var p updateParams
	if err := json.Unmarshal(m.Params, &p); err != nil || len(p.Update) == 0 {
		return []runs.Event{runs.Unparsed(line, "session/update without an update")}
	}
	var u update
	if err := json.Unmarshal(p.Update, &u); err != nil {
		return []runs.Event{runs.Unparsed(line, "session/update: "+err.Error())}
	}
	if d.p.Update != nil {
		if evs, ok := d.p.Update(u.SessionUpdate, p.Update); ok {
			return evs
		}
	}
	switch u.SessionUpdate {
	case "agent_message_chunk":
		text, ok := textOf(u.Content)
		if !ok {
			return []runs.Event{runs.Unparsed(line, "agent_message_chunk without text content")}
		}
		evs := d.flushThought()
		if d.turn != nil {
			d.turn.text.WriteString(text)
		}
		return append(evs, runs.NewEvent(runs.EventMessageDelta, runs.MessageData{Text: text}))
	case "agent_thought_chunk":
		text, ok := textOf(u.Content)
		if !ok {
			return []runs.Event{runs.Unparsed(line, "agent_thought_chunk without text content")}
		}
		evs := d.flushText()
		if d.turn != nil {
			d.turn.thought.WriteString(text)
		}
		return append(evs, runs.NewEvent(runs.EventReasoningDelta, runs.DeltaData{Text: text}))
	case "user_message_chunk":
		// The prompt's echo, or a loaded session's history.
		return nil
	case "tool_call":
		var tc ToolCall
		if err := json.Unmarshal(p.Update, &tc); err != nil || tc.ToolCallID == "" {
			return []runs.Event{runs.Unparsed(line, "tool_call without a toolCallId")}
		}
		evs := d.startTool(tc)
		return append(evs, d.toolUpdate(tc)...)
	case "tool_call_update":
		var tc ToolCall
		if err := json.Unmarshal(p.Update, &tc); err != nil || tc.ToolCallID == "" {
			return []runs.Event{runs.Unparsed(line, "tool_call_update without a toolCallId")}
		}
		evs := d.startTool(tc)
		return append(evs, d.toolUpdate(tc)...)
	case "plan":
		steps := make([]runs.PlanStep, 0, len(u.Entries))
		for _, e := range u.Entries {
			st := runs.StepPending
			switch e.Status {
			case "in_progress":
				st = runs.StepInProgress
			case "completed":
				st = runs.StepCompleted
			}
			steps = append(steps, runs.PlanStep{Step: e.Content, Status: st})
		}
		return []runs.Event{runs.NewEvent(runs.EventPlanUpdated, runs.PlanUpdatedData{Steps: steps})}
	case "available_commands_update", "current_mode_update", "config_option_update", "session_info_update", "usage_update":
		// Slash commands, modes, options, titles and context-window
		// fill: nothing a run reports.
		return nil
	}
	return []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown session/update %q", u.SessionUpdate))}
}

// startTool emits tool_call.started the first time a tool call is seen
// (in tool_call, tool_call_update or a permission request: Gemini sends
// no tool_call before it asks), completing the text streamed before it
// and any denied call still open.
func (d *Decoder) startTool(tc ToolCall) []runs.Event {
	if _, seen := d.named[tc.ToolCallID]; seen {
		return nil
	}
	evs := d.boundary()
	evs = append(evs, d.closeDenied()...)
	name := d.toolName(tc)
	d.named[tc.ToolCallID] = name
	d.tools = append(d.tools, tc.ToolCallID)
	server, tool, _ := d.mcpTool(tc)
	evs = append(evs, d.usageSoFar()...)
	return append(evs, runs.NewEvent(runs.EventToolCallStarted, runs.ToolCallStartedData{
		ID: tc.ToolCallID, Name: name, Input: d.toolInput(tc), MCPServer: server, MCPTool: tool,
	}))
}

// usageSoFar is usage.updated with the run's usage before the running
// turn plus the turn's so far (Profile.UsageSoFar), when that grew
// since the last one emitted.
func (d *Decoder) usageSoFar() []runs.Event {
	if d.p.UsageSoFar == nil || d.turn == nil {
		return nil
	}
	u, ok := d.p.UsageSoFar(d.sessionID)
	if !ok {
		return nil
	}
	sum := d.usage.Add(clampUsage(u))
	if sum == d.turn.reported {
		return nil
	}
	d.turn.reported = sum
	return []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: sum, CostUSD: d.costSoFar()})}
}

// mcpTool is Profile.MCPTool's answer for tc, checked against the run's
// servers: a name of no server of the run is a built-in tool.
func (d *Decoder) mcpTool(tc ToolCall) (server, tool string, ok bool) {
	if d.p.MCPTool == nil {
		return "", "", false
	}
	server, tool, ok = d.p.MCPTool(tc)
	if _, known := d.inv.Spec.MCPServers[server]; !ok || !known || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// toolUpdate completes a tool call whose status became completed or
// failed, and reports the file edits its content shows.
func (d *Decoder) toolUpdate(tc ToolCall) []runs.Event {
	var evs []runs.Event
	for _, c := range tc.Content {
		if c.Type != "diff" || c.Path == "" || c.NewText == nil {
			continue
		}
		kind := runs.ChangeUpdate
		if c.OldText == nil {
			kind = runs.ChangeAdd
		}
		evs = append(evs, runs.NewEvent(runs.EventFileChanged, runs.FileChangedData{Path: c.Path, Kind: kind, ToolCallID: tc.ToolCallID}))
	}
	if tc.Status != toolCompleted && tc.Status != toolFailed {
		return evs
	}
	i := indexOf(d.tools, tc.ToolCallID)
	if i < 0 {
		return evs // completed before
	}
	d.tools = append(d.tools[:i], d.tools[i+1:]...)
	delete(d.denied, tc.ToolCallID)
	return append(evs, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
		ID: tc.ToolCallID, Output: toolOutput(tc), IsError: tc.Status == toolFailed,
	}))
}

// closeDenied completes the denied tool calls still open: a CLI that
// goes on after a deny (Gemini) sends no update for them.
func (d *Decoder) closeDenied() []runs.Event {
	var evs []runs.Event
	kept := d.tools[:0]
	for _, id := range d.tools {
		if d.denied[id] {
			delete(d.denied, id)
			evs = append(evs, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
				ID: id, Output: "denied by the client", IsError: true,
			}))
			continue
		}
		kept = append(kept, id)
	}
	d.tools = kept
	return evs
}

// closeTools completes every open tool call as failed.
func (d *Decoder) closeTools(why string) []runs.Event {
	evs := d.closeDenied()
	for _, id := range d.tools {
		evs = append(evs, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: id, Output: why, IsError: true}))
	}
	d.tools = nil
	return evs
}

// boundary completes the thought and text streamed so far.
func (d *Decoder) boundary() []runs.Event {
	return append(d.flushThought(), d.flushText()...)
}

func (d *Decoder) flushText() []runs.Event {
	if d.turn == nil || d.turn.text.Len() == 0 {
		return nil
	}
	text := d.turn.text.String()
	d.turn.text.Reset()
	d.turn.result = text
	return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: text})}
}

func (d *Decoder) flushThought() []runs.Event {
	if d.turn == nil || d.turn.thought.Len() == 0 {
		return nil
	}
	text := d.turn.thought.String()
	d.turn.thought.Reset()
	vis := d.p.Reasoning
	if vis == "" {
		vis = runs.VisibilityFull
	}
	return []runs.Event{runs.NewEvent(runs.EventReasoningCompleted, runs.ReasoningData{Text: text, Visibility: vis})}
}

// Finish implements runs.Decoder. A turn still running when the process
// ended fails, classified from the exit and stderr. The outcome's usage
// is the sum over the turns, its status and result the last turn's.
func (d *Decoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := runs.Outcome{SessionID: d.sessionID, Model: d.model}
	if d.turn != nil || d.turns == 0 {
		// The process ended in a turn, or before turn 1 could end.
		re := d.exitError(exit, stderrTail)
		if d.turn != nil {
			out.Events = append(out.Events, d.boundary()...)
		}
		out.Events = append(out.Events, d.closeTools("no result: the agent ended before the tool call returned")...)
		result := ""
		if d.turn != nil {
			result = d.turn.result
		}
		for _, aid := range sortedKeys(d.approvals) {
			out.Events = append(out.Events, runs.NewEvent(runs.EventApprovalResolved, runs.ApprovalResolvedData{
				ID: aid, Decision: runs.Deny, Reason: runs.ResolvedWithdrawn,
			}))
			delete(d.approvals, aid)
		}
		var bill Bill
		if d.turn != nil && d.billed() {
			// What the turn was billed before the process ended.
			bill = d.turnBill(nil)
			out.Events = append(out.Events, bill.Events...)
			d.usage = d.usage.Add(bill.Usage)
			d.addCost(bill.CostUSD)
			if !bill.Usage.IsZero() || bill.CostUSD != nil {
				out.Events = append(out.Events, runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: d.usage, CostUSD: d.costSoFar()}))
			}
		}
		out.Events = append(out.Events, runs.NewEvent(runs.EventTurnCompleted, runs.TurnCompletedData{
			Status: runs.Failed, Result: result, Error: re, Usage: bill.Usage, CostUSD: bill.CostUSD,
		}))
		d.turns++
		d.turn = nil
		d.lastStatus, d.lastStop, d.lastResult, d.lastErr = runs.Failed, "", result, re
	} else {
		out.Events = append(out.Events, d.closeTools("no result: the agent ended before the tool call returned")...)
	}
	for i := range out.Events {
		out.Events[i].SessionID = d.sessionID
	}
	out.Status, out.StopReason, out.Result, out.Error = d.lastStatus, d.lastStop, d.lastResult, d.lastErr
	out.Usage, out.CostUSD, out.NumTurns = d.usage, d.costSoFar(), d.turns
	return out
}

func (d *Decoder) exitError(exit runs.Exit, stderrTail []byte) *runs.RunError {
	if d.failErr != nil {
		return d.failErr
	}
	if d.p.ClassifyExit != nil {
		if re := d.p.ClassifyExit(exit, stderrTail); re != nil {
			return re
		}
	}
	if exit.Signal != "" {
		return runs.NewRunError(runs.ProcessKilled, fmt.Sprintf("%s was killed by %s", d.agent(), exit.Signal), "")
	}
	return runs.NewRunError(runs.AgentCrashed, fmt.Sprintf("%s exited with code %d before the turn ended", d.agent(), exit.Code), "")
}

func (d *Decoder) agent() string {
	if d.p.Agent == "" {
		return "the agent"
	}
	return d.p.Agent
}

func (d *Decoder) toolName(tc ToolCall) string {
	if d.p.ToolName != nil {
		if n := d.p.ToolName(tc); n != "" {
			return n
		}
	}
	if n, ok := d.named[tc.ToolCallID]; ok {
		return n
	}
	return cmp.Or(tc.Kind, cmp.Or(tc.Title, "tool"))
}

func (d *Decoder) toolInput(tc ToolCall) json.RawMessage {
	if d.p.ToolInput != nil {
		if in := d.p.ToolInput(tc); len(in) > 0 {
			return in
		}
	}
	if raw := bytes.TrimSpace(tc.RawInput); len(raw) > 0 && raw[0] == '{' {
		return bytes.Clone(raw)
	}
	b, _ := json.Marshal(struct {
		Title   string `json:"title,omitempty"`
		Kind    string `json:"kind,omitempty"`
		Content string `json:"content,omitempty"`
	}{tc.Title, tc.Kind, contentText(tc.Content)})
	return b
}

// toolOutput is a completed tool call's output: the text of its content,
// else its rawOutput.
func toolOutput(tc ToolCall) string {
	if s := contentText(tc.Content); s != "" {
		return s
	}
	raw := bytes.TrimSpace(tc.RawOutput)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Output  *string `json:"output"`
		Message *string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil {
		if o.Output != nil {
			return *o.Output
		}
		if o.Message != nil {
			return *o.Message
		}
	}
	return string(raw)
}

// contentText joins the text of a tool call's content blocks.
func contentText(cs []ToolCallContent) string {
	var parts []string
	for _, c := range cs {
		if c.Type != "content" {
			continue
		}
		if t, ok := textOf(c.Content); ok && t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// textOf reads a text content block.
func textOf(raw json.RawMessage) (string, bool) {
	var b ContentBlock
	if err := json.Unmarshal(raw, &b); err != nil || b.Type != "text" {
		return "", false
	}
	return b.Text, true
}

// pick returns the id of the first option of kind.
func pick(opts []permissionOption, kind string) (string, bool) {
	for _, o := range opts {
		if o.Kind == kind {
			return o.OptionID, true
		}
	}
	return "", false
}

// maxTokens bounds every count read from a CLI, far above any real one,
// so that no sum can overflow.
const maxTokens = 1 << 50

func clampUsage(u runs.Usage) runs.Usage {
	c := func(n int64) int64 { return min(max(n, 0), maxTokens) }
	return runs.Usage{
		InputTokens: c(u.InputTokens), CacheReadTokens: c(u.CacheReadTokens), CacheWriteTokens: c(u.CacheWriteTokens),
		OutputTokens: c(u.OutputTokens), ReasoningTokens: c(u.ReasoningTokens),
	}
}

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func sortedKeys(m map[string]*approval) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Approval ids are "acp-<n>": order by n.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && approvalLess(keys[j], keys[j-1]); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

func approvalLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
