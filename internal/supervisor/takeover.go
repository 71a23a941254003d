package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/workspace"
)

// An interactive run whose replica dies is taken over by a live replica,
// from the last turn it finished: that turn's end stored the run's
// directory and its session's files in the cluster (keepTurn). The run
// stays running, idle and without a process (dormant) until its next
// message, which starts the CLI here, resuming the same session in the
// same files, and is the run's next turn. A turn that was cut off ends
// cancelled, class interrupted, and the approvals it waited for are
// withdrawn.

// canTakeOver reports whether this replica can take over r, a run whose
// replica died: an interactive run of an agent it runs in homes of its
// own, whose session was kept at a turn's end.
func (s *Supervisor) canTakeOver(ctx context.Context, r runs.Run) bool {
	a, ok := s.agents[r.Agent]
	if !ok || !a.info.Installed || !r.Spec.Interactive || r.Status != runs.Running || r.SessionID == "" ||
		s.ws == nil || s.cfg.HomesDir == "" || !s.enforces(a, r.Spec.Network) {
		return false
	}
	if _, keeps := a.Adapter.(runs.HomeKeeper); !keeps {
		return false
	}
	rec, ok, err := s.store.Session(ctx, r.Agent, r.SessionID)
	return err == nil && ok && rec.RunID == r.ID && rec.Tenant == r.Tenant
}

// takeOver makes r, whose replica died, a dormant run of this replica,
// unless another replica took it first or the run ended. An error is the
// store's: the run is not taken, and a later sweep may try again.
func (s *Supervisor) takeOver(ctx context.Context, r runs.Run) error {
	// Read before the run is this replica's, which no sweep then takes
	// over again: without it, its events would be numbered from 1, in
	// place of those stored. The dead replica appends no more.
	last, err := s.store.LastEvent(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("take over run %s: read its last event: %w", r.ID, err)
	}
	taken, err := s.store.TakeOverRun(ctx, r.ID, r.Owner, s.cfg.Replica)
	if errors.Is(err, runs.ErrClaimed) {
		return nil // another replica took it, or it ended
	}
	if err != nil {
		return err
	}
	// Seen here at once, so that input finds it, but acted on only once
	// it is set up (claimDormant waits for settled): its cut-off turn
	// ended, its record idle, run.resumed emitted.
	t := &task{run: taken, seq: last.Seq, started: true, agent: s.agents[r.Agent], woken: true, dormant: true,
		settled: make(chan struct{})}
	s.mu.Lock()
	if _, dup := s.tasks[r.ID]; dup {
		s.mu.Unlock()
		return nil
	}
	s.tasks[r.ID] = t
	s.mu.Unlock()
	defer close(t.settled)
	finished := s.endCutTurn(t)
	t.mu.Lock()
	t.run.Activity, t.run.PendingApprovals = runs.Idle, nil
	t.mu.Unlock()
	if err := s.storeRun(t.run); err != nil {
		s.log.Warn("store a run taken over", zap.String("run_id", r.ID), zap.Error(err))
	}
	s.emit(t, runs.NewEvent(runs.EventRunResumed, runs.RunResumedData{
		Replica: s.cfg.Replica, PreviousReplica: r.Owner, Turn: finished, Reason: runs.ResumedReplicaLost}))
	s.armDormant(t)
	s.log.Warn("interactive run taken over: its replica stopped answering", zap.String("run_id", r.ID),
		zap.String("agent", r.Agent), zap.String("previous_replica", r.Owner), zap.Int("turn", finished))
	return nil
}

// endCutTurn withdraws the approvals t's run waited for and ends, as
// interrupted, a turn its replica's death cut off. It returns the number
// of the last turn that finished.
func (s *Supervisor) endCutTurn(t *task) int {
	for _, a := range t.run.PendingApprovals {
		s.emit(t, runs.NewEvent(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: a.ID, Reason: runs.ResolvedWithdrawn}))
	}
	n := len(t.run.Turns)
	if n == 0 {
		return 0
	}
	last := &t.run.Turns[n-1]
	if last.FinishedAt != nil {
		return last.Turn
	}
	now := s.cfg.Now().UTC()
	cut := runs.NewRunError(runs.Interrupted, "the gateway replica running the turn stopped answering", "send the message again")
	last.Status, last.StopReason, last.Error, last.FinishedAt = runs.Cancelled, runs.ResumedReplicaLost, cut, &now
	s.emit(t, runs.NewEvent(runs.EventTurnCompleted, runs.TurnCompletedData{
		Turn: last.Turn, Status: runs.Cancelled, StopReason: runs.ResumedReplicaLost, Error: cut}))
	return last.Turn - 1
}

