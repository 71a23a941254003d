package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// Options name the AG-UI thread and runs that a Translator produces.
type Options struct {
	// ThreadID is the AG-UI thread; empty means the run's id.
	ThreadID string
	// RunID is the runId of every AG-UI run of the stream. Empty means
	// the run's id for the first, and for one that an interrupt's answer
	// opened, the interrupt's id.
	RunID string
	// PromptMessageID is the id of the user message that the first
	// RUN_STARTED echoes the prompt as; empty means "<run id>/prompt". A
	// client that sent the prompt as a message of its own passes that
	// message's id, so that it does not get the prompt twice.
	PromptMessageID string
}

// phase is where a Translator is in the sequence of AG-UI runs.
type phase int

const (
	// phaseBefore: no AG-UI run has opened yet (no run.started).
	phaseBefore phase = iota
	// phaseOpen: an AG-UI run is open.
	phaseOpen
	// phaseInterrupted: the last AG-UI run ended with an interrupt, and
	// its answer has not come.
	phaseInterrupted
	// phaseDone: run.completed has been translated; nothing follows.
	phaseDone
)

// Translator turns one run's stored envelopes, fed in log order, into
// AG-UI events. It is not safe for concurrent use.
type Translator struct {
	opts     Options
	runID    string
	threadID string
	phase    phase
	// runID of the open (or last) AG-UI run.
	aguiRunID string
	// interrupt is the id of the interrupt that ended the last AG-UI run,
	// and approval the approval it stands for (phaseInterrupted).
	interrupt, approval string
	// held are the envelopes that wait for the next AG-UI run to open.
	held []envelope

	state    State
	prompt   string
	started  bool // run.started was seen
	echoed   bool // the prompt was echoed
	texts    map[string]*textStream
	open     []*textStream // the open text messages, in the order they opened
	thoughts map[string]*reasoningStream
	thinking []*reasoningStream // the open reasoning spans, in order
	// step is the open step; suspended, one an interrupt closed, to open
	// again with the next AG-UI run.
	step, suspended string
	// tools maps the agent's tool call ids to their AG-UI ids.
	tools map[string]string

	messages, spans, calls int // counters of the ids made up

	ts  int64 // the timestamp of the envelope being translated
	out []Event
}

// textStream is one assistant message, by the agent's message id.
type textStream struct {
	key      string
	id       string // its AG-UI id, while open
	isOpen   bool
	streamed strings.Builder // all of its text sent so far
}

// reasoningStream is one block of reasoning of one agent (the run's own,
// or a helper's under a tool call): reasoning.completed carries no block
// id, so an agent has at most one open.
type reasoningStream struct {
	key      string // the parent tool call id
	block    string // the block id of its deltas
	span, id string // the AG-UI span and message ids, while open
	isOpen   bool
	streamed strings.Builder
}

// New returns a Translator for one run's log.
func New(opts Options) *Translator {
	return &Translator{
		opts:     opts,
		texts:    map[string]*textStream{},
		thoughts: map[string]*reasoningStream{},
		tools:    map[string]string{},
		state:    State{Status: string(runs.Queued), FilesChanged: []FileChange{}},
	}
}

// envelope is a stored event as the Translator reads it.
type envelope struct {
	RunID            string          `json:"run_id"`
	Time             json.RawMessage `json:"time"`
	Type             runs.EventType  `json:"type"`
	Agent            string          `json:"agent"`
	SessionID        string          `json:"session_id"`
	ParentToolCallID string          `json:"parent_tool_call_id"`
	Data             json.RawMessage `json:"data"`

	ts int64
}

// Translate translates the run's next stored envelope and returns the AG-UI
// events it makes, possibly none. An envelope that does not decode is
// skipped, and everything after run.completed is ignored.
func (t *Translator) Translate(stored []byte) []Event {
	t.out = nil
	if t.phase == phaseDone {
		return nil
	}
	var env envelope
	if json.Unmarshal(stored, &env) != nil || env.Type == "" {
		return nil
	}
	var at time.Time
	if json.Unmarshal(env.Time, &at) == nil && !at.IsZero() {
		env.ts = at.UnixMilli()
	}
	if t.runID == "" {
		t.runID = env.RunID
		if t.runID == "" {
			t.runID = "run"
		}
		t.threadID = t.opts.ThreadID
		if t.threadID == "" {
			t.threadID = t.runID
		}
		t.state.RunID = t.runID
	}
	if t.state.Agent == "" {
		t.state.Agent = env.Agent
	}
	t.feed(env)
	return t.out
}

