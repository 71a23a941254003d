package tenants

import (
	"context"
	"errors"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Usage is what the store keeps of one tenant for its quotas.
type Usage struct {
	// Runs are the tenant's unfinished runs and their state (Queued,
	// Running or Hibernated), while a count is limited.
	Runs map[string]runs.State `json:"runs,omitempty"`
	// Open are those of Runs that are interactive: the tenant's open
	// conversations, for MaxOpen.
	Open map[string]bool `json:"open,omitempty"`
	// Day (UTC, 2006-01-02) and CostUSD are the cost of the tenant's runs
	// that finished that day.
	Day     string  `json:"day,omitempty"`
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// Store is what a Ledger needs of the store every replica shares: the
// tenants' usage records, changed by compare-and-set, and runs' records,
// to find the runs a usage still counts though they ended.
type Store interface {
	// TenantUsage returns what is kept of a tenant for its quotas, and
	// the record's revision for SetTenantUsage (0 when there is none).
	TenantUsage(ctx context.Context, tenant string) (Usage, uint64, error)
	// SetTenantUsage stores u if the tenant's record is still at
	// revision rev (0: there is none), or fails with an error wrapping
	// ErrStale.
	SetTenantUsage(ctx context.Context, tenant string, u Usage, rev uint64) error
	// GetRun returns the run, or an error wrapping runs.ErrNotFound.
	GetRun(ctx context.Context, id string) (runs.Run, error)
}

// ErrQuota: a tenant's quota refuses the request; the error is a
// *QuotaError.
var ErrQuota = errors.New("quota exceeded")

// ErrStale: a compare-and-set found a newer revision than the one read.
var ErrStale = errors.New("stale revision")

// The limits a QuotaError names.
const (
	LimitRunning     = "running"
	LimitQueued      = "queued"
	LimitDailyBudget = "daily_budget"
	LimitOpen        = "open_conversations"
)

// Hibernated is a run's state in Usage.Runs while it hibernates: open,
// but not running.
const Hibernated runs.State = "hibernated"

// QuotaError says which limit refused a run, and when to try again.
type QuotaError struct {
	Limit      string
	Message    string
	RetryAfter time.Duration
}

func (e *QuotaError) Error() string { return e.Message }

func (e *QuotaError) Unwrap() error { return ErrQuota }
