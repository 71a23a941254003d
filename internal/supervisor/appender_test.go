package supervisor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// gatedStore is a memStore whose appends wait for a gate, and which counts
// the batches it was given.
type gatedStore struct {
	*memStore
	gate    chan struct{}
	mu      sync.Mutex
	batches int
}

func (g *gatedStore) AppendEvents(ctx context.Context, id string, evs []runs.StoredEvent) error {
	<-g.gate
	g.mu.Lock()
	g.batches++
	g.mu.Unlock()
	return g.memStore.AppendEvents(ctx, id, evs)
}

func seqs(from, to uint64) []runs.StoredEvent {
	var out []runs.StoredEvent
	for s := from; s <= to; s++ {
		out = append(out, runs.StoredEvent{Seq: s, Type: runs.EventMessageDelta, JSON: []byte(`{}`)})
	}
	return out
}

// Events that queue while an append is in flight are stored in order, as
// one batch, and close returns only when everything is stored.
func TestAppenderBatchesInOrder(t *testing.T) {
	st := &gatedStore{memStore: newMemStore(), gate: make(chan struct{})}
	a := newAppender(st, "r", 1000, time.Second, zap.NewNop())
	a.add(seqs(1, 1)) // taken by the loop, which waits at the gate
	for s := uint64(2); s <= 100; s++ {
		a.add(seqs(s, s))
	}
	close(st.gate)
	a.close()
	evs := st.eventsOf("r")
	if len(evs) != 100 {
		t.Fatalf("stored %d events, want 100", len(evs))
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: out of order", i, e.Seq)
		}
	}
	if st.batches > 3 {
		t.Fatalf("%d appends for 100 events queued behind one: not batched", st.batches)
	}
}

// A store that falls behind holds the reader back instead of letting the
// queue grow without bound.
func TestAppenderFullQueueBlocks(t *testing.T) {
	st := &gatedStore{memStore: newMemStore(), gate: make(chan struct{})}
	a := newAppender(st, "r", 10, time.Second, zap.NewNop())
	a.add(seqs(1, 1))
	waitTaken(a) // in flight, waiting at the gate
	a.add(seqs(2, 11))
	added := make(chan struct{})
	go func() {
		a.add(seqs(12, 12))
		close(added)
	}()
	select {
	case <-added:
		t.Fatal("add returned with the queue full")
	case <-time.After(100 * time.Millisecond):
	}
	close(st.gate)
	<-added
	a.close()
	if n := len(st.eventsOf("r")); n != 12 {
		t.Fatalf("stored %d events, want 12", n)
	}
}