// Done reports whether run.completed has been translated: the stream of
// AG-UI events is complete.
func (t *Translator) Done() bool { return t.phase == phaseDone }

func (t *Translator) feed(env envelope) {
	t.ts = env.ts
	switch {
	case env.Type == runs.EventRunCompleted:
		t.complete(env)
	case t.phase == phaseOpen:
		t.handle(env)
	case t.applyState(env, false):
		// Only the state changed: the next snapshot shows it.
	case env.Type == runs.EventRunStarted && t.phase == phaseBefore:
		t.startRun(env)
		t.flush()
	case env.Type == runs.EventApprovalResolved && t.phase == phaseInterrupted && t.answers(env):
		t.resume(env)
		t.flush()
	default:
		t.held = append(t.held, env)
	}
}

// handle translates env while an AG-UI run is open.
func (t *Translator) handle(env envelope) {
	t.ts = env.ts
	if t.applyState(env, true) {
		return
	}
	key := env.ParentToolCallID
	switch env.Type {
	case runs.EventRunStarted:
		t.noteStart(env)
		if t.state.Status != string(runs.Running) {
			t.state.Status = string(runs.Running)
			t.delta(replace(pathStatus, t.state.Status))
		}
	case runs.EventMessageDelta:
		var d runs.MessageData
		decode(env.Data, &d)
		t.textDelta(key+"\x00"+d.MessageID, d.Text)
	case runs.EventMessageCompleted:
		var d runs.MessageData
		decode(env.Data, &d)
		t.textDone(key+"\x00"+d.MessageID, d.Text)
	case runs.EventReasoningDelta:
		var d runs.DeltaData
		decode(env.Data, &d)
		t.reasoningDelta(key, d.ID, d.Text)
	case runs.EventReasoningCompleted:
		var d runs.ReasoningData
		decode(env.Data, &d)
		t.reasoningDone(key, d.Text)
	case runs.EventToolCallStarted:
		var d runs.ToolCallStartedData
		decode(env.Data, &d)
		t.toolStarted(d)
	case runs.EventToolCallOutput:
		// tool_call.completed carries the whole output.
	case runs.EventToolCallProgress:
		var d runs.ToolCallProgressData
		decode(env.Data, &d)
		t.toolProgress(d)
	case runs.EventToolCallCompleted:
		var d runs.ToolCallCompletedData
		decode(env.Data, &d)
		t.toolCompleted(d)
	case runs.EventApprovalRequested:
		var d runs.ApprovalRequestedData
		decode(env.Data, &d)
		if d.ID == "" {
			// Nothing could answer it by id.
			t.custom(env)
			return
		}
		t.interruptFor(d)
	case runs.EventApprovalResolved:
		var d runs.ApprovalResolvedData
		decode(env.Data, &d)
		if p := t.state.PendingApproval; p != nil && p.ID == d.ID {
			t.state.PendingApproval = nil
			t.delta(replace(pathPendingApproval, nil))
		}
		t.custom(env)
	case runs.EventTurnStarted:
		var d runs.TurnStartedData
		decode(env.Data, &d)
		t.turnStarted(d)
	case runs.EventTurnCompleted:
		if t.step != "" {
			t.emit(StepFinished, stepEvent{t.head(StepFinished), t.step})
			t.step = ""
		}
	case runs.EventAgentUnparsed:
		t.emit(Raw, rawEvent{head: t.head(Raw), Event: orNull(env.Data), Source: env.Agent})
	default:
		// warning, rate_limit, message.queued, and any type newer than
		// this translator.
		t.custom(env)
	}
}

