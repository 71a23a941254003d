package store

import (
	"context"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// synthLog is a stream as searchEvent sees it: at each stream sequence
// (index+1), the seq of the run's event there, or 0 for another run's.
type synthLog []uint64

func (l synthLog) probe(x uint64) (pos, first, last uint64, ok bool, err error) {
	for i := x; i >= 1 && i <= uint64(len(l)); i++ {
		if l[i-1] != 0 {
			return i, l[i-1], l[i-1], true, nil
		}
	}
	return 0, 0, 0, false, nil
}

// last is the run's last event and its stream sequence.
func (l synthLog) last() (seq, pos uint64) {
	for i := len(l); i >= 1; i-- {
		if l[i-1] != 0 {
			return l[i-1], uint64(i)
		}
	}
	return 0, 0
}

// groupedLog is a stream of messages of several events as searchEvent
// sees it: at each stream sequence (index+1), the seqs of the first and
// last events of the run's message there, or zeros for another run's.
type groupedLog [][2]uint64

func (l groupedLog) probe(x uint64) (pos, first, last uint64, ok bool, err error) {
	for i := x; i >= 1 && i <= uint64(len(l)); i++ {
		if m := l[i-1]; m[0] != 0 {
			return i, m[0], m[1], true, nil
		}
	}
	return 0, 0, 0, false, nil
}

// last is the run's last message and its stream sequence.
func (l groupedLog) last() (m [2]uint64, pos uint64) {
	for i := len(l); i >= 1; i-- {
		if l[i-1][0] != 0 {
			return l[i-1], uint64(i)
		}
	}
	return [2]uint64{}, 0
}

// dense builds a log of the run's events first..first+n-1 with gaps[i]
// other runs' events before event i (cycling through gaps).
func dense(first uint64, n int, gaps []int) (synthLog, map[uint64]uint64) {
	var l synthLog
	at := map[uint64]uint64{}
	for i := range n {
		if len(gaps) > 0 {
			for range gaps[i%len(gaps)] {
				l = append(l, 0)
			}
		}
		l = append(l, first+uint64(i))
		at[first+uint64(i)] = uint64(len(l))
	}
	return l, at
}

// probeBound is the most reads searchEvent may make on a stream of n.
func probeBound(n int) int { return 2*bits.Len(uint(n)) + 4 }

// groupedProbeBound is the most on a stream of n whose run's messages hold
// different numbers of events: the density near the run's end says less
// of where t lies, and up to bits(n) guesses step back from the end
// before one lands below t.
func groupedProbeBound(n int) int { return 3*bits.Len(uint(n)) + 4 }

// checkDense checks searchEvent for every t on a dense log.
func checkDense(t *testing.T, l synthLog, at map[uint64]uint64, first uint64, maxProbes int) (worst int) {
	t.Helper()
	lastSeq, lastPos := l.last()
	for want := uint64(1); want <= lastSeq; want++ {
		pos, probes, err := searchEvent(want, lastSeq, lastSeq, lastPos, l.probe)
		if err != nil {
			t.Fatal(err)
		}
		expect := at[want]
		if want < first {
			expect = at[first]
		}
		if pos != expect {
			t.Fatalf("seq %d: found at %d, want %d", want, pos, expect)
		}
		if probes > maxProbes {
			t.Fatalf("seq %d: %d reads, want at most %d", want, probes, maxProbes)
		}
		worst = max(worst, probes)
	}
	return worst
}

// The search finds every event of a run with few reads: one when the run
// is alone in the stream, two when it interleaves with others at a steady
// rate, and a bounded number however the others' events fall.
func TestSearchEvent(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		l, at := dense(1, 5000, nil)
		if worst := checkDense(t, l, at, 1, 1); worst != 1 {
			t.Errorf("worst %d reads", worst)
		}
	})
	t.Run("steady interleave", func(t *testing.T) {
		for _, gap := range []int{1, 2, 7} {
			l, at := dense(1, 3000, []int{gap})
			// Until a read lands in the run's middle, the search knows
			// only its last event, and finds the others' share by
			// doubling its guess: a few reads more for a denser mix.
			bound := 2*bits.Len(uint(gap)) + 2
			worst := checkDense(t, l, at, 1, bound)
			t.Logf("one event in %d: worst %d reads", gap+1, worst)
		}
	})
	t.Run("bursts", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		gaps := make([]int, 997)
		for i := range gaps {
			if r.IntN(10) == 0 {
				gaps[i] = r.IntN(500)
			}
		}
		l, at := dense(1, 4000, gaps)
		worst := checkDense(t, l, at, 1, probeBound(len(l)))
		t.Logf("stream of %d, run of 4000 in bursts: worst %d reads", len(l), worst)
	})
	t.Run("expired head", func(t *testing.T) {
		l, at := dense(40, 200, []int{0, 3})
		checkDense(t, l, at, 40, probeBound(len(l)))
	})
	t.Run("gap in the run", func(t *testing.T) {
		l := synthLog{1, 0, 2, 3, 0, 5, 6}
		if pos, _, err := searchEvent(4, 6, 6, 7, l.probe); pos != 0 || err != nil {
			t.Errorf("seq 4 of a log without it: %d, %v; want 0", pos, err)
		}
		if pos, _, _ := searchEvent(5, 6, 6, 7, l.probe); pos != 6 {
			t.Errorf("seq 5 found at %d, want 6", pos)
		}
	})
}

