package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

func queuedRun(t *testing.T, s *Store) runs.Run {
	t.Helper()
	r := runs.Run{ID: newID(t), Agent: "claude", Status: runs.Queued, CreatedAt: time.Now().UTC(),
		Spec: runs.Spec{Agent: "claude", Prompt: "p"}}
	if err := s.CreateRun(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// The queue is shared, FIFO, bounded, and keeps one copy of a run
// enqueued twice; a run's position counts only the runs ahead of it.
func TestQueueOrderPositionAndCapacity(t *testing.T) {
	e := newEnv(t)
	e.stop()
	e.start(Options{QueueSize: 3})
	s := e.s
	var ids []string
	for range 3 {
		r := queuedRun(t, s)
		big := strings.Repeat("x", 300<<10) // more than a record keeps
		if err := s.Enqueue(ctx(t), r.ID, runs.Spec{Agent: "claude", Prompt: big}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	// The same run again is not a fourth place.
	if err := s.Enqueue(ctx(t), ids[0], runs.Spec{Agent: "claude"}); err != nil {
		t.Fatalf("enqueue the same run again: %v", err)
	}
	extra := queuedRun(t, s)
	if err := s.Enqueue(ctx(t), extra.ID, runs.Spec{}); !errors.Is(err, runs.ErrCapacity) {
		t.Fatalf("enqueue into a full queue = %v, want ErrCapacity", err)
	}
	if n, err := s.QueueLength(ctx(t)); err != nil || n != 3 {
		t.Fatalf("length = %d, %v", n, err)
	}
	for i, id := range ids {
		if pos, err := s.QueuePosition(ctx(t), id); err != nil || pos != i+1 {
			t.Fatalf("position of run %d = %d, %v", i, pos, err)
		}
	}
	// Removing the middle run moves the last one up.
	if err := s.Unqueue(ctx(t), ids[1]); err != nil {
		t.Fatal(err)
	}
	if pos, _ := s.QueuePosition(ctx(t), ids[2]); pos != 2 {
		t.Fatalf("position after a removal = %d, want 2", pos)
	}
	if pos, _ := s.QueuePosition(ctx(t), ids[1]); pos != 0 {
		t.Fatalf("removed run's position = %d, want 0", pos)
	}
	q, err := s.Dequeue(ctx(t))
	if err != nil || q.RunID != ids[0] {
		t.Fatalf("dequeue = %+v, %v; want the first run", q, err)
	}
	if q.Spec == nil || len(q.Spec.Prompt) != 300<<10 {
		t.Fatalf("the queue did not carry the whole spec")
	}
	if err := q.Ack(); err != nil {
		t.Fatal(err)
	}
	// A run given back is taken again.
	q, err = s.Dequeue(ctx(t))
	if err != nil || q.RunID != ids[2] {
		t.Fatalf("dequeue = %+v, %v; want the third run", q, err)
	}
	if err := q.Nak(); err != nil {
		t.Fatal(err)
	}
	q, err = s.Dequeue(ctx(t))
	if err != nil || q.RunID != ids[2] {
		t.Fatalf("dequeue after a nak = %+v, %v", q, err)
	}
	q.Ack()
	if n, _ := s.QueueLength(ctx(t)); n != 0 {
		t.Fatalf("length after taking everything = %d", n)
	}
	// Dequeue on an empty queue waits, and ends with its context.
	c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Dequeue(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dequeue on an empty queue = %v", err)
	}
}

// Of several replicas claiming one run at once, exactly one wins.
func TestClaimRunOnce(t *testing.T) {
	e := newEnv(t)
	r := queuedRun(t, e.s)
	const n = 8
	var wg sync.WaitGroup
	wins := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			replica := string(rune('a' + i))
			got, err := e.s.ClaimRun(ctx(t), r.ID, replica)
			switch {
			case err == nil:
				if got.Owner != replica {
					t.Errorf("won with owner %q", got.Owner)
				}
				wins <- replica
			case !errors.Is(err, runs.ErrClaimed):
				t.Errorf("claim: %v", err)
			}
		})
	}
	wg.Wait()
	close(wins)
	var winners []string
	for w := range wins {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("winners %v, want one", winners)
	}
	stored, _ := e.s.GetRun(ctx(t), r.ID)
	if stored.Owner != winners[0] {
		t.Fatalf("stored owner %q, winner %q", stored.Owner, winners[0])
	}
	if _, err := e.s.ClaimRun(ctx(t), newID(t), "a"); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("claim of a missing run = %v", err)
	}
}

