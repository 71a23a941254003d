package fanout

import (
	"sync"

	"github.com/agentgate/agentgate/internal/runs"
)

// pollBatches holds the batches of readers that wait, for readers that
// have events to take. A thousand readers of a busy run each take a
// batch several hundred times a second, and clients that lag a little
// take a few dozen events at a time: allocating each batch afresh was
// most of what the gateway allocated with a thousand clients, and the
// collection it drove about a quarter of its CPU. Pooled, a reader holds
// a batch only between taking events and polling again, so a thousand
// waiting readers hold none.
var pollBatches = sync.Pool{New: func() any {
	b := make([]runs.StoredEvent, 0, newPollBatch)
	return &b
}}

// newPollBatch is the room of a new batch in pollBatches: a few dozen
// events, what a reader a little behind a busy run takes at a time.
const newPollBatch = 64

// maxPooledPoll is the largest batch kept in pollBatches: a stream's
// usual batch of 256 events.
const maxPooledPoll = 256

// releasePolled gives the reader's batch back to pollBatches: its caller
// is done with it, and polls no more until it has waited or read on with
// Next.
func (r *reader) releasePolled() {
	putPollBatch(r.polled)
	r.polled = nil
}

// putPollBatch gives b back to pollBatches, cleared so that the pool does
// not keep its events' bytes alive. Only b's length is cleared: a batch
// is cleared before each reuse as well, so what lies past its length was
// cleared before.
func putPollBatch(b *[]runs.StoredEvent) {
	if b == nil || cap(*b) > maxPooledPoll {
		return
	}
	clear(*b)
	*b = (*b)[:0]
	pollBatches.Put(b)
}