// FuzzSearchEvent checks the search on logs made from the input: each
// byte is how many other events come before the run's next one, or, with
// its top bit set, an event of the run out of order. On a dense log it
// finds every event within the bound; on any log it ends within a bounded
// number of reads and returns either nothing or an event of seq t (or the
// first stored one, when that one is later).
func FuzzSearchEvent(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0}, uint8(2))
	f.Add([]byte{1, 1, 1, 1, 1, 1}, uint8(3))
	f.Add([]byte{0, 9, 0, 0, 200, 0, 0, 3}, uint8(5))
	f.Add([]byte{0, 0, 0x81, 0x80, 0, 0}, uint8(3))
	f.Add([]byte{127, 0, 127, 0, 1}, uint8(1))
	f.Fuzz(func(t *testing.T, layout []byte, first uint8) {
		if len(layout) == 0 || len(layout) > 512 {
			return
		}
		var l synthLog
		next := uint64(first%4) + 1
		ordered := true
		for _, b := range layout {
			for range b & 0x7f {
				l = append(l, 0)
			}
			if b&0x80 != 0 && next > 2 {
				// An earlier event after a later one.
				l = append(l, next-2)
				ordered = false
			}
			l = append(l, next)
			next++
		}
		lastSeq, lastPos := l.last()
		bound := probeBound(len(l))
		if !ordered {
			bound = len(l) + 2
		}
		for want := uint64(1); want <= lastSeq; want++ {
			pos, probes, err := searchEvent(want, lastSeq, lastSeq, lastPos, l.probe)
			if err != nil {
				t.Fatal(err)
			}
			if probes > bound {
				t.Fatalf("seq %d: %d reads on a stream of %d", want, probes, len(l))
			}
			if pos == 0 {
				if ordered {
					t.Fatalf("seq %d not found in a dense log", want)
				}
				continue
			}
			firstPos, firstSeq, _, _, _ := l.probe(1)
			got := l[pos-1]
			if got != want && !(pos == firstPos && firstSeq > want) {
				t.Fatalf("seq %d: found seq %d at %d", want, got, pos)
			}
		}
	})
}

