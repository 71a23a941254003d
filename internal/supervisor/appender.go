package supervisor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// appender writes one run's events to the store behind the run's reader,
// so that reading the agent's output does not wait for a store round trip
// per line. Whatever queued while one append was in flight goes in the
// next, as one batch. While the run writes in bursts (the lines of one
// message, a tool's result, spread over a fraction of a millisecond) an
// event that finds the appender idle waits up to its window for the rest
// of its burst, since one append of a burst costs the store little more
// than one of its first event. While events come one at a time, it does
// not: a window that gathers nothing only adds its length to the event's
// latency and a timer to its cost. The queue is bounded: a full queue blocks
// add, so a store that falls behind slows the reader and, through the
// pipe, the agent, and nothing is dropped.
type appender struct {
	store  runs.Store
	runID  string
	log    *zap.Logger
	max    int
	retry  time.Duration // how long one failing batch is tried
	window time.Duration // how long an event arriving at an idle appender waits for others; 0: not at all

	mu        sync.Mutex
	changed   *sync.Cond // on mu: queue grew, shrank, or closing; the window ended
	queue     []runs.StoredEvent
	closing   bool
	gathering bool   // within a window: add wakes the loop only when a batch is full
	adds      uint64 // calls of add so far
	lost      int    // events the store never took
	done      chan struct{}
}

// maxAppendBatch bounds the events of one AppendEvents call. The store
// publishes a batch before it waits for the acks, and a NATS client stalls
// past a few thousand publishes in flight, shared by every run.
const maxAppendBatch = 512

// appendWindow is an appender's window: about what an event's delivery
// takes anyway, and ample for a burst of lines written together.
const appendWindow = time.Millisecond

func newAppender(store runs.Store, runID string, max int, retry time.Duration, log *zap.Logger) *appender {
	return newAppenderWindow(store, runID, max, retry, appendWindow, log)
}

// newAppenderWindow is newAppender with a window of its own; 0 appends
// each event that finds the appender idle at once.
func newAppenderWindow(store runs.Store, runID string, max int, retry, window time.Duration, log *zap.Logger) *appender {
	a := &appender{store: store, runID: runID, log: log, max: max, retry: retry, window: window, done: make(chan struct{})}
	a.changed = sync.NewCond(&a.mu)
	go a.loop()
	return a
}

// add queues evs, in order, waiting while the queue is full.
func (a *appender) add(evs []runs.StoredEvent) {
	a.mu.Lock()
	for len(a.queue) >= a.max && !a.closing {
		a.changed.Wait()
	}
	a.queue = append(a.queue, evs...)
	a.adds++
	if !a.gathering || a.full() {
		// Within a window the loop waits for its end or a full batch,
		// not for each event: waking it per event would cost what the
		// window saves.
		a.changed.Broadcast()
	}
	a.mu.Unlock()
}

// full reports whether the queue holds a whole batch, or as much as it
// may hold; on a.mu.
func (a *appender) full() bool { return len(a.queue) >= min(maxAppendBatch, a.max) }

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
	idle := true   // the queue was empty when the last append ended
	bursty := true // a run starts with a burst: its first lines come together
	for {
		a.mu.Lock()
		for len(a.queue) == 0 && !a.closing {
			a.changed.Wait()
		}
		if len(a.queue) == 0 {
			a.mu.Unlock()
			return
		}
		if idle && bursty && a.window > 0 {
			// What queued behind an append in flight goes at once:
			// it has waited already. An event that found the
			// appender idle waits for the others of its burst.
			// One that nothing joined ends the bursts.
			bursty = a.gather()
		}
		n := min(len(a.queue), maxAppendBatch)
		batch := a.queue[:n:n]
		a.queue = append([]runs.StoredEvent(nil), a.queue[n:]...)
		a.changed.Broadcast() // room again for add
		a.mu.Unlock()
		err := appendWithRetry(a.store, a.runID, batch, a.retry, a.log)
		a.mu.Lock()
		if err != nil {
			a.lost += len(batch)
		}
		idle = len(a.queue) == 0
		if !idle {
			bursty = true // events came while one was being stored
		}
		a.mu.Unlock()
	}
}

// gather waits, on a.mu, until the window has passed since now, the queue
// holds a whole batch, or the appender closes: close appends at once what
// is queued, so that run.completed is not held back. It reports whether
// anything was added meanwhile.
func (a *appender) gather() (joined bool) {
	if a.closing || a.full() {
		return false
	}
	adds := a.adds
	ended := false
	t := time.AfterFunc(a.window, func() {
		a.mu.Lock()
		ended = true
		a.changed.Broadcast()
		a.mu.Unlock()
	})
	a.gathering = true
	for !ended && !a.closing && !a.full() {
		a.changed.Wait()
	}
	a.gathering = false
	t.Stop()
	return a.adds > adds
}

// appendWithRetry appends batch, retrying a failing store for up to retry:
// long enough to outlast a leader election of the store's cluster. The
// store makes a retried append safe (it keeps one copy of each event, in
// order). A batch that still fails is logged and its error returned, never
// silently dropped: the run it belongs to cannot succeed.
func appendWithRetry(store runs.Store, runID string, batch []runs.StoredEvent, retry time.Duration, log *zap.Logger) error {
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
		if errors.Is(err, runs.ErrInvalid) || errors.Is(err, runs.ErrNotFound) || time.Now().Add(backoff).After(deadline) {
			return err // will not get better, or no time left
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, 2*time.Second)
	}
}
