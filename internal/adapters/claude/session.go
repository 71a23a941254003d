package claude

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/internal/runs"
)

// session is the decoder of a run whose Spec wants a Session: the CLI
// reads stream-json user lines and control messages on stdin and stays up
// between turns (see doc.go, "Sessions"). It reuses decoder for every
// output line the one-shot mode also prints, and adds the control
// protocol, turns and their accounting.
//
// Every method takes mu: the supervisor serializes all calls but
// Interrupt, which may come from another goroutine.
type session struct {
	mu sync.Mutex
	d  *decoder

	out  []byte // what Pending hands out next
	done bool   // stdin is to be closed

	inTurn   bool
	closing  bool // Close was called: done once no turn runs
	stopping bool // Interrupt was called: done at the next line
	// interrupted is set by InterruptTurn (or a deny_and_stop) for the
	// running turn.
	interrupted bool
	ctlSeq      int

	// unreplayed counts the user lines written and not yet echoed back
	// (--replay-user-messages echoes each when the CLI takes it up).
	// A result while one is left means the CLI queued a steered line as
	// a turn of its own, which the decoder folds into the running one.
	unreplayed int
	replays    bool // the CLI echoed a user line at least once

	approvals map[string]*approval
	approvalN int
	// answered holds the request ids answered, whose echo is ignored.
	answered map[string]bool

	// The running turn's figures, summed over the CLI's results that
	// make it up (more than one when a steered line was queued).
	turnUsage runs.Usage
	turnCost  *float64
	turnCostN bool // a result of the turn had no cost

	// The run's figures, over every turn.
	turns    int
	usage    runs.Usage
	cost     *float64
	costGone bool // some turn's cost is unknown
	// prevModelUsage is the last result's cumulative modelUsage, for a
	// result that reports no per-turn figures.
	prevModelUsage runs.Usage
	prevTotalCost  *float64
}

// approval is a can_use_tool request waiting for its answer.
type approval struct {
	requestID   string
	input       json.RawMessage
	suggestions []json.RawMessage
}

func newSession(inv runs.Invocation) *session {
	return &session{d: newDecoder(inv), approvals: map[string]*approval{}, answered: map[string]bool{}}
}

// userLine is a stream-json user message carrying text and, after it,
// images as base64 image blocks, which the CLI passes to the model
// (verified: the model got the same block for a small image, a large one
// re-encoded, and the CLI added a text block naming a copy it wrote under
// $TMPDIR/claude-<uid>/). The type is checked again here because a bad
// one would reach the model API, which refuses the whole request.
func userLine(text string, images []runs.Image) ([]byte, error) {
	var content any = text
	if len(images) > 0 {
		blocks := make([]any, 0, 1+len(images))
		blocks = append(blocks, map[string]any{"type": "text", "text": text})
		for i, img := range images {
			if !slices.Contains(imageTypes, img.MediaType) {
				return nil, runs.Invalid(runs.FieldAttachments, fmt.Sprintf(
					"attachment %d is %q; claude takes %s", i+1, img.MediaType, strings.Join(imageTypes, ", ")))
			}
			if len(img.Data) == 0 {
				return nil, runs.Invalid(runs.FieldAttachments, fmt.Sprintf("attachment %d is empty", i+1))
			}
			blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{
				"type": "base64", "media_type": img.MediaType, "data": base64.StdEncoding.EncodeToString(img.Data),
			}})
		}
		content = blocks
	}
	b, err := json.Marshal(map[string]any{
		"type":               "user",
		"message":            map[string]any{"role": "user", "content": content},
		"parent_tool_use_id": nil,
		"session_id":         "",
	})
	if err != nil {
		return nil, fmt.Errorf("claude: encode a user line: %w", err)
	}
	return append(b, '\n'), nil
}

// imageTypes are the media types of the images a user line may carry:
// those the Messages API takes.
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// controlResponse answers the CLI's control request id.
func controlResponse(id string, response any) []byte {
	b, _ := json.Marshal(map[string]any{
		"type":     "control_response",
		"response": map[string]any{"subtype": "success", "request_id": id, "response": response},
	})
	return append(b, '\n')
}

// interruptLine asks the CLI to stop the running turn.
func (s *session) interruptLine() []byte {
	s.ctlSeq++
	b, _ := json.Marshal(map[string]any{
		"type":       "control_request",
		"request_id": fmt.Sprintf("agentgate_interrupt_%d", s.ctlSeq),
		"request":    map[string]any{"subtype": "interrupt"},
	})
	return append(b, '\n')
}