// grouped builds a log of messages of the run holding events 1..n, the
// i-th message sizes[i%len(sizes)] events after gaps[i%len(gaps)] of other
// runs' messages. It returns where each event is stored.
func grouped(n uint64, sizes, gaps []int) (groupedLog, map[uint64]uint64) {
	var l groupedLog
	at := map[uint64]uint64{}
	next := uint64(1)
	for i := 0; next <= n; i++ {
		for range gaps[i%len(gaps)] {
			l = append(l, [2]uint64{})
		}
		last := min(n, next+uint64(max(1, sizes[i%len(sizes)]))-1)
		l = append(l, [2]uint64{next, last})
		for seq := next; seq <= last; seq++ {
			at[seq] = uint64(len(l))
		}
		next = last + 1
	}
	return l, at
}

// checkGrouped checks searchEvent for every t on a log of grouped
// messages: it finds the message holding t within maxProbes reads.
func checkGrouped(t *testing.T, l groupedLog, at map[uint64]uint64, maxProbes int) (worst int) {
	t.Helper()
	lastMsg, lastPos := l.last()
	for want := uint64(1); want <= lastMsg[1]; want++ {
		pos, probes, err := searchEvent(want, lastMsg[0], lastMsg[1], lastPos, l.probe)
		if err != nil {
			t.Fatal(err)
		}
		if pos != at[want] {
			t.Fatalf("seq %d: found at %d, want %d", want, pos, at[want])
		}
		if probes > maxProbes {
			t.Fatalf("seq %d: %d reads, want at most %d", want, probes, maxProbes)
		}
		worst = max(worst, probes)
	}
	return worst
}

// The search finds the message holding an event when messages hold many
// events, of varying counts, alone in the stream or between other runs'.
func TestSearchGroupedEvents(t *testing.T) {
	for name, tc := range map[string]struct{ sizes, gaps []int }{
		"alone, even":        {[]int{256}, []int{0}},
		"alone, uneven":      {[]int{1, 40, 3, 256, 1, 1, 17}, []int{0}},
		"interleaved":        {[]int{5, 1, 90}, []int{1, 0, 4}},
		"bursts of others":   {[]int{32}, []int{0, 0, 0, 300, 0, 2}},
		"lone events":        {[]int{1}, []int{2}},
		"one message of all": {[]int{5000}, []int{3}},
	} {
		t.Run(name, func(t *testing.T) {
			l, at := grouped(3000, tc.sizes, tc.gaps)
			worst := checkGrouped(t, l, at, groupedProbeBound(len(l)))
			t.Logf("%d messages: worst %d reads", len(l), worst)
		})
	}
	t.Run("gap in the run", func(t *testing.T) {
		l := groupedLog{{1, 3}, {}, {4, 6}, {9, 12}}
		if pos, _, err := searchEvent(7, 9, 12, 4, l.probe); pos != 0 || err != nil {
			t.Errorf("seq 7 of a log without it: %d, %v; want 0", pos, err)
		}
		if pos, _, _ := searchEvent(5, 9, 12, 4, l.probe); pos != 3 {
			t.Errorf("seq 5 found at %d, want 3", pos)
		}
		if pos, _, _ := searchEvent(10, 9, 12, 4, l.probe); pos != 4 {
			t.Errorf("seq 10 found at %d, want 4", pos)
		}
	})
}

// FuzzSearchGroupedEvents checks the search on logs of grouped messages
// made from the input: each byte's low 4 bits are how many other messages
// come before the run's next one, and its high 4 how many events more
// than one that message holds. On such a log, dense by construction, every
// event is found in the message holding it, within the bound.
func FuzzSearchGroupedEvents(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xf0, 0x01, 0x3f, 0x00, 0x12})
	f.Add([]byte{0x0f, 0x0f, 0xf0, 0xf0, 0xf0, 0x01})
	f.Fuzz(func(t *testing.T, layout []byte) {
		if len(layout) == 0 || len(layout) > 512 {
			return
		}
		sizes, gaps := make([]int, len(layout)), make([]int, len(layout))
		n := uint64(0)
		for i, b := range layout {
			gaps[i], sizes[i] = int(b&0x0f), int(b>>4)+1
			n += uint64(sizes[i])
		}
		l, at := grouped(n, sizes, gaps)
		checkGrouped(t, l, at, groupedProbeBound(len(l)))
	})
}

