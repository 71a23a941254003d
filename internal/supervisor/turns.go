package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// session is the turn state of a run whose adapter gave it a Session: its
// turns, the messages waiting for one, the approvals waiting for an
// answer, and their deadlines. It is the one place where input from
// outside reaches the decoder.
//
// Its mutex serializes every call into the decoder: the output reader's
// Decode and everything that comes from outside (Input, the deadlines'
// timers). Whatever a call leaves in Pending is written to stdin before
// the mutex is released, so stdin sees the decoder's messages in the order
// the decoder made them.
//
// A run's activity, while it runs:
//
//	       start (turn 1 = prompt)
//	            │
//	            ▼
//	┌────────► in_turn ◄──────────── answer ─────┐
//	│           │   │                            │
//	│           │   └── approval.requested ──► awaiting_approval
//	│  message  │                                │
//	│           ▼ turn.completed                 │ deadline: deny
//	└──────── idle ◄─────────────────────────────┘
//	            │ close, idle timeout, or not interactive
//	            ▼
//	        stopping ──► process exits ──► run.completed
//
// An idle interactive run of an agent that can hibernate falls asleep
// after hibernateTTL (or when the gateway shuts down): its stdin is
// closed as for a close, and once the CLI has exited the run hibernates
// in place of ending (hibernate.go).
type session struct {
	s           *Supervisor
	t           *task
	dec         runs.Session
	caps        runs.Interaction
	interactive bool
	approvalTTL time.Duration
	idleTTL     time.Duration
	// hibernateTTL is how long the session waits idle before it falls
	// asleep (0: never); canSleep says its run can hibernate at all.
	hibernateTTL time.Duration
	canSleep     bool
	log          *zap.Logger

	mu       sync.Mutex
	talk     *stdinWriter     // nil until the process has started
	agentPID int              // the process runProcess started (the reaper, when there is one)
	cgroup   *proctree.Cgroup // the run's, where its processes are looked for; nil: all of /proc
	reaped   bool             // a reaper runs the agent as its first child
	ended    bool             // the process is gone; no more input
	done     bool             // stdin was closed
	inTurn   bool
	turn     int  // number of the running or last turn
	closing  bool // close once no turn runs
	draining bool // the gateway shuts down: stop once no turn runs
	stopped  bool // the running turn was interrupted
	queue    []queuedMessage
	pending  map[string]*pendingApproval
	resolved map[string]runs.ResolvedApproval
	idle     *time.Timer
	// idleSince is when the session last became idle; sleepTimer fires
	// hibernateTTL after it; hibernating says the CLI was told to exit
	// for the run to hibernate, for sleepReason.
	idleSince   time.Time
	sleepTimer  *time.Timer
	hibernating bool
	sleepReason string
	// turnsUsage and turnsCost add up the turns ended so far.
	turnsUsage runs.Usage
	turnsCost  *float64
}

// queuedMessage is a message waiting for its turn, with its images as
// written to the run's directory.
type queuedMessage struct {
	id, text string
	images   []runs.Image
	atts     []runs.Attachment
}

type pendingApproval struct {
	a     runs.Approval
	timer *time.Timer
}

// maxResolvedKept bounds the resolved approvals a session remembers, to
// answer a late decision with 409 rather than 404.
const maxResolvedKept = 1024

func newSession(s *Supervisor, t *task, dec runs.Session, log *zap.Logger) *session {
	spec := t.inv.Spec
	ss := &session{
		s: s, t: t, dec: dec, caps: t.agent.Adapter.Describe().Interaction,
		interactive: spec.Interactive, log: log,
		approvalTTL: runs.DefaultApprovalTimeout, idleTTL: s.idleTimeout(spec),
		hibernateTTL: s.hibernateAfter(t), canSleep: spec.Interactive && s.canHibernate(t.agent),
		pending: map[string]*pendingApproval{}, resolved: map[string]runs.ResolvedApproval{},
	}
	if spec.ApprovalTimeoutSeconds > 0 {
		ss.approvalTTL = time.Duration(spec.ApprovalTimeoutSeconds) * time.Second
	}
	s.mu.Lock()
	ss.draining = s.closing
	s.mu.Unlock()
	if t.woken {
		// The run goes on from the turns another replica ran.
		t.mu.Lock()
		if n := len(t.run.Turns); n > 0 {
			ss.turn = t.run.Turns[n-1].Turn
		}
		ss.turnsUsage, ss.turnsCost = t.run.Usage, t.run.CostUSD
		t.mu.Unlock()
	}
	return ss
}