// applyState applies an event that only changes the state, with a
// STATE_DELTA when emit is set, and reports whether env was one.
func (t *Translator) applyState(env envelope, emit bool) bool {
	var ops []patchOp
	switch env.Type {
	case runs.EventRunQueued:
		// The run is queued until it starts; the status is queued already.
	case runs.EventSessionStarted:
		var d runs.SessionStartedData
		decode(env.Data, &d)
		if id := cmpOr(d.SessionID, env.SessionID); id != "" && id != t.state.SessionID {
			t.state.SessionID = id
			ops = append(ops, replace(pathSessionID, id))
		}
		if d.Model != "" && d.Model != t.state.Model {
			t.state.Model = d.Model
			ops = append(ops, replace(pathModel, d.Model))
		}
	case runs.EventUsageUpdated:
		var d runs.UsageData
		decode(env.Data, &d)
		t.state.Usage = d.Usage
		ops = append(ops, replace(pathUsage, d.Usage))
		if d.CostUSD != nil {
			t.state.CostUSD = d.CostUSD
			ops = append(ops, replace(pathCost, d.CostUSD))
		}
	case runs.EventPlanUpdated:
		var d runs.PlanUpdatedData
		decode(env.Data, &d)
		if d.Steps == nil {
			d.Steps = []runs.PlanStep{}
		}
		t.state.Plan = &d
		ops = append(ops, replace(pathPlan, &d))
	case runs.EventFileChanged:
		var d runs.FileChangedData
		decode(env.Data, &d)
		fc := FileChange{Path: d.Path, Kind: d.Kind, MovePath: d.MovePath, Status: d.Status, ToolCallID: d.ToolCallID}
		t.state.FilesChanged = append(t.state.FilesChanged, fc)
		ops = append(ops, patchOp{Op: "add", Path: pathFiles, Value: fc})
	default:
		return false
	}
	if emit && len(ops) > 0 {
		t.delta(ops...)
	}
	return true
}

// noteStart keeps what run.started says of the run.
func (t *Translator) noteStart(env envelope) {
	var d runs.RunStartedData
	decode(env.Data, &d)
	t.started = true
	t.prompt = d.Prompt
	if t.state.Model == "" {
		t.state.Model = d.Model
	}
}

// startRun opens the first AG-UI run, at run.started.
func (t *Translator) startRun(env envelope) {
	t.noteStart(env)
	t.state.Status = string(runs.Running)
	t.openRun("")
}

// openRun opens an AG-UI run; resumes is the interrupt whose answer opens
// it, if any. The first to open after run.started echoes the prompt.
func (t *Translator) openRun(resumes string) {
	t.aguiRunID = t.opts.RunID
	if t.aguiRunID == "" {
		t.aguiRunID = cmpOr(resumes, t.runID)
	}
	ev := runStartedEvent{head: t.head(RunStarted), ThreadID: t.threadID, RunID: t.aguiRunID, ProtocolVersion: ProtocolVersion}
	if t.started && !t.echoed {
		t.echoed = true
		id := cmpOr(t.opts.PromptMessageID, t.runID+"/prompt")
		ev.Input = &runInput{ThreadID: t.threadID, RunID: t.aguiRunID,
			Messages: []inputMessage{{ID: id, Role: "user", Content: t.prompt}},
			Tools:    []struct{}{}, Context: []struct{}{}}
	}
	if b, ok := marshal(ev); ok {
		t.out = append(t.out, Event{Type: RunStarted, JSON: b, Resumes: resumes})
	}
	t.phase = phaseOpen
	t.interrupt, t.approval = "", ""
	t.emit(StateSnapshot, snapshotEvent{head: t.head(StateSnapshot), Snapshot: &t.state})
	if t.suspended != "" {
		t.step, t.suspended = t.suspended, ""
		t.emit(StepStarted, stepEvent{t.head(StepStarted), t.step})
	}
}

// answers reports whether env, an approval.resolved, answers the interrupt
// that ended the last AG-UI run.
func (t *Translator) answers(env envelope) bool {
	var d runs.ApprovalResolvedData
	decode(env.Data, &d)
	return d.ID == t.approval
}

