package runs

import (
	"errors"
	"time"
)

// TenantUsage is what the store keeps of one tenant for its quotas.
type TenantUsage struct {
	// Runs are the tenant's unfinished runs and their state (Queued or
	// Running), while MaxRunning or MaxQueued is set.
	Runs map[string]State `json:"runs,omitempty"`
	// Day (UTC, 2006-01-02) and CostUSD are the cost of the tenant's runs
	// that finished that day.
	Day     string  `json:"day,omitempty"`
	CostUSD float64 `json:"cost_usd,omitempty"`
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
)

// QuotaError says which limit refused a run, and when to try again.
type QuotaError struct {
	Limit      string
	Message    string
	RetryAfter time.Duration
}

func (e *QuotaError) Error() string { return e.Message }

func (e *QuotaError) Unwrap() error { return ErrQuota }