// drain is called when the gateway shuts down: a session with no turn
// running, or whose turn waits for an approval, is stopped at once (its
// run ends interrupted); one in a turn is stopped when the turn ends.
func (ss *session) drain() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.draining = true
	switch {
	case ss.hibernating:
	case ss.canSleep && !ss.inTurn && len(ss.pending) == 0 && !ss.closing && !ss.ended && ss.resumable():
		// Nobody waits for it: it sleeps, and wakes on any replica.
		ss.fallAsleepLocked(runs.HibernatedShutdown)
	case !ss.inTurn || len(ss.pending) > 0:
		ss.stopForShutdownLocked()
	}
}

// stopForShutdownLocked stops the run as the shutdown does. The stop runs
// apart: it reaches the session again, through the run's Interrupt.
func (ss *session) stopForShutdownLocked() {
	go ss.s.stopTask(ss.t, errShutdown)
}

// begin records turn 1, whose text is the prompt the decoder's Open sends.
// It is called before the process starts.
func (ss *session) begin() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	id := ss.t.wakeMessageID // the message that woke a run taken over
	if id == "" {
		id = uuid.NewString()
	}
	ss.startTurnLocked(id, ss.t.inv.Spec.Prompt, ss.t.run.Spec.Attachments)
}

// started hands the session the process's stdin, once it runs, and writes
// the decoder's opening messages.
func (ss *session) started(talk *stdinWriter, pid int, reaped bool, cg *proctree.Cgroup) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.talk, ss.agentPID, ss.reaped, ss.cgroup = talk, pid, reaped, cg
	talk.write(ss.dec.Open())
	ss.flushLocked()
}

// line decodes one line of output, emits its events and acts on them.
func (ss *session) line(b []byte) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	evs := ss.dec.Decode(b)
	var after []func()
	kept := evs[:0]
	for i := range evs {
		f, keep := ss.observeLocked(&evs[i])
		if f != nil {
			after = append(after, f)
		}
		if keep {
			kept = append(kept, evs[i])
		}
	}
	ss.s.emit(ss.t, kept...)
	for _, f := range after {
		f()
	}
	if !ss.ended {
		ss.s.storeLiveUsage(ss.t)
	}
	ss.flushLocked()
}

// observeLocked updates the session from one event the decoder returned,
// before it is emitted; it may change the event's payload (the supervisor
// stamps deadlines and turn numbers). What must follow the event's
// emission is returned, and whether to emit the event at all: the
// withdrawal of an approval the gateway resolved already is not.
func (ss *session) observeLocked(ev *runs.Event) (after func(), keep bool) {
	switch d := ev.Data.(type) {
	case runs.ApprovalRequestedData:
		now := ss.s.cfg.Now().UTC()
		d.ExpiresAt = now.Add(ss.approvalTTL)
		if len(d.Options) == 0 {
			d.Options = slices.Clone(runs.Decisions)
		}
		ev.Data = d
		a := runs.Approval{ID: d.ID, ToolCallID: d.ToolCallID, Tool: d.Tool, Input: d.Input, Options: d.Options,
			Turn: ss.turn, CreatedAt: now, ExpiresAt: d.ExpiresAt}
		id := d.ID
		p := &pendingApproval{a: a}
		p.timer = time.AfterFunc(ss.approvalTTL, func() { ss.expire(id) })
		ss.pending[id] = p
		ss.s.obs.ApprovalRequested(ss.t.run.Agent)
		return ss.recordLocked, true
	case runs.ApprovalResolvedData:
		p, ok := ss.pending[d.ID]
		if !ok {
			return nil, false
		}
		ss.forgetLocked(p, d)
		return ss.recordLocked, true
	case runs.TurnCompletedData:
		if !ss.inTurn {
			// A turn ends once: a second end is the decoder's echo.
			return nil, false
		}
		ss.inTurn = false
		d.Turn = ss.turn
		ev.Data = d
		return func() { ss.turnEndedLocked(d) }, true
	}
	return nil, true
}

