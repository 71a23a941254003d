package acpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
)

// The stop reasons of a prompt's answer.
const (
	stopEndTurn         = "end_turn"
	stopCancelled       = "cancelled"
	stopMaxTurnRequests = "max_turn_requests"
	stopRefusal         = "refusal"
)

// session is one ACP session: the interactive run of its first prompt,
// the one prompt that waits for its turn, and what the bridge keeps of
// the run's tool calls and approvals.
//
// Its run's events are read by one follower goroutine from the first
// prompt on; the follower maps each to a session/update, sends the
// permission requests, and answers the pending prompt when its turn ends.
type session struct {
	agent    *Agent
	id       string
	settings Settings
	mcp      map[string]MCPServer

	mu            sync.Mutex
	runID         string
	ended         bool
	endErr        *Error // why the run ended, for a prompt that comes later
	pending       *pendingPrompt
	tools         map[string]toolCall // started tool calls by id
	approvalTools map[string]string   // approval id → tool call id
	// asking withdraws the editor's permission request of an approval
	// that was resolved otherwise (its deadline, another client, the
	// turn's end).
	asking map[string]context.CancelFunc
}

// pendingPrompt is the prompt that waits for its turn's end.
type pendingPrompt struct {
	messageID string // the follow-up message's id; empty for the first prompt
	turn      int    // the turn's number, once its turn.started came
	cancelled bool   // session/cancel came while it waited
	done      chan promptOutcome
}

// promptOutcome answers a prompt: a stop reason or an error.
type promptOutcome struct {
	stopReason string
	err        *Error
}

// liveRun returns the run's id while the run goes on, else "".
func (s *session) liveRun() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return ""
	}
	return s.runID
}

