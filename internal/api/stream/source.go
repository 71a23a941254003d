package stream

import (
	"context"

	"github.com/agentgate/agentgate/internal/runs"
)

// Bounds of one client's memory: what a stream holds is its write buffer,
// the rest of the batch being written and the next batch, read ahead.
const (
	// maxBatchBytes bounds one write: events are added to it while it
	// holds less, so a write is at most this or one event, whichever is
	// larger. A client that reads slowly (or not at all, until its write
	// deadline) then holds this much, not BatchSize events' worth: 64 MiB
	// of 256 KiB events.
	maxBatchBytes = runs.ReaderStepBytes
	// maxPooledBytes is the largest write buffer kept in writeBufs: a
	// steady stream's batches and a lagging one's fit in it, a replay's
	// megabyte does not.
	maxPooledBytes = 64 << 10
)

// batch is one result of Cursor.Next. full reports that it held all the
// events asked for: the cursor may well have more at once.
type batch struct {
	events []runs.StoredEvent
	full   bool
	err    error
}

// pollingCursor is a cursor that tells, without waiting, what it has now
// and when to look again: the fan-out hub's readers are. A stream on one
// waits on that channel in its own loop, and needs no goroutine of its
// own to wait in Next: with a thousand clients on a run, that is a
// thousand fewer goroutines, and one goroutine switch fewer per batch.
type pollingCursor interface {
	// Poll returns the events available now, at most max, in a slice
	// the cursor may use again at the next Poll. With none, it returns a
	// channel closed when there may be more, or, when it cannot tell
	// without waiting, no channel: the caller calls Next then.
	Poll(max int) ([]runs.StoredEvent, <-chan struct{}, error)
}

// batchSource is where Serve takes its batches: Poll while the cursor
// answers it, and otherwise a goroutine that waits in Next (started once,
// the first time it is needed), so that pings go out while it waits. The
// goroutine hands over one batch at a time, and the cursor is closed only
// after it has returned, since a cursor has one reader.
type batchSource struct {
	cur   runs.Cursor
	poll  pollingCursor // nil: the cursor is read by the goroutine only
	limit int
	next  int // how many events to ask for next
	// behind reports that the last batch was full: the stream is
	// behind its run (a replay, a client catching up), and the next
	// batch is likely there at once.
	behind bool

	batches chan batch // from the goroutine, once started
}

func newBatchSource(cur runs.Cursor, limit int) *batchSource {
	src := &batchSource{cur: cur, limit: limit, next: limit}
	src.poll, _ = cur.(pollingCursor)
	return src
}

// take returns the events available now without waiting, if the cursor
// can tell; otherwise, or with none, the channel to wait on: wake, closed
// when it is worth polling again, or batches, which hands over a batch.
func (src *batchSource) take(ctx context.Context) (evs []runs.StoredEvent, wake <-chan struct{}, batches <-chan batch, err error) {
	if src.poll != nil && src.batches == nil {
		evs, wake, err := src.poll.Poll(src.next)
		if len(evs) > 0 {
			src.behind = len(evs) >= src.next
		}
		if len(evs) > 0 || wake != nil || err != nil {
			src.next = batchLen(evs, src.limit)
			return evs, wake, nil, err
		}
	}
	if src.batches == nil {
		src.start(ctx)
	}
	return nil, nil, src.batches, nil
}

// start runs the goroutine that reads the cursor with Next until ctx ends
// or the cursor fails.
func (src *batchSource) start(ctx context.Context) {
	src.batches = make(chan batch)
	go func() {
		defer close(src.batches)
		n := src.next
		for {
			evs, err := src.cur.Next(ctx, n)
			full := len(evs) >= n
			n = batchLen(evs, src.limit)
			select {
			case src.batches <- batch{events: evs, full: full, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
}

// close waits for the goroutine, if any (ctx must have ended), and closes
// the cursor.
func (src *batchSource) close() {
	if src.batches != nil {
		for range src.batches {
		}
	}
	_ = src.cur.Close()
}

// batchLen is how many events to ask the cursor for after it gave evs: at
// most limit, and no more than maxBatchBytes of events as big as the largest
// in evs, so that a stream of big events does not read far ahead of what
// it can write.
func batchLen(evs []runs.StoredEvent, limit int) int {
	largest := 0
	for _, ev := range evs {
		largest = max(largest, len(ev.JSON)+eventOverhead)
	}
	if largest == 0 {
		return limit
	}
	return min(limit, max(1, maxBatchBytes/largest))
}