// turnEndedLocked records the turn's end and starts what comes next: the
// next queued message, the end of the session, or the idle wait.
func (ss *session) turnEndedLocked(d runs.TurnCompletedData) {
	ss.recordTurnEndLocked(d)
	if ss.interactive {
		ss.s.loop(func() { ss.s.keepTurn(ss.t) })
	}
	// A request still pending when its turn ended can no longer be
	// answered; the CLI did not say so, the gateway does.
	for _, p := range ss.pendingInOrder() {
		ss.resolveLocked(p, "", runs.ResolvedWithdrawn, "")
	}
	if ss.stopped && ss.caps.KillToolsOnInterrupt && ss.agentPID > 0 {
		// The CLI ended the turn but left its command running.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := ss.s.tree.KillDescendantsIn(ctx, ss.cgroup, ss.agentPID, ss.reaped); err != nil {
			ss.log.Warn("kill the interrupted turn's tools", zap.Error(err))
		}
		cancel()
	}
	ss.stopped = false
	switch {
	case ss.draining:
		ss.stopForShutdownLocked()
	case ss.closing || !ss.interactive:
		ss.closeLocked()
	case len(ss.queue) > 0:
		m := ss.queue[0]
		ss.queue = ss.queue[1:]
		ss.sendTurnLocked(m)
	default:
		ss.armIdleLocked()
	}
	ss.recordLocked()
}

// recordTurnEndLocked marks the running turn ended in the run record.
func (ss *session) recordTurnEndLocked(d runs.TurnCompletedData) {
	ss.inTurn = false
	now := ss.s.cfg.Now().UTC()
	ss.t.mu.Lock()
	defer ss.t.mu.Unlock()
	if n := len(ss.t.run.Turns); n > 0 {
		last := &ss.t.run.Turns[n-1]
		last.Status, last.StopReason, last.Usage, last.CostUSD, last.Error = d.Status, d.StopReason, d.Usage, d.CostUSD, d.Error
		last.FinishedAt = &now
		ss.s.obs.TurnFinished(ss.t.run.Agent, d.Status, now.Sub(last.StartedAt).Seconds())
	}
	ss.turnsUsage = ss.turnsUsage.Add(d.Usage)
	if d.CostUSD != nil {
		ss.turnsCost = addCostUSD(ss.turnsCost, *d.CostUSD)
	}
	addFinishedTurnLocked(ss.t, ss.turnsUsage, ss.turnsCost)
}

// lastTurn returns the status and error of the run's last turn, when the
// session ended because the gateway closed it: the run's status is then
// that of its last turn, whatever the CLI's exit says (Claude exits 1 at
// the end of stdin when its last turn was interrupted). A CLI that ended
// on its own keeps its decoder's verdict.
func (ss *session) lastTurn() (runs.State, *runs.RunError, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.done {
		return "", nil, false
	}
	ss.t.mu.Lock()
	defer ss.t.mu.Unlock()
	n := len(ss.t.run.Turns)
	if n == 0 || ss.t.run.Turns[n-1].Status == "" {
		return "", nil, false
	}
	last := ss.t.run.Turns[n-1]
	return last.Status, last.Error, true
}

// outcomeEvents passes the events of the decoder's Finish through the
// session, once the process is gone: a turn the CLI never ended is ended
// (numbered and recorded), and what can no longer be answered or was
// resolved already is dropped.
func (ss *session) outcomeEvents(evs []runs.Event) []runs.Event {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	kept := evs[:0]
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case runs.ApprovalRequestedData:
			continue
		case runs.ApprovalResolvedData:
			p, ok := ss.pending[d.ID]
			if !ok {
				continue
			}
			ss.forgetLocked(p, d)
		case runs.TurnCompletedData:
			if !ss.inTurn {
				continue
			}
			d.Turn = ss.turn
			ev.Data = d
			ss.recordTurnEndLocked(d)
		}
		kept = append(kept, ev)
	}
	return kept
}

