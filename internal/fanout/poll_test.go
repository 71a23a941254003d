package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// poller is what the api's streams use of a reader besides Next.
type poller interface {
	Poll(max int) ([]runs.StoredEvent, <-chan struct{}, error)
}

// TestPoll: Poll gives what the ring holds after the reader, then a channel
// that closes when there is more; a reader that fell off the ring answers
// neither, and Next reads it on from the store, without a gap; once back on
// the ring, it polls again.
func TestPoll(t *testing.T) {
	src := newMemLog()
	src.add("r", 3, false)
	h := New(src, Options{RingEvents: 4}, zap.NewNop())
	defer h.Close()
	cur := open(t, h, "r", 0)
	defer cur.Close()
	p := cur.(poller)

	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	want := uint64(1)
	// take polls until it has the events up to end, waiting on the
	// channels Poll gives.
	take := func(end uint64) {
		t.Helper()
		for want <= end {
			evs, wake, err := p.Poll(2)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Seq != want {
					t.Fatalf("event %d, want %d", ev.Seq, want)
				}
				want++
			}
			if len(evs) == 0 {
				if wake == nil {
					t.Fatalf("Poll in the ring gave no events and no channel, at %d", want)
				}
				select {
				case <-wake:
				case <-ctx.Done():
					t.Fatalf("no wake-up for event %d", want)
				}
			}
		}
	}
	take(3)
	src.add("r", 2, false)
	take(5)

	// 10 more: the ring keeps 4, so the reader, at 5, is off it.
	src.add("r", 10, false)
	waitFor(t, "the ring to move past the reader", func() bool {
		evs, wake, err := p.Poll(100)
		return len(evs) == 0 && wake == nil && err == nil
	})
	if cur.(*reader).polled != nil {
		t.Fatal("a reader off the ring still holds its last poll's batch")
	}
	evs, err := cur.Next(ctx, 3)
	if err != nil || len(evs) != 3 || evs[0].Seq != 6 {
		t.Fatalf("Next off the ring: %d events from %v, %v", len(evs), evs, err)
	}
	want = 9
	for want <= 15 {
		evs, err := cur.Next(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Seq != want {
				t.Fatalf("event %d, want %d", ev.Seq, want)
			}
			want++
		}
	}
	if st := h.Stats(); st.FellOff != 1 || st.RingReaders != 1 || st.StoreReaders != 0 {
		t.Fatalf("stats %+v, want one fall, the reader back on the ring", st)
	}
	src.add("r", 1, true)
	take(16)

	_ = cur.Close()
	if _, _, err := p.Poll(1); !errors.Is(err, errReaderClosed) {
		t.Fatalf("Poll after Close: %v", err)
	}
}

// TestSpacedWakeUps: with wake-ups spaced apart, events that come between
// two are not lost: readers waiting in Next get them when the held-back
// wake-up comes, and run.completed wakes them at once.
func TestSpacedWakeUps(t *testing.T) {
	src := newMemLog()
	src.add("r", 1, false)
	h := New(src, Options{WakePerReader: within, MaxWakeDelay: 100 * time.Millisecond}, zap.NewNop())
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	readers := make([]runs.Cursor, 3)
	for i := range readers {
		readers[i] = open(t, h, "r", 0)
		defer readers[i].Close()
	}
	want := make([]uint64, len(readers))
	// Each round adds events and waits for every reader to have them,
	// whether their wake-up came at once or was held back.
	for round := range 5 {
		complete := round == 4
		src.add("r", 3, complete)
		end := uint64(1 + 3*(round+1))
		for i, cur := range readers {
			for want[i] < end {
				evs, err := cur.Next(ctx, 64)
				if err != nil {
					t.Fatalf("reader %d in round %d: %v", i, round, err)
				}
				for _, ev := range evs {
					if ev.Seq != want[i]+1 {
						t.Fatalf("reader %d: event %d after %d", i, ev.Seq, want[i])
					}
					want[i] = ev.Seq
				}
			}
		}
	}
	if st := h.Stats(); st.Delivered != 3*16 {
		t.Fatalf("delivered %d, want %d", st.Delivered, 3*16)
	}
}

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPollReusesOnlyItsOwn: a reader reuses the slice of its last Poll for
// the next, and only its own: two readers of one ring never share one, and
// what Next returned stays the caller's.
func TestPollReusesOnlyItsOwn(t *testing.T) {
	src := newMemLog()
	src.add("r", 2, false)
	h := New(src, Options{}, zap.NewNop())
	defer h.Close()
	a, b := open(t, h, "r", 0), open(t, h, "r", 0)
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	kept, err := a.Next(ctx, 1)
	if err != nil || len(kept) != 1 || kept[0].Seq != 1 {
		t.Fatalf("Next: %v, %v", kept, err)
	}
	first := pollUntil(ctx, t, a.(poller), 8)
	evB := pollUntil(ctx, t, b.(poller), 8)
	if &first[0] == &evB[0] {
		t.Fatal("two readers' polls share a slice")
	}
	// Rewound, a reader takes the same events again: into the slice its
	// last Poll returned, since it has not waited since.
	ra := a.(*reader)
	ra.next, ra.last = ra.f.lo, 0
	second := pollUntil(ctx, t, a.(poller), 8)
	if second[0].Seq != 1 || kept[0].Seq != 1 {
		t.Fatalf("second poll %v, kept %v", second, kept)
	}
	if &first[:1][0] != &second[:1][0] {
		t.Error("a reader's second poll did not reuse its first's slice")
	}
}

