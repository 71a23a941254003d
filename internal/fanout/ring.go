package fanout

import (
	"sort"

	"github.com/agentgate/agentgate/internal/runs"
)

// lastLocked is the seq of the ring's last event, or the seq it begins
// after.
func (f *feed) lastLocked() uint64 {
	if n := len(f.evs); n > 0 {
		return f.evs[n-1].Seq
	}
	return f.floor
}

// appendLocked adds evs to the ring and drops its oldest events beyond its
// bounds.
func (f *feed) appendLocked(evs []runs.StoredEvent) {
	opts := f.h.opts
	for _, ev := range evs {
		if f.completed {
			return
		}
		if n := len(f.evs); (n > 0 && ev.Seq <= f.evs[n-1].Seq) || (n == 0 && ev.Seq <= f.floor) {
			continue // a store cursor never gives it; a reader must never get it twice
		}
		f.evs = append(f.evs, ev)
		f.bytes += len(ev.JSON)
		f.completed = ev.Type == runs.EventRunCompleted
		for len(f.evs) > opts.RingEvents || (f.bytes > opts.RingBytes && len(f.evs) > 1) {
			f.floor = f.evs[0].Seq
			f.bytes -= len(f.evs[0].JSON)
			// Cleared, so that the backing array does not keep its
			// envelope alive until the next reallocation.
			f.evs[0] = runs.StoredEvent{}
			f.evs = f.evs[1:]
			f.lo++
		}
	}
}

// indexAfterLocked is the absolute index of the first event of the ring
// above seq (the ring's end when there is none).
func (f *feed) indexAfterLocked(seq uint64) uint64 {
	i := sort.Search(len(f.evs), func(i int) bool { return f.evs[i].Seq > seq })
	return f.lo + uint64(i)
}