// startTurnLocked numbers a new turn, records it and emits turn.started.
func (ss *session) startTurnLocked(messageID, text string, atts []runs.Attachment) {
	ss.stopIdleLocked()
	ss.turn++
	ss.inTurn = true
	now := ss.s.cfg.Now().UTC()
	ss.t.mu.Lock()
	ss.t.run.Turns = append(ss.t.run.Turns, runs.Turn{Turn: ss.turn, MessageID: messageID, StartedAt: now})
	if over := len(ss.t.run.Turns) - runs.MaxRecordedTurns; over > 0 {
		ss.t.run.Turns = slices.Delete(ss.t.run.Turns, 0, over)
	}
	ss.t.mu.Unlock()
	ss.s.obs.TurnStarted(ss.t.run.Agent)
	ss.s.emit(ss.t, runs.NewEvent(runs.EventTurnStarted, runs.TurnStartedData{Turn: ss.turn, MessageID: messageID, Text: text, Attachments: atts}))
}

// sendTurnLocked starts a turn with m in the CLI. A message the session
// refuses (its CLI cannot take what it carries) ends its turn at once,
// failed with the reason, so that the session goes on to the next one
// rather than waiting for an answer that never comes.
func (ss *session) sendTurnLocked(m queuedMessage) {
	ss.startTurnLocked(m.id, m.text, m.atts)
	err := ss.dec.Send(m.text, m.images, false)
	if err == nil {
		return
	}
	ss.log.Warn("send message", zap.Error(err))
	d := runs.TurnCompletedData{Turn: ss.turn, Status: runs.Failed, Error: sendError(err)}
	ss.s.emit(ss.t, runs.NewEvent(runs.EventTurnCompleted, d))
	ss.turnEndedLocked(d)
}

// sendError is the error of a turn whose message the session refused.
func sendError(err error) *runs.RunError {
	if errors.Is(err, runs.ErrUnsupported) {
		return runs.NewRunError(runs.FlagRejected, "the agent cannot take this message: "+err.Error(), "send it without what the agent does not take")
	}
	return runs.NewRunError(runs.Internal, "could not send the message to the agent: "+err.Error(), "")
}

func (ss *session) closeLocked() {
	ss.closing = true
	ss.stopIdleLocked()
	ss.dec.Close()
}

func (ss *session) armIdleLocked() {
	ss.stopIdleLocked()
	ss.idleSince = ss.s.cfg.Now()
	ss.idle = time.AfterFunc(ss.idleTTL, ss.idleExpired)
	if ss.hibernateTTL > 0 && ss.hibernateTTL < ss.idleTTL {
		ss.sleepTimer = time.AfterFunc(ss.hibernateTTL, ss.sleepExpired)
	}
}

func (ss *session) stopIdleLocked() {
	if ss.idle != nil {
		ss.idle.Stop()
		ss.idle = nil
	}
	if ss.sleepTimer != nil {
		ss.sleepTimer.Stop()
		ss.sleepTimer = nil
	}
}

// sleepExpired puts a session that waited hibernateTTL for a message to
// sleep.
func (ss *session) sleepExpired() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended || ss.inTurn || ss.closing || ss.draining || ss.hibernating || len(ss.pending) > 0 || len(ss.queue) > 0 || !ss.resumable() {
		return
	}
	ss.fallAsleepLocked(runs.HibernatedIdle)
}

// resumable reports whether the CLI named the session it keeps: without
// its id, a woken CLI would begin another conversation.
func (ss *session) resumable() bool {
	ss.t.mu.Lock()
	defer ss.t.mu.Unlock()
	return ss.t.run.SessionID != ""
}

// fallAsleepLocked ends the CLI's conversation so that the run hibernates
// once the CLI has exited; input meanwhile waits for the run to sleep.
func (ss *session) fallAsleepLocked(reason string) {
	ss.log.Info("interactive run idle: hibernating", zap.String("reason", reason))
	ss.hibernating, ss.sleepReason = true, reason
	ss.stopIdleLocked()
	ss.t.mu.Lock()
	if ss.t.slept == nil {
		ss.t.slept = make(chan struct{})
	}
	ss.t.mu.Unlock()
	ss.dec.Close()
	ss.flushLocked()
}

