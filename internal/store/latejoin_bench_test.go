package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go/jetstream"
)

// lateJoinEvents is the length of the finished run the late-join
// benchmark reads.
const lateJoinEvents = 100_000

// storeRun stores the events 1..n of a run as AppendEvents stores them
// (same subject, headers and message ids), but pipelined without the
// per-event expectation, so that a benchmark's setup takes seconds, not
// minutes. other, when set, gets an event of its own after each of id's,
// so that the two runs interleave in the stream.
func storeRun(b testing.TB, s *Store, id, other string, n uint64) {
	b.Helper()
	const chunk = 1000
	for from := uint64(1); from <= n; from += chunk {
		to := min(from+chunk-1, n)
		evs := mkEvents(id, from, to)
		for _, ev := range evs {
			if _, err := s.js.PublishMsgAsync(eventMsg(eventsSubject(id), id, ev)); err != nil {
				b.Fatal(err)
			}
			if other != "" {
				oev := mkEvents(other, ev.Seq, ev.Seq)[0]
				if _, err := s.js.PublishMsgAsync(eventMsg(eventsSubject(other), other, oev)); err != nil {
					b.Fatal(err)
				}
			}
		}
		select {
		case <-s.js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatal("stored events not acknowledged after a minute")
		}
	}
}

// lateJoin opens a cursor on the run at after and reads until it has the
// event at seq want, checking that every event it gets is the next one.
// It returns how long the first event took and how long the whole read.
func lateJoin(b testing.TB, s *Store, id string, after, want uint64) (first, all time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := s.OpenCursor(ctx, id, after)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	next := after + 1
	for next <= want {
		batch, err := c.Next(ctx, 4096)
		if err != nil {
			b.Fatalf("after seq %d: %v", next-1, err)
		}
		if first == 0 {
			first = time.Since(start)
		}
		for _, ev := range batch {
			if ev.Seq != next {
				b.Fatalf("got seq %d, want %d", ev.Seq, next)
			}
			next++
		}
	}
	return first, time.Since(start)
}