// resume opens the AG-UI run that the answer env to the interrupt opens.
func (t *Translator) resume(env envelope) {
	t.ts = env.ts
	t.state.PendingApproval = nil
	t.state.Status = string(runs.Running)
	t.openRun(t.interrupt)
	t.custom(env)
}

// flush translates the held envelopes while an AG-UI run is open. One may
// end it with an interrupt; then the interrupt's answer, if it is among
// them, opens the next, and the rest follow.
func (t *Translator) flush() {
	for len(t.held) > 0 {
		if t.phase != phaseOpen {
			i := slices.IndexFunc(t.held, func(env envelope) bool {
				return env.Type == runs.EventApprovalResolved && t.answers(env)
			})
			if i < 0 {
				return
			}
			env := t.held[i]
			t.held = slices.Delete(t.held, i, i+1)
			t.resume(env)
			continue
		}
		env := t.held[0]
		t.held = t.held[1:]
		t.handle(env)
	}
	t.held = nil
}

// interruptFor ends the open AG-UI run with an interrupt for the approval.
func (t *Translator) interruptFor(d runs.ApprovalRequestedData) {
	t.closeAll()
	id := t.runID + "/" + d.ID
	if len(d.Options) == 0 {
		d.Options = slices.Clone(runs.Decisions)
	}
	p := &PendingApproval{ID: d.ID, InterruptID: id, ToolCallID: d.ToolCallID, Tool: d.Tool,
		Input: nonNull(d.Input), MCPServer: d.MCPServer, Options: d.Options}
	in := interrupt{ID: id, Reason: "tool_call", Message: approvalPrompt(d),
		ResponseSchema: responseSchema(d.Options),
		Metadata: &gatewayMeta{approvalMeta{RunID: t.runID, ApprovalID: d.ID, Tool: d.Tool,
			Input: p.Input, MCPServer: d.MCPServer, Options: d.Options}}}
	if ag, ok := t.tools[d.ToolCallID]; ok && d.ToolCallID != "" {
		in.ToolCallID = ag
	}
	if !d.ExpiresAt.IsZero() {
		exp := d.ExpiresAt.UTC()
		p.ExpiresAt = &exp
		in.ExpiresAt = exp.Format(time.RFC3339Nano)
	}
	t.state.Status = StatusAwaitingApproval
	t.state.PendingApproval = p
	t.delta(replace(pathStatus, t.state.Status), replace(pathPendingApproval, p))
	ev := runFinishedEvent{head: t.head(RunFinished), ThreadID: t.threadID, RunID: t.aguiRunID,
		Outcome: &outcome{Type: "interrupt", Interrupts: []interrupt{in}}}
	if b, ok := marshal(ev); ok {
		t.out = append(t.out, Event{Type: RunFinished, JSON: b, Interrupt: id})
	}
	t.phase = phaseInterrupted
	t.interrupt, t.approval = id, d.ID
}

// approvalMeta is the metadata of an interrupt.
type approvalMeta struct {
	RunID      string          `json:"run_id"`
	ApprovalID string          `json:"approval_id"`
	Tool       string          `json:"tool"`
	Input      json.RawMessage `json:"input,omitempty"`
	MCPServer  string          `json:"mcp_server,omitempty"`
	Options    []runs.Decision `json:"options"`
}

// approvalPrompt is the interrupt's message for a person.
func approvalPrompt(d runs.ApprovalRequestedData) string {
	msg := "Allow " + cmpOr(d.Tool, "the tool call") + "?"
	if in := compact(d.Input); in != "" && in != "null" {
		msg += " " + clip.Text(in, 300)
	}
	return msg
}

// responseSchema is the JSON Schema of the payload that answers an
// approval: approved, or one of its options by name, and a message for
// the model.
func responseSchema(options []runs.Decision) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"approved": map[string]any{"type": "boolean",
				"description": "true runs the tool call once; false refuses it"},
			"decision": map[string]any{"type": "string", "enum": options,
				"description": "the decision by name, instead of approved"},
			"message": map[string]any{"type": "string",
				"description": "told to the model with a refusal"},
		},
	})
	return b
}

