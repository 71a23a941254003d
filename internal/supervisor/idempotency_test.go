package supervisor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// One Idempotency-Key makes one run: the same spec returns it, however
// many submit it at once; another spec is refused.
func TestIdempotentSubmit(t *testing.T) {
	h := newHarness(t, Config{})
	spec := runs.Spec{Agent: "fake", Prompt: "mode:hello", IdempotencyKey: "order-42"}
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := h.sup.Submit(context.Background(), spec)
			if err != nil {
				t.Errorf("submit %d: %v", i, err)
				return
			}
			ids[i] = r.ID
		})
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("one key made runs %v", ids)
		}
	}
	if page, _ := h.store.ListRuns(context.Background(), runs.Filter{}); len(page.Runs) != 1 {
		t.Fatalf("%d runs stored, want 1", len(page.Runs))
	}
	done := h.wait(t, ids[0], 30*time.Second)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s", done.Status)
	}
	// Later, the same request returns the run as it is now.
	again, err := h.sup.Submit(context.Background(), spec)
	if err != nil || again.ID != ids[0] || again.Status != runs.Succeeded {
		t.Fatalf("a retry after the run ended = %s %s, %v", again.ID, again.Status, err)
	}
	other := spec
	other.Prompt = "mode:tool"
	if _, err := h.sup.Submit(context.Background(), other); !errors.Is(err, runs.ErrIdempotencyMismatch) {
		t.Fatalf("the key with another spec = %v, want ErrIdempotencyMismatch", err)
	}
	// Without a key, the same spec makes a new run.
	spec.IdempotencyKey = ""
	if r, err := h.sup.Submit(context.Background(), spec); err != nil || r.ID == ids[0] {
		t.Fatalf("a submit without a key = %s, %v", r.ID, err)
	}
}

// A client that left before its run was recorded creates nothing, and a
// retry with its key makes the run.
func TestSubmitAbandonedCreatesNothing(t *testing.T) {
	h := newHarness(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	spec := runs.Spec{Agent: "fake", Prompt: "mode:hello", IdempotencyKey: "k1"}
	if _, err := h.sup.Submit(ctx, spec); !errors.Is(err, context.Canceled) {
		t.Fatalf("submit of a gone client = %v", err)
	}
	if page, _ := h.store.ListRuns(context.Background(), runs.Filter{}); len(page.Runs) != 0 {
		t.Fatalf("a gone client's submission stored %d runs", len(page.Runs))
	}
	r, err := h.sup.Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if done := h.wait(t, r.ID, 30*time.Second); done.Status != runs.Succeeded {
		t.Fatalf("the retried run %s", done.Status)
	}
}
