package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// within bounds every wait of these tests: long, since it only guards
// against a hang on a loaded machine.
const within = 60 * time.Second

// readToEnd reads cur until run.completed and checks that it got every
// event after `after` once, in order, up to seq end.
func readToEnd(cur runs.Cursor, after, end uint64, batch int) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	want := after + 1
	for {
		evs, err := cur.Next(ctx, batch)
		if err != nil {
			return fmt.Errorf("after event %d: %w", want-1, err)
		}
		if len(evs) == 0 || len(evs) > batch {
			return fmt.Errorf("batch of %d events, asked for at most %d", len(evs), batch)
		}
		for _, ev := range evs {
			if ev.Seq != want {
				return fmt.Errorf("got event %d, want %d", ev.Seq, want)
			}
			want++
			if ev.Type == runs.EventRunCompleted {
				if ev.Seq != end {
					return fmt.Errorf("run.completed at %d, want %d", ev.Seq, end)
				}
				return nil
			}
		}
	}
}

// feedOf is the hub's feed of run id, nil when there is none.
func feedOf(h *Hub, id string) *feed {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.feeds[id]
}

// waitRing waits until the ring of f holds seq.
func waitRing(t *testing.T, f *feed, seq uint64) {
	t.Helper()
	deadline := time.After(within)
	for {
		f.mu.RLock()
		n := len(f.evs)
		got := n > 0 && f.evs[n-1].Seq >= seq
		wake := f.wake
		f.mu.RUnlock()
		if got {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("the ring never reached event %d", seq)
		}
	}
}

func open(t *testing.T, h *Hub, id string, after uint64) runs.Cursor {
	t.Helper()
	cur, err := h.OpenCursor(context.Background(), id, after)
	if err != nil {
		t.Fatalf("open cursor after %d: %v", after, err)
	}
	return cur
}

// TestEveryReaderGetsEveryEvent: 1, 10 and 1,000 readers of one run, the
// run writing while they read, each get every event once and in order,
// from one store cursor when the ring holds the whole run.
func TestEveryReaderGetsEveryEvent(t *testing.T) {
	for _, n := range []int{1, 10, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			const total = 2000
			src := newMemLog()
			h := New(src, Options{RingEvents: total}, zap.NewNop())
			defer h.Close()
			src.add("r", 5, false)
			curs := make([]runs.Cursor, n)
			for i := range curs {
				curs[i] = open(t, h, "r", 0)
			}
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for i, cur := range curs {
				wg.Go(func() {
					defer cur.Close()
					errs <- readToEnd(cur, 0, total, 1+i%64)
				})
			}
			for sent := 5; sent < total; {
				k := min(7, total-sent)
				src.add("r", k, sent+k == total)
				sent += k
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if opened, open := src.counts(); opened != 1 || open != 0 {
				t.Fatalf("store cursors: %d opened, %d left open; want 1 and 0", opened, open)
			}
			if st := h.Stats(); st.Feeds != 0 || st.StoreReads != 0 {
				t.Fatalf("stats %+v, want no feed and no store read", st)
			}
		})
	}
}

