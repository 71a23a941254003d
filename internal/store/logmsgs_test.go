package store

import (
	"bytes"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// groupEvents cuts a batch into messages of at most perMsg events and
// maxBytes of body, sends an event too big for a group alone in the format
// of one event, and stops at maxMsgs; each message reads back as the
// events it was made of, with the Nats-Msg-Id of its last.
func TestGroupEvents(t *testing.T) {
	id := "run-1"
	evs := mkEvents(id, 1, 20)
	big := bytes.Repeat([]byte("x"), 500)
	evs[9].JSON = append([]byte(`{"big":"`), append(big, `"}`...)...)

	groups := groupEvents(id, evs, 100, 4, 300)
	var got []runs.StoredEvent
	var sizes []int
	for _, g := range groups {
		sizes = append(sizes, g.n)
		if g.msg.Subject != eventsSubject(id) {
			t.Errorf("subject %q", g.msg.Subject)
		}
		if mid := g.msg.Header.Get(jetstream.MsgIDHeader); mid != msgID(id, g.last) {
			t.Errorf("message %d..%d has Nats-Msg-Id %q, want %q", g.first, g.last, mid, msgID(id, g.last))
		}
		if g.n > 1 && len(g.msg.Data) > 300+16 {
			t.Errorf("message %d..%d has %d bytes of body", g.first, g.last, len(g.msg.Data))
		}
		first, last, err := msgSeqs(g.msg.Header)
		if err != nil || first != g.first || last != g.last || int(last-first)+1 != g.n {
			t.Errorf("message %d..%d of %d: headers say %d..%d (%v)", g.first, g.last, g.n, first, last, err)
		}
		if typ := lastType(g.msg.Header); typ != evs[g.last-1].Type {
			t.Errorf("message %d..%d: last type %q, want %q", g.first, g.last, typ, evs[g.last-1].Type)
		}
		n := len(got)
		if got, err = logEvents(g.msg.Header, g.msg.Data, typeNames{}, got); err != nil {
			t.Fatalf("message %d..%d: %v", g.first, g.last, err)
		}
		if len(got)-n != g.n {
			t.Fatalf("message %d..%d read as %d events", g.first, g.last, len(got)-n)
		}
	}
	// Events 1..9 in groups of 4 at most, within 300 bytes; the big one
	// alone; then the rest.
	if len(got) != len(evs) {
		t.Fatalf("%d events read back, want %d (groups %v)", len(got), len(evs), sizes)
	}
	for i := range evs {
		if got[i].Seq != evs[i].Seq || got[i].Type != evs[i].Type || !bytes.Equal(got[i].JSON, evs[i].JSON) {
			t.Fatalf("event %d read back as %d %q %s", evs[i].Seq, got[i].Seq, got[i].Type, got[i].JSON)
		}
	}
	for _, g := range groups {
		if g.first <= 10 && g.last >= 10 && g.n != 1 {
			t.Errorf("the big event shares a message: %d..%d", g.first, g.last)
		}
		if g.n > 4 {
			t.Errorf("message %d..%d holds %d events, more than 4", g.first, g.last, g.n)
		}
	}
	big10 := groups[0]
	for _, g := range groups {
		if g.first == 10 {
			big10 = g
		}
	}
	if big10.first != 10 || big10.msg.Header.Get(headerLastSeq) != "" || !bytes.Equal(big10.msg.Data, evs[9].JSON) {
		t.Errorf("the big event is not stored as a message of one event: %+v", big10.msg.Header)
	}

	if limited := groupEvents(id, evs, 2, 4, 1<<20); len(limited) != 2 || eventCount(limited) != 8 {
		t.Errorf("2 messages of at most 4: %d messages of %d events", len(limited), eventCount(limited))
	}
	if one := groupEvents(id, evs[:1], 10, 4, 1<<20); len(one) != 1 || one[0].msg.Header.Get(headerLastSeq) != "" {
		t.Errorf("a lone event is not a message of one event")
	}
}

// A message whose body does not hold the events its headers name is
// refused whole: no event of it is read.
func TestLogEventsRefusesMismatches(t *testing.T) {
	id := "run-1"
	g := groupEvents(id, mkEvents(id, 1, 5), 1, 8, 1<<20)[0]
	for name, edit := range map[string]func(h nats.Header, body []byte) (nats.Header, []byte){
		"last seq past the body": func(h nats.Header, b []byte) (nats.Header, []byte) {
			h.Set(headerLastSeq, "6")
			return h, b
		},
		"first seq before the body": func(h nats.Header, b []byte) (nats.Header, []byte) {
			h.Set(headerSeq, "0")
			return h, b
		},
		"last seq not after the first": func(h nats.Header, b []byte) (nats.Header, []byte) {
			h.Set(headerLastSeq, "1")
			return h, b
		},
		"malformed last seq": func(h nats.Header, b []byte) (nats.Header, []byte) {
			h.Set(headerLastSeq, "5x")
			return h, b
		},
		"damaged body": func(h nats.Header, b []byte) (nats.Header, []byte) {
			b[len(b)/2] ^= 0x40
			return h, b
		},
		"body of one event": func(h nats.Header, b []byte) (nats.Header, []byte) {
			return h, []byte(`{"seq":1}`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := nats.Header{}
			for k, v := range g.msg.Header {
				h[k] = append([]string(nil), v...)
			}
			h, body := edit(h, bytes.Clone(g.msg.Data))
			prior := []runs.StoredEvent{{Seq: 99}}
			evs, err := logEvents(h, body, nil, prior)
			if err == nil {
				t.Fatalf("read as %d events", len(evs)-1)
			}
			if len(evs) != 1 {
				t.Fatalf("%d events added with the error %v", len(evs)-1, err)
			}
		})
	}
}

// FuzzLogEvents reads arbitrary headers and bodies as a message of a run's
// log: it never panics, and what it reads is consecutive events within
// the seqs the headers name, or nothing with an error.
func FuzzLogEvents(f *testing.F) {
	id := "run-1"
	for _, g := range groupEvents(id, mkEvents(id, 1, 7), 10, 3, 1<<20) {
		f.Add(g.msg.Header.Get(headerSeq), g.msg.Header.Get(headerLastSeq), g.msg.Header.Get(headerType), g.msg.Data)
	}
	f.Add("1", "", "run.queued", []byte(`{}`))
	f.Add("18446744073709551615", "18446744073709551616", "x", []byte{1, 0xff})
	f.Fuzz(func(t *testing.T, seq, lastSeq, typ string, body []byte) {
		h := nats.Header{headerSeq: {seq}, headerType: {typ}}
		if lastSeq != "" {
			h.Set(headerLastSeq, lastSeq)
		}
		evs, err := logEvents(h, body, typeNames{}, nil)
		if err != nil {
			if len(evs) != 0 {
				t.Fatalf("%d events with the error %v", len(evs), err)
			}
			return
		}
		first, last, err := msgSeqs(h)
		if err != nil {
			t.Fatalf("read though its headers are malformed: %v", err)
		}
		if uint64(len(evs)) != last-first+1 {
			t.Fatalf("%d events from a message of %d..%d", len(evs), first, last)
		}
		for i, ev := range evs {
			if ev.Seq != first+uint64(i) {
				t.Fatalf("event %d has seq %d in a message from %d", i, ev.Seq, first)
			}
		}
	})
}

// The store stores a batch in as few messages as its bound allows, and one
// whose messages hold one event each (as before grouping) reads the same
// log: messages of both kinds, written by either, read back as one run.
func TestGroupedAndSingleMessagesMix(t *testing.T) {
	e := newEnv(t)
	single, err := Open(ctx(t), e.nc, Options{EventsPerMessage: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := newID(t)
	appendEvents(t, e.s, id, 1, 300) // 256 + 44
	appendEvents(t, single, id, 301, 303)
	// Another grouping store: e.s remembers the run's end as 300, and a
	// run has one writer at a time.
	grouping, err := Open(ctx(t), e.nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, grouping, id, 304, 310)
	_, msgs := storedEvents(t, e.s, id)
	if msgs != 2+3+1 {
		t.Errorf("%d messages, want 6", msgs)
	}
	checkStored(t, e.s, id, 310)
	for _, after := range []uint64{0, 100, 256, 257, 300, 302, 305, 310} {
		for name, s := range map[string]*Store{"grouping": e.s, "single": single} {
			c, err := s.OpenCursor(ctx(t), id, after)
			if err != nil {
				t.Fatal(err)
			}
			if after < 310 {
				read(t, c, id, after+1, 310)
			}
			expectNothing(t, c)
			c.Close()
			last, err := s.LastEvent(ctx(t), id)
			if err != nil || last.Seq != 310 || last.Type != runs.EventMessageDelta {
				t.Errorf("%s: last event %d %q, %v", name, last.Seq, last.Type, err)
			}
		}
	}
	if _, err := Open(ctx(t), e.nc, Options{EventsPerMessage: -1}); err == nil {
		t.Error("a negative EventsPerMessage was taken")
	}
}

// A cursor that starts in the middle of a message reads on from the event
// after the reader's, and the log's packs are not what serves it: the
// per-event log is read when packs are missing.
func TestCursorInsideAMessageWithoutPacks(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	appendEvents(t, e.s, id, 1, 100)
	// No packs: the run's range is read from its log.
	if err := e.s.packStream.Purge(ctx(t), jetstream.WithPurgeSubject(packsFilter(id))); err != nil {
		t.Fatal(err)
	}
	for _, after := range []uint64{0, 1, 50, 99} {
		c := openCursor(t, e.s, id, after)
		read(t, c, id, after+1, 100)
		expectNothing(t, c)
		c.Close()
	}
	c := openCursor(t, e.s, id, 100)
	appendEvents(t, e.s, id, 101, 140)
	read(t, c, id, 101, 140)
	expectNothing(t, c)
}