// complete translates run.completed: it ends the AG-UI run, opening one
// first if none is open.
func (t *Translator) complete(env envelope) {
	for t.phase != phaseOpen {
		t.openRun(t.interrupt)
		t.flush()
	}
	t.ts = env.ts
	t.closeAll()
	var d runs.RunCompletedData
	decode(env.Data, &d)
	t.state.Status = cmpOr(string(d.Status), "unknown")
	t.state.Usage = d.Usage
	t.state.PendingApproval = nil
	ops := []patchOp{replace(pathStatus, t.state.Status), replace(pathUsage, d.Usage), replace(pathPendingApproval, nil)}
	if d.CostUSD != nil {
		t.state.CostUSD = d.CostUSD
		ops = append(ops, replace(pathCost, d.CostUSD))
	}
	ops = append(ops, t.addRunFiles(d.Files)...)
	t.delta(ops...)
	usage := t.usage(d.Usage)
	if d.Status == runs.Succeeded {
		ev := runFinishedEvent{head: t.head(RunFinished), ThreadID: t.threadID, RunID: t.aguiRunID,
			Outcome: &outcome{Type: "success"}, Usage: usage}
		switch {
		case len(d.StructuredOutput) > 0 && string(d.StructuredOutput) != "null":
			ev.Result = d.StructuredOutput
		case d.Result != "":
			ev.Result, _ = json.Marshal(d.Result)
		}
		t.emit(RunFinished, ev)
	} else {
		ev := runErrorEvent{head: t.head(RunError), Usage: usage}
		if e := d.Error; e != nil {
			ev.Code = string(e.Class)
			ev.Message = e.Message
			if e.Hint != "" {
				ev.Message = strings.TrimSpace(ev.Message + " (" + e.Hint + ")")
			}
		}
		ev.Code = cmpOr(ev.Code, t.state.Status)
		ev.Message = cmpOr(ev.Message, "the run ended "+t.state.Status)
		t.emit(RunError, ev)
	}
	t.phase = phaseDone
	t.held = nil
}

// addRunFiles adds to the state the files the run changed in its
// directory, as run.completed lists them, that no file.changed named: a
// CLI's shell commands change files too, and only its edit tools say so.
func (t *Translator) addRunFiles(files []runs.ChangedFile) []patchOp {
	named := make(map[string]bool, len(t.state.FilesChanged))
	for _, f := range t.state.FilesChanged {
		named[f.Path] = true
	}
	var ops []patchOp
	for _, f := range files {
		if named[f.Path] {
			continue
		}
		named[f.Path] = true
		fc := FileChange{Path: f.Path, Kind: f.Kind}
		t.state.FilesChanged = append(t.state.FilesChanged, fc)
		ops = append(ops, patchOp{Op: "add", Path: pathFiles, Value: fc})
	}
	return ops
}

// usage is u as AG-UI's token usage, whose accounting is agentgate's:
// input counts both caches, output counts reasoning.
func (t *Translator) usage(u runs.Usage) []tokenUsage {
	if u.IsZero() {
		return nil
	}
	return []tokenUsage{{Model: t.state.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		TotalTokens: u.InputTokens + u.OutputTokens, ReasoningTokens: u.ReasoningTokens,
		CachedInputTokens: u.CacheReadTokens, CacheWriteInputTokens: u.CacheWriteTokens}}
}

// closeAll closes what is open, as AG-UI requires before a run ends: text
// messages, reasoning, the step. A step closed here opens again with the
// next AG-UI run.
func (t *Translator) closeAll() {
	for _, s := range t.open {
		t.emit(TextMessageEnd, idEvent{t.head(TextMessageEnd), s.id})
		s.isOpen = false
	}
	t.open = nil
	for _, r := range slices.Clone(t.thinking) {
		t.endReasoning(r)
	}
	if t.step != "" {
		t.emit(StepFinished, stepEvent{t.head(StepFinished), t.step})
		t.step, t.suspended = "", t.step
	}
}

func (t *Translator) textDelta(key, text string) {
	if text == "" {
		return
	}
	s := t.texts[key]
	if s == nil {
		s = &textStream{key: key}
		t.texts[key] = s
	}
	t.openText(s)
	s.streamed.WriteString(text)
	t.emit(TextMessageContent, contentEvent{t.head(TextMessageContent), s.id, text})
}

