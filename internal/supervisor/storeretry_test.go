package supervisor

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// A store that fails for a while, as a NATS cluster does while it elects a
// leader, loses nothing: the run's events and its final record are retried
// until the store takes them, and the run succeeds with its whole log.
func TestStoreOutageShorterThanRetryLosesNothing(t *testing.T) {
	h := newHarness(t, Config{StoreRetry: time.Minute})
	var failing atomic.Bool
	var refused atomic.Int32
	h.store.failAppend = func(id string, evs []runs.StoredEvent) bool {
		for _, e := range evs {
			if e.Type == runs.EventMessageCompleted && refused.Load() == 0 {
				failing.Store(true) // the outage begins with the first message
			}
		}
		if failing.Load() {
			if refused.Add(1) >= 5 {
				failing.Store(false)
			}
			return true
		}
		return false
	}
	r := h.submit(t, "mode:hello")
	done := h.wait(t, r.ID, 30*time.Second)
	if done.Status != runs.Succeeded {
		t.Fatalf("run through a short outage = %s %+v", done.Status, done.Error)
	}
	if refused.Load() < 5 {
		t.Fatalf("the store refused %d appends, want 5: the outage did not happen", refused.Load())
	}
	evs := h.store.eventsOf(r.ID)
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: lost or reordered (%v)", i, e.Seq, h.types(r.ID))
		}
	}
	if last := evs[len(evs)-1]; last.Type != runs.EventRunCompleted {
		t.Fatalf("last event %s", last.Type)
	}
}

// When the final record cannot be stored for a while, run.completed waits
// for it: a run is never left running once its run.completed is stored.
func TestFinalRecordRetriedBeforeRunCompleted(t *testing.T) {
	h := newHarness(t, Config{StoreRetry: time.Minute})
	var refused atomic.Int32
	h.store.failUpdate = func(r runs.Run) bool {
		if !r.Status.Terminal() {
			return false
		}
		if h.store.hasCompleted(r.ID) {
			t.Errorf("run.completed was stored before the final record")
		}
		return refused.Add(1) <= 3
	}
	r := h.submit(t, "mode:hello")
	done := h.wait(t, r.ID, 30*time.Second)
	if done.Status != runs.Succeeded || refused.Load() != 4 {
		t.Fatalf("run %s after %d refused final writes", done.Status, refused.Load())
	}
	h.waitFor(t, r.ID, runs.EventRunCompleted, "")
}

// A store that stays down longer than the retry time fails the run with
// class store_failed, whatever else it did.
func TestStoreOutageLongerThanRetryFailsRun(t *testing.T) {
	h := newHarness(t, Config{StoreRetry: 200 * time.Millisecond})
	h.store.failAppend = func(id string, evs []runs.StoredEvent) bool {
		for _, e := range evs {
			if e.Type == runs.EventMessageCompleted {
				return true
			}
		}
		return false
	}
	r := h.submit(t, "mode:hello")
	done := h.wait(t, r.ID, 30*time.Second)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.StoreFailed {
		t.Fatalf("run = %s %+v", done.Status, done.Error)
	}
}
