package codex

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentgate/agentgate/internal/runs"
)

// session is the decoder of a run whose Spec asks for a Session: an
// interactive run, or one whose tool calls wait for approvals. It is the
// same decoder, whose conversation goes on after each turn, plus the
// methods the supervisor drives it with. Runs without a Session get the
// plain decoder, which does not implement runs.Session.
type session struct{ *decoder }

var _ runs.Session = session{}

// approvalPolicy is the thread's approval policy. A run that asks gets
// "untrusted": codex 0.171.0 then asks before every command, `ls` and
// `cat` included (the decoder accepts those itself, see readOnly), and
// before every patch. "on-request" asks only when the model itself wants
// to leave the sandbox, so a write inside the workspace would run
// unasked.
func (d *decoder) approvalPolicy() string {
	if d.asks {
		return "untrusted"
	}
	return "never"
}

// approval is a server request the client has to answer.
type approval struct {
	id      string
	request json.RawMessage // the server's id of the request, to answer with
	kind    string          // the request's method
}

// The approval requests the decoder maps.
const (
	methodCommandApproval = "item/commandExecution/requestApproval"
	methodFileApproval    = "item/fileChange/requestApproval"
	methodElicitation     = "mcpServer/elicitation/request"
)

// approvalRequest reports a request of the server to run a tool as
// approval.requested. ok is false for a request that is not an approval
// the client can give, which is then declined as in a headless run.
func (d *decoder) approvalRequest(m message) (evs []runs.Event, ok bool) {
	switch m.Method {
	case methodCommandApproval:
		var p commandApprovalParams
		if json.Unmarshal(m.Params, &p) != nil {
			return nil, false
		}
		if readOnly(p.Actions) {
			d.send(reply{ID: m.ID, Result: map[string]string{"decision": "accept"}})
			return nil, true
		}
		input := map[string]any{"command": p.Command, "cwd": p.Cwd}
		if p.Reason != "" {
			input["reason"] = p.Reason
		}
		return d.ask(m, p.ThreadID, p.ItemID, "shell", rawJSON(input)), true
	case methodFileApproval:
		var p fileChangeApprovalParams
		if json.Unmarshal(m.Params, &p) != nil {
			return nil, false
		}
		type change struct {
			Path     string `json:"path"`
			Kind     string `json:"kind"`
			MovePath string `json:"move_path,omitempty"`
			Diff     string `json:"diff"`
		}
		changes := []change{}
		for _, c := range d.changes[p.ItemID] {
			changes = append(changes, change{Path: d.relative(c.Path), Kind: changeKind(c.Kind.Type),
				MovePath: d.relative(c.Kind.MovePath), Diff: c.Diff})
		}
		input := map[string]any{"changes": changes}
		if p.Reason != "" {
			input["reason"] = p.Reason
		}
		if p.GrantRoot != "" {
			input["grant_root"] = p.GrantRoot
		}
		return d.ask(m, p.ThreadID, p.ItemID, "apply_patch", rawJSON(input)), true
	case methodElicitation:
		var p elicitationParams
		if json.Unmarshal(m.Params, &p) != nil || p.Meta.Kind != "mcp_tool_call" {
			return nil, false // a form the MCP server itself wants filled in
		}
		evs := d.ask(m, p.ThreadID, p.Meta.CallID, mcpToolName(p.ServerName, p.Meta.ToolName), rawJSON(p.Meta.ToolParams))
		for i := range evs {
			if data, ok := evs[i].Data.(runs.ApprovalRequestedData); ok {
				data.MCPServer = p.ServerName
				evs[i].Data = data
			}
		}
		return evs, true
	}
	return nil, false
}

// readOnlyActions are the kinds of commandActions that only read: Codex
// parses each command it asks for into actions, and a command it cannot
// read as one of these (a redirection, a pipe into a writer, anything
// else) is "unknown".
var readOnlyActions = map[string]bool{"read": true, "listFiles": true, "search": true}

// readOnly reports whether every action of a command only reads. Such a
// command is accepted without asking the client: codex 0.171.0's
// untrusted policy asks even for `ls` and `cat` (commandActions listFiles
// and read), which ApprovalsAsk promises to run unasked. The sandbox of
// the run's permission still applies to it.
func readOnly(raw json.RawMessage) bool {
	var actions []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &actions) != nil || len(actions) == 0 {
		return false
	}
	for _, a := range actions {
		if !readOnlyActions[a.Type] {
			return false
		}
	}
	return true
}