// asleep reports whether the process exited for the run to hibernate, and
// why and since when it has been idle.
func (ss *session) asleep(exit runs.Exit) (reason string, idleSince time.Time, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.hibernating || exit.Reason != "" || ss.inTurn {
		return "", time.Time{}, false
	}
	return ss.sleepReason, ss.idleSince, true
}

// idleExpired closes a session that waited idleTTL for a message.
func (ss *session) idleExpired() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended || ss.inTurn || ss.closing {
		return
	}
	ss.log.Info("interactive run idle: closing", zap.Duration("idle_timeout", ss.idleTTL))
	ss.s.emit(ss.t, runs.NewEvent(runs.EventWarning, runs.WarningData{Code: "idle_timeout",
		Message: fmt.Sprintf("no message for %s: the session is closed", ss.idleTTL)}))
	ss.closeLocked()
	ss.recordLocked()
	ss.flushLocked()
}

// expire denies an approval nobody answered in time.
func (ss *session) expire(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	p, ok := ss.pending[id]
	if !ok || ss.ended {
		return
	}
	msg := fmt.Sprintf("no answer within %s: denied by the gateway", ss.approvalTTL)
	if err := ss.dec.Answer(id, runs.Deny, msg); err != nil {
		ss.log.Warn("deny an expired approval", zap.String("approval_id", id), zap.Error(err))
	}
	ss.resolveLocked(p, runs.Deny, runs.ResolvedByTimeout, msg)
	ss.recordLocked()
	ss.flushLocked()
}

// resolveLocked drops a pending approval and emits approval.resolved.
func (ss *session) resolveLocked(p *pendingApproval, d runs.Decision, reason, msg string, by ...*runs.Actor) runs.ResolvedApproval {
	data := runs.ApprovalResolvedData{ID: p.a.ID, Decision: d, Reason: reason, Message: msg}
	if len(by) > 0 {
		data.DecidedBy = by[0]
	}
	r := ss.forgetLocked(p, data)
	ss.s.emit(ss.t, runs.NewEvent(runs.EventApprovalResolved, data))
	return r
}

// forgetLocked drops a pending approval, remembering how it was resolved.
func (ss *session) forgetLocked(p *pendingApproval, d runs.ApprovalResolvedData) runs.ResolvedApproval {
	p.timer.Stop()
	delete(ss.pending, p.a.ID)
	now := ss.s.cfg.Now().UTC()
	r := runs.ResolvedApproval{Approval: p.a, Decision: d.Decision, Reason: d.Reason, Message: d.Message, ResolvedAt: now, DecidedBy: d.DecidedBy}
	if len(ss.resolved) < maxResolvedKept {
		ss.resolved[p.a.ID] = r
	}
	ss.s.obs.ApprovalResolved(ss.t.run.Agent, d.Decision, d.Reason, now.Sub(p.a.CreatedAt).Seconds())
	return r
}

func (ss *session) pendingInOrder() []*pendingApproval {
	out := make([]*pendingApproval, 0, len(ss.pending))
	for _, p := range ss.pending {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pendingApproval) int { return a.a.CreatedAt.Compare(b.a.CreatedAt) })
	return out
}

// activityLocked is what the run is doing now.
func (ss *session) activityLocked() runs.Activity {
	switch {
	case len(ss.pending) > 0:
		return runs.AwaitingApproval
	case ss.inTurn:
		return runs.InTurn
	case ss.closing:
		return runs.Stopping
	}
	return runs.Idle
}

// recordLocked stores the run record with the session's state: its
// turns, pending approvals and activity.
func (ss *session) recordLocked() {
	if ss.ended {
		return
	}
	approvals := make([]runs.Approval, 0, len(ss.pending))
	for _, p := range ss.pendingInOrder() {
		approvals = append(approvals, p.a)
	}
	ss.t.mu.Lock()
	ss.t.run.PendingApprovals = approvals
	ss.t.run.Activity = ss.activityLocked()
	ss.t.usageDirty = false // stored with the rest
	r := ss.s.recordOf(ss.t, ss.t.run)
	ss.t.mu.Unlock()
	// The record must not depend on the request that caused the change.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ss.s.store.UpdateRun(ctx, r); err != nil {
		ss.log.Warn("store the run's session state", zap.Error(err))
	}
}

