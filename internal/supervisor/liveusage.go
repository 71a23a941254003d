package supervisor

import (
	"context"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// liveUsageEvery bounds how often a running run's record is stored for a
// change of its usage alone: usage.updated can come many times a second,
// and each store write is a write to every replica.
const liveUsageEvery = time.Second

// observeUsageLocked keeps the run record's usage and cost at the run's
// figures so far, from each usage.updated of the run itself (a helper's
// are in its parent's). The caller holds t.mu.
func observeUsageLocked(t *task, ev runs.Event) {
	d, ok := ev.Data.(runs.UsageData)
	if !ok || ev.Type != runs.EventUsageUpdated || ev.ParentToolCallID != "" || t.done {
		return
	}
	// A woken run's CLI counts only what it ran since the wake.
	t.run.Usage = t.usageBefore.Add(d.Usage)
	if d.CostUSD != nil {
		t.run.CostUSD = addCostUSD(t.costBefore, *d.CostUSD)
	}
	t.usageDirty = true
}

// addFinishedTurnLocked raises the record's usage and cost to the sum of
// the turns ended so far (sum and sumCost), where the run's last
// usage.updated said less or nothing. The caller holds t.mu.
func addFinishedTurnLocked(t *task, sum runs.Usage, sumCost *float64) {
	if total(sum) > total(t.run.Usage) {
		t.run.Usage = sum
	}
	if sumCost != nil && (t.run.CostUSD == nil || *sumCost > *t.run.CostUSD) {
		c := *sumCost
		t.run.CostUSD = &c
	}
}

// storeLiveUsage stores the running run's record when its usage changed
// and the last such write is liveUsageEvery old. Only the run's reader
// calls it, after emitting (for a session, under the session's lock), so
// that it never races the record's other writes nor lands after the
// finished record.
func (s *Supervisor) storeLiveUsage(t *task) {
	now := s.cfg.Now()
	t.mu.Lock()
	if t.done || !t.usageDirty || now.Sub(t.usageStoredAt) < liveUsageEvery {
		t.mu.Unlock()
		return
	}
	t.usageDirty, t.usageStoredAt = false, now
	r := s.recordOf(t, t.run)
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.store.UpdateRun(ctx, r); err != nil {
		s.log.Warn("store the run's usage so far", zap.String("run_id", r.ID), zap.Error(err))
	}
}

// addCostUSD returns sum plus c; a nil sum is none yet.
func addCostUSD(sum *float64, c float64) *float64 {
	if sum != nil {
		c += *sum
	}
	return &c
}
