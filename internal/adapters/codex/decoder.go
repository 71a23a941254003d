package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// The methods of the protocol the decoder calls.
const (
	methodInitialize    = "initialize"
	methodInitialized   = "initialized"
	methodThreadStart   = "thread/start"
	methodThreadResume  = "thread/resume"
	methodTurnStart     = "turn/start"
	methodTurnInterrupt = "turn/interrupt"
	methodTurnSteer     = "turn/steer"
)

// optOut are notifications the gateway has no use for. Fewer lines to
// read, and none of them would be reported as agent.unparsed.
var optOut = []string{
	"remoteControl/status/changed", "thread/status/changed", "skills/changed",
	"app/list/updated", "thread/name/updated",
	"item/reasoning/summaryPartAdded", "fs/changed",
}

// decoder holds one run's conversation with codex app-server: it sends
// initialize, then thread/start (or thread/resume), then turn/start, and
// maps the server's notifications to events until the root turn
// completes, when it ends the conversation. Only the root thread's turn
// ends the run: helper threads (sub-agents) complete their own turns
// inside it. For a run with a Session (see session.go) the conversation
// goes on after the turn: the decoder reports turn.completed and waits
// for the next turn, an answer to an approval, or Close.
type decoder struct {
	inv     runs.Invocation
	methods map[string]string
	// operatorMCP names the MCP servers of the operator's config.toml,
	// which a run with servers of its own turns off.
	operatorMCP []string
	// interactive is set for a run whose Spec asks for a Session; asks
	// for one whose tool calls wait for approvals.
	interactive, asks bool

	out  []byte // to write to stdin
	done bool   // stdin is to be closed

	// mu guards what Interrupt, which may run while Decode does, reads
	// and writes: the request ids, the thread and turn, and the stop.
	mu         sync.Mutex
	nextID     int            // the id of the next request
	calls      map[int]string // request id → method, until answered
	rootThread string
	rootTurn   string // the running (or last) turn of the root thread; "" until known
	turnActive bool   // a turn was started and has not completed
	interrupt  bool   // a turn/interrupt of the running turn was sent
	stopping   bool   // Interrupt was called: end the conversation with the turn

	session    bool               // session.started emitted
	model      string             // as the server resolved it
	helpers    map[string]string  // helper thread id → the tool call that started it
	spawning   []string           // spawnAgent calls started and not completed
	open       map[string]string  // tool calls started, not completed → name
	openOrder  []string           // the same, in order
	messages   map[string]bool    // message ids that had deltas
	usage      runs.Usage         // summed over every model request of the run
	result     string             // the root thread's last agent message (of the turn)
	diff       string             // the root turn's latest diff
	turnStatus string             // the last root turn's final status; "" until it completes
	turnErr    *turnError         // the last root turn's error
	lastErr    *errorNotification // the last error notification of the root thread
	rpcErr     *rpcFailure        // an error answer to one of our requests
	unanswered []string           // server requests declined

	// The session's state; see session.go.
	turns        int                    // turns completed
	last         runs.TurnCompletedData // the last turn's end
	turnUsage    runs.Usage             // the running turn's usage so far
	closing      bool                   // Close was called: end the conversation with the turn
	interruptAsk bool                   // InterruptTurn came before the turn's id
	steers       [][]inputItem          // steered input waiting for the turn's id
	approvals    map[string]*approval   // pending approvals by their id
	approvalSeq  int
	changes      map[string][]fileChange // file change items by id, for their approval's input
}

// rpcFailure is an error answer to one of the decoder's requests.
type rpcFailure struct {
	method string
	err    rpcError
}

func newDecoder(inv runs.Invocation, methods map[string]string) *decoder {
	return &decoder{
		inv: inv, methods: methods, interactive: inv.Spec.Session(), asks: inv.Spec.Asks(),
		nextID: 1, calls: map[int]string{},
		helpers: map[string]string{}, open: map[string]string{}, messages: map[string]bool{},
		approvals: map[string]*approval{}, changes: map[string][]fileChange{},
	}
}