func (s *session) send(b []byte) { s.out = append(s.out, b...) }

// Open implements runs.Conversation: the prompt is turn 1's user line.
func (s *session) Open() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inTurn = true
	s.unreplayed++
	// Command built the same line from the same invocation, and refused
	// it if it could not.
	b, _ := userLine(s.d.inv.Spec.Prompt, s.d.inv.Images)
	return b
}

// Pending implements runs.Conversation.
func (s *session) Pending() ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.out
	s.out = nil
	return out, s.done
}

// Interrupt implements runs.Conversation: the run must stop. The control
// interrupt ends a running turn (its tool is killed) and is answered even
// when no turn runs; at the next line stdin is closed and the CLI exits.
func (s *session) Interrupt() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.done {
		return nil
	}
	s.stopping = true
	return s.interruptLine()
}

// Answer implements runs.Session.
func (s *session) Answer(id string, dec runs.Decision, message string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok {
		return fmt.Errorf("approval %s: %w", id, runs.ErrNotFound)
	}
	input := a.input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	var resp map[string]any
	switch dec {
	case runs.Allow:
		resp = map[string]any{"behavior": "allow", "updatedInput": input}
	case runs.AllowSession:
		resp = map[string]any{"behavior": "allow", "updatedInput": input, "updatedPermissions": sessionRules(a.suggestions)}
	case runs.Deny, runs.DenyAndStop:
		if message == "" {
			message = "The user denied this tool call."
		}
		resp = map[string]any{"behavior": "deny", "message": message}
		if dec == runs.DenyAndStop {
			// The CLI ends the turn (result error_during_execution,
			// terminal_reason aborted_tools).
			resp["interrupt"] = true
			s.interrupted = true
		}
	default:
		return runs.Invalid("decision", fmt.Sprintf("unknown decision %q", dec))
	}
	delete(s.approvals, id)
	s.answered[a.requestID] = true
	s.send(controlResponse(a.requestID, resp))
	return nil
}

// sessionRules keeps the addRules suggestions of a can_use_tool request
// and moves them to destination "session": the CLI's suggestion is
// usually "localSettings", which writes <cwd>/.claude/settings.local.json
// and outlives the run. Other suggestions (setMode acceptEdits,
// addDirectories) would allow more than the identical call, so they are
// dropped.
func sessionRules(suggestions []json.RawMessage) []json.RawMessage {
	out := []json.RawMessage{}
	for _, raw := range suggestions {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		var typ string
		_ = json.Unmarshal(m["type"], &typ)
		if typ != "addRules" {
			continue
		}
		m["destination"] = json.RawMessage(`"session"`)
		if b, err := json.Marshal(m); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// Send implements runs.Session.
func (s *session) Send(text string, images []runs.Image, steer bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.done || s.closing || s.stopping:
		return runs.Conflict(runs.ConflictClosing, "the session is closing")
	case s.inTurn && !steer:
		// The CLI would queue the line as a turn of its own, which
		// resultLine would fold into the running one: the supervisor
		// queues such a message itself.
		return errors.New("claude: a message without steer while a turn runs")
	}
	// Steered, the line is folded into the running turn after its next
	// tool result, or queued by the CLI as a turn of its own, which
	// resultLine folds into this one. Idle, it starts the next turn.
	line, err := userLine(text, images)
	if err != nil {
		return err
	}
	if !s.inTurn {
		s.inTurn, s.interrupted = true, false
		s.turnUsage, s.turnCost, s.turnCostN = runs.Usage{}, nil, false
		s.d.schemaError = "" // an earlier turn's
	}
	s.unreplayed++
	s.send(line)
	return nil
}

// InterruptTurn implements runs.Session.
func (s *session) InterruptTurn() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inTurn {
		return runs.Conflict(runs.ConflictNoTurn, "no turn is running")
	}
	s.interrupted = true
	s.send(s.interruptLine())
	return nil
}

// Close implements runs.Session.
func (s *session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	if !s.inTurn {
		s.done = true
	}
}

// Decode implements runs.Decoder.
func (s *session) Decode(line []byte) []runs.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	var l wireLine
	if err := json.Unmarshal(trimmed, &l); err != nil {
		return []runs.Event{runs.Unparsed(trimmed, "invalid JSON: "+err.Error())}
	}
	switch l.Type {
	case "control_request":
		return s.controlRequest(&l, trimmed)
	case "control_cancel_request":
		return s.cancelRequest(&l)
	case "control_response":
		return s.controlResponseLine(&l, trimmed)
	case "user":
		if l.IsReplay {
			s.replays = true
			if s.unreplayed > 0 {
				s.unreplayed--
			}
			return nil
		}
	case "result":
		evs := s.d.Decode(line)
		return s.endOfResult(&l, evs)
	case "stream_event":
		return s.runFigures(s.d.Decode(line))
	}
	return s.d.Decode(line)
}