// TestEveryReaderGetsEveryEventEmbeddedStore is the same on the gateway's
// store, with a ring smaller than the run, so that readers also fall off
// it and read on from the store.
func TestEveryReaderGetsEveryEventEmbeddedStore(t *testing.T) {
	st := runstest.Store(t)
	ctx := context.Background()
	const id, total, readers = "run-1", 600, 20
	if err := st.AppendEvents(ctx, id, events(id, 1, 10, false)); err != nil {
		t.Fatal(err)
	}
	h := New(st, Options{RingEvents: 32}, zap.NewNop())
	defer h.Close()
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for i := range readers {
		after := uint64(i % 3 * 4) // 0, 4, 8
		cur := open(t, h, id, after)
		wg.Go(func() {
			defer cur.Close()
			errs <- readToEnd(cur, after, total, 1+i*7%64)
		})
	}
	for seq := uint64(11); seq <= total; seq += 10 {
		if err := st.AppendEvents(ctx, id, events(id, seq, 10, seq+9 == total)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// events are n envelopes of run id from seq first, the last run.completed
// when complete is set.
func events(id string, first uint64, n int, complete bool) []runs.StoredEvent {
	out := make([]runs.StoredEvent, n)
	for i := range out {
		t := runs.EventMessageDelta
		if complete && i == n-1 {
			t = runs.EventRunCompleted
		}
		out[i] = envelope(id, first+uint64(i), t)
	}
	return out
}

// TestStalledReaderLagsOnlyItself: a reader that stops reading does not
// hold up the feed or the other readers; once it reads again it gets what
// fell off the ring from the store, then rejoins the ring.
func TestStalledReaderLagsOnlyItself(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{RingEvents: 16}, zap.NewNop())
	defer h.Close()
	src.add("r", 1, false)
	stalled := open(t, h, "r", 0)
	defer stalled.Close()
	live := open(t, h, "r", 0)
	done := make(chan error, 1)
	go func() {
		defer live.Close()
		done <- readToEnd(live, 0, 1000, 8)
	}()
	for sent := 1; sent < 1000; sent += 9 {
		src.add("r", 9, sent+9 == 1000)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(within):
		t.Fatal("the live reader waited for the stalled one")
	}
	// The live reader, as fast as the run here, may have fallen off
	// too: what counts is the stalled one's own cursor.
	before, _ := src.counts()
	r := stalled.(*reader)
	if err := readToEnd(stalled, 0, 1000, 5); err != nil {
		t.Fatal(err)
	}
	if opened, _ := src.counts(); opened != before+1 {
		t.Fatalf("%d store cursors opened for the stalled reader; want 1", opened-before)
	}
	if opened, _ := src.counts(); h.Stats().StoreReads != int64(opened-1) {
		t.Fatalf("stats %+v, with %d store cursors opened", h.Stats(), opened)
	}
	if r.own != nil {
		t.Fatal("the stalled reader never rejoined the ring")
	}
}

// TestSlowReaderCatchesUpWhileRunWrites: a reader that falls off the ring
// while the run keeps writing rejoins it, with no gap and no duplicate.
func TestSlowReaderCatchesUpWhileRunWrites(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{RingEvents: 8}, zap.NewNop())
	defer h.Close()
	src.add("r", 1, false)
	cur := open(t, h, "r", 0)
	defer cur.Close()
	f := feedOf(h, "r")
	r := cur.(*reader)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var got []uint64
	rejoined := 0
	for sent := 1; ; {
		if sent < 3001 {
			src.add("r", 20, sent+20 == 3001)
			sent += 20
			// The ring moves past the reader.
			waitRing(t, f, uint64(sent))
		}
		wasOwn := r.own != nil
		evs, err := cur.Next(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if wasOwn && r.own == nil {
			rejoined++
		}
		for _, ev := range evs {
			got = append(got, ev.Seq)
		}
		if evs[len(evs)-1].Type == runs.EventRunCompleted {
			break
		}
	}
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("event %d is %d", i+1, seq)
		}
	}
	if len(got) != 3001 {
		t.Fatalf("got %d events, want 3001", len(got))
	}
	if rejoined == 0 {
		t.Fatal("the reader never rejoined the ring")
	}
}

// TestJoinPositions: readers joining a feed at 0 and before the ring (from
// the store), at the ring's first event, mid-ring and at its end (from the
// ring) each get exactly what follows their position.
func TestJoinPositions(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{RingEvents: 16}, zap.NewNop())
	defer h.Close()
	src.add("r", 100, false)
	first := open(t, h, "r", 100)
	defer first.Close()
	f := feedOf(h, "r")
	src.add("r", 20, false) // 101..120: the ring holds 105..120
	waitRing(t, f, 120)
	f.mu.RLock()
	floor := f.floor
	f.mu.RUnlock()
	if floor != 104 {
		t.Fatalf("the ring holds events after %d, want after 104", floor)
	}
	cases := []struct {
		name    string
		after   uint64
		ownWant bool
	}{
		{"at 0", 0, true},
		{"before the ring", 50, true},
		{"just before the ring", 103, true},
		{"at the ring's start", 104, false},
		{"mid-ring", 110, false},
		{"at the end", 120, false},
	}
	curs := make([]runs.Cursor, len(cases))
	for i, c := range cases {
		curs[i] = open(t, h, "r", c.after)
		if own := curs[i].(*reader).own != nil; own != c.ownWant {
			t.Fatalf("%s: reads from a store cursor of its own: %v, want %v", c.name, own, c.ownWant)
		}
	}
	src.add("r", 10, true)
	var wg sync.WaitGroup
	errs := make([]error, len(cases))
	for i, c := range cases {
		wg.Go(func() {
			defer curs[i].Close()
			errs[i] = readToEnd(curs[i], c.after, 130, 4)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", cases[i].name, err)
		}
	}
}

// TestLateFeedStartsNearTheEnd: the first reader of a long run, from its
// start, reads the old events from a store cursor of its own; the feed
// begins a ring's length before the end instead of racing through the
// log.
func TestLateFeedStartsNearTheEnd(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{RingEvents: 10}, zap.NewNop())
	defer h.Close()
	src.add("r", 1000, true)
	cur := open(t, h, "r", 0)
	defer cur.Close()
	f := feedOf(h, "r")
	f.mu.RLock()
	floor := f.floor
	f.mu.RUnlock()
	if floor != 990 {
		t.Fatalf("the feed starts after %d, want 990", floor)
	}
	if err := readToEnd(cur, 0, 1000, 64); err != nil {
		t.Fatal(err)
	}
}

