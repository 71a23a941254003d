package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// Quotas bound what one tenant may use, on every replica together. A zero
// field is no limit.
//
// The counts live in one store record per tenant (TenantUsage), changed by
// compare-and-set, so that replicas racing for a tenant's last slot admit
// one run. A run is counted from its submission until it finishes; the
// record heals itself when a replica died before it could count a run out:
// a tenant at a limit has its counted runs checked against their records.
type Quotas struct {
	// MaxRunning is the most runs of a tenant running at once. A
	// submission while the tenant is at it is refused; a queued run of a
	// tenant that reached it meanwhile waits in the queue.
	MaxRunning int
	// MaxQueued is the most runs of a tenant waiting in the shared queue.
	MaxQueued int
	// DailyBudgetUSD is the cost a tenant's finished runs may reach in a
	// UTC day; past it, new runs are refused until the next day.
	DailyBudgetUSD float64
}

func (q Quotas) counts() bool  { return q.MaxRunning > 0 || q.MaxQueued > 0 }
func (q Quotas) enabled() bool { return q.counts() || q.DailyBudgetUSD > 0 }

// quotaRetries bounds the compare-and-set attempts of one change: each
// failure means another replica changed the record meanwhile.
const quotaRetries = 50

// updateTenant applies change to the tenant's usage record until it lands
// or change refuses.
func (s *Supervisor) updateTenant(ctx context.Context, tenant string, change func(u *runs.TenantUsage) error) error {
	for range quotaRetries {
		u, rev, err := s.store.TenantUsage(ctx, tenant)
		if err != nil {
			return fmt.Errorf("read tenant usage: %w", err)
		}
		if u.Runs == nil {
			u.Runs = map[string]runs.State{}
		}
		if err := change(&u); err != nil {
			return err
		}
		err = s.store.SetTenantUsage(ctx, tenant, u, rev)
		if !errors.Is(err, runs.ErrStale) {
			return err
		}
	}
	return fmt.Errorf("tenant usage of %q: too much contention", tenant)
}

func countStates(m map[string]runs.State) (running, queued int) {
	for _, st := range m {
		if st == runs.Running {
			running++
		} else {
			queued++
		}
	}
	return running, queued
}

// heal drops from u the runs whose records say they ended (or are gone):
// a replica that died before counting a run out leaves it counted.
func (s *Supervisor) heal(ctx context.Context, u *runs.TenantUsage) {
	for id := range u.Runs {
		r, err := s.store.GetRun(ctx, id)
		if errors.Is(err, runs.ErrNotFound) || (err == nil && r.Status.Terminal()) {
			delete(u.Runs, id)
		}
	}
}

// nextUTCDay is how long until the budget's day ends.
func (s *Supervisor) nextUTCDay() time.Duration {
	now := s.cfg.Now().UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	return next.Sub(now)
}

// admit counts a new run of the tenant in, or refuses it with a
// *QuotaError.
func (s *Supervisor) admit(ctx context.Context, tenant, runID string) error {
	q := s.cfg.Quotas
	if !q.enabled() {
		return nil
	}
	today := s.cfg.Now().UTC().Format(time.DateOnly)
	return s.updateTenant(ctx, tenant, func(u *runs.TenantUsage) error {
		if q.DailyBudgetUSD > 0 && u.Day == today && u.CostUSD >= q.DailyBudgetUSD {
			return &runs.QuotaError{Limit: runs.LimitDailyBudget, RetryAfter: s.nextUTCDay(),
				Message: fmt.Sprintf("the tenant's runs cost $%.4f today, at or past its daily budget of $%.2f; new runs are refused until 00:00 UTC", u.CostUSD, q.DailyBudgetUSD)}
		}
		if !q.counts() {
			return nil
		}
		check := func() error {
			running, queued := countStates(u.Runs)
			switch {
			case q.MaxRunning > 0 && running >= q.MaxRunning:
				return &runs.QuotaError{Limit: runs.LimitRunning, RetryAfter: 5 * time.Second,
					Message: fmt.Sprintf("the tenant has %d runs running, its limit; retry when one ends", running)}
			case q.MaxQueued > 0 && queued >= q.MaxQueued:
				return &runs.QuotaError{Limit: runs.LimitQueued, RetryAfter: 5 * time.Second,
					Message: fmt.Sprintf("the tenant has %d runs waiting in the queue, its limit; retry when one starts", queued)}
			}
			return nil
		}
		if err := check(); err != nil {
			s.heal(ctx, u)
			if err := check(); err != nil {
				return err
			}
		}
		u.Runs[runID] = runs.Queued
		return nil
	})
}

// startAllowed moves a queued run of the tenant to running, unless the
// tenant is at MaxRunning; then the run waits in the queue.
func (s *Supervisor) startAllowed(ctx context.Context, tenant, runID string) bool {
	q := s.cfg.Quotas
	if !q.counts() {
		return true
	}
	atLimit := errors.New("at limit")
	err := s.updateTenant(ctx, tenant, func(u *runs.TenantUsage) error {
		if q.MaxRunning > 0 {
			running, _ := countStates(u.Runs)
			if u.Runs[runID] == runs.Running {
				running--
			}
			if running >= q.MaxRunning {
				s.heal(ctx, u)
				if running, _ = countStates(u.Runs); u.Runs[runID] == runs.Running {
					running--
				}
				if running >= q.MaxRunning {
					return atLimit
				}
			}
		}
		u.Runs[runID] = runs.Running
		return nil
	})
	if err != nil && !errors.Is(err, atLimit) {
		// The store is failing: the run goes on rather than waiting on
		// a count that cannot be read.
		s.log.Warn("count a tenant's run as running", zap.String("run_id", runID), zap.Error(err))
		return true
	}
	return err == nil
}

// countOut removes a finished (or never queued) run from its tenant's
// counts and adds its cost to the tenant's day.
func (s *Supervisor) countOut(ctx context.Context, tenant, runID string, cost *float64) {
	q := s.cfg.Quotas
	if !q.enabled() {
		return
	}
	today := s.cfg.Now().UTC().Format(time.DateOnly)
	err := s.updateTenant(ctx, tenant, func(u *runs.TenantUsage) error {
		delete(u.Runs, runID)
		if q.DailyBudgetUSD > 0 && cost != nil && *cost > 0 {
			if u.Day != today {
				u.Day, u.CostUSD = today, 0
			}
			u.CostUSD += *cost
		}
		return nil
	})
	if err != nil {
		s.log.Warn("count a tenant's run out", zap.String("run_id", runID), zap.Error(err))
	}
}
