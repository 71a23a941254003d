package fanout

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// feed is one run's store cursor and ring. Its pump goroutine alone
// appends to the ring; readers read it under mu.
type feed struct {
	h  *Hub
	id string

	readers int           // guarded by h.mu
	ready   chan struct{} // closed once start returned
	openErr error         // start's error; read after ready is closed

	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the pump has ended (or never began)

	mu sync.RWMutex
	// evs is the ring: the events read after seq floor, in order; the
	// absolute index of evs[0] is lo. Readers keep absolute indexes, so
	// that one that fell off the ring (its index below lo) knows it.
	evs   []runs.StoredEvent
	lo    uint64
	floor uint64
	bytes int
	// completed: run.completed is in the ring, and nothing follows it.
	completed bool
	// err is why the store cursor failed; readers get it after the ring.
	err error
	// wake is closed, and replaced, when the ring grows or the feed ends,
	// no sooner than wakeGap after the last time (woken): until then a
	// timer (wakeTimer) holds the wake-up back.
	wake      chan struct{}
	woken     time.Time
	wakeTimer *time.Timer
	// ringReaders is the feed's open readers in its ring, for wakeGap.
	ringReaders atomic.Int64

	// local: the ring is kept current by offers alone, and the pump has
	// no store cursor. dropCursor, while the pump reads a store cursor,
	// ends that read: an offer that brings the ring to the log's end
	// calls it. gap: an offer found the ring behind the log while local.
	// offeredAt is when the last offer came. poke wakes a local pump.
	local      bool
	dropCursor context.CancelFunc
	gap        bool
	offeredAt  time.Time
	poke       chan struct{}
}

func newFeed(h *Hub, id string) *feed {
	ctx, cancel := context.WithCancel(context.Background())
	return &feed{
		h: h, id: id,
		ready:   make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
		stopped: make(chan struct{}),
		wake:    make(chan struct{}),
		poke:    make(chan struct{}, 1),
	}
}

// start opens the feed's store cursor and its pump, for a first reader
// after seq after. The ring begins at most RingEvents before the run's
// end: a reader further back reads from the store until it has caught up,
// and the feed does not race through a long log only to drop it.
func (f *feed) start(ctx context.Context, after uint64) error {
	from := after
	last, err := f.h.src.LastEvent(ctx, f.id)
	if err != nil {
		close(f.stopped)
		return fmt.Errorf("open events of run %s: %w", f.id, err)
	}
	if n := uint64(f.h.opts.RingEvents); last.Seq > after+n {
		from = last.Seq - n
	}
	cur, err := f.h.src.OpenCursor(ctx, f.id, from)
	if err != nil {
		close(f.stopped)
		return err
	}
	f.floor = from
	f.h.mu.Lock()
	if f.h.closed {
		f.h.mu.Unlock()
		_ = cur.Close()
		close(f.stopped)
		return fmt.Errorf("open events of run %s: %w", f.id, ErrClosed)
	}
	// Under the Hub's lock, so that Close's Wait does not race the Add.
	f.h.pumps.Add(1)
	f.h.mu.Unlock()
	go f.pump(cur)
	f.h.log.Debug("event feed started", zap.String("run_id", f.id), zap.Uint64("after_seq", from))
	return nil
}

// pump moves events from the store cursor into the ring, never waiting
// for a reader, until run.completed, a failure, or the feed is stopped.
// While offers keep the ring current it closes its store cursor and waits
// (waitLocal), and opens another from the ring's end when they no longer
// do.
func (f *feed) pump(cur runs.Cursor) {
	defer f.h.pumps.Done()
	defer close(f.stopped)
	defer func() {
		f.mu.Lock()
		if f.local {
			f.local = false
			f.h.localFeeds.Add(-1)
		}
		f.mu.Unlock()
	}()
	for {
		err := f.follow(cur)
		_ = cur.Close()
		if err != nil {
			f.fail(err)
			return
		}
		if !f.waitLocal() {
			return
		}
		f.mu.RLock()
		after := f.lastLocked()
		f.mu.RUnlock()
		cur, err = f.h.src.OpenCursor(f.ctx, f.id, after)
		if err != nil {
			f.fail(err)
			return
		}
		f.h.log.Debug("event feed reads the store again", zap.String("run_id", f.id), zap.Uint64("after_seq", after))
	}
}

// follow reads cur into the ring until run.completed (nil, the feed
// done), an offer brings the ring to the log's end (nil, the feed local),
// or cur fails.
func (f *feed) follow(cur runs.Cursor) error {
	ctx, drop := context.WithCancel(f.ctx)
	defer drop()
	f.mu.Lock()
	f.dropCursor = drop
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.dropCursor = nil
		f.mu.Unlock()
	}()
	for {
		evs, err := cur.Next(ctx, f.h.opts.ReadBatch)
		if err != nil {
			if f.ctx.Err() != nil {
				return ErrClosed
			}
			f.mu.RLock()
			local := f.local
			f.mu.RUnlock()
			if ctx.Err() != nil && local {
				return nil
			}
			return err
		}
		f.mu.Lock()
		f.appendLocked(evs)
		done := f.completed
		if done {
			f.wakeLocked()
		} else {
			f.wakeSoonLocked()
		}
		f.mu.Unlock()
		if done {
			// Nothing is stored after run.completed: the store
			// cursor goes now, and the ring stays for the readers.
			return nil
		}
	}
}

// fail ends the feed with err: its readers get what the ring holds, then
// err.
func (f *feed) fail(err error) {
	if f.ctx.Err() != nil {
		err = ErrClosed
	} else {
		f.h.log.Warn("event feed failed", zap.String("run_id", f.id), zap.Error(err))
		f.h.forget(f)
	}
	f.mu.Lock()
	f.err = err
	f.wakeLocked()
	f.mu.Unlock()
}

// stop ends the pump, which closes the store cursor, and waits for it.
func (f *feed) stop() {
	f.cancel()
	<-f.stopped
	f.h.log.Debug("event feed stopped", zap.String("run_id", f.id))
}