// method returns the name the decoder sends for m.
func (d *decoder) method(m string) string {
	if r, ok := d.methods[m]; ok {
		return r
	}
	return m
}

// call queues a request for method and remembers what its id answers.
// Ids count from 1 in the order requests are made, so that a one-turn run
// sends initialize, thread/start and turn/start as 1, 2 and 3.
func (d *decoder) call(method string, params any) {
	d.out = append(d.out, d.request(method, params)...)
}

// request encodes a request with a fresh id, as a line.
func (d *decoder) request(method string, params any) []byte {
	d.mu.Lock()
	id := d.nextID
	d.nextID++
	d.calls[id] = method
	d.mu.Unlock()
	b, err := json.Marshal(request{ID: id, Method: d.method(method), Params: params})
	if err != nil {
		return nil // every message is built from plain values
	}
	return append(b, '\n')
}

// send queues one message to the server.
func (d *decoder) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // every message is built from plain values
	}
	d.out = append(append(d.out, b...), '\n')
}

// Open implements runs.Conversation: the handshake.
func (d *decoder) Open() []byte {
	d.call(methodInitialize, initializeParams{
		ClientInfo:   clientInfo{Name: "agentgate", Title: "agentgate", Version: "1"},
		Capabilities: capabilities{OptOut: optOut},
	})
	out := d.out
	d.out = nil
	return out
}

// Pending implements runs.Conversation.
func (d *decoder) Pending() ([]byte, bool) {
	out := d.out
	d.out = nil
	return out, d.done
}

// Interrupt implements runs.Conversation: turn/interrupt of the root
// turn, once it has started. In a session that is idle between turns
// there is no turn to interrupt: the request is sent all the same, and
// its answer (an error, "no active turn to interrupt") ends the
// conversation, so that the server exits at once rather than at a
// signal.
func (d *decoder) Interrupt() []byte {
	d.mu.Lock()
	// A session remembers the stop, to interrupt its turn as soon as the
	// turn's id is known; a one-turn run leaves an early stop to signals,
	// as it always has.
	if d.interactive || (d.rootTurn != "" && !d.interrupt) {
		d.stopping = true
	}
	switch {
	case d.rootThread == "":
		d.mu.Unlock()
		return nil // the thread is not there yet: signals stop the run
	case d.interrupt:
		d.mu.Unlock()
		return nil // already asked
	case d.turnActive && d.rootTurn == "":
		d.mu.Unlock()
		return nil // sent once the turn's id is known (see setRootTurn)
	}
	d.interrupt = true
	thread, turn := d.rootThread, d.rootTurn
	d.mu.Unlock()
	return d.request(methodTurnInterrupt, turnInterruptParams{ThreadID: thread, TurnID: turn})
}

// Decode implements runs.Decoder.
func (d *decoder) Decode(line []byte) []runs.Event {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return []runs.Event{runs.Unparsed(line, "not JSON: "+err.Error())}
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case hasID && m.Method != "":
		return d.serverRequest(m)
	case hasID:
		return d.response(line, m)
	case m.Method != "":
		return d.notification(line, m)
	}
	return []runs.Event{runs.Unparsed(line, "neither a response, a request nor a notification")}
}

// response handles the answer to one of the decoder's requests.
func (d *decoder) response(line []byte, m message) []runs.Event {
	id, err := strconv.Atoi(string(m.ID))
	d.mu.Lock()
	method, ok := d.calls[id]
	delete(d.calls, id)
	d.mu.Unlock()
	if err != nil || !ok {
		return []runs.Event{runs.Unparsed(line, "response to an id the gateway never sent")}
	}
	if m.Error != nil {
		return d.failedRequest(method, *m.Error)
	}
	switch method {
	case methodInitialize:
		d.send(notification{Method: d.method(methodInitialized)})
		method, params := d.threadRequest()
		d.call(method, params)
	case methodThreadStart, methodThreadResume:
		var r threadResult
		if err := json.Unmarshal(m.Result, &r); err != nil || r.Thread.ID == "" {
			return []runs.Event{runs.Unparsed(line, "thread result without a thread id")}
		}
		d.mu.Lock()
		d.rootThread = r.Thread.ID
		d.mu.Unlock()
		d.model = r.Model
		d.startTurn(userInput(d.inv.Spec.Prompt, d.inv.Images), d.inv.Spec.OutputSchema)
		return d.sessionStarted()
	case methodTurnStart:
		var r turnResult
		if err := json.Unmarshal(m.Result, &r); err == nil && r.Turn.ID != "" {
			d.setRootTurn(r.Turn.ID)
		}
	case methodTurnInterrupt:
		d.interruptAnswered()
	case methodTurnSteer:
	}
	return nil
}