// storeLayout stores id's events 1..n, with others' events in between:
// gaps[i%len(gaps)] of other's before event i. It returns the stream
// sequence of each of id's events.
func storeLayout(t *testing.T, s *Store, id, other string, n uint64, gaps []int) map[uint64]uint64 {
	t.Helper()
	at := map[uint64]uint64{}
	var oseq uint64
	for seq := uint64(1); seq <= n; seq++ {
		for range gaps[int(seq-1)%len(gaps)] {
			oseq++
			if err := s.AppendEvents(ctx(t), other, mkEvents(other, oseq, oseq)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AppendEvents(ctx(t), id, mkEvents(id, seq, seq)); err != nil {
			t.Fatal(err)
		}
		_, pos, err := s.lastStored(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		at[seq] = pos
	}
	return at
}

// checkStart checks where a cursor opened at after starts in the stream:
// at want, or from the run's first event when want is 0.
func checkStart(t *testing.T, c *cursor, want uint64) {
	t.Helper()
	cfg := c.cons.CachedInfo().Config
	switch {
	case want == 0 && cfg.DeliverPolicy != jetstream.DeliverAllPolicy:
		t.Errorf("consumer starts with %v at %d, want from the first event", cfg.DeliverPolicy, cfg.OptStartSeq)
	case want != 0 && (cfg.DeliverPolicy != jetstream.DeliverByStartSequencePolicy || cfg.OptStartSeq != want):
		t.Errorf("consumer starts with %v at %d, want by start sequence at %d", cfg.DeliverPolicy, cfg.OptStartSeq, want)
	}
}

// A cursor starts at the stored position of the event after the one the
// reader has seen, whatever that is, on a run alone in the stream and on
// one whose events interleave with another run's; it reads every event
// from there in order, and then what is appended.
func TestCursorStartsAtStoredPosition(t *testing.T) {
	for name, gaps := range map[string][]int{"alone": {0}, "interleaved": {1, 0, 3, 0, 0, 17}} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			id, other := newID(t), newID(t)
			const n = 120
			at := storeLayout(t, e.s, id, other, n, gaps)
			for _, tc := range []struct {
				name  string
				after uint64
				start uint64
			}{
				{"at 0", 0, 0},
				{"at 1", 1, at[2]},
				{"in the middle", n / 2, at[n/2+1]},
				{"before the last", n - 1, at[n]},
				{"at the last", n, at[n] + 1},
				{"past the end", n + 5, at[n] + 1},
			} {
				t.Run(tc.name, func(t *testing.T) {
					c := openCursor(t, e.s, id, tc.after)
					checkStart(t, c, tc.start)
					if tc.after < n {
						read(t, c, id, tc.after+1, n)
					}
					expectNothing(t, c)
				})
			}
			// A cursor past the end gets what comes after its position.
			c := openCursor(t, e.s, id, n+2)
			appendEvents(t, e.s, id, n+1, n+4)
			read(t, c, id, n+3, n+4)
			expectNothing(t, c)
		})
	}
}

