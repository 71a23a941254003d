package tenants

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// Quotas bound what one tenant may use, on every replica together. A zero
// field is no limit.
//
// The counts live in one store record per tenant (Usage), changed by
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
	// MaxOpen is the most interactive runs (conversations) of a tenant
	// open at once: queued, running or hibernated. A hibernated run
	// counts here and not against MaxRunning.
	MaxOpen int
}

func (q Quotas) counts() bool  { return q.MaxRunning > 0 || q.MaxQueued > 0 || q.MaxOpen > 0 }
func (q Quotas) enabled() bool { return q.counts() || q.DailyBudgetUSD > 0 }

// Ledger counts tenants' runs against their Quotas in the store. A nil
// *Ledger keeps no quotas: it admits and starts every run.
type Ledger struct {
	quotas Quotas
	store  Store
	now    func() time.Time
	log    *zap.Logger
}

// NewLedger returns a Ledger of q over st, on the clock now (nil:
// time.Now), logging to log (nil: nowhere) what it cannot count.
func NewLedger(q Quotas, st Store, now func() time.Time, log *zap.Logger) *Ledger {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Ledger{quotas: q, store: st, now: now, log: log}
}

// updateRetries bounds the compare-and-set attempts of one change: each
// failure means another replica changed the record meanwhile.
const updateRetries = 50

// update applies change to the tenant's usage record until it lands or
// change refuses.
func (l *Ledger) update(ctx context.Context, tenant string, change func(u *Usage) error) error {
	for range updateRetries {
		u, rev, err := l.store.TenantUsage(ctx, tenant)
		if err != nil {
			return fmt.Errorf("read tenant usage: %w", err)
		}
		if u.Runs == nil {
			u.Runs = map[string]runs.State{}
		}
		if u.Open == nil {
			u.Open = map[string]bool{}
		}
		if err := change(&u); err != nil {
			return err
		}
		err = l.store.SetTenantUsage(ctx, tenant, u, rev)
		if !errors.Is(err, ErrStale) {
			return err
		}
	}
	return fmt.Errorf("tenant usage of %q: too much contention", tenant)
}

// countStates counts the runs running and queued; a hibernated run is
// neither.
func countStates(m map[string]runs.State) (running, queued int) {
	for _, st := range m {
		switch st {
		case runs.Running:
			running++
		case runs.Queued:
			queued++
		}
	}
	return running, queued
}

// heal drops from u the runs whose records say they ended (or are gone):
// a replica that died before counting a run out leaves it counted.
func (l *Ledger) heal(ctx context.Context, u *Usage) {
	for id := range u.Runs {
		r, err := l.store.GetRun(ctx, id)
		if errors.Is(err, runs.ErrNotFound) || (err == nil && r.Status.Terminal()) {
			delete(u.Runs, id)
		}
	}
	for id := range u.Open {
		if _, counted := u.Runs[id]; !counted {
			delete(u.Open, id)
		}
	}
}

// untilNextUTCDay is how long until the budget's day ends.
func (l *Ledger) untilNextUTCDay() time.Duration {
	now := l.now().UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	return next.Sub(now)
}

func (l *Ledger) today() string { return l.now().UTC().Format(time.DateOnly) }