// startTurn sends turn/start with input on the root thread.
func (d *decoder) startTurn(input []inputItem, schema json.RawMessage) {
	d.mu.Lock()
	thread := d.rootThread
	d.rootTurn, d.turnActive, d.interrupt = "", true, false
	d.mu.Unlock()
	d.turnUsage, d.result, d.interruptAsk = runs.Usage{}, "", false
	d.call(methodTurnStart, turnStartParams{
		ThreadID:     thread,
		Input:        input,
		Effort:       d.inv.Spec.Effort,
		OutputSchema: schema,
	})
}

// threadRequest starts the run's thread, or resumes the session asked for.
func (d *decoder) threadRequest() (string, threadParams) {
	s := d.inv.Spec
	perm := adapterkit.Permission(s.Permission)
	p := threadParams{
		Cwd: d.inv.Dir, Model: s.Model, Sandbox: sandboxModes[perm],
		ApprovalPolicy: d.approvalPolicy(), DeveloperInstructions: s.SystemPrompt,
		Config: mcpConfig(s.MCPServers, d.asks, d.operatorMCP),
	}
	if s.ResumeSessionID != "" {
		p.ThreadID = s.ResumeSessionID
		return methodThreadResume, p
	}
	ephemeral := !s.KeepSession
	p.Ephemeral = &ephemeral
	return methodThreadStart, p
}

// setRootTurn records the running turn's id, from the turn/start answer
// or turn/started, whichever comes first, and sends what waited for it:
// the stop of the run, an interrupt of the turn, steered input.
func (d *decoder) setRootTurn(id string) {
	d.mu.Lock()
	if d.rootTurn != "" || !d.turnActive {
		d.mu.Unlock()
		return
	}
	d.rootTurn = id
	thread := d.rootThread
	interrupt := (d.stopping || d.interruptAsk) && !d.interrupt
	if interrupt {
		d.interrupt = true
	}
	d.mu.Unlock()
	if interrupt {
		d.call(methodTurnInterrupt, turnInterruptParams{ThreadID: thread, TurnID: id})
	}
	for _, in := range d.steers {
		d.call(methodTurnSteer, turnSteerParams{ThreadID: thread, ExpectedTurnID: id, Input: in})
	}
	d.steers = nil
}

func (d *decoder) sessionStarted() []runs.Event {
	if d.session {
		return nil
	}
	d.session = true
	ev := runs.NewEvent(runs.EventSessionStarted, runs.SessionStartedData{SessionID: d.rootThread, Model: d.model})
	ev.SessionID = d.rootThread
	return []runs.Event{ev}
}

// failedRequest handles an error answer. A refused initialize, thread or
// first turn ends the conversation: the server refused to start the run
// (an unknown session to resume, a method or a parameter this CLI
// version does not know). In a session a refused later turn fails that
// turn only; a refused steer or interrupt is a warning.
func (d *decoder) failedRequest(method string, e rpcError) []runs.Event {
	switch method {
	case methodTurnInterrupt:
		// The turn ended before the interrupt arrived; the stop goes on
		// with signals if needed.
		d.interruptAnswered()
		return []runs.Event{runs.Warning("interrupt_refused", fmt.Sprintf("turn/interrupt: %s", e.Message))}
	case methodTurnSteer:
		return []runs.Event{runs.Warning("steer_refused", fmt.Sprintf("turn/steer: %s", e.Message))}
	case methodTurnStart:
		if d.interactive && d.turns > 0 {
			return d.turnRefused(e)
		}
	}
	if d.rpcErr == nil {
		d.rpcErr = &rpcFailure{method: method, err: e}
	}
	d.done = true
	return nil
}