// runFigures makes the usage.updated the decoder emits for a stream,
// which counts what was streamed since the last result, the run's: the
// turns ended so far and the stream, with the cost of those turns (the
// CLI tells a turn's cost only at its result).
func (s *session) runFigures(evs []runs.Event) []runs.Event {
	for i := range evs {
		if evs[i].Type != runs.EventUsageUpdated {
			continue
		}
		var c *float64
		if !s.costGone {
			c = s.cost
		}
		evs[i].Data = runs.UsageData{Usage: s.usage.Add(s.d.streamedUsage()), CostUSD: c}
	}
	return evs
}

func (s *session) controlRequest(l *wireLine, line []byte) []runs.Event {
	if l.Request == nil || l.RequestID == "" {
		return []runs.Event{runs.Unparsed(line, "control_request without request or request_id")}
	}
	if l.Request.Subtype != "can_use_tool" {
		// Hooks, MCP messages: nothing the adapter registered for.
		b, _ := json.Marshal(map[string]any{"type": "control_response", "response": map[string]any{
			"subtype": "error", "request_id": l.RequestID, "error": "not supported by this client: " + l.Request.Subtype}})
		s.send(append(b, '\n'))
		return []runs.Event{runs.Unparsed(line, fmt.Sprintf("control request %q answered as unsupported", l.Request.Subtype))}
	}
	r := l.Request
	if !s.d.inv.Spec.Asks() {
		// Without approvals the CLI gets no --permission-prompt-tool
		// and should not ask; should it ask anyway, nobody will answer.
		s.answered[l.RequestID] = true
		s.send(controlResponse(l.RequestID, map[string]any{"behavior": "deny", "message": "approvals are off for this run"}))
		return []runs.Event{runs.Warning("permission_denied", r.ToolName+" was refused: approvals are off for this run")}
	}
	s.approvalN++
	id := fmt.Sprintf("approval_%d", s.approvalN)
	input := r.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	s.approvals[id] = &approval{requestID: l.RequestID, input: input, suggestions: r.PermissionSuggestions}
	// The CLI names an MCP tool's server in the request too; the tool's
	// name is what ties it to the run's own servers.
	server, _, _ := mcpTool(r.ToolName, s.d.inv.Spec.MCPServers)
	return []runs.Event{runs.NewEvent(runs.EventApprovalRequested, runs.ApprovalRequestedData{
		ID: id, ToolCallID: r.ToolUseID, Tool: r.ToolName, Input: input, MCPServer: server,
		Options: append([]runs.Decision(nil), runs.Decisions...),
	})}
}

// withdraw drops the pending approval of the CLI's request id, if any.
func (s *session) withdraw(requestID string) []runs.Event {
	for id, a := range s.approvals {
		if a.requestID == requestID {
			delete(s.approvals, id)
			return []runs.Event{runs.NewEvent(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: id, Reason: runs.ResolvedWithdrawn})}
		}
	}
	return nil
}

func (s *session) cancelRequest(l *wireLine) []runs.Event {
	return s.withdraw(l.RequestID)
}

// controlResponseLine reads the CLI's answer to a control request: to an
// interrupt, or the echo of an approval answered (with
// --replay-user-messages the CLI repeats it).
func (s *session) controlResponseLine(l *wireLine, line []byte) []runs.Event {
	if l.Response == nil {
		return []runs.Event{runs.Unparsed(line, "control_response without response")}
	}
	if s.stopping {
		// The answer to the run's interrupt, or the last echo before
		// it: stdin may close now. The interrupted turn still ends
		// with its result, and the CLI exits at EOF.
		s.done = true
	}
	if s.answered[l.Response.RequestID] {
		delete(s.answered, l.Response.RequestID)
		return nil
	}
	if l.Response.Subtype == "error" {
		return []runs.Event{runs.Warning("control_error", "claude refused a control request: "+l.Response.Error)}
	}
	return nil
}

