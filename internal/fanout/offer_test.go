package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/store"
)

// store appends n events to the run's log, as this replica's store would,
// and returns them; the last is run.completed when complete is set.
func (m *memLog) store(runID string, n int, complete bool) []runs.StoredEvent {
	m.add(runID, n, complete)
	m.mu.Lock()
	defer m.mu.Unlock()
	evs := m.events[runID]
	return append([]runs.StoredEvent(nil), evs[len(evs)-n:]...)
}

// waitStats waits until the hub's stats satisfy cond.
func waitStats(t *testing.T, h *Hub, what string, cond func(Stats) bool) {
	t.Helper()
	var last Stats
	defer func() {
		if t.Failed() {
			t.Logf("the hub's stats: %+v", last)
		}
	}()
	waitFor(t, what, func() bool { last = h.Stats(); return cond(last) })
}

// waitOpen waits until the log has n store cursors open.
func waitOpen(t *testing.T, m *memLog, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d store cursors open", n), func() bool { _, open := m.counts(); return open == n })
}

// A run whose events this replica stores and offers is read by its readers
// from memory: once an offer follows the ring, the feed closes its store
// cursor, and every reader still gets every event once, in order, the
// offered run.completed ending them.
func TestOffersKeepAFeedWithoutAStoreCursor(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{}, zap.NewNop())
	defer h.Close()
	h.Offer("r", src.store("r", 3, false)) // no feed yet: nothing happens
	curs := []runs.Cursor{open(t, h, "r", 0), open(t, h, "r", 2)}
	f := feedOf(h, "r")
	waitRing(t, f, 3)
	errs := make(chan error, len(curs))
	for i, cur := range curs {
		go func() { errs <- readToEnd(cur, uint64(2*i), 500, 7) }()
	}
	h.Offer("r", src.store("r", 10, false))
	waitStats(t, h, "a local feed", func(s Stats) bool { return s.LocalFeeds == 1 })
	waitOpen(t, src, 0)
	for sent := 13; sent < 500; sent += 11 {
		n := min(11, 500-sent)
		h.Offer("r", src.store("r", n, sent+n == 500))
	}
	for range curs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, cur := range curs {
		cur.Close()
	}
	st := h.Stats()
	if st.Offered < 400 || st.LocalFallbacks != 0 {
		t.Errorf("offered %d events, fell back %d times; want most offered, no fallback", st.Offered, st.LocalFallbacks)
	}
	waitStats(t, h, "no local feed", func(s Stats) bool { return s.LocalFeeds == 0 && s.Feeds == 0 })
	if opened, _ := src.counts(); opened != 1 {
		t.Errorf("%d store cursors opened, want 1", opened)
	}
}

// A feed kept by offers that meets a gap (events stored that were not
// offered) reads them from a store cursor, in order, and is kept by offers
// again once it has caught up.
func TestOfferAfterAGapGoesBackToTheStore(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{}, zap.NewNop())
	defer h.Close()
	src.add("r", 2, false)
	cur := open(t, h, "r", 0)
	defer cur.Close()
	errs := make(chan error, 1)
	go func() { errs <- readToEnd(cur, 0, 40, 5) }()
	waitRing(t, feedOf(h, "r"), 2)
	h.Offer("r", src.store("r", 3, false))
	waitStats(t, h, "a local feed", func(s Stats) bool { return s.LocalFeeds == 1 })
	// Once its store cursor is closed: one still open may bring what
	// follows before the feed sees the gap, which is as good.
	waitOpen(t, src, 0)
	src.add("r", 4, false)                  // 6..9, never offered
	h.Offer("r", src.store("r", 2, false))  // 10..11: a gap after 5
	h.Offer("r", src.store("r", 20, false)) // 12..31
	waitStats(t, h, "a fallback", func(s Stats) bool { return s.LocalFallbacks == 1 })
	// Once the store cursor has caught up, offers keep the feed again.
	waitRing(t, feedOf(h, "r"), 31)
	h.Offer("r", src.store("r", 5, false))
	waitStats(t, h, "a local feed again", func(s Stats) bool { return s.LocalFeeds == 1 })
	h.Offer("r", src.store("r", 4, true)) // 37..40
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// localFeed is a hub on a log of run "r" with one reader, whose feed has
// taken `offered` events after the first from offers and closed its store
// cursor. The hub and the reader go when the test ends.
func localFeed(t *testing.T, check time.Duration, offered int) (*memLog, *Hub, runs.Cursor) {
	t.Helper()
	src := newMemLog()
	h := New(src, Options{LocalCheck: check}, zap.NewNop())
	t.Cleanup(func() { h.Close() })
	src.add("r", 1, false)
	cur := open(t, h, "r", 0)
	t.Cleanup(func() { cur.Close() })
	waitRing(t, feedOf(h, "r"), 1)
	h.Offer("r", src.store("r", offered, false))
	waitStats(t, h, "a local feed", func(s Stats) bool { return s.LocalFeeds == 1 })
	waitOpen(t, src, 0)
	return src, h, cur
}