// serverRequest answers a request from the server. An approval request
// of a run that asks is the client's to answer (session.go). Otherwise,
// with approval policy never, none should come; one that does is
// declined, so that it never waits for an answer that would not come,
// and reported.
func (d *decoder) serverRequest(m message) []runs.Event {
	if d.asks {
		if evs, ok := d.approvalRequest(m); ok {
			return evs
		}
	}
	d.unanswered = append(d.unanswered, m.Method)
	r := reply{ID: m.ID}
	switch m.Method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		r.Result = map[string]string{"decision": "decline"}
	case "execCommandApproval", "applyPatchApproval":
		r.Result = map[string]string{"decision": "denied"}
	default:
		r.Error = &rpcError{Code: codeMethodNotFound, Message: "agentgate runs headless and answers no " + m.Method + " request"}
	}
	d.send(r)
	return []runs.Event{runs.Warning("request_declined",
		fmt.Sprintf("Codex asked the client %q; a headless run declines every request", m.Method))}
}

// notification maps one server notification to events.
func (d *decoder) notification(line []byte, m message) []runs.Event {
	switch m.Method {
	case "thread/started":
		return nil // the thread/start result already said
	case "turn/started":
		var n turnNotification
		if json.Unmarshal(m.Params, &n) == nil && d.isRoot(n.ThreadID) {
			d.setRootTurn(n.Turn.ID)
		}
		return nil
	case "item/started", "item/completed":
		var n itemNotification
		if err := json.Unmarshal(m.Params, &n); err != nil {
			return []runs.Event{runs.Unparsed(line, "item without an item: "+err.Error())}
		}
		return d.scope(n.ThreadID, d.item(n.Item, m.Method == "item/completed", n.ThreadID))
	case "item/agentMessage/delta":
		var n deltaNotification
		if err := json.Unmarshal(m.Params, &n); err != nil {
			return []runs.Event{runs.Unparsed(line, err.Error())}
		}
		d.messages[n.ItemID] = true
		return d.scope(n.ThreadID, []runs.Event{runs.NewEvent(runs.EventMessageDelta,
			runs.MessageData{MessageID: n.ItemID, Text: n.Delta})})
	case "item/reasoning/summaryTextDelta", "item/reasoning/textDelta":
		var n deltaNotification
		if err := json.Unmarshal(m.Params, &n); err != nil {
			return []runs.Event{runs.Unparsed(line, err.Error())}
		}
		return d.scope(n.ThreadID, []runs.Event{runs.NewEvent(runs.EventReasoningDelta, runs.DeltaData{ID: n.ItemID, Text: n.Delta})})
	case "item/commandExecution/outputDelta":
		var n deltaNotification
		if err := json.Unmarshal(m.Params, &n); err != nil {
			return []runs.Event{runs.Unparsed(line, err.Error())}
		}
		return d.scope(n.ThreadID, []runs.Event{runs.NewEvent(runs.EventToolCallOutput, runs.DeltaData{ID: n.ItemID, Text: n.Delta})})
	case "item/fileChange/outputDelta", "item/plan/delta", "item/mcpToolCall/progress",
		"item/commandExecution/terminalInteraction", "item/fileChange/patchUpdated",
		"hook/started", "hook/completed":
		// The completed item carries the whole text, and output.
		return nil
	case "serverRequest/resolved":
		return d.requestResolved(m)
	case "mcpServer/startupStatus/updated":
		return d.mcpStatus(m)
	case "thread/tokenUsage/updated":
		return d.tokenUsage(line, m)
	case "turn/diff/updated":
		var n diffNotification
		if json.Unmarshal(m.Params, &n) == nil && d.isRoot(n.ThreadID) {
			d.diff = n.Diff
		}
		return nil
	case "turn/plan/updated":
		return d.plan(line, m)
	case "turn/completed":
		return d.turnCompleted(line, m)
	case "error":
		return d.errorNotification(line, m)
	case "warning", "configWarning", "deprecationNotice", "guardianWarning":
		var n warningNotification
		_ = json.Unmarshal(m.Params, &n)
		msg := n.Message
		if msg == "" {
			msg = strings.TrimSpace(n.Summary + " " + n.Details)
		}
		if m.Method == "configWarning" && isBundledBubblewrapNotice(msg) {
			// About the host, not the run: the agent's advisory says it
			// once (Adapter.HostAdvisory), and the command still runs,
			// sandboxed by the bubblewrap Codex bundles.
			return nil
		}
		return d.scope(n.ThreadID, []runs.Event{runs.Warning(kebab(m.Method), msg)})
	case "account/rateLimits/updated":
		return d.rateLimits(m)
	case "model/rerouted":
		return []runs.Event{runs.Warning("model_rerouted", string(m.Params))}
	case "thread/compacted", "account/updated", "thread/settings/updated", "mcpServer/oauthLogin/completed",
		"model/verification", "turn/moderationMetadata", "thread/closed", "thread/archived",
		"thread/goal/updated", "thread/goal/cleared", "thread/readState/changed":
		return nil
	}
	return []runs.Event{runs.Unparsed(line, "notification the adapter does not map: "+clip.Text(m.Method, 80))}
}