// openText starts s as a new AG-UI message unless it is open.
func (t *Translator) openText(s *textStream) {
	if s.isOpen {
		return
	}
	s.id, s.isOpen = t.messageID(), true
	t.open = append(t.open, s)
	t.emit(TextMessageStart, textStartEvent{t.head(TextMessageStart), s.id, "assistant"})
}

func (t *Translator) textDone(key, text string) {
	s := t.texts[key]
	if s == nil {
		if text == "" {
			return
		}
		s = &textStream{key: key}
	}
	delete(t.texts, key)
	if rest := remainder(text, s.streamed.String()); rest != "" {
		t.openText(s)
		t.emit(TextMessageContent, contentEvent{t.head(TextMessageContent), s.id, rest})
	}
	if s.isOpen {
		t.emit(TextMessageEnd, idEvent{t.head(TextMessageEnd), s.id})
		t.open = slices.DeleteFunc(t.open, func(o *textStream) bool { return o == s })
	}
}

// remainder is what of the completed text the deltas did not carry.
func remainder(text, streamed string) string {
	if rest, ok := strings.CutPrefix(text, streamed); ok {
		return rest
	}
	// The deltas said something else; what they said stands.
	return ""
}

func (t *Translator) reasoningDelta(key, block, text string) {
	if text == "" {
		return
	}
	r := t.thoughts[key]
	if r != nil && r.block != block {
		if r.isOpen {
			t.endReasoning(r)
		}
		r = nil
	}
	if r == nil {
		r = &reasoningStream{key: key, block: block}
		t.thoughts[key] = r
	}
	t.openReasoning(r)
	r.streamed.WriteString(text)
	t.emit(ReasoningMessageContent, contentEvent{t.head(ReasoningMessageContent), r.id, text})
}

func (t *Translator) openReasoning(r *reasoningStream) {
	if r.isOpen {
		return
	}
	r.span, r.id, r.isOpen = t.spanID(), t.messageID(), true
	t.thinking = append(t.thinking, r)
	t.emit(ReasoningStart, idEvent{t.head(ReasoningStart), r.span})
	t.emit(ReasoningMessageStart, textStartEvent{t.head(ReasoningMessageStart), r.id, "reasoning"})
}

func (t *Translator) endReasoning(r *reasoningStream) {
	t.emit(ReasoningMessageEnd, idEvent{t.head(ReasoningMessageEnd), r.id})
	t.emit(ReasoningEnd, idEvent{t.head(ReasoningEnd), r.span})
	r.isOpen = false
	t.thinking = slices.DeleteFunc(t.thinking, func(o *reasoningStream) bool { return o == r })
}

// reasoningDone ends the agent's reasoning block. A block with no text (a
// redacted one) is a span with no message.
func (t *Translator) reasoningDone(key, text string) {
	r := t.thoughts[key]
	delete(t.thoughts, key)
	if r == nil {
		if text == "" {
			span := t.spanID()
			t.emit(ReasoningStart, idEvent{t.head(ReasoningStart), span})
			t.emit(ReasoningEnd, idEvent{t.head(ReasoningEnd), span})
			return
		}
		r = &reasoningStream{key: key}
	}
	if rest := remainder(text, r.streamed.String()); rest != "" {
		t.openReasoning(r)
		t.emit(ReasoningMessageContent, contentEvent{t.head(ReasoningMessageContent), r.id, rest})
	}
	if r.isOpen {
		t.endReasoning(r)
	}
}

func (t *Translator) toolStarted(d runs.ToolCallStartedData) {
	id := t.runID + "/tool/" + d.ID
	if _, dup := t.tools[d.ID]; dup || d.ID == "" {
		id = t.callID()
	}
	t.tools[d.ID] = id
	t.emit(ToolCallStart, toolStartEvent{t.head(ToolCallStart), id, cmpOr(d.Name, "tool")})
	if args := compact(d.Input); args != "" && args != "null" {
		t.emit(ToolCallArgs, toolArgsEvent{t.head(ToolCallArgs), id, args})
	}
	t.emit(ToolCallEnd, toolEndEvent{t.head(ToolCallEnd), id})
}