// TestFeedStopsWithItsLastReader: the store cursor closes when the last
// reader leaves, and the next reader starts a feed of its own.
func TestFeedStopsWithItsLastReader(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	src := newMemLog()
	h := New(src, Options{}, zap.NewNop())
	defer h.Close()
	src.add("r", 3, false)
	a, b := open(t, h, "r", 0), open(t, h, "r", 0)
	a.Close()
	if _, n := src.counts(); n != 1 {
		t.Fatalf("%d store cursors open with one reader left; want 1", n)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := a.Next(context.Background(), 1); err == nil {
		t.Fatal("Next after Close returned no error")
	}
	b.Close()
	if _, n := src.counts(); n != 0 || feedOf(h, "r") != nil {
		t.Fatalf("%d store cursors open, and the feed still there, with no reader", n)
	}
	c := open(t, h, "r", 0)
	defer c.Close()
	if opened, _ := src.counts(); opened != 2 {
		t.Fatalf("%d store cursors opened; want a new feed's", opened)
	}
}

// TestCompletedFeedClosesItsStoreCursor: after run.completed the feed
// keeps its ring for its readers, without a store cursor.
func TestCompletedFeedClosesItsStoreCursor(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{}, zap.NewNop())
	defer h.Close()
	src.add("r", 3, false)
	a := open(t, h, "r", 0)
	defer a.Close()
	f := feedOf(h, "r")
	src.add("r", 2, true)
	select {
	case <-f.stopped:
	case <-time.After(within):
		t.Fatal("the feed went on reading after run.completed")
	}
	if _, n := src.counts(); n != 0 {
		t.Fatalf("%d store cursors open after run.completed", n)
	}
	late := open(t, h, "r", 2)
	defer late.Close()
	for _, c := range []struct {
		cur   runs.Cursor
		after uint64
	}{{a, 0}, {late, 2}} {
		if err := readToEnd(c.cur, c.after, 5, 2); err != nil {
			t.Fatal(err)
		}
	}
	if opened, _ := src.counts(); opened != 1 {
		t.Fatalf("%d store cursors opened; the late reader should read the ring", opened)
	}
	// Nothing follows run.completed: Next waits for its context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Next(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next past run.completed: %v, want the context's error", err)
	}
}

// TestHubClose ends every feed; readers get ErrClosed after the ring, and
// no goroutine is left.
func TestHubClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	src := newMemLog()
	h := New(src, Options{}, zap.NewNop())
	src.add("r", 3, false)
	src.add("s", 3, false)
	a, b := open(t, h, "r", 0), open(t, h, "s", 1)
	waitRing(t, feedOf(h, "r"), 3)
	h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	evs, err := a.Next(ctx, 10)
	if err != nil || len(evs) != 3 {
		t.Fatalf("Next after Hub.Close: %d events, %v; want the ring's 3", len(evs), err)
	}
	if _, err := a.Next(ctx, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after the ring: %v, want ErrClosed", err)
	}
	a.Close()
	b.Close()
	if _, n := src.counts(); n != 0 {
		t.Fatalf("%d store cursors open after Close", n)
	}
	if _, err := h.OpenCursor(context.Background(), "r", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("OpenCursor after Close: %v, want ErrClosed", err)
	}
}

// TestStoreCursorError: a store cursor that fails ends the feed; its
// readers get the ring's events, then the failure, as from a store cursor
// of their own, and the next reader starts a new feed.
func TestStoreCursorError(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{}, zap.NewNop())
	defer h.Close()
	src.failAfter = 5
	src.add("r", 3, false)
	curs := []runs.Cursor{open(t, h, "r", 0), open(t, h, "r", 0)}
	src.add("r", 5, false)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for i, cur := range curs {
		var seqs []uint64
		var err error
		for err == nil {
			var evs []runs.StoredEvent
			evs, err = cur.Next(ctx, 2)
			for _, ev := range evs {
				seqs = append(seqs, ev.Seq)
			}
		}
		if !errors.Is(err, errInjected) || fmt.Sprint(seqs) != "[1 2 3 4 5]" {
			t.Fatalf("reader %d: events %v then %v; want 1..5 then the store's failure", i, seqs, err)
		}
		cur.Close()
	}
	src.failAfter = 0
	src.add("r", 1, true)
	again := open(t, h, "r", 0)
	defer again.Close()
	if err := readToEnd(again, 0, 9, 64); err != nil {
		t.Fatal(err)
	}
}

