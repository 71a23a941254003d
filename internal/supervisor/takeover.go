package supervisor

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/workspace"
)

// An interactive run whose replica dies is taken over by a live replica,
// from the last turn it finished: that turn's end stored the run's
// directory and its session's files in the cluster (keepTurn). The run
// hibernates at once (hibernate.go): its next message starts the CLI
// again on whichever replica takes it, resuming the same session in the
// same files, and is the run's next turn. A turn that was cut off ends
// cancelled, class interrupted, and the approvals it waited for are
// withdrawn.

// canTakeOver reports whether this replica can take over r, a run whose
// replica died: an interactive run of an agent it runs in homes of its
// own, whose session was kept at a turn's end.
func (s *Supervisor) canTakeOver(ctx context.Context, r runs.Run) bool {
	a, ok := s.agents[r.Agent]
	if !ok || !a.info.Installed || !r.Spec.Interactive || r.Status != runs.Running || r.SessionID == "" ||
		!s.canHibernate(a) || !s.enforces(a, r.Spec.Network) {
		return false
	}
	rec, ok, err := s.store.Session(ctx, r.Agent, r.SessionID)
	return err == nil && ok && rec.RunID == r.ID && rec.Tenant == r.Tenant
}

// takeOver makes r, whose replica died, a hibernated run of this replica,
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
	s.forgetLocalRun(r.ID) // the dead replica may have run it after this one
	// Seen here at once, so that input waits until it sleeps (localInput)
	// rather than finding a record that is neither running here nor
	// asleep.
	t := &task{run: taken, seq: last.Seq, agent: s.agents[r.Agent], slept: make(chan struct{})}
	s.mu.Lock()
	if _, dup := s.tasks[r.ID]; dup {
		s.mu.Unlock()
		return nil
	}
	s.tasks[r.ID] = t
	s.mu.Unlock()
	finished := s.endCutTurn(t)
	s.emit(t, runs.NewEvent(runs.EventRunResumed, runs.RunResumedData{
		Replica: s.cfg.Replica, PreviousReplica: r.Owner, Turn: finished, Reason: runs.ResumedReplicaLost}))
	s.sleep(t, runs.HibernatedReplicaLost, s.cfg.Now().Add(s.idleTimeout(r.Spec)))
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
	t.run.PendingApprovals = nil
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

// runWoken prepares and executes a woken run, as a worker does a run it
// took from the queue.
func (s *Supervisor) runWoken(t *task) {
	defer s.untrackTaken(t)
	if src := t.run.Spec.Workspace; src != nil && src.Git != nil && t.run.Git != nil {
		// The clone was made on the replica that ran the run before; its
		// base is in the record, for the push when the run ends.
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
