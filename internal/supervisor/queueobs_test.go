package supervisor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// gatedQueueStore answers QueueLength with what length was when it was
// called, once gate lets it, and counts the calls.
// Its first call closes reading.
type gatedQueueStore struct {
	*memStore
	gate    chan struct{}
	reading chan struct{}
	calls   atomic.Int64
	length  atomic.Int64
}

func (g *gatedQueueStore) QueueLength(ctx context.Context) (int, error) {
	if g.calls.Add(1) == 1 {
		close(g.reading)
	}
	n := int(g.length.Load()) // the length when the read began
	select {
	case <-g.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return n, nil
}

// depthObserver records the queue depths reported.
type depthObserver struct {
	nopObserver
	depths chan int
}

func (d depthObserver) QueueDepth(queued, _ int) { d.depths <- queued }

// Many asks for the queue's length while one read is in flight cost one
// read more, not one each, and what is reported last is read after the
// last ask; the asks never wait for a read.
func TestQueueObserverCoalesces(t *testing.T) {
	st := &gatedQueueStore{memStore: newMemStore(), gate: make(chan struct{}), reading: make(chan struct{})}
	obs := depthObserver{depths: make(chan int, 16)}
	s := &Supervisor{store: st, obs: obs, queueKick: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.queueObserver(ctx) }()
	defer func() { cancel(); <-done }()

	st.length.Store(5)
	s.observeQueue()
	// The first read is in flight, held at the gate.
	select {
	case <-st.reading:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the observer never read the queue")
	}
	for range 100 {
		s.observeQueue() // must not block
	}
	st.length.Store(7)
	close(st.gate)
	if got := <-obs.depths; got != 5 {
		t.Fatalf("first depth %d, want 5", got)
	}
	if got := <-obs.depths; got != 7 {
		t.Fatalf("second depth %d, want 7: the asks during the first read were not served after it", got)
	}
	if n := st.calls.Load(); n != 2 {
		t.Errorf("%d reads for 101 asks, want 2", n)
	}
}
