package tenants

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentgate/agentgate/internal/runs"
)

// memStore keeps usage records and runs in memory, by compare-and-set as
// the real store does. failRead and stale, when set, make every read fail
// and every write find a newer revision.
type memStore struct {
	mu       sync.Mutex
	usage    map[string]Usage
	rev      map[string]uint64
	runs     map[string]runs.Run
	writes   int
	failRead error
	stale    bool
}

func newMemStore() *memStore {
	return &memStore{usage: map[string]Usage{}, rev: map[string]uint64{}, runs: map[string]runs.Run{}}
}

func (m *memStore) TenantUsage(_ context.Context, tenant string) (Usage, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failRead != nil {
		return Usage{}, 0, m.failRead
	}
	u := m.usage[tenant]
	counted := make(map[string]runs.State, len(u.Runs))
	for id, st := range u.Runs {
		counted[id] = st
	}
	u.Runs = counted
	open := make(map[string]bool, len(u.Open))
	for id := range u.Open {
		open[id] = true
	}
	u.Open = open
	return u, m.rev[tenant], nil
}

func (m *memStore) SetTenantUsage(_ context.Context, tenant string, u Usage, rev uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if m.stale || m.rev[tenant] != rev {
		return ErrStale
	}
	m.usage[tenant], m.rev[tenant] = u, rev+1
	return nil
}

func (m *memStore) GetRun(_ context.Context, id string) (runs.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return runs.Run{}, runs.ErrNotFound
	}
	return r, nil
}

func (m *memStore) get(tenant string) Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usage[tenant]
}

// at is a clock stopped at t.
func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func TestLedgerWithoutQuotasNeverReadsTheStore(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	st.failRead = errors.New("the store must not be read")
	for name, l := range map[string]*Ledger{"nil": nil, "zero quotas": NewLedger(Quotas{}, st, nil, zaptest.NewLogger(t))} {
		if err := l.Admit(ctx, "acme", "r1", false); err != nil {
			t.Errorf("%s: Admit = %v, want nil", name, err)
		}
		if !l.StartAllowed(ctx, "acme", "r1") {
			t.Errorf("%s: StartAllowed = false, want true", name)
		}
		cost := 3.0
		l.CountOut(ctx, "acme", "r1", &cost)
	}
	if st.writes != 0 {
		t.Errorf("%d writes to the store of a ledger without quotas", st.writes)
	}
}

func TestLedgerGivesUpUnderContention(t *testing.T) {
	st := newMemStore()
	st.stale = true
	l := NewLedger(Quotas{MaxRunning: 1}, st, nil, zaptest.NewLogger(t))
	err := l.Admit(context.Background(), "acme", "r1", false)
	if err == nil || errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "contention") {
		t.Fatalf("Admit against a record that always changes = %v, want an error of contention, not a quota", err)
	}
	if st.writes != updateRetries {
		t.Errorf("%d compare-and-set attempts, want %d", st.writes, updateRetries)
	}
}

func TestLedgerStartsARunWhenTheStoreFails(t *testing.T) {
	st := newMemStore()
	st.failRead = errors.New("store down")
	core, logs := observer.New(zapcore.WarnLevel)
	l := NewLedger(Quotas{MaxRunning: 1}, st, nil, zap.New(core))
	if !l.StartAllowed(context.Background(), "acme", "r1") {
		t.Fatal("StartAllowed = false while the store fails, want the run to go on")
	}
	if n := logs.FilterMessage("count a tenant's run as running").FilterField(zap.String("run_id", "r1")).Len(); n != 1 {
		t.Errorf("%d warnings of the uncounted run, want 1: %v", n, logs.All())
	}
}

func TestLedgerDailyBudgetRetriesAtMidnightUTC(t *testing.T) {
	st := newMemStore()
	st.usage["acme"], st.rev["acme"] = Usage{Day: "2030-03-04", CostUSD: 1}, 1
	l := NewLedger(Quotas{DailyBudgetUSD: 1}, st, at(time.Date(2030, 3, 4, 22, 30, 0, 0, time.UTC)), zaptest.NewLogger(t))
	var qe *QuotaError
	err := l.Admit(context.Background(), "acme", "r1", false)
	if !errors.As(err, &qe) || qe.Limit != LimitDailyBudget || qe.RetryAfter != 90*time.Minute {
		t.Fatalf("Admit at the budget = %v (%+v), want %s with a retry after 1h30m", err, qe, LimitDailyBudget)
	}
}

func TestLedgerCountOutBeginsANewDay(t *testing.T) {
	st := newMemStore()
	st.usage["acme"], st.rev["acme"] = Usage{Runs: map[string]runs.State{"r1": runs.Running}, Day: "2030-03-04", CostUSD: 0.9}, 1
	l := NewLedger(Quotas{MaxRunning: 2, DailyBudgetUSD: 1}, st, at(time.Date(2030, 3, 5, 0, 0, 1, 0, time.UTC)), zaptest.NewLogger(t))
	cost := 0.25
	l.CountOut(context.Background(), "acme", "r1", &cost)
	if u := st.get("acme"); len(u.Runs) != 0 || u.Day != "2030-03-05" || u.CostUSD != 0.25 {
		t.Errorf("usage after counting out yesterday's run = %+v, want no runs and $0.25 on 2030-03-05", u)
	}
}

func TestLedgerStartAllowedHealsWhatEnded(t *testing.T) {
	st := newMemStore()
	st.runs["done"] = runs.Run{ID: "done", Status: runs.Succeeded}
	st.usage["acme"], st.rev["acme"] = Usage{Runs: map[string]runs.State{"done": runs.Running, "gone": runs.Running, "r1": runs.Queued}}, 1
	l := NewLedger(Quotas{MaxRunning: 1}, st, nil, zaptest.NewLogger(t))
	if !l.StartAllowed(context.Background(), "acme", "r1") {
		t.Fatalf("StartAllowed = false, though the runs counted running ended or are gone: %+v", st.get("acme"))
	}
	if u := st.get("acme"); len(u.Runs) != 1 || u.Runs["r1"] != runs.Running {
		t.Errorf("usage %v, want r1 running alone", u.Runs)
	}
	st.runs["r1"] = runs.Run{ID: "r1", Status: runs.Running}
	if l.StartAllowed(context.Background(), "acme", "r2") {
		t.Errorf("StartAllowed of a second run while r1 runs = true; usage %v", st.get("acme").Runs)
	}
}