// oldLateJoin is what a late join cost before cursors started at the
// stored position: a cursor opened at 0 that reads and drops every event
// up to after, as the old cursor did inside. It returns how long the
// first event past after took, and how long it took to read on to want.
func oldLateJoin(b testing.TB, s *Store, id string, after, want uint64) (first, all time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := s.OpenCursor(ctx, id, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	next := uint64(1)
	for next <= want {
		batch, err := c.Next(ctx, 4096)
		if err != nil {
			b.Fatalf("after seq %d: %v", next-1, err)
		}
		for _, ev := range batch {
			if ev.Seq != next {
				b.Fatalf("got seq %d, want %d", ev.Seq, next)
			}
			if next == after+1 {
				first = time.Since(start)
			}
			next++
		}
	}
	return first, time.Since(start)
}

// BenchmarkLateJoin measures a client joining a finished run of 100k
// events late, on the embedded store: the first event of a cursor opened
// at after = 99,990 (a client asking for the last 10 events) and at
// after = 50,000 (a client resuming in the middle), and the replay of the
// rest. Each is measured against the old behaviour in the same run: a
// cursor opened at 0 that drops what the client has seen. "first-ms" and
// "old-first-ms" are the mean first-event latencies, "first-ratio" old
// over new; "events/s" is the replay rate of the events the client asked
// for, "old-events/s" the same events read the old way. The interleaved
// cases store another run's event after each of this run's.
func BenchmarkLateJoin(b *testing.B) {
	for _, interleaved := range []bool{false, true} {
		e := newEnv(b)
		id := newID(b)
		other := ""
		name := "alone"
		if interleaved {
			other, name = newID(b), "interleaved"
		}
		storeRun(b, e.s, id, other, lateJoinEvents)
		for _, after := range []uint64{lateJoinEvents - 10, lateJoinEvents / 2, 0} {
			b.Run(fmt.Sprintf("%s/after=%d", name, after), func(b *testing.B) {
				var first, all, oldFirst, oldAll time.Duration
				n := 0
				for b.Loop() {
					f, a := lateJoin(b, e.s, id, after, lateJoinEvents)
					first, all = first+f, all+a
					f, a = oldLateJoin(b, e.s, id, after, lateJoinEvents)
					oldFirst, oldAll = oldFirst+f, oldAll+a
					n++
				}
				events := float64(n) * float64(lateJoinEvents-after)
				b.ReportMetric(ms(first)/float64(n), "first-ms")
				b.ReportMetric(ms(oldFirst)/float64(n), "old-first-ms")
				b.ReportMetric(float64(oldFirst)/float64(first), "first-ratio")
				b.ReportMetric(events/all.Seconds(), "events/s")
				b.ReportMetric(events/oldAll.Seconds(), "old-events/s")
			})
		}
	}
}

// storePackedRun stores the events 1..n of a run as storeRun does, the
// last its run.completed, and its packs as AppendEvents writes them.
func storePackedRun(b testing.TB, s *Store, id string, n uint64) {
	b.Helper()
	const chunk = 1000
	for from := uint64(1); from <= n; from += chunk {
		evs := mkEvents(id, from, min(from+chunk-1, n))
		if evs[len(evs)-1].Seq == n {
			evs[len(evs)-1].Type = runs.EventRunCompleted
		}
		for _, ev := range evs {
			if _, err := s.js.PublishMsgAsync(eventMsg(eventsSubject(id), id, ev)); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-s.js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatal("stored events not acknowledged after a minute")
		}
		s.packed(id, evs)
	}
	select {
	case <-s.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("packs not acknowledged after a minute")
	}
}

// rawRead reads the run's n events with a bare ordered consumer pulling in
// bulk, as fast as the server hands them out.
func rawRead(b testing.TB, s *Store, id string, n int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cons, err := s.js.OrderedConsumer(ctx, eventsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{eventsSubject(id)}})
	if err != nil {
		b.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(4096, 8<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer it.Stop()
	for range n {
		if _, err := it.Next(jetstream.NextContext(ctx)); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkPackReplay replays a finished run of 100k events whole (after
// = 0) and its second half (after = 50,000), from packs, against the same
// run stored without packs (the per-event consumer) and a bare ordered
// consumer reading the run without packs (the floor of a replay through
// per-event messages), in the same iterations. "events/s" is the replay
// with packs, "nopack-events/s" without, "raw-events/s" the bare
// consumer's; "x-nopack" and "x-raw" are how many times faster the
// replay from packs is.
func BenchmarkPackReplay(b *testing.B) {
	e := newEnv(b)
	packed, plain := newID(b), newID(b)
	storePackedRun(b, e.s, packed, lateJoinEvents)
	storeRun(b, e.s, plain, "", lateJoinEvents)
	for _, after := range []uint64{0, lateJoinEvents / 2} {
		b.Run(fmt.Sprintf("after=%d", after), func(b *testing.B) {
			var withPacks, without, raw time.Duration
			n := 0
			for b.Loop() {
				_, a := lateJoin(b, e.s, packed, after, lateJoinEvents)
				withPacks += a
				_, a = lateJoin(b, e.s, plain, after, lateJoinEvents)
				without += a
				if after == 0 {
					raw += rawRead(b, e.s, plain, lateJoinEvents)
				}
				n++
			}
			events := float64(n) * float64(lateJoinEvents-after)
			b.ReportMetric(events/withPacks.Seconds(), "events/s")
			b.ReportMetric(events/without.Seconds(), "nopack-events/s")
			b.ReportMetric(float64(without)/float64(withPacks), "x-nopack")
			if raw > 0 {
				b.ReportMetric(events/raw.Seconds(), "raw-events/s")
				b.ReportMetric(float64(raw)/float64(withPacks), "x-raw")
			}
		})
	}
}

// BenchmarkRawRead reads the same 100k events with a bare ordered consumer
// pulling in bulk, as fast as the server hands them out: the floor that
// a cursor's replay is compared with.
func BenchmarkRawRead(b *testing.B) {
	e := newEnv(b)
	id := newID(b)
	storeRun(b, e.s, id, "", lateJoinEvents)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cons, err := e.s.js.OrderedConsumer(ctx, eventsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{eventsSubject(id)}})
		if err != nil {
			b.Fatal(err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(4096, 8<<20))
		if err != nil {
			b.Fatal(err)
		}
		for range lateJoinEvents {
			if _, err := it.Next(jetstream.NextContext(ctx)); err != nil {
				b.Fatal(err)
			}
		}
		it.Stop()
		cancel()
	}
	b.ReportMetric(float64(b.N)*lateJoinEvents/b.Elapsed().Seconds(), "events/s")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
