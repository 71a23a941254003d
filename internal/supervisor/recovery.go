package supervisor

import (
	"context"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// recover marks the runs this replica was running when it stopped as
// failed with class interrupted, and kills any process they left behind.
// Runs it had taken from the queue and not started go back to the queue.
func (s *Supervisor) recover(ctx context.Context) error {
	left := map[string]bool{}
	asleep, since := map[string]time.Time{}, s.cfg.Now()
	err := s.eachRun(ctx, []runs.State{runs.Queued, runs.Running}, func(r runs.Run) {
		switch {
		case r.Owner != s.cfg.Replica:
		case r.Status == runs.Queued:
			s.giveBack(&task{run: r})
		case r.Activity == runs.Hibernated:
			asleep[r.ID] = closesAt(r, s.cfg.Now())
		default:
			left[r.ID] = true
		}
	})
	if err != nil {
		return err
	}
	// Hibernated runs have nothing to stop: their timers are armed again.
	s.keepSleepers(asleep, since)
	if len(left) == 0 {
		return nil
	}
	if procs, err := s.tree.FindAny(); err == nil {
		for id := range procs {
			if left[id] {
				_ = s.tree.Kill(ctx, id)
			}
		}
	}
	for id := range left {
		r, err := s.store.GetRun(ctx, id)
		if err != nil {
			return err
		}
		if s.canTakeOver(ctx, r) {
			// From this replica, as it was before it stopped. No sweep
			// takes over a live replica's run: an error fails the start.
			if err := s.takeOver(ctx, r); err != nil {
				return err
			}
			continue
		}
		last, err := s.store.LastEvent(ctx, id)
		if err != nil {
			return err
		}
		t := &task{run: r, seq: last.Seq}
		s.finish(ctx, t, runs.Outcome{}, runs.NewRunError(runs.Interrupted,
			"the gateway stopped while the run was in progress", "submit the run again"), nil)
		s.log.Warn("run interrupted by a gateway restart", zap.String("run_id", id), zap.String("agent", r.Agent))
	}
	return nil
}

// closesAt is when the hibernated run r is closed; now when its record
// does not say.
func closesAt(r runs.Run, now time.Time) time.Time {
	if r.ClosesAt != nil {
		return *r.ClosesAt
	}
	return now
}

// completedRepairAfter is how long after a run was recorded finished its
// run.completed may still be on its way. Past it, the event was lost.
const completedRepairAfter = 30 * time.Second

// repairCompleted appends the run.completed a finished run lacks: its
// supervisor recorded the run finished and died before the event was
// stored. Without it a stream of the run would wait for ever. Any replica
// may repair it; the store's de-duplication by run and seq keeps one copy
// when several do at once.
func (s *Supervisor) repairCompleted(r runs.Run, lastSeq uint64) {
	s.mu.Lock()
	_, local := s.tasks[r.ID]
	s.mu.Unlock()
	finished := r.CreatedAt
	if r.FinishedAt != nil {
		finished = *r.FinishedAt
	}
	if local || s.cfg.Now().Sub(finished) < completedRepairAfter {
		return // still on its way
	}
	var dur time.Duration
	if r.StartedAt != nil {
		dur = finished.Sub(*r.StartedAt)
	}
	s.log.Warn("run.completed was lost; appending it from the run record", zap.String("run_id", r.ID),
		zap.String("agent", r.Agent), zap.Uint64("seq", lastSeq+1))
	s.emit(&task{run: r, seq: lastSeq}, runs.NewEvent(runs.EventRunCompleted, runs.RunCompletedData{
		Status: r.Status, Result: r.Result, StructuredOutput: r.StructuredOutput, Usage: r.Usage,
		CostUSD: r.CostUSD, NumTurns: r.NumTurns, DurationMS: dur.Milliseconds(), Exit: r.Exit, Error: r.Error,
	}))
}

// eachRun calls fn for every stored run in one of states, of every
// tenant: a run nobody finishes because its tenant was not listed would
// stay running for ever.
func (s *Supervisor) eachRun(ctx context.Context, states []runs.State, fn func(runs.Run)) error {
	for _, st := range states {
		cursor := ""
		for {
			page, err := s.store.ListRuns(ctx, runs.Filter{AllTenants: true, Status: st, Limit: 500, Cursor: cursor})
			if err != nil {
				return err
			}
			for _, r := range page.Runs {
				fn(r)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
	}
	return nil
}