// flushLocked writes what the decoder has for stdin, and closes stdin
// once the decoder says the conversation is over.
func (ss *session) flushLocked() {
	if ss.talk == nil || ss.done {
		return
	}
	out, done := ss.dec.Pending()
	ss.talk.write(out)
	if done {
		ss.done = true
		ss.talk.finish()
	}
}

// ending is called when the supervisor begins to stop the run (cancel,
// timeout, shutdown), before the CLI is told: the approvals still pending
// are resolved run_ended at once, not withdrawn by the CLI's answer to
// the stop.
func (ss *session) ending() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.stopIdleLocked()
	ss.closing = true
	for _, p := range ss.pendingInOrder() {
		ss.resolveLocked(p, "", runs.ResolvedRunEnded, "")
	}
	ss.queue = nil
}

// end is called once the process is gone: nothing more can reach the CLI.
// The approvals still pending are resolved run_ended, before run.completed.
func (ss *session) end() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.stopIdleLocked()
	for _, p := range ss.pendingInOrder() {
		ss.resolveLocked(p, "", runs.ResolvedRunEnded, "")
	}
	ss.queue = nil
	ss.ended = true
	ss.t.mu.Lock()
	ss.t.run.PendingApprovals, ss.t.run.Activity = nil, ""
	ss.t.mu.Unlock()
}

// input carries out one input from outside.
func (ss *session) input(in runs.Input, images []runs.Image) (runs.InputResult, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.hibernating {
		return runs.InputResult{}, errFallingAsleep
	}
	if ss.ended || ss.done {
		return runs.InputResult{}, runs.Conflict(runs.ConflictRunEnded, "the run has ended")
	}
	defer ss.flushLocked()
	switch in.Kind {
	case runs.InputDecision:
		return ss.decideLocked(in)
	case runs.InputMessage:
		return ss.messageLocked(in, images)
	case runs.InputInterrupt:
		if !ss.inTurn {
			return runs.InputResult{}, runs.Conflict(runs.ConflictNoTurn, "no turn is running")
		}
		if err := ss.dec.InterruptTurn(); err != nil {
			return runs.InputResult{}, fmt.Errorf("interrupt turn: %w", err)
		}
		ss.stopped = true
		ss.queue = nil // an interrupt stops what was asked for, queued included
		return runs.InputResult{}, nil
	case runs.InputClose:
		if !ss.interactive {
			return runs.InputResult{}, runs.Conflict(runs.ConflictNotInteractive, "the run is not interactive; it ends after its turn")
		}
		ss.queue = nil
		switch {
		case len(ss.pending) > 0:
			ss.closing = true
			ss.stopPendingForCloseLocked()
		case ss.inTurn:
			ss.closing = true
		default:
			ss.closeLocked()
		}
		ss.recordLocked()
		return runs.InputResult{}, nil
	}
	return runs.InputResult{}, runs.Invalid("kind", "unknown input")
}

// closedMessage goes to the model with the deny of the approvals a close
// cut short.
const closedMessage = "the run was closed"

// stopPendingForCloseLocked ends a turn that waits for approvals when the
// run is closed: nobody is left to answer them, so each is resolved
// run_ended and the CLI is told deny_and_stop, which ends the turn on
// every agent; the session then closes as after any turn.
func (ss *session) stopPendingForCloseLocked() {
	for _, p := range ss.pendingInOrder() {
		if err := ss.dec.Answer(p.a.ID, runs.DenyAndStop, closedMessage); err != nil && !errors.Is(err, runs.ErrNotFound) {
			ss.log.Warn("deny an approval of a closed run", zap.String("approval_id", p.a.ID), zap.Error(err))
		}
		ss.resolveLocked(p, "", runs.ResolvedRunEnded, closedMessage)
	}
}