// armDormant ends t's dormant run when no message came within its idle
// timeout, as an idle session ends.
func (s *Supervisor) armDormant(t *task) {
	idle := runs.DefaultIdleTimeout
	if n := t.run.Spec.IdleTimeoutSeconds; n > 0 {
		idle = time.Duration(n) * time.Second
	}
	timer := time.AfterFunc(idle, func() { s.endDormant(t) })
	t.mu.Lock()
	t.dormantTimer = timer
	t.mu.Unlock()
}

// settleWait bounds how long input to a run being taken over waits for
// the take-over to finish setting it up: a few writes to the store.
const settleWait = time.Minute

// claimDormant makes t no longer dormant; false when it was not. A run
// still being taken over is claimed once it is set up.
func (t *task) claimDormant() bool {
	if t.settled != nil {
		select {
		case <-t.settled:
		case <-time.After(settleWait):
			return false
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dormant {
		return false
	}
	t.dormant = false
	if t.dormantTimer != nil {
		t.dormantTimer.Stop()
	}
	return true
}

// endDormant finishes t's dormant run, closed or idle too long: its
// status is that of its last turn.
func (s *Supervisor) endDormant(t *task) {
	if !t.claimDormant() {
		return
	}
	defer s.untrack(t)
	out := runs.Outcome{Status: runs.Succeeded, Usage: t.run.Usage, CostUSD: t.run.CostUSD, SessionID: t.run.SessionID}
	if n := len(t.run.Turns); n > 0 && t.run.Turns[n-1].Status != "" {
		out.Status, out.Error = t.run.Turns[n-1].Status, t.run.Turns[n-1].Error
		if out.Status == runs.Cancelled {
			out.Status = runs.Failed
		}
	}
	s.finish(context.Background(), t, out, nil, nil)
}

// dormantInput is what a dormant run does with an input: a message wakes
// it (a steer too, there being no turn to add it to), a close ends it;
// nothing else has anything to act on.
func (s *Supervisor) dormantInput(t *task, in runs.Input) (runs.InputResult, error) {
	switch in.Kind {
	case runs.InputMessage:
		// As in a live idle session: a steer is queued, where the agent
		// can steer at all.
		if in.Mode == runs.MessageSteer && !t.agent.Adapter.Describe().Interaction.Steer {
			return runs.InputResult{}, runs.Unsupported(t.run.Agent, "mode",
				"this agent cannot add a message to a running turn; send it with mode queue, or interrupt first")
		}
		return s.wake(t, in)
	case runs.InputClose:
		s.endDormant(t)
		return runs.InputResult{}, nil
	case runs.InputInterrupt:
		return runs.InputResult{}, runs.Conflict(runs.ConflictNoTurn, "no turn is running")
	}
	return runs.InputResult{}, fmt.Errorf("approval %s: %w", in.ApprovalID, runs.ErrNotFound)
}

// wake starts t's CLI again, here, resuming its session, with in as the
// run's next turn.
func (s *Supervisor) wake(t *task, in runs.Input) (runs.InputResult, error) {
	if s.isClosing() {
		return runs.InputResult{}, runs.Conflict(runs.ConflictClosing, "the gateway is shutting down")
	}
	if !t.claimDormant() {
		return runs.InputResult{}, runs.Conflict(runs.ConflictNotStarted, "the run is starting its agent again; send the message once it has")
	}
	id := uuid.NewString()
	spec := t.run.Spec
	spec.Prompt, spec.Attachments, spec.ResumeSessionID = in.Text, in.Attachments, t.run.SessionID
	t.mu.Lock()
	t.run.Spec, t.wakeMessageID = spec, id
	t.mu.Unlock()
	s.emit(t, runs.NewEvent(runs.EventMessageQueued, runs.MessageQueuedData{MessageID: id, Text: in.Text, Mode: runs.MessageQueue, Attachments: in.Attachments}))
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
	go s.runWoken(t)
	return runs.InputResult{MessageID: id}, nil
}

// runWoken prepares and executes a woken run, as a worker does a run it
// took from the queue.
func (s *Supervisor) runWoken(t *task) {
	defer s.untrackTaken(t)
	if src := t.run.Spec.Workspace; src != nil && src.Git != nil && t.run.Git != nil {
		// The clone was made on the replica that died; its base is in
		// the record, for the push when the run ends.
		t.prepared = &workspace.Prepared{Git: &workspace.GitWork{URL: src.Git.URL, Credential: src.Git.Credential,
			Base: t.run.Git.Base, Ref: src.Git.Ref}}
	}
	runErr := s.prepareWork(t)
	if runErr == nil {
		runErr = s.prepare(t)
	}
	if runErr != nil {
		s.finish(context.Background(), t, runs.Outcome{Status: runs.Failed, Error: runErr}, nil, nil)
		return
	}
	s.execute(t)
}