// ask records a pending approval and reports it.
func (d *decoder) ask(m message, thread, callID, tool string, input json.RawMessage) []runs.Event {
	d.approvalSeq++
	a := &approval{id: fmt.Sprintf("approval_%d", d.approvalSeq), request: append(json.RawMessage(nil), m.ID...), kind: m.Method}
	d.approvals[a.id] = a
	return d.scope(thread, []runs.Event{runs.NewEvent(runs.EventApprovalRequested, runs.ApprovalRequestedData{
		ID: a.id, ToolCallID: callID, Tool: tool, Input: input, Options: slices.Clone(runs.Decisions),
	})})
}

// requestResolved withdraws an approval the server no longer waits for:
// it sends serverRequest/resolved after an answer, and for a request
// still pending when the turn was interrupted.
func (d *decoder) requestResolved(m message) []runs.Event {
	var p resolvedParams
	if json.Unmarshal(m.Params, &p) != nil {
		return nil
	}
	for id, a := range d.approvals {
		if string(a.request) == string(p.RequestID) {
			return d.withdraw(id)
		}
	}
	return nil
}

// withdraw reports the pending approvals ids (all of them when none is
// named) as withdrawn by the CLI.
func (d *decoder) withdraw(ids ...string) []runs.Event {
	if len(ids) == 0 {
		for id := range d.approvals {
			ids = append(ids, id)
		}
		slices.Sort(ids)
	}
	var evs []runs.Event
	for _, id := range ids {
		if _, ok := d.approvals[id]; !ok {
			continue
		}
		delete(d.approvals, id)
		evs = append(evs, runs.NewEvent(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: id, Reason: runs.ResolvedWithdrawn}))
	}
	return d.scope("", evs)
}

// Answer implements runs.Session. Codex takes no message with a
// decision: the model learns of a decline only that the user refused.
// deny_and_stop is Codex's cancel, which ends the turn as interrupted;
// for an MCP tool, whose elicitation has no such answer, it is a decline
// and a turn/interrupt.
func (s session) Answer(id string, dec runs.Decision, _ string) error {
	d := s.decoder
	a, ok := d.approvals[id]
	if !ok {
		return fmt.Errorf("approval %q: %w", id, runs.ErrNotFound)
	}
	if !dec.Valid() {
		return runs.Invalid("decision", fmt.Sprintf("unknown decision %q", dec))
	}
	delete(d.approvals, id)
	if a.kind == methodElicitation {
		var result map[string]any
		switch dec {
		case runs.Allow:
			result = map[string]any{"action": "accept", "content": nil}
		case runs.AllowSession:
			// The request offers _meta.persist ["session","always"];
			// "always" would be kept in the Codex home, beyond the run.
			result = map[string]any{"action": "accept", "content": nil, "_meta": map[string]any{"persist": "session"}}
		default:
			result = map[string]any{"action": "decline", "content": nil}
		}
		d.send(reply{ID: a.request, Result: result})
		if dec == runs.DenyAndStop {
			_ = s.InterruptTurn()
		}
		return nil
	}
	decision := map[runs.Decision]string{
		runs.Allow: "accept", runs.AllowSession: "acceptForSession", runs.Deny: "decline", runs.DenyAndStop: "cancel",
	}[dec]
	d.send(reply{ID: a.request, Result: map[string]string{"decision": decision}})
	return nil
}

// Send implements runs.Session: turn/start on the thread while idle,
// turn/steer of the running turn with steer.
func (s session) Send(text string, images []runs.Image, steer bool) error {
	d := s.decoder
	if d.done || d.closing {
		return runs.Conflict(runs.ConflictClosing, "the session is closing")
	}
	d.mu.Lock()
	active, turn, thread, stopping := d.turnActive, d.rootTurn, d.rootThread, d.stopping
	d.mu.Unlock()
	switch {
	case stopping:
		return runs.Conflict(runs.ConflictRunEnded, "the run is stopping")
	case thread == "" || active:
		if !steer {
			return fmt.Errorf("a turn is running: %w", runs.ErrConflict)
		}
		in := userInput(text, images)
		if turn == "" {
			d.steers = append(d.steers, in) // sent with the turn's id
			return nil
		}
		d.call(methodTurnSteer, turnSteerParams{ThreadID: thread, ExpectedTurnID: turn, Input: in})
		return nil
	}
	d.startTurn(userInput(text, images), nil)
	return nil
}