// prompt runs one turn: the first creates the run with the prompt, a
// later one sends it as a message. It answers when the turn ends.
func (s *session) prompt(ctx context.Context, text string, attachments []Attachment) (any, error) {
	s.mu.Lock()
	if s.pending != nil {
		s.mu.Unlock()
		return nil, &Error{Code: CodeInvalidRequest, Message: "a prompt of this session is still running"}
	}
	if s.ended {
		err := s.endErr
		s.mu.Unlock()
		return nil, err
	}
	p := &pendingPrompt{done: make(chan promptOutcome, 1)}
	first := s.runID == ""
	if first {
		// Not under the lock: nothing reads this session's events yet.
		s.pending = p
		s.mu.Unlock()
		id, err := s.agent.gw.CreateRun(ctx, s.request(text, attachments))
		s.mu.Lock()
		if err != nil {
			s.pending = nil
			s.mu.Unlock()
			return nil, gatewayError("create the run", err)
		}
		s.runID = id
		cancelled := p.cancelled
		s.mu.Unlock()
		s.agent.wg.Add(1)
		go s.follow(id)
		if cancelled {
			s.cancel() // session/cancel came before the run had an id
		}
	} else {
		// Under the lock, so that the follower cannot take the message's
		// turn.started before the message's id is known.
		id, err := s.agent.gw.SendMessage(ctx, s.runID, Message{Text: text, Attachments: attachments})
		if err != nil {
			s.mu.Unlock()
			return nil, gatewayError("send the prompt", err)
		}
		p.messageID = id
		s.pending = p
		s.mu.Unlock()
	}
	select {
	case o := <-p.done:
		if o.err != nil {
			return nil, o.err
		}
		return map[string]any{"stopReason": o.stopReason, "_meta": map[string]any{"agentgate": map[string]any{"run_id": s.runIDNow()}}}, nil
	case <-ctx.Done():
		s.mu.Lock()
		if s.pending == p {
			s.pending = nil
		}
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (s *session) runIDNow() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runID
}

// request is the body of the run's creation.
func (s *session) request(text string, attachments []Attachment) RunRequest {
	approvals := s.settings.Approvals
	if approvals == "" {
		approvals = "ask" // an editor asks its user before the agent acts
	}
	return RunRequest{
		Agent: s.settings.Agent, Prompt: text, Model: s.settings.Model,
		Permission: s.settings.Permission, Approvals: approvals, Interactive: true,
		TimeoutSeconds: s.settings.TimeoutSeconds, Workspace: s.settings.Workspace,
		Metadata: s.settings.Metadata, Attachments: attachments, MCPServers: s.mcp,
	}
}

// cancel interrupts the running turn of the pending prompt.
func (s *session) cancel() {
	s.mu.Lock()
	p, runID := s.pending, s.runID
	if p != nil {
		p.cancelled = true
	}
	s.mu.Unlock()
	if p == nil || runID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(s.agent.ctx, closeTimeout)
	defer cancel()
	if err := s.agent.gw.Interrupt(ctx, runID); err != nil {
		// A turn that ended meanwhile answers no_turn_running: its
		// prompt is answered by its turn.completed.
		s.agent.log("acp: interrupt run %s: %v", runID, err)
	}
}

// follow reads the run's events until its end.
func (s *session) follow(runID string) {
	defer s.agent.wg.Done()
	err := s.agent.gw.Follow(s.agent.ctx, runID, s.event)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	s.endErr = &Error{Code: CodeGatewayError, Message: "the run's events could not be followed", Data: map[string]any{"code": "run_ended", "run_id": runID}}
	if err != nil {
		s.endErr = gatewayError("follow the run", err)
		s.agent.log("acp: follow run %s: %v", runID, err)
	}
	s.resolve(promptOutcome{err: s.endErr})
}

// event takes one of the run's events, in order.
func (s *session) event(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := updateOf(ev, s.tools); ok {
		s.agent.conn.Notify("session/update", map[string]any{"sessionId": s.id, "update": u})
		return
	}
	switch ev.Type {
	case evApprovalRequested:
		s.askPermission(ev.Data)
	case evApprovalResolved:
		s.approvalResolved(ev.Data)
	case evTurnStarted:
		var d struct {
			Turn      int    `json:"turn"`
			MessageID string `json:"message_id"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && s.pending != nil && s.pending.turn == 0 &&
			(d.MessageID == s.pending.messageID || (s.pending.messageID == "" && d.Turn == 1)) {
			s.pending.turn = d.Turn
		}
	case evTurnCompleted:
		var d turnOutcome
		if json.Unmarshal(ev.Data, &d) == nil && s.pending != nil && s.pending.turn == d.Turn {
			s.resolve(s.outcomeOf(d))
		}
	case evRunCompleted:
		var d turnOutcome
		_ = json.Unmarshal(ev.Data, &d)
		s.ended = true
		s.endErr = &Error{Code: CodeGatewayError, Message: "the session's run has ended (" + d.Status + ")", Data: map[string]any{"code": "run_ended", "run_id": s.runID}}
		if s.pending != nil {
			o := s.outcomeOf(d)
			if o.err == nil && !s.pending.cancelled && d.Status != "succeeded" {
				o = promptOutcome{err: s.endErr}
			}
			s.resolve(o)
		}
	}
}

// turnOutcome is what turn.completed and run.completed say of the end.
type turnOutcome struct {
	Turn   int    `json:"turn"`
	Status string `json:"status"`
	Error  *struct {
		Class     string `json:"class"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
		Hint      string `json:"hint"`
	} `json:"error"`
}

// outcomeOf is the answer of the pending prompt for its turn's end: a
// prompt the editor cancelled is cancelled whatever the turn became, as
// ACP asks.
func (s *session) outcomeOf(d turnOutcome) promptOutcome {
	if s.pending != nil && s.pending.cancelled {
		return promptOutcome{stopReason: stopCancelled}
	}
	switch d.Status {
	case "succeeded":
		return promptOutcome{stopReason: stopEndTurn}
	case "cancelled":
		return promptOutcome{stopReason: stopCancelled}
	}
	if d.Error == nil {
		return promptOutcome{err: &Error{Code: CodeGatewayError, Message: "the turn ended " + d.Status, Data: map[string]any{"code": d.Status}}}
	}
	switch d.Error.Class {
	case "max_turns":
		return promptOutcome{stopReason: stopMaxTurnRequests}
	case "refused":
		return promptOutcome{stopReason: stopRefusal}
	case "interrupted", "cancelled":
		return promptOutcome{stopReason: stopCancelled}
	}
	data := map[string]any{"code": d.Error.Class, "retryable": d.Error.Retryable}
	if d.Error.Hint != "" {
		data["hint"] = d.Error.Hint
	}
	return promptOutcome{err: &Error{Code: CodeGatewayError, Message: d.Error.Message, Data: data}}
}

// resolve answers the pending prompt; called under s.mu.
func (s *session) resolve(o promptOutcome) {
	if s.pending == nil {
		return
	}
	s.pending.done <- o
	s.pending = nil
}

// askPermission sends session/request_permission for an approval and
// posts the editor's answer, in a goroutine of its own: the run's other
// events go on meanwhile. Called under s.mu.
func (s *session) askPermission(data json.RawMessage) {
	var d struct {
		ID         string          `json:"id"`
		ToolCallID string          `json:"tool_call_id"`
		Tool       string          `json:"tool"`
		Input      json.RawMessage `json:"input"`
		Options    []string        `json:"options"`
	}
	if json.Unmarshal(data, &d) != nil || d.ID == "" {
		return
	}
	toolCallID := d.ToolCallID
	if toolCallID == "" {
		toolCallID = d.ID
	}
	s.approvalTools[d.ID] = toolCallID
	tc, ok := s.tools[toolCallID]
	if !ok {
		tc = toolCall{Title: toolTitle(d.Tool, d.Input), Kind: toolKind(d.Tool), RawInput: d.Input}
	}
	call := map[string]any{"toolCallId": toolCallID, "title": tc.Title, "kind": tc.Kind, "status": "pending"}
	if len(tc.RawInput) > 0 && json.Valid(tc.RawInput) {
		call["rawInput"] = tc.RawInput
	}
	params := map[string]any{"sessionId": s.id, "toolCall": call, "options": permissionOptions(d.Options)}
	runID, approvalID := s.runID, d.ID
	askCtx, withdraw := context.WithCancel(s.agent.ctx)
	s.asking[approvalID] = withdraw
	s.agent.wg.Add(1)
	go func() {
		defer s.agent.wg.Done()
		res, err := s.agent.conn.Call(askCtx, "session/request_permission", params)
		s.mu.Lock()
		delete(s.asking, approvalID)
		s.mu.Unlock()
		withdraw()
		if errors.Is(err, errConnClosed) || errors.Is(err, context.Canceled) {
			return // the editor is gone (its run is closed), or the approval was resolved otherwise
		}
		decision := "deny"
		if err != nil {
			s.agent.log("acp: the editor answered a permission request with an error: %v", err)
		} else {
			decision = decisionOf(res)
		}
		ctx, cancel := context.WithTimeout(s.agent.ctx, closeTimeout)
		defer cancel()
		if err := s.agent.gw.Decide(ctx, runID, approvalID, decision); err != nil {
			// approval_resolved: it timed out or was withdrawn meanwhile.
			s.agent.log("acp: answer approval %s of run %s: %v", approvalID, runID, err)
		}
	}()
}

// approvalResolved tells the editor that an allowed tool call runs now,
// and that a refused one will not. Called under s.mu.
func (s *session) approvalResolved(data json.RawMessage) {
	var d struct {
		ID       string `json:"id"`
		Decision string `json:"decision"`
	}
	if json.Unmarshal(data, &d) != nil {
		return
	}
	if withdraw, ok := s.asking[d.ID]; ok {
		withdraw()
		delete(s.asking, d.ID)
	}
	toolCallID, ok := s.approvalTools[d.ID]
	if !ok {
		return
	}
	delete(s.approvalTools, d.ID)
	status := "failed"
	if d.Decision == "allow" || d.Decision == "allow_session" {
		status = "in_progress"
	}
	s.agent.conn.Notify("session/update", map[string]any{"sessionId": s.id,
		"update": update{"sessionUpdate": "tool_call_update", "toolCallId": toolCallID, "status": status}})
}