// endOfResult accounts for a result line: it ends the running turn,
// unless a steered line is still unread by the CLI, which then runs it
// as a turn of its own that the client sees as part of this one.
func (s *session) endOfResult(l *wireLine, evs []runs.Event) []runs.Event {
	u, cost := s.resultFigures(l)
	s.turnUsage = s.turnUsage.Add(u)
	if cost == nil {
		s.turnCostN = true
	} else {
		s.turnCost = addCost(s.turnCost, *cost)
	}
	s.usage = s.usage.Add(u)
	if cost == nil {
		s.costGone = true
	} else {
		s.cost = addCost(s.cost, *cost)
	}
	// usage.updated carries the run's figures so far, not the turn's.
	for i := range evs {
		if evs[i].Type == runs.EventUsageUpdated {
			var c *float64
			if !s.costGone {
				c = s.cost
			}
			evs[i].Data = runs.UsageData{Usage: s.usage, CostUSD: c}
		}
	}
	if s.replays && s.unreplayed > 0 && !s.stopping {
		return evs
	}
	for id := range s.approvals {
		// The turn is over; nothing can answer its requests now.
		evs = append(evs, runs.NewEvent(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: id, Reason: runs.ResolvedWithdrawn}))
		delete(s.approvals, id)
	}
	s.turns++
	td := runs.TurnCompletedData{Result: l.Result, Usage: s.turnUsage}
	if !s.turnCostN {
		td.CostUSD = s.turnCost
	}
	if l.StopReason != nil && *l.StopReason != "" {
		td.StopReason = *l.StopReason
	} else {
		td.StopReason = l.TerminalReason
	}
	switch e := s.d.classifyResult(l, ""); {
	case e == nil:
		td.Status = runs.Succeeded
	case e.Class == runs.Interrupted:
		td.Status = runs.Cancelled
	default:
		td.Status, td.Error = runs.Failed, e
	}
	evs = append(evs, runs.NewEvent(runs.EventTurnCompleted, td))
	s.inTurn, s.interrupted = false, false
	s.turnUsage, s.turnCost, s.turnCostN = runs.Usage{}, nil, false
	if s.closing || s.stopping {
		s.done = true
	}
	return evs
}

// resultFigures returns a result's own usage and cost: result.usage and
// model_usage_since_last_result are the turn's, while modelUsage and
// total_cost_usd add up over the process (and, resumed, the session).
func (s *session) resultFigures(l *wireLine) (runs.Usage, *float64) {
	cum := sumModelUsage(l.ModelUsage)
	prevCum, prevTotal := s.prevModelUsage, s.prevTotalCost
	s.prevModelUsage, s.prevTotalCost = cum, l.TotalCostUSD

	u := resultUsage(l)
	if u.IsZero() {
		u = sumModelUsage(l.ModelUsageSinceLastResult)
	}
	if u.IsZero() {
		u = cum.Sub(prevCum)
	}
	if len(l.ModelUsageSinceLastResult) > 0 {
		var c float64
		for _, m := range l.ModelUsageSinceLastResult {
			c += m.CostUSD
		}
		return u, &c
	}
	if l.TotalCostUSD == nil {
		return u, nil
	}
	switch {
	case prevTotal != nil:
		c := max(*l.TotalCostUSD-*prevTotal, 0)
		return u, &c
	case s.d.inv.Spec.ResumeSessionID == "":
		// The first result of a new session: its total is its own.
		c := *l.TotalCostUSD
		return u, &c
	}
	return u, nil
}

func addCost(sum *float64, c float64) *float64 {
	v := c
	if sum != nil {
		v += *sum
	}
	return &v
}

// Finish implements runs.Decoder: the run's outcome is the last turn's,
// with the usage of every turn.
func (s *session) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.d.Finish(exit, stderrTail)
	if s.inTurn {
		// The CLI ended in the middle of a turn: the turn still ends,
		// with what its streams billed, and so does the run.
		if s.d.result != nil {
			// out is the earlier turn's; this one has no result.
			out.Status, out.Error = runs.Failed, s.d.classifyNoResult(exit, string(stderrTail))
		}
		s.turns++
		td := runs.TurnCompletedData{Status: runs.Failed, Usage: s.turnUsage.Add(s.d.streamedUsage()), Error: out.Error}
		if out.Error != nil && out.Error.Class == runs.Interrupted {
			td.Status, td.Error = runs.Cancelled, nil
		}
		out.Events = append(out.Events, runs.NewEvent(runs.EventTurnCompleted, td))
		s.inTurn = false
	}
	if s.d.result == nil {
		out.NumTurns = s.turns
		return out
	}
	out.Usage = s.usage.Add(s.d.streamedUsage())
	out.NumTurns = s.turns
	// out.SessionCostUSD stays the last total_cost_usd: the session's
	// cost so far, of which the supervisor makes the run's own.
	return out
}