// waitTaken waits until the appender's loop has taken the queue.
func waitTaken(a *appender) {
	for {
		a.mu.Lock()
		n := len(a.queue)
		a.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A long queue is stored in batches of at most maxAppendBatch, in order.
func TestAppenderBoundsBatches(t *testing.T) {
	st := &gatedStore{memStore: newMemStore(), gate: make(chan struct{})}
	a := newAppender(st, "r", 10000, time.Second, zap.NewNop())
	a.add(seqs(1, 1))
	waitTaken(a)
	a.add(seqs(2, 2*maxAppendBatch+10))
	close(st.gate)
	a.close()
	evs := st.eventsOf("r")
	if len(evs) != 2*maxAppendBatch+10 {
		t.Fatalf("stored %d events", len(evs))
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if st.batches != 4 { // 1, then 512, 512, and the last 9
		t.Fatalf("%d appends, want 4", st.batches)
	}
}

// countingStore is a memStore that counts the appends it was given.
type countingStore struct {
	*memStore
	mu      sync.Mutex
	batches int
	events  int
}

func (c *countingStore) AppendEvents(ctx context.Context, id string, evs []runs.StoredEvent) error {
	c.mu.Lock()
	c.batches++
	c.events += len(evs)
	c.mu.Unlock()
	return c.memStore.AppendEvents(ctx, id, evs)
}

func (c *countingStore) counts() (batches, events int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.batches, c.events
}

// waitStored waits until the store holds n events, or fails the test.
func waitStored(t *testing.T, c *countingStore, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, events := c.counts(); events >= n {
			return
		}
		if time.Now().After(deadline) {
			_, events := c.counts()
			t.Fatalf("the store holds %d events after 30s, want %d", events, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Events reaching an idle appender within its window are stored in one
// append, and close does not wait for the window to end: run.completed is
// not held back.
func TestAppenderWindowGathersABurst(t *testing.T) {
	st := &countingStore{memStore: newMemStore()}
	a := newAppenderWindow(st, "r", 1000, time.Second, time.Hour, zap.NewNop())
	for s := uint64(1); s <= 5; s++ {
		a.add(seqs(s, s))
	}
	done := make(chan struct{})
	go func() {
		a.close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("close waited for the window")
	}
	if batches, events := st.counts(); batches != 1 || events != 5 {
		t.Fatalf("%d appends of %d events, want 1 of 5", batches, events)
	}
	for i, e := range st.eventsOf("r") {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: out of order", i, e.Seq)
		}
	}
}

// A window ends by itself: a lone event is stored without close.
func TestAppenderWindowEnds(t *testing.T) {
	st := &countingStore{memStore: newMemStore()}
	a := newAppenderWindow(st, "r", 1000, time.Second, time.Millisecond, zap.NewNop())
	defer a.close()
	a.add(seqs(1, 1))
	waitStored(t, st, 1)
	a.add(seqs(2, 2))
	waitStored(t, st, 2)
}

// Once a window gathered nothing, events that find the appender idle go
// at once, until some come while one is being stored: a run writing one
// event at a time pays no window.
func TestAppenderWindowOnlyForBursts(t *testing.T) {
	st := &gatedStore{memStore: newMemStore(), gate: make(chan struct{}, 1000)}
	a := newAppenderWindow(st, "r", maxAppendBatch, time.Second, time.Hour, zap.NewNop())
	defer a.close()
	open := func() { st.gate <- struct{}{} }
	stored := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for len(st.eventsOf("r")) < n {
			if time.Now().After(deadline) {
				t.Fatalf("the store holds %d events after 30s, want %d: held by a window", len(st.eventsOf("r")), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// A full queue in one add: the window gathers nothing.
	open()
	a.add(seqs(1, maxAppendBatch))
	stored(maxAppendBatch)
	// One at a time now: each goes at once, with no window (of an hour).
	const next = maxAppendBatch + 1
	open()
	a.add(seqs(next, next))
	stored(next)
	// One comes while another is being stored: bursts again, and the
	// next idle event waits for the window, here for close.
	a.add(seqs(next+1, next+1)) // taken, held at the gate
	waitTaken(a)
	a.add(seqs(next+2, next+2)) // queued behind it
	open()
	open()
	stored(next + 2)
	open()
	a.add(seqs(next+3, next+3)) // gathering, for an hour
	a.mu.Lock()
	gathering := a.gathering
	a.mu.Unlock()
	for !gathering {
		time.Sleep(time.Millisecond)
		a.mu.Lock()
		gathering = a.gathering
		a.mu.Unlock()
	}
	a.close()
	if n := len(st.eventsOf("r")); n != next+3 {
		t.Fatalf("stored %d events, want %d", n, next+3)
	}
}

// A whole batch goes at once, whatever is left of the window; so does a
// full queue, so that the reader is not held for the window.
func TestAppenderWindowEndsOnFullBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int
		want int
	}{{"batch", 10000, maxAppendBatch}, {"queue", 20, 20}} {
		t.Run(tc.name, func(t *testing.T) {
			st := &countingStore{memStore: newMemStore()}
			a := newAppenderWindow(st, "r", tc.max, time.Second, time.Hour, zap.NewNop())
			defer a.close()
			for s := uint64(1); s <= uint64(tc.want); s++ {
				a.add(seqs(s, s))
			}
			waitStored(t, st, tc.want)
			if batches, _ := st.counts(); batches != 1 {
				t.Fatalf("%d appends, want 1", batches)
			}
		})
	}
}

// Without a window an event finding the appender idle is appended alone,
// at once, as before windows.
func TestAppenderNoWindow(t *testing.T) {
	st := &countingStore{memStore: newMemStore()}
	a := newAppenderWindow(st, "r", 1000, time.Second, 0, zap.NewNop())
	for s := uint64(1); s <= 3; s++ {
		a.add(seqs(s, s))
		waitStored(t, st, int(s))
	}
	a.close()
	if batches, _ := st.counts(); batches != 3 {
		t.Fatalf("%d appends of 3 events added one at a time, want 3", batches)
	}
}