// InterruptTurn implements runs.Session: turn/interrupt of the running
// turn, which then completes as interrupted. Codex leaves the command
// the turn ran alive (Interaction.KillToolsOnInterrupt).
func (s session) InterruptTurn() error {
	d := s.decoder
	d.mu.Lock()
	active, turn, thread, sent := d.turnActive, d.rootTurn, d.rootThread, d.interrupt
	if active && turn != "" && !sent {
		d.interrupt = true
	}
	if active && turn == "" {
		d.interruptAsk = true // sent with the turn's id
	}
	d.mu.Unlock()
	switch {
	case !active:
		return runs.Conflict(runs.ConflictNoTurn, "no turn is running")
	case turn == "" || sent:
		return nil
	}
	d.call(methodTurnInterrupt, turnInterruptParams{ThreadID: thread, TurnID: turn})
	return nil
}

// Close implements runs.Session: the conversation ends now, or once the
// running turn has completed.
func (s session) Close() {
	d := s.decoder
	d.closing = true
	d.mu.Lock()
	active := d.turnActive
	d.mu.Unlock()
	if !active {
		d.done = true
	}
}

// endTurn reports the end of the root thread's turn in a session:
// approvals still pending are withdrawn (Codex sends
// serverRequest/resolved for them only after turn/completed), tool calls
// still open are closed (an interrupted command never completes), then
// turn.completed with the turn's own usage. The conversation ends here
// after Close or Interrupt.
func (d *decoder) endTurn() []runs.Event {
	evs := d.withdraw()
	evs = append(evs, d.closeOpen("the turn ended before the tool call completed")...)
	d.turns++
	data := runs.TurnCompletedData{StopReason: d.turnStatus, Result: d.result, Usage: d.turnUsage}
	switch d.turnStatus {
	case "completed":
		data.Status = runs.Succeeded
	case "interrupted":
		data.Status = runs.Cancelled
	case "failed":
		e := d.turnErr
		if e == nil && d.lastErr != nil {
			e = &d.lastErr.Error
		}
		if e == nil {
			e = &turnError{Message: "the turn failed without an error"}
		}
		data.Status, data.Error = runs.Failed, classify(*e).runError(*e)
	default:
		data.Status = runs.Failed
		data.Error = runs.NewRunError(runs.AgentCrashed, fmt.Sprintf("the turn ended with status %q", d.turnStatus), "")
	}
	d.lastErr, d.last = nil, data
	evs = append(evs, d.scope("", []runs.Event{runs.NewEvent(runs.EventTurnCompleted, data)})...)
	d.mu.Lock()
	stop := d.stopping
	d.mu.Unlock()
	if d.closing || stop {
		d.done = true
	}
	return evs
}

// turnRefused fails a later turn the server would not start.
func (d *decoder) turnRefused(e rpcError) []runs.Event {
	d.mu.Lock()
	d.turnActive = false
	d.mu.Unlock()
	d.turns++
	d.turnStatus = "failed"
	f := rpcFailure{method: methodTurnStart, err: e}
	d.last = runs.TurnCompletedData{Status: runs.Failed, StopReason: "failed", Error: d.requestError(&f)}
	evs := d.scope("", []runs.Event{runs.NewEvent(runs.EventTurnCompleted, d.last)})
	if d.closing || d.isStopping() {
		d.done = true
	}
	return evs
}

// interruptAnswered ends the conversation of a run being stopped whose
// turn is already over: in an idle session the turn/interrupt that
// Interrupt sent is answered with an error, and there is nothing else to
// wait for.
func (d *decoder) interruptAnswered() {
	d.mu.Lock()
	end := d.interactive && d.stopping && !d.turnActive
	d.mu.Unlock()
	if end {
		d.done = true
	}
}

func (d *decoder) isStopping() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopping
}

// closeOpen closes every tool call still open as failed.
func (d *decoder) closeOpen(why string) []runs.Event {
	var evs []runs.Event
	for _, id := range d.openOrder {
		if _, ok := d.open[id]; ok {
			delete(d.open, id)
			evs = append(evs, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: id, Output: why, IsError: true}))
		}
	}
	d.openOrder = nil
	return d.scope("", evs)
}