// Cursors opened after a restart of the server, on the files it left,
// start at the stored position too, and a cursor opened in the middle
// before a restart of JetStream reads on from where it was, with nothing
// lost or repeated.
func TestCursorStartAcrossRestart(t *testing.T) {
	e := newEnv(t)
	id, other := newID(t), newID(t)
	const n = 60
	at := storeLayout(t, e.s, id, other, n, []int{2, 0})
	e.stop()
	e.start(Options{})
	for _, after := range []uint64{0, 1, n / 2, n - 1} {
		c := openCursor(t, e.s, id, after)
		if after > 0 {
			checkStart(t, c, at[after+1])
		}
		read(t, c, id, after+1, n)
		expectNothing(t, c)
		c.Close()
	}

	c := openCursor(t, e.s, id, n/2)
	read(t, c, id, n/2+1, n)
	if err := e.srv.RestartJetStream(); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Health(); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, e.s, id, n+1, n+3)
	// The consumer went with JetStream; the client makes a new one,
	// from after the last event it delivered, after two missed
	// heartbeats (about 10 s).
	wait, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := uint64(n + 1)
	for next <= n+3 {
		batch, err := c.Next(wait, 100)
		if err != nil {
			t.Fatalf("after seq %d: %v", next-1, err)
		}
		for _, ev := range batch {
			if ev.Seq != next {
				t.Fatalf("after the restart: seq %d, want %d", ev.Seq, next)
			}
			next++
		}
	}
	expectNothing(t, c)
}

// A log that is not a dense prefix (written by an earlier version) still
// reads in order, each event once: a cursor whose event is missing replays
// the run from its first event and drops what the reader has seen, and
// says so; one whose run's oldest events expired starts at the first that
// is stored.
func TestCursorStartOnImperfectLogs(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	e := newEnv(t)
	s, err := Open(ctx(t), e.nc, Options{Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("gap", func(t *testing.T) {
		id := newID(t)
		// Stored raw, as an earlier version could have: 1..5, 7..9.
		for _, ev := range append(mkEvents(id, 1, 5), mkEvents(id, 7, 9)...) {
			if _, err := s.js.PublishMsg(ctx(t), eventMsg(eventsSubject(id), id, ev)); err != nil {
				t.Fatal(err)
			}
		}
		c := openCursor(t, s, id, 5)
		checkStart(t, c, 0)
		read(t, c, id, 7, 9)
		expectNothing(t, c)
		if n := logs.FilterMessage("event not found by its seq, cursor replays the run").Len(); n != 1 {
			t.Errorf("%d warnings of the replay, want 1", n)
		}
		c2 := openCursor(t, s, id, 7)
		read(t, c2, id, 8, 9)
	})
	t.Run("expired head", func(t *testing.T) {
		id := newID(t)
		for seq := uint64(1); seq <= 30; seq++ {
			appendEvents(t, s, id, seq, seq) // a message each
		}
		_, pos20, err := s.lastStored(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		pos20 -= 10
		// Events 1..19 go, as MaxAge would take them.
		if err := s.events.Purge(ctx(t), jetstream.WithPurgeSubject(eventsSubject(id)), jetstream.WithPurgeSequence(pos20)); err != nil {
			t.Fatal(err)
		}
		c := openCursor(t, s, id, 5)
		checkStart(t, c, pos20)
		read(t, c, id, 20, 30)
		c2 := openCursor(t, s, id, 25)
		checkStart(t, c2, pos20+6)
		read(t, c2, id, 26, 30)
	})
	t.Run("expired head of grouped messages", func(t *testing.T) {
		id := newID(t)
		appendEvents(t, s, id, 1, 10)
		appendEvents(t, s, id, 11, 20)
		_, pos11, err := s.lastStored(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		appendEvents(t, s, id, 21, 30)
		// The message of events 1..10 goes, as MaxAge would take it.
		if err := s.events.Purge(ctx(t), jetstream.WithPurgeSubject(eventsSubject(id)), jetstream.WithPurgeSequence(pos11)); err != nil {
			t.Fatal(err)
		}
		c := openCursor(t, s, id, 5)
		checkStart(t, c, pos11)
		read(t, c, id, 11, 30)
		// In the middle of a message: the cursor starts at it and
		// drops what the reader has seen.
		c2 := openCursor(t, s, id, 15)
		checkStart(t, c2, pos11)
		read(t, c2, id, 16, 30)
		expectNothing(t, c2)
	})
}