// TestOpenErrors: what the store answers when a feed or a reader's own
// cursor cannot open reaches the caller as it is.
func TestOpenErrors(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{RingEvents: 4}, zap.NewNop())
	defer h.Close()
	src.add("r", 20, false)
	src.openErr = fmt.Errorf("open cursor: %w", runs.ErrStreamCapacity)
	if _, err := h.OpenCursor(context.Background(), "r", 0); !errors.Is(err, runs.ErrStreamCapacity) {
		t.Fatalf("first reader: %v, want ErrStreamCapacity", err)
	}
	if feedOf(h, "r") != nil {
		t.Fatal("a feed that never opened was kept")
	}
	src.openErr = nil
	live := open(t, h, "r", 20)
	defer live.Close()
	src.openErr = fmt.Errorf("open cursor: %w", runs.ErrStreamCapacity)
	// Before the ring: it needs a store cursor of its own.
	if _, err := h.OpenCursor(context.Background(), "r", 0); !errors.Is(err, runs.ErrStreamCapacity) {
		t.Fatalf("reader before the ring: %v, want ErrStreamCapacity", err)
	}
	// In the ring: it does not.
	inRing := open(t, h, "r", 20)
	inRing.Close()
	if _, err := live.Next(context.Background(), 0); !errors.Is(err, runs.ErrInvalid) {
		t.Fatalf("Next(0): %v, want ErrInvalid", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := live.Next(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on an ended context: %v", err)
	}
}

// promisedStepBytes is what docs/security.md promises a reader's batch
// holds at most (or one event): a literal, so that a bound grown back
// fails here rather than moving the test with it.
const promisedStepBytes = 256 << 10

// TestBatchBytes: a reader of 64 KiB events gets them in batches of at
// most promisedStepBytes, however many it asks for, and every event in
// order.
func TestBatchBytes(t *testing.T) {
	const n, size = 40, 64 << 10
	src := newMemLog()
	h := New(src, Options{RingBytes: 8 << 20}, zap.NewNop())
	defer h.Close()
	src.mu.Lock()
	for seq := uint64(1); seq <= n; seq++ {
		typ := runs.EventMessageDelta
		if seq == n {
			typ = runs.EventRunCompleted
		}
		src.events["r"] = append(src.events["r"], runs.StoredEvent{Seq: seq, Type: typ, JSON: make([]byte, size)})
	}
	src.mu.Unlock()
	cur := open(t, h, "r", 0)
	defer cur.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for want := uint64(1); want <= n; {
		evs, err := cur.Next(ctx, 1000)
		if err != nil {
			t.Fatalf("at seq %d: %v", want, err)
		}
		if len(evs)*size > promisedStepBytes {
			t.Fatalf("a batch of %d events of %d KiB, beyond %d bytes", len(evs), size>>10, promisedStepBytes)
		}
		for _, ev := range evs {
			if ev.Seq != want {
				t.Fatalf("event %d, want %d", ev.Seq, want)
			}
			want++
		}
	}
}

// TestRingBytes: the ring keeps no more than its byte bound (but always
// the newest event), and a batch from it no more than maxBatchBytes (but
// always one event), with every event still delivered.
func TestRingBytes(t *testing.T) {
	src := newMemLog()
	h := New(src, Options{RingBytes: 3 << 20}, zap.NewNop())
	defer h.Close()
	big := func(seq uint64, typ runs.EventType) runs.StoredEvent {
		return runs.StoredEvent{Seq: seq, Type: typ, JSON: make([]byte, 700<<10)}
	}
	src.mu.Lock()
	src.events["r"] = []runs.StoredEvent{big(1, runs.EventMessageDelta)}
	src.mu.Unlock()
	cur := open(t, h, "r", 0)
	defer cur.Close()
	f := feedOf(h, "r")
	src.mu.Lock()
	for seq := uint64(2); seq <= 12; seq++ {
		typ := runs.EventMessageDelta
		if seq == 12 {
			typ = runs.EventRunCompleted
		}
		src.events["r"] = append(src.events["r"], big(seq, typ))
	}
	close(src.changed)
	src.changed = make(chan struct{})
	src.mu.Unlock()
	waitRing(t, f, 12)
	f.mu.RLock()
	n, size := len(f.evs), f.bytes
	f.mu.RUnlock()
	if size > 3<<20 || n != 4 {
		t.Fatalf("the ring holds %d events, %d bytes; want 4 within 3 MiB", n, size)
	}
	if err := readToEnd(cur, 0, 12, 100); err != nil {
		t.Fatal(err)
	}
	inRing := open(t, h, "r", 8)
	defer inRing.Close()
	if inRing.(*reader).own != nil {
		t.Fatal("a reader after the ring's floor reads from the store")
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	want := uint64(9)
	for want <= 12 {
		evs, err := inRing.Next(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 1 {
			t.Fatalf("a batch of %d events of 700 KiB, beyond %d bytes", len(evs), maxBatchBytes)
		}
		for _, ev := range evs {
			if ev.Seq != want {
				t.Fatalf("event %d, want %d", ev.Seq, want)
			}
			want++
		}
	}
}
