package runs

import (
	"context"
	"sync"
	"testing"
	"time"

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

func (g *gatedStore) AppendEvents(ctx context.Context, id string, evs []StoredEvent) error {
	<-g.gate
	g.mu.Lock()
	g.batches++
	g.mu.Unlock()
	return g.memStore.AppendEvents(ctx, id, evs)
}

func seqs(from, to uint64) []StoredEvent {
	var out []StoredEvent
	for s := from; s <= to; s++ {
		out = append(out, StoredEvent{Seq: s, Type: EventMessageDelta, JSON: []byte(`{}`)})
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