func (t *Translator) toolCompleted(d runs.ToolCallCompletedData) {
	id, ok := t.tools[d.ID]
	if !ok {
		id = t.callID()
	}
	ev := toolResultEvent{head: t.head(ToolCallResult), MessageID: t.messageID(), ToolCallID: id,
		Content: d.Output, Role: "tool"}
	if d.IsError {
		ev.Metadata = &gatewayMeta{map[string]bool{"is_error": true}}
	}
	t.emit(ToolCallResult, ev)
}

// progressValue is the value of CUSTOM agentgate.tool_call.progress: the
// event's data, and the call's id as TOOL_CALL_START gave it.
type progressValue struct {
	runs.ToolCallProgressData
	ToolCallID string `json:"toolCallId,omitempty"`
}

// toolProgress reports a running call: AG-UI has no event for it, so it
// is a CUSTOM one naming the call as TOOL_CALL_START did. Progress on a
// call that was never started names none.
func (t *Translator) toolProgress(d runs.ToolCallProgressData) {
	value, err := json.Marshal(progressValue{ToolCallProgressData: d, ToolCallID: t.tools[d.ID]})
	if err != nil {
		return // plain strings and numbers: cannot happen
	}
	t.emit(Custom, customEvent{head: t.head(Custom), Name: customPrefix + string(runs.EventToolCallProgress), Value: value})
}

func (t *Translator) turnStarted(d runs.TurnStartedData) {
	if t.step != "" {
		t.emit(StepFinished, stepEvent{t.head(StepFinished), t.step})
	}
	t.step = fmt.Sprintf("turn %d", d.Turn)
	t.emit(StepStarted, stepEvent{t.head(StepStarted), t.step})
	// The first turn's text is the prompt, which RUN_STARTED echoed.
	if d.Turn > 1 && d.Text != "" {
		id := t.messageID()
		t.emit(TextMessageStart, textStartEvent{t.head(TextMessageStart), id, "user"})
		t.emit(TextMessageContent, contentEvent{t.head(TextMessageContent), id, d.Text})
		t.emit(TextMessageEnd, idEvent{t.head(TextMessageEnd), id})
	}
}

// custom emits env as CUSTOM agentgate.<type>, its data the value.
func (t *Translator) custom(env envelope) {
	t.emit(Custom, customEvent{head: t.head(Custom), Name: customPrefix + string(env.Type), Value: orNull(env.Data)})
}

func (t *Translator) delta(ops ...patchOp) {
	t.emit(StateDelta, deltaEvent{t.head(StateDelta), ops})
}

func (t *Translator) messageID() string {
	t.messages++
	return t.runID + "/m" + strconv.Itoa(t.messages)
}

// callID makes up the id of a tool call whose own id is empty or was
// used before. Other tool calls keep theirs, after "<run id>/tool/".
func (t *Translator) callID() string {
	t.calls++
	return t.runID + "/tool#" + strconv.Itoa(t.calls)
}

func (t *Translator) spanID() string {
	t.spans++
	return t.runID + "/r" + strconv.Itoa(t.spans)
}

func (t *Translator) head(typ EventType) head { return head{Type: typ, Timestamp: t.ts} }

func (t *Translator) emit(typ EventType, v any) {
	if b, ok := marshal(v); ok {
		t.out = append(t.out, Event{Type: typ, JSON: b})
	}
}

// marshal encodes an event. Every value comes from JSON the store holds,
// so it cannot fail; should it, the event is left out.
func marshal(v any) ([]byte, bool) {
	b, err := json.Marshal(v)
	return b, err == nil
}

// decode fills v from data as far as it decodes: a payload of another
// shape leaves fields at their zero values rather than losing the event.
func decode(data json.RawMessage, v any) {
	_ = json.Unmarshal(data, v)
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func nonNull(raw json.RawMessage) json.RawMessage {
	if s := bytes.TrimSpace(raw); len(s) == 0 || string(s) == "null" {
		return nil
	}
	return raw
}

// compact is raw JSON as one line of text.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return strings.TrimSpace(string(raw))
	}
	return b.String()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
