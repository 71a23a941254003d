package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// Source is where a Hub reads runs' logs: the store. Any runs.EventLog implements
// it.
type Source interface {
	// OpenCursor reads the run's log from the event after seq after.
	OpenCursor(ctx context.Context, runID string, after uint64) (runs.Cursor, error)
	// LastEvent returns the run's last stored event (its JSON unread).
	LastEvent(ctx context.Context, runID string) (runs.StoredEvent, error)
}

// ErrClosed is what readers get once their Hub is closed, and what
// OpenCursor returns after it.
var ErrClosed = errors.New("event hub closed")

// Hub hands out cursors on runs' logs that share, per run, one store cursor
// and a ring of recent events. It is safe for concurrent use; each cursor
// it returns has one reader, like any runs.Cursor.
type Hub struct {
	src  Source
	opts Options
	log  *zap.Logger

	mu     sync.Mutex
	feeds  map[string]*feed // by run id, while they have readers
	closed bool
	pumps  sync.WaitGroup

	// storeReads counts the store cursors readers opened of their own:
	// starting before a ring, or fallen off it; fellOff those of readers
	// that fell off.
	storeReads atomic.Int64
	fellOff    atomic.Int64
	// onRing and onStore are the open readers in a ring and on a store
	// cursor of their own.
	onRing  atomic.Int64
	onStore atomic.Int64
	// delivered counts the events readers returned.
	delivered atomic.Int64
	// offered counts the events that entered rings from Offer;
	// localFeeds the feeds kept by Offer alone now, and fallbacks the
	// times one went back to a store cursor.
	offered    atomic.Int64
	localFeeds atomic.Int64
	fallbacks  atomic.Int64
}

// New returns a Hub reading from src.
func New(src Source, opts Options, log *zap.Logger) *Hub {
	opts.setDefaults()
	return &Hub{src: src, opts: opts, log: log, feeds: map[string]*feed{}}
}

// OpenCursor returns a cursor on the run's log from the event after seq
// after. The first reader of a run on this Hub starts the run's feed (a
// store cursor); errors opening it, or a store cursor of the reader's own
// when it starts before the ring, are returned as the store gave them
// (runs.ErrStreamCapacity among them). It fails with ErrClosed after
// Close.
func (h *Hub) OpenCursor(ctx context.Context, runID string, after uint64) (runs.Cursor, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, fmt.Errorf("open events of run %s: %w", runID, ErrClosed)
		}
		f := h.feeds[runID]
		opener := f == nil
		if opener {
			f = newFeed(h, runID)
			h.feeds[runID] = f
		}
		f.readers++
		h.mu.Unlock()

		if opener {
			f.openErr = f.start(ctx, after)
			if f.openErr != nil {
				// Gone before anyone waiting sees the failure, so that
				// they start feeds of their own.
				h.forget(f)
			}
			close(f.ready)
			if f.openErr != nil {
				h.leave(f)
				return nil, f.openErr
			}
		} else {
			select {
			case <-f.ready:
			case <-ctx.Done():
				h.leave(f)
				return nil, ctx.Err()
			}
			if f.openErr != nil {
				// The opener's attempt failed, perhaps for its own
				// context's sake: make one of our own.
				h.leave(f)
				continue
			}
		}
		r := &reader{f: f, last: after}
		if err := r.place(ctx); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
}

// Close ends every feed and waits for their goroutines. Readers still open
// get ErrClosed once they have read what their feed's ring holds; they
// must still be closed.
func (h *Hub) Close() error {
	h.mu.Lock()
	h.closed = true
	feeds := h.feeds
	h.feeds = map[string]*feed{}
	h.mu.Unlock()
	for _, f := range feeds {
		f.cancel()
	}
	h.pumps.Wait()
	return nil
}

// leave drops one reader of f; the last one stops it.
func (h *Hub) leave(f *feed) {
	h.mu.Lock()
	f.readers--
	last := f.readers == 0
	if last && h.feeds[f.id] == f {
		delete(h.feeds, f.id)
	}
	h.mu.Unlock()
	if last {
		f.stop()
	}
}

// forget removes f, whose store cursor failed, so that the next reader of
// its run starts a new feed.
func (h *Hub) forget(f *feed) {
	h.mu.Lock()
	if h.feeds[f.id] == f {
		delete(h.feeds, f.id)
	}
	h.mu.Unlock()
}
