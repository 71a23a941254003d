package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// packRun is the events 1..n of a run as a supervisor stores them: the
// last is its run.completed. big, when set, gives those events a payload
// of that many bytes.
func packRun(runID string, n uint64, big func(seq uint64) int) []runs.StoredEvent {
	evs := mkEvents(runID, 1, n)
	evs[n-1].Type = runs.EventRunCompleted
	for i := range evs {
		ev := &evs[i]
		pad := ""
		if big != nil {
			pad = strings.Repeat("x", big(ev.Seq))
		}
		ev.JSON = fmt.Appendf(nil, `{"run_id":%q,"seq":%d,"type":%q,"pad":%q}`, runID, ev.Seq, ev.Type, pad)
	}
	return evs
}

// appendInBatches stores evs through AppendEvents, batch events at a time,
// as a run's appender does.
func appendInBatches(t testing.TB, s *Store, runID string, evs []runs.StoredEvent, batch int) {
	t.Helper()
	for i := 0; i < len(evs); i += batch {
		if err := s.AppendEvents(ctx(t), runID, evs[i:min(i+batch, len(evs))]); err != nil {
			t.Fatal(err)
		}
	}
}

// packsSent waits until every pack the store sent is stored (its
// publishes are the only asynchronous ones a test makes).
func packsSent(t testing.TB, s *Store) {
	t.Helper()
	select {
	case <-s.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("packs not acknowledged after a minute")
	}
}