// isRoot reports whether thread is the run's own thread.
func (d *decoder) isRoot(thread string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return thread == "" || thread == d.rootThread
}

// scope marks events of a helper thread with its session and the tool
// call that started it.
func (d *decoder) scope(thread string, evs []runs.Event) []runs.Event {
	if d.isRoot(thread) {
		for i := range evs {
			evs[i].SessionID = d.rootThread
		}
		return evs
	}
	parent, ok := d.helpers[thread]
	if !ok && len(d.spawning) == 1 {
		// The spawn's item/completed, which names the thread, may come
		// after the helper's first events: the one spawn still running
		// is the one that started it.
		parent = d.spawning[0]
		d.helpers[thread] = parent
	}
	for i := range evs {
		evs[i].SessionID = thread
		evs[i].ParentToolCallID = parent
	}
	return evs
}

// item maps a started or completed thread item.
func (d *decoder) item(it item, completed bool, thread string) []runs.Event {
	switch it.Type {
	case "userMessage", "hookPrompt", "contextCompaction", "enteredReviewMode", "exitedReviewMode", "sleep":
		return nil
	case "agentMessage":
		return d.agentMessageItem(it, completed, thread)
	case "reasoning":
		return reasoningItem(it, completed)
	case "plan":
		return planItem(it, completed)
	case "commandExecution":
		return d.commandItem(it, completed)
	case "fileChange":
		return d.fileChangeItem(it, completed)
	case "mcpToolCall":
		return d.mcpItem(it, completed)
	case "dynamicToolCall":
		return d.toolItem(it, completed, it.Tool, it.Arguments)
	case "collabAgentToolCall":
		return d.collabItem(it, completed)
	case "webSearch":
		return d.webSearchItem(it, completed)
	case "imageView", "imageGeneration", "subAgentActivity", "functionCallOutput":
		return d.toolItem(it, completed, it.Type, map[string]string{})
	}
	raw, _ := json.Marshal(it)
	return []runs.Event{runs.Unparsed(raw, "item type the adapter does not map: "+clip.Text(it.Type, 80))}
}

// agentMessageItem is a message once completed; the root thread's last
// one is the run's result.
func (d *decoder) agentMessageItem(it item, completed bool, thread string) []runs.Event {
	if !completed {
		return nil
	}
	if d.isRoot(thread) {
		d.result = it.Text
	}
	return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{MessageID: it.ID, Text: it.Text})}
}

// reasoningItem is the reasoning's full text once completed, or its
// summary where Codex gives no text, or a redacted reasoning.
func reasoningItem(it item, completed bool) []runs.Event {
	if !completed {
		return nil
	}
	var content []string
	_ = json.Unmarshal(it.Content, &content)
	text, vis := strings.Join(content, "\n"), runs.VisibilityFull
	if text == "" {
		text, vis = strings.Join(it.Summary, "\n"), runs.VisibilitySummary
	}
	if text == "" {
		vis = runs.VisibilityRedacted
	}
	return []runs.Event{runs.NewEvent(runs.EventReasoningCompleted, runs.ReasoningData{Text: text, Visibility: vis})}
}