func (ss *session) decideLocked(in runs.Input) (runs.InputResult, error) {
	p, ok := ss.pending[in.ApprovalID]
	if !ok {
		if r, was := ss.resolved[in.ApprovalID]; was {
			return runs.InputResult{}, runs.Conflict(runs.ConflictApprovalResolved,
				fmt.Sprintf("approval %s was already resolved (%s)", in.ApprovalID, r.Reason))
		}
		return runs.InputResult{}, fmt.Errorf("approval %s: %w", in.ApprovalID, runs.ErrNotFound)
	}
	if !slices.Contains(p.a.Options, in.Decision) {
		return runs.InputResult{}, runs.Invalid("decision", fmt.Sprintf("must be one of the approval's options: %v", p.a.Options))
	}
	if err := ss.dec.Answer(in.ApprovalID, in.Decision, in.Message); err != nil {
		if errors.Is(err, runs.ErrNotFound) {
			// The decoder saw it withdrawn in a line not yet read.
			r := ss.resolveLocked(p, "", runs.ResolvedWithdrawn, "")
			return runs.InputResult{}, runs.Conflict(runs.ConflictApprovalResolved,
				fmt.Sprintf("approval %s was already resolved (%s)", in.ApprovalID, r.Reason))
		}
		return runs.InputResult{}, fmt.Errorf("answer approval %s: %w", in.ApprovalID, err)
	}
	r := ss.resolveLocked(p, in.Decision, runs.ResolvedByClient, in.Message, in.By)
	ss.recordLocked()
	return runs.InputResult{Approval: &r}, nil
}

func (ss *session) messageLocked(in runs.Input, images []runs.Image) (runs.InputResult, error) {
	switch {
	case !ss.interactive:
		return runs.InputResult{}, runs.Conflict(runs.ConflictNotInteractive, "the run is not interactive: it takes no messages")
	case ss.closing:
		return runs.InputResult{}, runs.Conflict(runs.ConflictClosing, "the session is closing")
	case ss.draining:
		return runs.InputResult{}, runs.Conflict(runs.ConflictClosing, "the gateway is shutting down; the session ends after its turn")
	}
	mode := in.Mode
	if mode == "" {
		mode = runs.MessageQueue
	}
	if mode == runs.MessageSteer && !ss.caps.Steer {
		return runs.InputResult{}, runs.Unsupported(ss.t.run.Agent, "mode",
			"this agent cannot add a message to a running turn; send it with mode queue, or interrupt first")
	}
	id := uuid.NewString()
	switch {
	case mode == runs.MessageSteer && ss.inTurn:
		if err := ss.dec.Send(in.Text, images, true); err != nil {
			return runs.InputResult{}, fmt.Errorf("steer: %w", err)
		}
		ss.s.emit(ss.t, runs.NewEvent(runs.EventMessageQueued, runs.MessageQueuedData{MessageID: id, Text: in.Text, Mode: mode, Attachments: in.Attachments}))
	case ss.inTurn:
		if len(ss.queue) >= runs.MaxQueuedMessages {
			return runs.InputResult{}, runs.Conflict(runs.ConflictQueueFull, fmt.Sprintf("%d messages already wait for their turn", runs.MaxQueuedMessages))
		}
		ss.queue = append(ss.queue, queuedMessage{id: id, text: in.Text, images: images, atts: in.Attachments})
		ss.s.emit(ss.t, runs.NewEvent(runs.EventMessageQueued, runs.MessageQueuedData{MessageID: id, Text: in.Text, Mode: runs.MessageQueue, Attachments: in.Attachments}))
	default:
		ss.s.emit(ss.t, runs.NewEvent(runs.EventMessageQueued, runs.MessageQueuedData{MessageID: id, Text: in.Text, Mode: runs.MessageQueue, Attachments: in.Attachments}))
		ss.sendTurnLocked(queuedMessage{id: id, text: in.Text, images: images, atts: in.Attachments})
		ss.recordLocked()
	}
	return runs.InputResult{MessageID: id}, nil
}

// stoppingSession is the Conversation runProcess sees for a run with a
// Session: its Interrupt, which begins a stop, first ends the session's
// pending approvals.
type stoppingSession struct {
	runs.Session
	ss *session
}

func (c stoppingSession) Interrupt() []byte {
	c.ss.ending()
	return c.Session.Interrupt()
}
