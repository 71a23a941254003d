package runs

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
)

// appender writes one run's events to the store behind the run's reader,
// so that reading the agent's output does not wait for a store round trip
// per line. Whatever queued while one append was in flight goes in the
// next, as one batch. The queue is bounded: a full queue blocks add, so a
// store that falls behind slows the reader and, through the pipe, the
// agent, and nothing is dropped.
type appender struct {
	store Store
	runID string
	log   *zap.Logger
	max   int
	retry time.Duration // how long one failing batch is tried

	mu      sync.Mutex
	changed *sync.Cond // on mu: queue grew, shrank, or closing
	queue   []StoredEvent
	closing bool
	lost    int // events the store never took
	done    chan struct{}
}

// maxAppendBatch bounds the events of one AppendEvents call. The store
// publishes a batch before it waits for the acks, and a NATS client stalls
// past a few thousand publishes in flight, shared by every run.
const maxAppendBatch = 512

func newAppender(store Store, runID string, max int, retry time.Duration, log *zap.Logger) *appender {
	a := &appender{store: store, runID: runID, log: log, max: max, retry: retry, done: make(chan struct{})}
	a.changed = sync.NewCond(&a.mu)
	go a.loop()
	return a
}

// add queues evs, in order, waiting while the queue is full.
func (a *appender) add(evs []StoredEvent) {
	a.mu.Lock()
	for len(a.queue) >= a.max && !a.closing {
		a.changed.Wait()
	}
	a.queue = append(a.queue, evs...)
	a.changed.Broadcast()
	a.mu.Unlock()
}

// close appends everything queued and returns, once it is stored, how
// many events of the run the store never took.
func (a *appender) close() (lost int) {
	a.mu.Lock()
	a.closing = true
	a.changed.Broadcast()
	a.mu.Unlock()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

func (a *appender) loop() {
	defer close(a.done)
	for {
		a.mu.Lock()
		for len(a.queue) == 0 && !a.closing {
			a.changed.Wait()
		}
		if len(a.queue) == 0 {
			a.mu.Unlock()
			return
		}
		n := min(len(a.queue), maxAppendBatch)
		batch := a.queue[:n:n]
		a.queue = append([]StoredEvent(nil), a.queue[n:]...)
		a.changed.Broadcast() // room again for add
		a.mu.Unlock()
		if err := appendWithRetry(a.store, a.runID, batch, a.retry, a.log); err != nil {
			a.mu.Lock()
			a.lost += len(batch)
			a.mu.Unlock()
		}
	}
}

// appendWithRetry appends batch, retrying a failing store for up to retry:
// long enough to outlast a leader election of the store's cluster. The
// store makes a retried append safe (it keeps one copy of each event, in
// order). A batch that still fails is logged and its error returned, never
// silently dropped: the run it belongs to cannot succeed.
func appendWithRetry(store Store, runID string, batch []StoredEvent, retry time.Duration, log *zap.Logger) error {
	err := retryStore(retry, func(ctx context.Context) error { return store.AppendEvents(ctx, runID, batch) })
	if err != nil {
		log.Error("append events: given up", zap.String("run_id", runID), zap.Uint64("first_seq", batch[0].Seq),
			zap.Int("events", len(batch)), zap.Duration("tried_for", retry), zap.Error(err))
	}
	return err
}

// storeAttemptTimeout bounds one attempt of a retried store write, so that
// a request lost in a leader election is tried again rather than waited on.
const storeAttemptTimeout = 10 * time.Second

// retryStore calls write until it succeeds or retry has passed, backing
// off from 50 ms to 2 s between attempts. It returns the last error.
func retryStore(retry time.Duration, write func(context.Context) error) error {
	deadline := time.Now().Add(retry)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), min(storeAttemptTimeout, max(time.Until(deadline), time.Second)))
		err := write(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotFound) || time.Now().Add(backoff).After(deadline) {
			return err // will not get better, or no time left
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, 2*time.Second)
	}
}