// planItem is the plan's text as a message once completed.
func planItem(it item, completed bool) []runs.Event {
	if !completed {
		return nil
	}
	return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{MessageID: it.ID, Text: it.Text})}
}

// commandItem is a shell call; a command the sandbox policy declined
// fails with a word on why when it printed nothing.
func (d *decoder) commandItem(it item, completed bool) []runs.Event {
	input := map[string]string{"command": it.Command, "cwd": it.Cwd}
	if !completed {
		return d.toolStarted(it.ID, "shell", input)
	}
	failed := it.Status == "failed" || it.Status == "declined" || (it.ExitCode != nil && *it.ExitCode != 0)
	out := it.AggregatedOutput
	if it.Status == "declined" && out == "" {
		out = "declined by the sandbox policy"
	}
	return d.toolCompleted(it.ID, "shell", input, out, failed)
}

// fileChangeItem is an apply_patch call; once completed, each change is
// a file.changed event before the call's completion.
func (d *decoder) fileChangeItem(it item, completed bool) []runs.Event {
	paths := make([]string, 0, len(it.Changes))
	for _, c := range it.Changes {
		paths = append(paths, d.relative(c.Path))
	}
	input := map[string]any{"paths": paths}
	if len(it.Changes) > 0 {
		d.changes[it.ID] = it.Changes // the diff its approval request lacks
	}
	if !completed {
		return d.toolStarted(it.ID, "apply_patch", input)
	}
	var evs []runs.Event
	for _, c := range it.Changes {
		evs = append(evs, runs.NewEvent(runs.EventFileChanged, runs.FileChangedData{
			Path: d.relative(c.Path), Kind: changeKind(c.Kind.Type), MovePath: d.relative(c.Kind.MovePath),
			Diff: c.Diff, Status: it.Status, ToolCallID: it.ID,
		}))
	}
	return append(evs, d.toolCompleted(it.ID, "apply_patch", input, it.Status, it.Status != "completed")...)
}

// mcpItem is a call of an MCP server's tool.
func (d *decoder) mcpItem(it item, completed bool) []runs.Event {
	if !completed {
		return d.mcpStarted(it)
	}
	out, failed := mcpOutput(it.Result), len(it.Error) > 0 && string(it.Error) != "null"
	if failed {
		out = mcpError(it.Error)
	}
	evs := d.mcpStarted(it) // a call whose start was never seen
	return append(evs, d.toolCompleted(it.ID, mcpToolName(it.Server, it.Tool), it.Arguments, out, failed || it.Status == "failed")...)
}

// collabItem is a call of the multi-agent tools: spawning a helper
// thread, or addressing one.
func (d *decoder) collabItem(it item, completed bool) []runs.Event {
	// The first call that names a helper thread spawned it; later
	// ones (wait, send_input) only address it.
	for _, t := range it.ReceiverThreadIDs {
		if _, ok := d.helpers[t]; !ok {
			d.helpers[t] = it.ID
		}
	}
	if it.Tool == "spawnAgent" {
		d.spawning = slices.DeleteFunc(d.spawning, func(id string) bool { return id == it.ID })
		if !completed {
			d.spawning = append(d.spawning, it.ID)
		}
	}
	input := map[string]any{"prompt": it.Prompt, "threads": it.ReceiverThreadIDs}
	return d.toolItem(it, completed, "agent_"+it.Tool, input)
}

// webSearchItem is a web search, which reports no output and no failure.
func (d *decoder) webSearchItem(it item, completed bool) []runs.Event {
	input := map[string]string{"query": it.Query}
	if !completed {
		return d.toolStarted(it.ID, "web_search", input)
	}
	return d.toolCompleted(it.ID, "web_search", input, "", false)
}

// toolItem is a tool call whose status is its output: started, or
// completed and failed when its status says so.
func (d *decoder) toolItem(it item, completed bool, name string, input any) []runs.Event {
	if !completed {
		return d.toolStarted(it.ID, name, input)
	}
	return d.toolCompleted(it.ID, name, input, it.Status, it.Status == "failed")
}

