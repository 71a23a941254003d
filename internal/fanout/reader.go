package fanout

import (
	"context"
	"errors"

	"github.com/agentgate/agentgate/internal/runs"
)

// maxBatchBytes bounds the envelopes of one batch a reader gets from the
// ring, like a store cursor's buffer: a reader of big events gets them a
// few at a time (always at least one).
const maxBatchBytes = runs.ReaderStepBytes

// errReaderClosed is what Next returns after Close.
var errReaderClosed = errors.New("cursor closed")

// reader is a runs.Cursor on a feed: a position in its ring, or, while it
// is behind the ring, a store cursor of its own.
type reader struct {
	f *feed
	// last is the seq of the last event returned (at first, the one it
	// starts after): nothing at or below it is returned.
	last uint64
	// next is the absolute index in the ring of the next event to look
	// at, while own is nil.
	next   uint64
	own    runs.Cursor
	closed bool
	// at is where the reader reads from now, as the Hub's Stats count it.
	at readerPlace
	// polled holds what the last Poll returned, reused by the next: a
	// stream polls again only once it has written it. A reader that finds
	// nothing new gives it back to pollBatches before it waits. (A
	// pointer, as the pool keeps it, so that giving it back allocates
	// nothing.)
	polled *[]runs.StoredEvent
}

// readerPlace is where a reader reads from.
type readerPlace int

const (
	nowhere readerPlace = iota // not yet placed, or closed
	inRing
	onStoreCursor
)

// move records that the reader now reads from p.
func (r *reader) move(p readerPlace) {
	h := r.f.h
	switch r.at {
	case inRing:
		h.onRing.Add(-1)
		r.f.ringReaders.Add(-1)
	case onStoreCursor:
		h.onStore.Add(-1)
	}
	switch p {
	case inRing:
		h.onRing.Add(1)
		r.f.ringReaders.Add(1)
	case onStoreCursor:
		h.onStore.Add(1)
	}
	r.at = p
}

// place puts a new reader in the ring, or on a store cursor of its own
// when it starts before the ring.
func (r *reader) place(ctx context.Context) error {
	if r.join() {
		r.move(inRing)
		return nil
	}
	cur, err := r.f.h.src.OpenCursor(ctx, r.f.id, r.last)
	if err != nil {
		return err
	}
	r.f.h.storeReads.Add(1)
	r.own = cur
	r.move(onStoreCursor)
	return nil
}

// join moves the reader into the ring if the ring holds every event after
// the reader's last, or will: it reports whether it did.
func (r *reader) join() bool {
	f := r.f
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.err != nil || r.last < f.floor {
		return false
	}
	r.next = f.indexAfterLocked(r.last)
	return true
}

// Next returns the next events after the reader's position, at most max,
// waiting for one until ctx ends. A reader that fell off the ring opens a
// store cursor from where it is, and comes back to the ring once that has
// caught up. After its feed fails, a reader gets the events the ring still
// holds, then the failure.
func (r *reader) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	if max <= 0 {
		return nil, runs.Invalid("max", "must be positive")
	}
	if r.closed {
		return nil, errReaderClosed
	}
	f := r.f
	for {
		if r.own != nil {
			evs, err := r.own.Next(ctx, max)
			if err != nil {
				return nil, err
			}
			out := evs[:0]
			for _, ev := range evs {
				if ev.Seq > r.last {
					out = append(out, ev)
					r.last = ev.Seq
				}
			}
			if r.join() {
				_ = r.own.Close()
				r.own = nil
				r.move(inRing)
			}
			if len(out) > 0 {
				f.h.delivered.Add(int64(len(out)))
				return out, nil
			}
			continue
		}

		f.mu.RLock()
		if r.next < f.lo {
			f.mu.RUnlock()
			// Fell off the ring: read on from the store.
			cur, err := f.h.src.OpenCursor(ctx, f.id, r.last)
			if err != nil {
				return nil, err
			}
			f.h.storeReads.Add(1)
			f.h.fellOff.Add(1)
			r.own = cur
			r.move(onStoreCursor)
			continue
		}
		if int(r.next-f.lo) < len(f.evs) {
			out := r.takeLocked(max, nil)
			f.mu.RUnlock()
			if len(out) > 0 {
				return out, nil
			}
			continue
		}
		err, wake := f.err, f.wake
		f.mu.RUnlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// takeLocked returns the ring's events from the reader's position on, at
// most limit and about maxBatchBytes, and moves the reader past them: in
// reuse when they fit in it, else in a new slice. It returns none when the
// ring has nothing newer than the reader's last.
func (r *reader) takeLocked(limit int, reuse []runs.StoredEvent) []runs.StoredEvent {
	f := r.f
	for int(r.next-f.lo) < len(f.evs) {
		i := int(r.next - f.lo)
		out := reuse[:0]
		if n := min(limit, len(f.evs)-i); cap(out) < n {
			out = make([]runs.StoredEvent, 0, n)
		}
		size := 0
		for ; i < len(f.evs) && len(out) < limit; i++ {
			ev := f.evs[i]
			if len(out) > 0 && size+len(ev.JSON) > maxBatchBytes {
				break
			}
			r.next++
			if ev.Seq <= r.last {
				continue
			}
			out = append(out, ev)
			size += len(ev.JSON)
			r.last = ev.Seq
		}
		if len(out) > 0 {
			f.h.delivered.Add(int64(len(out)))
			return out
		}
	}
	return nil
}

// Poll is Next without the wait, for a caller that waits on other things
// too and would rather not spend a goroutine on each reader: it returns
// the events the ring holds after the reader's position now, at most max,
// in a slice that is the reader's again at its next Poll (a caller polls
// once it is done with them; Next's are the caller's to keep).
// With none, it returns a channel that is closed when the ring may have
// more (Poll again then), or the feed's failure once the ring has nothing
// left for the reader. A reader that reads from a store cursor of its own,
// or has just fallen off the ring, returns no events and no channel: its
// caller calls Next, which reads the store.
func (r *reader) Poll(max int) ([]runs.StoredEvent, <-chan struct{}, error) {
	if max <= 0 {
		return nil, nil, runs.Invalid("max", "must be positive")
	}
	if r.closed {
		return nil, nil, errReaderClosed
	}
	if r.own != nil {
		r.releasePolled() // its caller reads with Next now
		return nil, nil, nil
	}
	f := r.f
	f.mu.RLock()
	defer f.mu.RUnlock()
	if r.next < f.lo {
		r.releasePolled()
		return nil, nil, nil
	}
	if r.polled == nil {
		r.polled = pollBatches.Get().(*[]runs.StoredEvent)
	} else {
		clear(*r.polled) // see putPollBatch: what is past its length is zero
	}
	if out := r.takeLocked(max, *r.polled); len(out) > 0 {
		*r.polled = out // a batch it outgrew is dropped
		return out, nil, nil
	}
	// Nothing new: the caller is done with the last batch, and is about
	// to wait.
	r.releasePolled()
	if f.err != nil {
		return nil, nil, f.err
	}
	return nil, f.wake, nil
}

// Close releases the reader, and its store cursor if it has one; the last
// reader of a run stops the run's feed.
func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.move(nowhere)
	if r.own != nil {
		_ = r.own.Close()
		r.own = nil
	}
	r.f.h.leave(r.f)
	return nil
}
