package tenants

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// retryAtCount is the Retry-After of a refusal by a count of runs: one
// ends or starts soon, but when is not known.
const retryAtCount = 5 * time.Second

// Admit counts a new run of the tenant in, as queued (and as an open
// conversation when interactive), or refuses it with a *QuotaError.
func (l *Ledger) Admit(ctx context.Context, tenant, runID string, interactive bool) error {
	if l == nil || !l.quotas.enabled() {
		return nil
	}
	today := l.today()
	return l.update(ctx, tenant, func(u *Usage) error {
		if err := l.checkBudget(u, today); err != nil || !l.quotas.counts() {
			return err
		}
		if err := l.checkCounts(u, interactive); err != nil {
			l.heal(ctx, u)
			if err := l.checkCounts(u, interactive); err != nil {
				return err
			}
		}
		u.Runs[runID] = runs.Queued
		if interactive {
			u.Open[runID] = true
		}
		return nil
	})
}

// checkBudget refuses a new run of a tenant whose runs cost its daily
// budget today.
func (l *Ledger) checkBudget(u *Usage, today string) error {
	q := l.quotas
	if q.DailyBudgetUSD > 0 && u.Day == today && u.CostUSD >= q.DailyBudgetUSD {
		return &QuotaError{Limit: LimitDailyBudget, RetryAfter: l.untilNextUTCDay(),
			Message: fmt.Sprintf("the tenant's runs cost $%.4f today, at or past its daily budget of $%.2f; new runs are refused until 00:00 UTC", u.CostUSD, q.DailyBudgetUSD)}
	}
	return nil
}

// checkCounts refuses a new run of a tenant at MaxRunning or MaxQueued,
// and a new conversation at MaxOpen.
func (l *Ledger) checkCounts(u *Usage, interactive bool) error {
	q := l.quotas
	running, queued := countStates(u.Runs)
	switch {
	case interactive && q.MaxOpen > 0 && len(u.Open) >= q.MaxOpen:
		return &QuotaError{Limit: LimitOpen, RetryAfter: retryAtCount,
			Message: fmt.Sprintf("the tenant has %d interactive runs open (hibernated ones included), its limit; close one first", len(u.Open))}
	case q.MaxRunning > 0 && running >= q.MaxRunning:
		return &QuotaError{Limit: LimitRunning, RetryAfter: retryAtCount,
			Message: fmt.Sprintf("the tenant has %d runs running, its limit; retry when one ends", running)}
	case q.MaxQueued > 0 && queued >= q.MaxQueued:
		return &QuotaError{Limit: LimitQueued, RetryAfter: retryAtCount,
			Message: fmt.Sprintf("the tenant has %d runs waiting in the queue, its limit; retry when one starts", queued)}
	}
	return nil
}

// errAtLimit: the tenant runs MaxRunning runs already.
var errAtLimit = errors.New("at limit")

// StartAllowed counts a queued run of the tenant as running and says yes,
// unless the tenant is at MaxRunning: then the run waits in the queue.
func (l *Ledger) StartAllowed(ctx context.Context, tenant, runID string) bool {
	if l == nil || !l.quotas.counts() {
		return true
	}
	err := l.update(ctx, tenant, func(u *Usage) error {
		if most := l.quotas.MaxRunning; most > 0 && l.runningOthers(u, runID) >= most {
			l.heal(ctx, u)
			if l.runningOthers(u, runID) >= most {
				return errAtLimit
			}
		}
		u.Runs[runID] = runs.Running
		return nil
	})
	if err != nil && !errors.Is(err, errAtLimit) {
		// The store is failing: the run goes on rather than waiting on
		// a count that cannot be read.
		l.log.Warn("count a tenant's run as running", zap.String("run_id", runID), zap.Error(err))
		return true
	}
	return err == nil
}

// runningOthers is how many of the tenant's runs other than runID run.
func (l *Ledger) runningOthers(u *Usage, runID string) int {
	running, _ := countStates(u.Runs)
	if u.Runs[runID] == runs.Running {
		running--
	}
	return running
}

// Hibernate counts a run of the tenant that hibernated as open but no
// longer running.
func (l *Ledger) Hibernate(ctx context.Context, tenant, runID string) {
	if l == nil || !l.quotas.counts() {
		return
	}
	err := l.update(ctx, tenant, func(u *Usage) error {
		if _, counted := u.Runs[runID]; counted {
			u.Runs[runID] = Hibernated
		}
		return nil
	})
	if err != nil {
		l.log.Warn("count a tenant's run as hibernated", zap.String("run_id", runID), zap.Error(err))
	}
}

// Wake counts a hibernated run of the tenant as running again, or refuses
// with a *QuotaError when the tenant runs MaxRunning runs already: the
// message that would wake it is refused, to be sent again later.
func (l *Ledger) Wake(ctx context.Context, tenant, runID string) error {
	if l == nil || !l.quotas.counts() {
		return nil
	}
	err := l.update(ctx, tenant, func(u *Usage) error {
		if most := l.quotas.MaxRunning; most > 0 && l.runningOthers(u, runID) >= most {
			l.heal(ctx, u)
			if l.runningOthers(u, runID) >= most {
				return &QuotaError{Limit: LimitRunning, RetryAfter: retryAtCount,
					Message: fmt.Sprintf("the tenant has %d runs running, its limit; the hibernated run wakes when one ends: send the message again then", most)}
			}
		}
		u.Runs[runID] = runs.Running
		return nil
	})
	var qe *QuotaError
	if err != nil && !errors.As(err, &qe) {
		l.log.Warn("count a tenant's woken run as running", zap.String("run_id", runID), zap.Error(err))
		return nil // the store is failing: the run goes on, as StartAllowed
	}
	return err
}

// CountOut removes a finished (or never queued) run from its tenant's
// counts and adds its cost, when known, to the tenant's day.
func (l *Ledger) CountOut(ctx context.Context, tenant, runID string, cost *float64) {
	if l == nil || !l.quotas.enabled() {
		return
	}
	today := l.today()
	err := l.update(ctx, tenant, func(u *Usage) error {
		delete(u.Runs, runID)
		delete(u.Open, runID)
		if l.quotas.DailyBudgetUSD > 0 && cost != nil && *cost > 0 {
			if u.Day != today {
				u.Day, u.CostUSD = today, 0
			}
			u.CostUSD += *cost
		}
		return nil
	})
	if err != nil {
		l.log.Warn("count a tenant's run out", zap.String("run_id", runID), zap.Error(err))
	}
}