// mcpToolName is an MCP tool's name in events, as Claude's model sees
// it; Codex offers it to its model as function Tool of namespace
// mcp__<Server>.
func mcpToolName(server, tool string) string { return "mcp__" + server + "__" + tool }

// mcpStarted opens an MCP tool call, with its server (the key of the
// run's mcp_servers, which Codex names it by) and the tool's own name.
func (d *decoder) mcpStarted(it item) []runs.Event {
	evs := d.toolStarted(it.ID, mcpToolName(it.Server, it.Tool), it.Arguments)
	for i := range evs {
		if data, ok := evs[i].Data.(runs.ToolCallStartedData); ok {
			data.MCPServer, data.MCPTool = it.Server, it.Tool
			evs[i].Data = data
		}
	}
	return evs
}

// toolStarted opens a tool call.
func (d *decoder) toolStarted(id, name string, input any) []runs.Event {
	if _, ok := d.open[id]; ok {
		return nil
	}
	d.open[id] = name
	d.openOrder = append(d.openOrder, id)
	return []runs.Event{runs.NewEvent(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: id, Name: name, Input: rawJSON(input)})}
}

// toolCompleted closes a tool call, opening it first if its start was
// never seen.
func (d *decoder) toolCompleted(id, name string, input any, output string, failed bool) []runs.Event {
	var evs []runs.Event
	if _, ok := d.open[id]; !ok {
		evs = d.toolStarted(id, name, input)
	}
	delete(d.open, id)
	return append(evs, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: id, Output: output, IsError: failed}))
}

// relative returns path relative to the run's directory when it is inside
// it, so that clients see the paths they know.
func (d *decoder) relative(path string) string {
	if path == "" || d.inv.Dir == "" {
		return path
	}
	if rel, err := filepath.Rel(d.inv.Dir, path); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return path
}

func changeKind(k string) string {
	switch k {
	case "add":
		return runs.ChangeAdd
	case "delete":
		return runs.ChangeDelete
	}
	return runs.ChangeUpdate
}

// tokenUsage adds one model request's usage. Codex sends it once per
// request, with `last` that request and `total` the whole thread, which
// after a resume includes earlier runs. Adding up `last` counts this
// run's requests only, helper threads' included: they were billed too.
// Usage of a turn that is not the run's own is left out.
func (d *decoder) tokenUsage(line []byte, m message) []runs.Event {
	var n tokenUsageNotification
	if err := json.Unmarshal(m.Params, &n); err != nil {
		return []runs.Event{runs.Unparsed(line, err.Error())}
	}
	if d.isRoot(n.ThreadID) {
		// thread/resume replays the thread's last usage, under its last
		// turn, before the run's own turn starts: not this run's tokens.
		d.mu.Lock()
		ours := d.rootTurn != "" && (n.TurnID == "" || n.TurnID == d.rootTurn)
		d.mu.Unlock()
		if !ours {
			return nil
		}
	}
	d.usage = d.usage.Add(normalize(n.TokenUsage.Last))
	d.turnUsage = d.turnUsage.Add(normalize(n.TokenUsage.Last))
	// The run's usage so far, helpers' included, belongs to the root.
	return d.scope("", []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: d.usage})})
}

// normalize maps Codex's counters onto the gateway's: both count cached
// input in the input and reasoning in the output already.
func normalize(t tokenBreakdown) runs.Usage {
	return runs.Usage{
		InputTokens: nonNeg(t.Input), CacheReadTokens: nonNeg(t.Cached), CacheWriteTokens: nonNeg(t.CacheWrite),
		OutputTokens: nonNeg(t.Output), ReasoningTokens: nonNeg(t.Reasoning),
	}
}

func nonNeg(n int64) int64 { return max(n, 0) }