// pollUntil polls p until it returns events, waiting on the channels it
// gives meanwhile.
func pollUntil(ctx context.Context, t *testing.T, p poller, max int) []runs.StoredEvent {
	t.Helper()
	for {
		evs, wake, err := p.Poll(max)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 {
			return evs
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatal("no events")
		}
	}
}

// TestPollGivesItsBatchBackToWait: a reader that finds nothing new holds
// no batch while it waits, and the batch it gave back no longer holds the
// events' bytes; a reader that takes events, then waits, over and over,
// allocates nothing for its batches.
func TestPollGivesItsBatchBackToWait(t *testing.T) {
	src := newMemLog()
	src.add("r", 3, false)
	h := New(src, Options{}, zap.NewNop())
	defer h.Close()
	cur := open(t, h, "r", 0)
	defer cur.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	p, r := cur.(poller), cur.(*reader)
	evs := pollUntil(ctx, t, p, 8)
	for len(evs) < 3 { // the ring may have got them one at a time
		evs = append(slices.Clone(evs), pollUntil(ctx, t, p, 8)...)
	}
	got, wake, err := p.Poll(8)
	if len(got) != 0 || wake == nil || err != nil {
		t.Fatalf("Poll with nothing new: %d events, wake %v, %v", len(got), wake, err)
	}
	if r.polled != nil {
		t.Fatalf("a waiting reader holds a batch of %d", cap(*r.polled))
	}
	r.next, r.last = r.f.lo, 0
	batch := pollUntil(ctx, t, p, 8)
	if _, _, err := p.Poll(8); err != nil {
		t.Fatal(err)
	}
	for i, ev := range batch {
		if ev.JSON != nil || ev.Seq != 0 {
			t.Fatalf("event %d of a batch given back is still there: %+v", i, ev)
		}
	}

	if raceEnabled {
		return // see raceEnabled
	}
	allocs := testing.AllocsPerRun(100, func() {
		r.next, r.last = r.f.lo, 0
		if evs, _, _ := p.Poll(8); len(evs) != 3 {
			t.Fatalf("rewound, Poll took %d events", len(evs))
		}
		if evs, wake, _ := p.Poll(8); len(evs) != 0 || wake == nil {
			t.Fatal("Poll after the last event did not wait")
		}
	})
	if allocs != 0 {
		t.Errorf("taking events and waiting allocates %v times a round", allocs)
	}
}

// TestEveryPollerGetsEveryEvent: readers that poll, as the API's streams
// do, each get every event once and in order, each event's envelope its
// own, while the run writes and while some of them fall behind the ring
// and read on with Next. Their batches come from one pool: a batch handed
// to two readers at once, or given back while its reader still reads it,
// shows here as an envelope that is not its event's (and, under -race, as
// a race).
func TestEveryPollerGetsEveryEvent(t *testing.T) {
	const total, readers = 3000, 64
	src := newMemLog()
	h := New(src, Options{RingEvents: 128}, zap.NewNop())
	defer h.Close()
	src.add("r", 1, false)
	errs := make(chan error, readers)
	// The first reader waits until the run is far past the ring: it
	// reads on from the store, at least once.
	stalled, released := make(chan struct{}), false
	var wg sync.WaitGroup
	for i := range readers {
		cur := open(t, h, "r", 0)
		wg.Go(func() {
			defer cur.Close()
			if i == 0 {
				<-stalled
			}
			errs <- pollToEnd(cur, total, 1+i%40, i%8 == 0)
		})
	}
	for sent := 1; sent < total; {
		k := min(5, total-sent)
		src.add("r", k, sent+k == total)
		sent += k
		if sent >= total/2 && !released {
			waitRing(t, feedOf(h, "r"), uint64(sent))
			close(stalled)
			released = true
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := h.Stats(); st.FellOff == 0 {
		t.Fatalf("stats %+v: no reader fell off the ring", st)
	}
}

// pollToEnd reads cur to run.completed at end by Poll, and by Next while
// Poll says to, checking each event's seq and its envelope's before the
// next Poll. A dawdler yields after each batch, to fall behind the ring
// now and then.
func pollToEnd(cur runs.Cursor, end uint64, max int, dawdler bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	p := cur.(poller)
	want := uint64(1)
	check := func(evs []runs.StoredEvent) (bool, error) {
		for _, ev := range evs {
			var env struct {
				Seq uint64 `json:"seq"`
			}
			if err := json.Unmarshal(ev.JSON, &env); err != nil || ev.Seq != want || env.Seq != want {
				return false, fmt.Errorf("got event %d with the envelope of %d (%v), want %d", ev.Seq, env.Seq, err, want)
			}
			want++
			if ev.Type == runs.EventRunCompleted {
				if ev.Seq != end {
					return false, fmt.Errorf("run.completed at %d, want %d", ev.Seq, end)
				}
				return true, nil
			}
		}
		return false, nil
	}
	for {
		evs, wake, err := p.Poll(max)
		if err != nil {
			return err
		}
		if len(evs) == 0 && wake == nil {
			if evs, err = cur.Next(ctx, max); err != nil {
				return fmt.Errorf("Next after event %d: %w", want-1, err)
			}
		}
		if len(evs) > max {
			return fmt.Errorf("batch of %d events, asked for at most %d", len(evs), max)
		}
		if done, err := check(evs); done || err != nil {
			return err
		}
		if dawdler {
			runtime.Gosched()
		}
		if len(evs) == 0 {
			select {
			case <-wake:
			case <-ctx.Done():
				return fmt.Errorf("no wake-up after event %d", want-1)
			}
		}
	}
}
