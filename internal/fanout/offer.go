package fanout

import (
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Offer hands the Hub events of the run that this replica has just stored:
// AppendEvents returned nil for them, so they are the log's, in order. The
// replica's store calls it after each append (store.Store.OnAppend). A
// feed of the run whose ring ends right before them takes them at once,
// without waiting for its store cursor to deliver them, and then closes
// that cursor: while the run's events keep coming through Offer, in
// order, its readers cost the store nothing. A feed that sees a gap
// between its ring and an offer (its store cursor has not caught up, or
// another writer stored events in between) leaves it to the store cursor,
// and one kept by Offer alone goes back to a store cursor then, or when no
// offer came for Options.LocalCheck and the store holds events past its
// ring. Events the ring holds already are dropped, so offering a batch
// twice is harmless. Offer does not keep evs' slice; it keeps their JSON,
// which must not change after.
func (h *Hub) Offer(runID string, evs []runs.StoredEvent) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	f := h.feeds[runID]
	h.mu.Unlock()
	if f == nil {
		return
	}
	f.offer(evs)
}

// waitLocal waits while the feed is kept by offers alone, and reports
// whether it needs a store cursor again: an offer found a gap, or none came
// for LocalCheck and the store holds events past the ring. It returns
// false when the run has completed or the feed is stopped.
func (f *feed) waitLocal() bool {
	check := f.h.opts.LocalCheck
	timer := time.NewTimer(check)
	defer timer.Stop()
	for {
		f.mu.Lock()
		switch {
		case f.completed:
			f.mu.Unlock()
			return false
		case !f.local:
			// Not kept by offers: only a store cursor keeps it.
			f.mu.Unlock()
			return true
		case f.gap:
			f.leaveLocalLocked()
			f.mu.Unlock()
			return true
		}
		idle := time.Since(f.offeredAt)
		f.mu.Unlock()
		if idle >= check {
			stored, err := f.h.src.LastEvent(f.ctx, f.id)
			if f.ctx.Err() != nil {
				return false
			}
			f.mu.Lock()
			// A store that cannot answer is asked again next period:
			// a cursor opened on it now would only fail the feed, and
			// creating a consumer on a store in trouble (its disk
			// full) adds to the trouble.
			behind := err == nil && stored.Seq > f.lastLocked()
			if behind && f.local && !f.completed {
				// Written without this replica (another took the
				// run over): the store cursor brings it.
				f.leaveLocalLocked()
				f.mu.Unlock()
				return true
			}
			f.offeredAt = time.Now() // checked: wait another period
			f.mu.Unlock()
			idle = 0
		}
		timer.Reset(check - idle)
		select {
		case <-f.ctx.Done():
			return false
		case <-f.poke:
		case <-timer.C:
		}
	}
}

// leaveLocalLocked marks the feed as reading a store cursor again.
func (f *feed) leaveLocalLocked() {
	f.local, f.gap = false, false
	f.h.localFeeds.Add(-1)
	f.h.fallbacks.Add(1)
}

// offer adds evs, stored by this replica, to the ring if they follow it
// (see Hub.Offer).
func (f *feed) offer(evs []runs.StoredEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.completed || f.err != nil || f.ctx.Err() != nil || (!f.local && f.dropCursor == nil) {
		// Done, or the pump is not reading (not yet started, or
		// opening a store cursor again), which then brings these.
		return
	}
	last := f.lastLocked()
	i := 0
	for i < len(evs) && evs[i].Seq <= last {
		i++
	}
	if i < len(evs) && evs[i].Seq != last+1 {
		// The ring is behind the log: its store cursor brings what is
		// between, and a feed kept by offers alone needs one again.
		if f.local {
			f.gap = true
			f.pokeLocked()
		}
		return
	}
	f.offeredAt = time.Now()
	if i < len(evs) {
		f.appendLocked(evs[i:])
		f.h.offered.Add(int64(len(evs) - i))
	}
	if !f.local && f.dropCursor != nil {
		// The ring is at the log's end, having taken these events or
		// holding them already (its store cursor, racing this
		// replica's acknowledgement, often brings them first): the
		// store cursor is not needed while offers keep it there.
		f.local = true
		f.h.localFeeds.Add(1)
		f.dropCursor()
	}
	switch {
	case f.completed:
		f.wakeLocked()
		f.pokeLocked()
	case i < len(evs):
		f.wakeSoonLocked()
	}
}

func (f *feed) pokeLocked() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}