func (d *decoder) plan(line []byte, m message) []runs.Event {
	var n planNotification
	if err := json.Unmarshal(m.Params, &n); err != nil {
		return []runs.Event{runs.Unparsed(line, err.Error())}
	}
	steps := make([]runs.PlanStep, 0, len(n.Plan))
	for _, s := range n.Plan {
		status := runs.StepPending
		switch s.Status {
		case "inProgress":
			status = runs.StepInProgress
		case "completed":
			status = runs.StepCompleted
		}
		steps = append(steps, runs.PlanStep{Step: s.Step, Status: status})
	}
	return d.scope(n.ThreadID, []runs.Event{runs.NewEvent(runs.EventPlanUpdated, runs.PlanUpdatedData{Explanation: n.Explanation, Steps: steps})})
}

// turnCompleted ends the run when the root thread's turn completed; a
// helper thread's turn ending changes nothing. In a session it ends the
// turn only (see endTurn).
func (d *decoder) turnCompleted(line []byte, m message) []runs.Event {
	var n turnNotification
	if err := json.Unmarshal(m.Params, &n); err != nil {
		return []runs.Event{runs.Unparsed(line, err.Error())}
	}
	d.mu.Lock()
	root := n.ThreadID == d.rootThread && d.turnActive && (d.rootTurn == "" || n.Turn.ID == d.rootTurn)
	if root {
		d.turnActive = false
	}
	d.mu.Unlock()
	if !root {
		return nil
	}
	d.turnStatus, d.turnErr = n.Turn.Status, n.Turn.Error
	if d.turnStatus == "" {
		d.turnStatus = "completed"
	}
	for _, it := range n.Turn.Items {
		if it.Type == "agentMessage" && it.Text != "" {
			d.result = it.Text
		}
	}
	if !d.interactive {
		d.done = true
		return nil
	}
	return d.endTurn()
}

// errorNotification reports a failure Codex will retry as a rate_limit or
// warning; a final one is kept for the outcome, which turn/completed
// usually repeats.
func (d *decoder) errorNotification(line []byte, m message) []runs.Event {
	var n errorNotification
	if err := json.Unmarshal(m.Params, &n); err != nil {
		return []runs.Event{runs.Unparsed(line, err.Error())}
	}
	if !n.WillRetry {
		if d.isRoot(n.ThreadID) {
			d.lastErr = &n
		}
		return nil
	}
	c := classify(n.Error)
	if c.class == runs.RateLimited {
		return d.scope(n.ThreadID, []runs.Event{runs.NewEvent(runs.EventRateLimit, runs.RateLimitData{Status: c.status, Error: n.Error.Message})})
	}
	return d.scope(n.ThreadID, []runs.Event{runs.Warning("retrying", n.Error.Message)})
}

// rateLimits reports an account limit that was reached. Codex sends a
// snapshot after each request; most say nothing was reached.
func (d *decoder) rateLimits(m message) []runs.Event {
	var n rateLimitsNotification
	if json.Unmarshal(m.Params, &n) != nil {
		return nil
	}
	reached := strings.Trim(string(n.RateLimits.RateLimitReachedType), `"`)
	if reached == "" || reached == "null" {
		return nil
	}
	return d.scope("", []runs.Event{runs.NewEvent(runs.EventRateLimit, runs.RateLimitData{Error: "account rate limit reached: " + reached})})
}

// rawJSON encodes a tool call's input. HTML is not escaped: a command's
// ">" stays ">" for whoever reads the event.
func rawJSON(v any) json.RawMessage {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 || string(raw) == "null" || !json.Valid(raw) {
			return json.RawMessage(`{}`)
		}
		return raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(`{}`)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// kebab turns a method such as "configWarning" into a warning code,
// config_warning.
func kebab(method string) string {
	var b strings.Builder
	for i, r := range method {
		switch {
		case r >= 'A' && r <= 'Z':
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r + 'a' - 'A')
		case r == '/':
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isBundledBubblewrapNotice reports whether a configWarning is the one
// Codex sends at the start of every session when bwrap is not on its PATH
// ("Codex could not find bubblewrap on PATH. … Codex will use the bundled
// bubblewrap in the meantime.", 0.171.0).
func isBundledBubblewrapNotice(msg string) bool {
	return strings.Contains(msg, "could not find bubblewrap on PATH")
}