// A queued run survives the restart of the (only) server, and is still
// taken afterwards.
func TestQueueSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	r := queuedRun(t, e.s)
	if err := e.s.Enqueue(ctx(t), r.ID, r.Spec); err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.start(Options{})
	q, err := e.s.Dequeue(ctx(t))
	if err != nil || q.RunID != r.ID {
		t.Fatalf("after a restart dequeue = %+v, %v", q, err)
	}
	q.Ack()
}

func TestDeleteRun(t *testing.T) {
	e := newEnv(t)
	r := queuedRun(t, e.s)
	if err := e.s.AppendEvents(ctx(t), r.ID, []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued, JSON: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteRun(ctx(t), r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.GetRun(ctx(t), r.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("get after delete = %v", err)
	}
	if last, err := e.s.LastEvent(ctx(t), r.ID); err != nil || last.Seq != 0 {
		t.Fatalf("events after delete: %+v %v", last, err)
	}
}

// One key records one run; a second claim returns the first record.
func TestClaimIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	first := runs.IdempotencyRecord{RunID: "r1", RequestHash: "h1", CreatedAt: time.Now().UTC().Truncate(time.Second)}
	got, fresh, err := e.s.ClaimIdempotencyKey(ctx(t), "key/with any:chars ✓", first)
	if err != nil || !fresh || got != first {
		t.Fatalf("first claim = %+v %v %v", got, fresh, err)
	}
	got, fresh, err = e.s.ClaimIdempotencyKey(ctx(t), "key/with any:chars ✓", runs.IdempotencyRecord{RunID: "r2", RequestHash: "h2"})
	if err != nil || fresh || got.RunID != "r1" || got.RequestHash != "h1" {
		t.Fatalf("second claim = %+v %v %v", got, fresh, err)
	}
	if _, fresh, _ := e.s.ClaimIdempotencyKey(ctx(t), "another", first); !fresh {
		t.Fatal("another key was taken")
	}
	if _, _, err := e.s.ClaimIdempotencyKey(ctx(t), "", first); !errors.Is(err, runs.ErrInvalid) {
		t.Fatalf("empty key = %v", err)
	}
}

// The embedded server takes a queued run whose spec is as large as the
// API's largest body (2 MiB): the queue message carries it whole.
func TestQueueCarriesLargestSpec(t *testing.T) {
	e := newEnv(t)
	r := queuedRun(t, e.s)
	prompt := strings.Repeat("p", 2<<20-1024)
	if err := e.s.Enqueue(ctx(t), r.ID, runs.Spec{Agent: "claude", Prompt: prompt}); err != nil {
		t.Fatalf("enqueue a 2 MiB spec: %v", err)
	}
	q, err := e.s.Dequeue(ctx(t))
	if err != nil || q.Spec == nil || q.Spec.Prompt != prompt {
		t.Fatalf("dequeue: %v, spec carried whole: %v", err, q.Spec != nil && q.Spec.Prompt == prompt)
	}
	q.Ack()
	// Past the server's limit, it is a clear invalid prompt, not a 500.
	if err := e.s.Enqueue(ctx(t), r.ID, runs.Spec{Agent: "claude", Prompt: strings.Repeat("p", 5<<20)}); !errors.Is(err, runs.ErrInvalid) {
		t.Fatalf("enqueue past the limit = %v, want ErrInvalid", err)
	}
}
