package autorun

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// WhenBusy is what a start does while the owner's previous run has not
// ended.
type WhenBusy string

// The rules of WhenBusy.
const (
	// Skip records the start as skipped_busy and starts nothing.
	Skip WhenBusy = "skip"
	// Queue keeps one start waiting until the previous run ends; a
	// further start while one waits is skipped.
	Queue WhenBusy = "queue"
	// CancelPrevious cancels the previous run and starts at once.
	CancelPrevious WhenBusy = "cancel_previous"
)

// WhenBusyValues are the accepted values, for messages.
var WhenBusyValues = []WhenBusy{Skip, Queue, CancelPrevious}

// Valid reports whether w is one of WhenBusyValues.
func (w WhenBusy) Valid() bool { return w == Skip || w == Queue || w == CancelPrevious }

// Outcome is what became of one fire or delivery.
type Outcome string

// The outcomes a Record holds.
const (
	Started     Outcome = "started"
	SkippedBusy Outcome = "skipped_busy"
	Queued      Outcome = "queued"
	Refused     Outcome = "refused"
	Missed      Outcome = "missed"
	Ignored     Outcome = "ignored"
)

// ErrorInfo is an error as the API gives it: a stable code and a sentence.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Record is one fire of a schedule or one delivery to a trigger: when,
// and what it started. Key is its claim's key, which is also the
// idempotency key of the run it starts.
type Record struct {
	Key       string     `json:"key"`
	ID        string     `json:"id,omitempty"` // a delivery's id
	Time      time.Time  `json:"time"`
	Outcome   Outcome    `json:"outcome"`
	RunID     string     `json:"run_id,omitempty"`
	BusyRunID string     `json:"busy_run_id,omitempty"`
	Error     *ErrorInfo `json:"error,omitempty"`
	// Manual: fired by POST /v1/schedules/{id}/run.
	Manual bool `json:"manual,omitempty"`
	// DeliveryID and Event are a delivery's, from its sender.
	DeliveryID string `json:"delivery_id,omitempty"`
	Event      string `json:"event,omitempty"`
	// Lag is how long after Time a clock fire's run was submitted.
	Lag time.Duration `json:"lag,omitempty"`
}

// Final reports whether the record's outcome will not change: all but
// Queued.
func (r Record) Final() bool { return r.Outcome != Queued && r.Outcome != "" }

// MaxRecent is how many Records an owner keeps: the API's listing.
const MaxRecent = 100

// Pending is a start in progress: the replica that set it is submitting
// the run of Key. It is a lease: past PendingLease another replica may
// act as if it were gone.
type Pending struct {
	Key string    `json:"key"`
	At  time.Time `json:"at"`
}

// PendingLease bounds how long a Pending start holds its owner.
const PendingLease = 30 * time.Second

// Waiting is a start held by Queue until the previous run ends. Prompt is
// what Owner.KeepPrompt kept of the run's rendered prompt where the owner
// renders one per start (a trigger), so that the delivery need not be
// kept.
type Waiting struct {
	Record Record `json:"record"`
	Prompt string `json:"prompt,omitempty"`
}

// State is an owner's record in the store.
type State struct {
	LastRunID string   `json:"last_run_id,omitempty"`
	Pending   *Pending `json:"pending,omitempty"`
	Waiting   *Waiting `json:"waiting,omitempty"`
	// Cursor is a schedule's last fire time handled: every fire time
	// up to it has its Record (or was found missed).
	Cursor time.Time `json:"cursor,omitzero"`
	// Recent are the owner's Records, newest first, at most MaxRecent.
	Recent []Record `json:"recent,omitempty"`
}

// Put adds rec to Recent, replacing the record of the same key, newest
// first and bounded.
func (st *State) Put(rec Record) {
	out := make([]Record, 0, min(len(st.Recent)+1, MaxRecent))
	out = append(out, rec)
	for _, r := range st.Recent {
		if r.Key != rec.Key && len(out) < MaxRecent {
			out = append(out, r)
		}
	}
	st.Recent = out
}

// Find returns the record of key.
func (st State) Find(key string) (Record, bool) {
	for _, r := range st.Recent {
		if r.Key == key {
			return r, true
		}
	}
	return Record{}, false
}

// pendingHeld reports whether another start than key holds the owner.
func (st State) pendingHeld(key string, now time.Time) bool {
	return st.Pending != nil && st.Pending.Key != key && now.Sub(st.Pending.At) < PendingLease
}

// StateKey is the store key of an owner's State.
func StateKey(kind, id string) string { return fmt.Sprintf("state.%s.%s", kind, id) }

// TenantKey is the token that stands for tenant in store keys: any
// tenant name is a valid key token this way, and tenants' owners are
// listed apart.
func TenantKey(tenant string) string {
	sum := sha256.Sum256([]byte(tenant))
	return hex.EncodeToString(sum[:12])
}

// Latest is the first limit of recs (newest first), each as as makes it:
// the fires or deliveries the API lists.
func Latest[T any](recs []Record, limit int, as func(Record) T) []T {
	out := make([]T, 0, min(len(recs), limit))
	for _, r := range recs[:min(len(recs), limit)] {
		out = append(out, as(r))
	}
	return out
}