// storedPacks returns the stream sequence of each of the run's packs.
func storedPacks(t testing.TB, s *Store, runID string) map[uint64]uint64 {
	t.Helper()
	out := map[uint64]uint64{}
	for k := uint64(0); ; k++ {
		m, err := s.packStream.GetLastMsgForSubject(ctx(t), packSubject(runID, k))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// Packs are dense but for those a test removed: look a
			// few further before concluding.
			if _, err := s.packStream.GetLastMsgForSubject(ctx(t), packsFilter(runID)); errors.Is(err, jetstream.ErrMsgNotFound) {
				return out
			}
			if k > 64 {
				return out
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[k] = m.Sequence
	}
}

// readAll reads the events after..after+len(want) from a cursor and checks
// that they are want: every one once, in order, the same bytes.
func readAll(t testing.TB, c runs.Cursor, want []runs.StoredEvent) {
	t.Helper()
	got := make([]runs.StoredEvent, 0, len(want))
	for len(got) < len(want) {
		batch, err := c.Next(ctx(t), min(1000, len(want)-len(got)))
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		got = append(got, batch...)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || !bytes.Equal(got[i].JSON, want[i].JSON) {
			t.Fatalf("event %d = {%d %s %.60s}, want {%d %s %.60s}", i,
				got[i].Seq, got[i].Type, got[i].JSON, want[i].Seq, want[i].Type, want[i].JSON)
		}
	}
}

// consumers is how many consumers the events stream has.
func consumers(t testing.TB, s *Store) int {
	t.Helper()
	info, err := s.events.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

// A finished run replayed from anywhere gets every event once, in order,
// the bytes stored, from packs alone: no consumer is created, and a second
// cursor reading the same range without packs (a run stored the same way
// with none) gets the same.
func TestPacksReplay(t *testing.T) {
	e := newEnv(t)
	const n = 5000
	id := newID(t)
	evs := packRun(id, n, nil)
	appendInBatches(t, e.s, id, evs, 97)
	packsSent(t, e.s)
	if got, want := len(storedPacks(t, e.s, id)), int(packOf(n)+1); got != want {
		t.Fatalf("%d packs stored, want %d", got, want)
	}
	if st := e.s.PackStats(); st.Sent != int64(packOf(n)+1) || st.Abandoned != 0 || st.Read != 0 {
		t.Errorf("PackStats after storing: %+v, want %d sent, none abandoned or read", st, packOf(n)+1)
	}
	before := e.s.PackStats()
	c0 := openCursor(t, e.s, id, 0)
	readAll(t, c0, evs)
	c0.Close()
	if st := e.s.PackStats(); st.Read-before.Read != int64(packOf(n)+1) || st.Damaged != 0 {
		t.Errorf("PackStats after a whole replay: %+v (before %+v), want every pack read once", st, before)
	}
	for _, after := range []uint64{0, 1, 511, 512, 513, 700, 2500, 4608, 4700, 4999} {
		t.Run(fmt.Sprint(after), func(t *testing.T) {
			c := openCursor(t, e.s, id, after)
			readAll(t, c, evs[after:])
			if n := consumers(t, e.s); n != 0 {
				t.Errorf("a replay served by packs created %d consumers", n)
			}
		})
	}
	// Asked for more after the run's end, a cursor follows the log.
	c := openCursor(t, e.s, id, 4700)
	readAll(t, c, evs[4700:])
	expectNothing(t, c)
	more := mkEvents(id, n+1, n+1)
	if err := e.s.AppendEvents(ctx(t), id, more); err != nil {
		t.Fatal(err)
	}
	readAll(t, c, more)
	// Caught up: no pack holds more, the cursor waits on the log.
	c.Close()
	c = openCursor(t, e.s, id, n+1)
	if n := consumers(t, e.s); n != 1 {
		t.Errorf("a caught-up cursor: %d consumers, want 1", n)
	}
	expectNothing(t, c)
}

// A pack missing in the middle, one abandoned for its size, and one whose
// bytes are damaged each cost their range a replay through the events, and
// the packs after it are not read: every event still arrives once, in
// order.
func TestPacksDamaged(t *testing.T) {
	e := newEnv(t)
	const n = 3000
	for _, tc := range []struct {
		name   string
		big    func(seq uint64) int
		damage func(t *testing.T, id string, packs map[uint64]uint64)
		want   int // packs stored
	}{
		{name: "missing", want: 6, damage: func(t *testing.T, id string, packs map[uint64]uint64) {
			if err := e.s.packStream.DeleteMsg(ctx(t), packs[2]); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "too big", want: 5, big: func(seq uint64) int {
			if packOf(seq) == 3 {
				return 2 << 10 // 512 of them pass maxPackBytes
			}
			return 10
		}},
		{name: "corrupt", want: 6, damage: func(t *testing.T, id string, packs map[uint64]uint64) {
			m, err := e.s.packStream.GetMsg(ctx(t), packs[1])
			if err != nil {
				t.Fatal(err)
			}
			if err := e.s.packStream.DeleteMsg(ctx(t), packs[1]); err != nil {
				t.Fatal(err)
			}
			bad := bytes.Clone(m.Data)
			bad[len(bad)/2] ^= 0x20 // a letter's case: still a valid structure
			if _, err := e.s.js.Publish(ctx(t), packSubject(id, 1), bad); err != nil {
				t.Fatal(err)
			}
			if _, err := e.s.js.Publish(ctx(t), packSubject(id, 4), []byte("not a pack")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := newID(t)
			evs := packRun(id, n, tc.big)
			appendInBatches(t, e.s, id, evs, 200)
			packsSent(t, e.s)
			packs := storedPacks(t, e.s, id)
			if len(packs) != tc.want {
				t.Fatalf("%d packs stored, want %d", len(packs), tc.want)
			}
			if tc.damage != nil {
				tc.damage(t, id, packs)
			}
			before := e.s.PackStats()
			for _, after := range []uint64{0, 600, 1100, 1600, 2100} {
				readAll(t, openCursor(t, e.s, id, after), evs[after:])
			}
			st := e.s.PackStats()
			switch tc.name {
			case "missing", "too big":
				if st.Missed == before.Missed {
					t.Errorf("PackStats %+v (before %+v): no pack counted missing", st, before)
				}
			case "corrupt":
				if st.Damaged == before.Damaged {
					t.Errorf("PackStats %+v (before %+v): no pack counted damaged", st, before)
				}
			}
			if tc.name == "too big" && st.Abandoned == 0 {
				t.Errorf("PackStats %+v: the pack past its size is not counted abandoned", st)
			}
		})
	}
}

// A cursor on a running run reads its packs, then follows the live tail
// through a consumer, across pack boundaries.
func TestPacksThenLiveTail(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	evs := packRun(id, 3000, nil)
	appendInBatches(t, e.s, id, evs[:1200], 50)
	packsSent(t, e.s)
	c := openCursor(t, e.s, id, 0)
	// The pump runs at most cursorBuffer events ahead of the reader: at
	// 600 it has not yet passed the packs' 1,024.
	readAll(t, c, evs[:600])
	if n := consumers(t, e.s); n != 0 {
		t.Errorf("the cursor made %d consumers while packs held its events", n)
	}
	readAll(t, c, evs[600:1200])
	for from := 1200; from < len(evs); from += 300 {
		appendInBatches(t, e.s, id, evs[from:from+300], 7)
		readAll(t, c, evs[from:from+300])
	}
	expectNothing(t, c)
	// The packs written meanwhile serve the next reader.
	packsSent(t, e.s)
	if got := len(storedPacks(t, e.s, id)); got != 6 {
		t.Errorf("%d packs stored, want 6", got)
	}
	readAll(t, openCursor(t, e.s, id, 0), evs)
}

func TestDeleteRunRemovesPacks(t *testing.T) {
	e := newEnv(t)
	id, other := newID(t), newID(t)
	evs := packRun(id, 1100, nil)
	appendInBatches(t, e.s, id, evs, 100)
	appendInBatches(t, e.s, other, packRun(other, 600, nil), 100)
	packsSent(t, e.s)
	packsSent(t, e.s)
	if err := e.s.DeleteRun(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	if packs := storedPacks(t, e.s, id); len(packs) != 0 {
		t.Errorf("packs left after DeleteRun: %v", packs)
	}
	if packs := storedPacks(t, e.s, other); len(packs) != 2 {
		t.Errorf("another run's packs: %v, want 2", packs)
	}
}

// A store opened on a stream made before packs adds their old subject to
// it (packs an earlier version stored there expire with it), and makes the
// packs stream, whose copies answer direct gets.
func TestStreamGainsPacksSubject(t *testing.T) {
	e := &env{t: t, dir: t.TempDir()}
	srv, err := StartEmbedded(e.dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	t.Cleanup(e.stop)
	nc := e.connect()
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx(t), jetstream.StreamConfig{
		Name: eventsStream, Subjects: []string{eventsPrefix + "*"}, Storage: jetstream.FileStorage,
		Duplicates: dedupeWindow, AllowAtomicPublish: true,
	}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx(t), nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	info, err := s.events.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Config.Subjects; len(got) != 2 || got[1] != legacyPacksPrefix+"*.*" {
		t.Fatalf("stream subjects %v", got)
	}
	pinfo, err := s.packStream.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := pinfo.Config; !got.AllowDirect || len(got.Subjects) != 1 || got.Subjects[0] != packsPrefix+"*.*" {
		t.Fatalf("packs stream: direct gets %v, subjects %v", got.AllowDirect, got.Subjects)
	}
	id := newID(t)
	evs := packRun(id, 600, nil)
	appendInBatches(t, s, id, evs, 100)
	packsSent(t, s)
	if got := len(storedPacks(t, s, id)); got != 2 {
		t.Fatalf("%d packs stored, want 2", got)
	}
}

// A pack is stored once: the same pack sent again (a second writer, a
// restarted one) is refused, and the first stays.
func TestPackStoredOnce(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	evs := packRun(id, 512, nil)
	w := newPackWriter(e.s.log, &packStats{})
	first := w.stored(id, evs)
	if len(first) != 1 {
		t.Fatalf("%d packs for a full range", len(first))
	}
	if _, err := e.s.js.PublishMsg(ctx(t), first[0]); err != nil {
		t.Fatal(err)
	}
	evs[3].JSON = []byte(`{"other":true}`)
	again := newPackWriter(e.s.log, &packStats{}).stored(id, evs)
	if _, err := e.s.js.PublishMsg(ctx(t), again[0]); err == nil {
		t.Fatal("a second pack for the same range was stored")
	}
	m, err := e.s.packStream.GetLastMsgForSubject(ctx(t), packSubject(id, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, first[0].Data) {
		t.Error("the stored pack is not the first sent")
	}
}

// decoded returns the events of a pack the writer made.
func decoded(t *testing.T, data []byte) []runs.StoredEvent {
	t.Helper()
	evs, err := decodePack(data, typeNames{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Only a dense run of seqs from a pack's boundary enters the pack: events
// that skip, repeat, or start inside a range abandon it, and the next
// pack starts at its boundary.
func TestPackWriterTakesOnlyDenseRanges(t *testing.T) {
	id := "r"
	evs := packRun(id, 2100, nil)
	w := newPackWriter(nil, &packStats{})
	var packs [][]byte
	feed := func(from, to int) { // evs[from:to]
		for _, m := range w.stored(id, evs[from:to]) {
			packs = append(packs, m.Data)
		}
	}
	feed(100, 300)   // starts inside pack 0: no pack 0
	feed(300, 700)   // pack 1 begins at 513
	feed(701, 1100)  // skips 701: pack 1 abandoned
	feed(1100, 1600) // pack 2 (1025..1536) complete
	feed(1590, 1700) // repeats 1591..1600 (another writer): pack 3 abandoned
	feed(2048, 2100) // from 2049 (pack 4) to run.completed: partial pack 4
	if len(packs) != 2 {
		t.Fatalf("%d packs, want 2", len(packs))
	}
	for i, want := range [][2]uint64{{1025, 1536}, {2049, 2100}} {
		got := decoded(t, packs[i])
		if got[0].Seq != want[0] || got[len(got)-1].Seq != want[1] {
			t.Errorf("pack %d holds %d..%d, want %d..%d", i, got[0].Seq, got[len(got)-1].Seq, want[0], want[1])
		}
		for j, ev := range got {
			if w := evs[ev.Seq-1]; ev.Type != w.Type || !bytes.Equal(ev.JSON, w.JSON) {
				t.Fatalf("pack %d event %d = %s %s, want %s %s", i, j, ev.Type, ev.JSON, w.Type, w.JSON)
			}
		}
	}
	if w.bytes != 0 || w.runs[id].buf != nil {
		t.Errorf("after run.completed %d bytes are buffered", w.bytes)
	}
}

// The writer's memory is bounded: runs past maxPackRuns evict the least
// recently appended, and a pack that would pass maxPackMemory is abandoned.
func TestPackWriterBounded(t *testing.T) {
	w := newPackWriter(nil, &packStats{})
	for i := range maxPackRuns + 10 {
		id := fmt.Sprint("r", i)
		w.stored(id, mkEvents(id, 1, 3))
	}
	if len(w.runs) != maxPackRuns {
		t.Errorf("%d runs buffered, want %d", len(w.runs), maxPackRuns)
	}
	if _, ok := w.runs["r0"]; ok {
		t.Error("the run appended least recently kept its buffer")
	}
	big := make([]byte, 8<<10)
	for i := range maxPackRuns {
		id := fmt.Sprint("r", i+10)
		evs := mkEvents(id, 4, 40)
		for j := range evs {
			evs[j].JSON = big
		}
		w.stored(id, evs)
		if w.bytes > maxPackMemory+maxPackBytes {
			t.Fatalf("%d bytes buffered", w.bytes)
		}
	}
	total := 0
	for _, b := range w.runs {
		total += cap(b.buf)
	}
	if total != w.bytes {
		t.Errorf("buffers hold %d bytes, counted %d", total, w.bytes)
	}
}

func TestDecodePackRejects(t *testing.T) {
	good := finishPack(appendPackEvent(startPack(nil, 7), runs.StoredEvent{Seq: 7, Type: "a", JSON: []byte("{}")}))
	if evs := decoded(t, good); len(evs) != 1 || evs[0].Seq != 7 || evs[0].Type != "a" || string(evs[0].JSON) != "{}" {
		t.Fatalf("decoded %+v", evs)
	}
	cases := map[string][]byte{
		"empty":        nil,
		"short":        good[:5],
		"checksum":     append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1),
		"version":      finishPack(append([]byte{9}, startPack(nil, 7)[1:]...)),
		"no events":    finishPack(startPack(nil, 7)),
		"seq 0":        finishPack(appendPackEvent(startPack(nil, 0), runs.StoredEvent{Type: "a", JSON: []byte("{}")})),
		"cut field":    finishPack(append(startPack(nil, 1), 1, 'a', 5, '{')),
		"empty type":   finishPack(append(startPack(nil, 1), 0, 2, '{', '}')),
		"empty event":  finishPack(append(startPack(nil, 1), 1, 'a', 0)),
		"long uvarint": finishPack([]byte{packVersion, 0xd3, 0x00, 1, 'b', 2, '{', '}'}),
		"overflow": finishPack(appendPackEvent(appendPackEvent(startPack(nil, ^uint64(0)),
			runs.StoredEvent{Type: "a", JSON: []byte("{}")}), runs.StoredEvent{Type: "a", JSON: []byte("{}")})),
	}
	for name, data := range cases {
		if evs, err := decodePack(data, nil, nil); !errors.Is(err, errBadPack) || len(evs) != 0 {
			t.Errorf("%s: %d events, %v", name, len(evs), err)
		}
	}
}

// The events a pack decodes to are capped: appending to one does not
// write over the next.
func TestDecodedEventsAreCapped(t *testing.T) {
	w := newPackWriter(nil, &packStats{})
	evs := packRun("r", 3, nil)
	data := w.stored("r", evs)[0].Data
	got := decoded(t, data)
	_ = append(got[0].JSON, "garbage"...)
	if !bytes.Equal(got[1].JSON, evs[1].JSON) {
		t.Fatalf("event 2 = %s", got[1].JSON)
	}
}

func TestParseDirectGet(t *testing.T) {
	const subj = packsPrefix + "r.0"
	msg := func(hdr map[string]string, data string) *nats.Msg {
		m := nats.NewMsg("_INBOX.x")
		for k, v := range hdr {
			m.Header.Set(k, v)
		}
		m.Data = []byte(data)
		return m
	}
	for name, tc := range map[string]struct {
		reply *nats.Msg
		want  string
		err   error
	}{
		"message":       {reply: msg(map[string]string{jetstream.SubjectHeader: subj, jetstream.SequenceHeader: "5"}, "hello"), want: "hello"},
		"not found":     {reply: msg(map[string]string{statusHeader: "404", descriptionHeader: "Message Not Found"}, ""), err: errNoPack},
		"other subject": {reply: msg(map[string]string{jetstream.SubjectHeader: packsPrefix + "r.1"}, "hello"), err: errBadPack},
		"no subject":    {reply: msg(nil, "hello"), err: errBadPack},
	} {
		got, err := parseDirectGet(tc.reply, subj)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %q, %v; want %v", name, got, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, tc.want)
		}
	}
	// Another status (a timeout, say) is an error, but not a missing or
	// damaged pack.
	_, err := parseDirectGet(msg(map[string]string{statusHeader: "408", descriptionHeader: "Request Timeout"}, ""), subj)
	if err == nil || errors.Is(err, errNoPack) || errors.Is(err, errBadPack) || !strings.Contains(err.Error(), "408") {
		t.Errorf("a 408: %v", err)
	}
}

// FuzzDecodePack: any bytes decode to a pack's events or to errBadPack,
// never a panic; events decoded are dense from the first seq, non-empty,
// within the input, and encode back to the same pack. Each input is also
// read with a valid checksum appended, so that the mutations reach the
// framing behind it.
func FuzzDecodePack(f *testing.F) {
	w := newPackWriter(nil, &packStats{})
	for _, pack := range [][]byte{
		w.stored("r", packRun("r", 3, nil))[0].Data,
		w.stored("s", packRun("s", 40, func(seq uint64) int { return int(seq % 7) }))[0].Data,
		{packVersion, 1, 1, 'a', 2, '{', '}', 0, 0, 0, 0},
	} {
		f.Add(pack)
		f.Add(pack[:len(pack)-4])
	}
	check := func(t *testing.T, data []byte) {
		evs, err := decodePack(data, typeNames{}, nil)
		if err != nil {
			if !errors.Is(err, errBadPack) || len(evs) != 0 {
				t.Fatalf("%d events with %v", len(evs), err)
			}
			return
		}
		again := startPack(nil, evs[0].Seq)
		for i, ev := range evs {
			if ev.Seq != evs[0].Seq+uint64(i) || ev.Type == "" || len(ev.JSON) == 0 || cap(ev.JSON) != len(ev.JSON) {
				t.Fatalf("event %d: %+v", i, ev)
			}
			again = appendPackEvent(again, ev)
		}
		if !bytes.Equal(finishPack(again), data) {
			t.Fatal("events do not encode back to the pack")
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, data)
		check(t, finishPack(bytes.Clone(data)))
	})
}

// FuzzParseDirectGet: any reply is a body, errNoPack, or an error, never a
// panic; a body comes only from a reply that is the message of the
// subject asked for, with no status.
func FuzzParseDirectGet(f *testing.F) {
	f.Add(packsPrefix+"r.0", "", "hello")
	f.Add("", "404", "")
	f.Add(packsPrefix+"r.1", "503", "x")
	f.Fuzz(func(t *testing.T, subject, status, data string) {
		m := nats.NewMsg("_INBOX.x")
		if subject != "" {
			m.Header.Set(jetstream.SubjectHeader, subject)
		}
		if status != "" {
			m.Header.Set(statusHeader, status)
		}
		m.Data = []byte(data)
		got, err := parseDirectGet(m, packsPrefix+"r.0")
		if err == nil && (status != "" || subject != packsPrefix+"r.0" || string(got) != data) {
			t.Fatalf("body %q from subject %q, status %q", got, subject, status)
		}
		if err != nil && got != nil {
			t.Fatalf("body %q with %v", got, err)
		}
	})
}

// The cursor reads packs and the per-event log over the same connection as
// it read before: a cursor closed in the middle of a pack replay ends its
// fetches (goleak checks the goroutines of the whole package).
func TestCursorClosedInPackReplay(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	evs := packRun(id, 3000, nil)
	appendInBatches(t, e.s, id, evs, 500)
	packsSent(t, e.s)
	c, err := e.s.OpenCursor(ctx(t), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(ctx(t), 10); err != nil {
		t.Fatal(err)
	}
	c.Close()
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Events it held may still come; then the end.
	for {
		if _, err := c.Next(cctx, 1000); err != nil {
			if !errors.Is(err, errCursorClosed) {
				t.Fatalf("after Close: %v", err)
			}
			return
		}
	}
}