// A feed kept by offers whose run is written by someone else (another
// replica took the run over) finds out when no offer came for LocalCheck,
// and reads what was written from the store.
func TestLocalFeedNoticesAnotherWriter(t *testing.T) {
	src, h, cur := localFeed(t, 20*time.Millisecond, 4)
	src.add("r", 3, true) // 6..8, written elsewhere
	if err := readToEnd(cur, 0, 8, 100); err != nil {
		t.Fatal(err)
	}
	if st := h.Stats(); st.LocalFallbacks != 1 {
		t.Errorf("%d fallbacks, want 1", st.LocalFallbacks)
	}
}

// A feed kept by offers whose store cannot say where the run's log ends
// stays as it is, and asks again later: a store cursor opened then would
// only fail the feed.
func TestLocalFeedKeepsThroughAStoreThatCannotAnswer(t *testing.T) {
	src, h, cur := localFeed(t, 5*time.Millisecond, 2)
	src.mu.Lock()
	src.lastErr = errInjected
	src.openErr = errInjected
	calls := src.lastCalls
	src.mu.Unlock()
	src.add("r", 2, false) // 4..5, written elsewhere, not yet seen
	// Three checks fail meanwhile; none ends the feed.
	waitFor(t, "three checks of the store", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.lastCalls-calls >= 3
	})
	if st := h.Stats(); st.LocalFeeds != 1 || st.LocalFallbacks != 0 {
		t.Fatalf("after failed checks: %+v", st)
	}
	src.mu.Lock()
	src.lastErr, src.openErr = nil, nil
	src.mu.Unlock()
	src.add("r", 1, true)
	if err := readToEnd(cur, 0, 6, 10); err != nil {
		t.Fatal(err)
	}
}

// An offer the ring does not follow yet (its store cursor has not caught
// up) is left to the store cursor, and events offered twice, or already
// read, are not delivered twice.
func TestOffersBehindOrRepeatedAreHarmless(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{}, zap.NewNop())
	defer h.Close()
	first := src.store("r", 50, false)
	cur := open(t, h, "r", 0)
	defer cur.Close()
	errs := make(chan error, 1)
	go func() { errs <- readToEnd(cur, 0, 81, 3) }()
	more := src.store("r", 30, false) // 51..80
	h.Offer("r", more[10:])           // perhaps ahead of the ring
	h.Offer("r", first)
	waitRing(t, feedOf(h, "r"), 80)
	h.Offer("r", more)
	h.Offer("r", more)
	h.Offer("r", src.store("r", 1, true))
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// Many offers racing the store cursor, and readers joining and leaving,
// lose and repeat nothing (run with -race).
func TestOffersRaceTheStoreCursor(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{RingEvents: 64, LocalCheck: time.Millisecond}, zap.NewNop())
	defer h.Close()
	const total = 3000
	src.add("r", 1, false)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		cur := open(t, h, "r", uint64(i%2))
		wg.Go(func() {
			defer cur.Close()
			errs <- readToEnd(cur, uint64(i%2), total, 1+i*3)
		})
	}
	for sent := 1; sent < total; {
		n := min(1+sent%9, total-sent)
		evs := src.store("r", n, sent+n == total)
		if sent%5 != 0 { // some never offered, as another writer's
			h.Offer("r", evs)
		}
		sent += n
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The gateway's store, with the Hub registered for its appends, offers
// the Hub what its AppendEvents stored, and nothing when the append fails;
// readers of a run written through it read it from memory once caught up,
// and get every event once, in order.
func TestStoreOffersItsAppends(t *testing.T) {
	st := runstest.Store(t)
	ctx := context.Background()
	const id, total = "run-1", 600
	h := New(st, Options{RingEvents: 64}, zap.NewNop())
	defer h.Close()
	offering := st.(*store.Store)
	offering.OnAppend(h.Offer)
	if err := offering.AppendEvents(ctx, id, events(id, 1, 10, false)); err != nil {
		t.Fatal(err)
	}
	if got := h.Stats().Offered; got != 0 {
		t.Errorf("offered %d events to a run without readers", got)
	}
	errs := make(chan error, 4)
	for i := range 4 {
		cur := open(t, h, id, uint64(i*3))
		go func() {
			defer cur.Close()
			errs <- readToEnd(cur, uint64(i*3), total, 1+i*5)
		}()
	}
	waitRing(t, feedOf(h, id), 10)
	for seq := uint64(11); seq <= total; seq += 10 {
		if err := offering.AppendEvents(ctx, id, events(id, seq, 10, seq+9 == total)); err != nil {
			t.Fatal(err)
		}
		if seq == 11 {
			waitStats(t, h, "a local feed", func(s Stats) bool { return s.LocalFeeds == 1 })
			bad := events(id, 30, 1, false)
			if err := offering.AppendEvents(ctx, id, bad); !errors.Is(err, runs.ErrInvalid) {
				t.Fatalf("append with a gap: %v, want invalid", err)
			}
		}
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st2 := h.Stats()
	if st2.Offered < total-20 || st2.LocalFallbacks != 0 {
		t.Errorf("offered %d of %d events, %d fallbacks", st2.Offered, total, st2.LocalFallbacks)
	}
}
