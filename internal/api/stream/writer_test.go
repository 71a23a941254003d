package stream

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestEncodeCutsByBytes: encode stops before the event that would take a
// write past maxBatchBytes, hands back the rest, and a write holds at least
// one event however big.
func TestEncodeCutsByBytes(t *testing.T) {
	big := bigLog(t, 12, 400<<10, func(seq int) bool { return seq != 5 })
	st := &Writer{enc: SSE{}}
	var got []uint64
	rest := big
	for writes := 0; len(rest) > 0; writes++ {
		if writes > len(big) {
			t.Fatal("encode makes no progress")
		}
		var done bool
		rest, done = st.encode(rest)
		if len(st.buf) > promisedStepBytes && bytes.Count(st.buf, []byte("\nid: "))+1 > 1 {
			t.Fatalf("a write of %d bytes holds more than one event", len(st.buf))
		}
		for _, line := range bytes.Split(st.buf, []byte("\n")) {
			if s, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
				n, _ := strconv.ParseUint(string(s), 10, 64)
				got = append(got, n)
			}
		}
		if done != (len(rest) == 0) {
			t.Fatalf("done=%v with %d events left", done, len(rest))
		}
	}
	if len(got) != len(big) {
		t.Fatalf("encoded seqs %v, want 1..%d", got, len(big))
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("encoded seqs %v, want 1..%d in order", got, len(big))
		}
	}

	// One event bigger than a batch is written alone.
	huge := bigLog(t, 3, 3*maxBatchBytes, func(int) bool { return true })
	st = &Writer{enc: SSE{}}
	rest, _ = st.encode(huge)
	if len(rest) != 2 || !bytes.HasPrefix(st.buf, []byte("id: 1\n")) || len(st.buf) > 4<<10 {
		t.Fatalf("first write of a run.queued then a huge event: %d bytes, %d left", len(st.buf), len(rest))
	}
	rest, _ = st.encode(rest)
	if len(rest) != 1 || !bytes.Contains(st.buf, []byte("id: 2\n")) {
		t.Fatalf("the huge event's write: %d bytes, %d left", len(st.buf), len(rest))
	}
}

func TestBatchLen(t *testing.T) {
	ev := func(size int) runs.StoredEvent { return runs.StoredEvent{JSON: make([]byte, size)} }
	for _, tc := range []struct {
		evs   []runs.StoredEvent
		limit int
		want  int
	}{
		{nil, 256, 256},
		{[]runs.StoredEvent{ev(100), ev(200)}, 256, 256},
		{[]runs.StoredEvent{ev(100), ev(256 << 10)}, 256, 1},
		{[]runs.StoredEvent{ev(64 << 10)}, 256, 3},
		{[]runs.StoredEvent{ev(8 << 20)}, 256, 1},
		{[]runs.StoredEvent{ev(1 << 10)}, 16, 16},
	} {
		if got := batchLen(tc.evs, tc.limit); got != tc.want {
			t.Errorf("batchLen(%d events, %d) = %d, want %d", len(tc.evs), tc.limit, got, tc.want)
		}
	}
}

// scriptedPoll is a polling cursor whose every Poll is one step of a
// script, called on the stream's own goroutine: a step may look at the
// stream it feeds.
type scriptedPoll struct {
	steps []func(max int) ([]runs.StoredEvent, <-chan struct{})
}

func (c *scriptedPoll) Poll(max int) ([]runs.StoredEvent, <-chan struct{}, error) {
	if len(c.steps) == 0 {
		return nil, nil, errUnexpected
	}
	step := c.steps[0]
	c.steps = c.steps[1:]
	evs, wake := step(max)
	return evs, wake, nil
}

func (c *scriptedPoll) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	return nil, errUnexpected
}

func (c *scriptedPoll) Close() error { return nil }

// TestStreamKeepsItsBufferWhileBehind: a stream that got a full batch keeps
// its write buffer for the next one, even across a wait, and lets it go
// when it waits caught up (its last batch short), so that a replay does not
// allocate a buffer per batch and a waiting client does not hold one.
func TestStreamKeepsItsBufferWhileBehind(t *testing.T) {
	const eventBytes = 1 << 10
	seq := uint64(0)
	events := func(n int, typ runs.EventType) []runs.StoredEvent {
		out := make([]runs.StoredEvent, n)
		for i := range out {
			seq++
			out[i] = runs.StoredEvent{Seq: seq, Type: typ,
				JSON: []byte(fmt.Sprintf(`{"seq":%d,"text":%q}`, seq, strings.Repeat("x", eventBytes)))}
		}
		return out
	}
	woken := func() <-chan struct{} {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	var st *Writer
	var caps []int
	look := func() { caps = append(caps, cap(st.buf)) }
	cur := &scriptedPoll{steps: []func(int) ([]runs.StoredEvent, <-chan struct{}){
		func(max int) ([]runs.StoredEvent, <-chan struct{}) { return events(max, runs.EventMessageDelta), nil },
		// Behind: the wait that follows keeps the buffer.
		func(int) ([]runs.StoredEvent, <-chan struct{}) { look(); return nil, woken() },
		func(int) ([]runs.StoredEvent, <-chan struct{}) { look(); return events(1, runs.EventMessageDelta), nil },
		// Caught up: the wait lets it go.
		func(int) ([]runs.StoredEvent, <-chan struct{}) { look(); return nil, woken() },
		func(int) ([]runs.StoredEvent, <-chan struct{}) { look(); return events(1, runs.EventRunCompleted), nil },
	}}
	w := &discardStream{h: http.Header{}}
	cfg := Config{BatchSize: 64, PingInterval: time.Hour, ReconnectDelay: time.Second, WriteTimeout: time.Minute}
	st = New(w, SSE{}, 0, &cfg)
	ctx, cancel := context.WithCancel(context.Background())
	if err := st.Serve(ctx, cancel, cur); err != nil {
		t.Fatal(err)
	}
	if st.last != seq || len(cur.steps) != 0 {
		t.Fatalf("the stream wrote up to %d of %d events, with %d steps left", st.last, seq, len(cur.steps))
	}
	full := 64 * eventBytes
	if len(caps) != 4 || caps[0] < full || caps[1] < full || caps[2] < full || caps[3] != 0 {
		t.Errorf("the write buffer's capacity at each poll after the full batch: %v; want it kept (≥ %d) three times, then let go (0)", caps, full)
	}
}

// bufferWatch is a ResponseWriter that records where each write of events
// starts in memory: writes from one buffer kept from batch to batch start
// at the same place.
type bufferWatch struct {
	discardStream
	starts []*byte
}

func (w *bufferWatch) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("id: ")) {
		w.starts = append(w.starts, &p[0])
	}
	return w.discardStream.Write(p)
}

// TestStreamReplayWritesFromOneBuffer: a replay read through Next (a
// cursor that does not poll, read by the stream's goroutine) writes every
// batch from the one buffer, though the stream waits for each batch.
func TestStreamReplayWritesFromOneBuffer(t *testing.T) {
	const batches, batchLen = 8, 64
	evs := make([]runs.StoredEvent, batches*batchLen)
	for i := range evs {
		typ := runs.EventMessageDelta
		if i == len(evs)-1 {
			typ = runs.EventRunCompleted
		}
		evs[i] = runs.StoredEvent{Seq: uint64(i + 1), Type: typ,
			JSON: []byte(fmt.Sprintf(`{"seq":%d,"text":%q}`, i+1, strings.Repeat("x", 1<<10)))}
	}
	cur := sliceCursor(evs, false)
	w := &bufferWatch{discardStream: discardStream{h: http.Header{}}}
	cfg := Config{BatchSize: batchLen, PingInterval: time.Hour, ReconnectDelay: time.Second, WriteTimeout: time.Minute}
	st := New(w, SSE{}, 0, &cfg)
	ctx, cancel := context.WithCancel(context.Background())
	if err := st.Serve(ctx, cancel, cur); err != nil {
		t.Fatal(err)
	}
	if st.last != uint64(len(evs)) || len(w.starts) != batches {
		t.Fatalf("the stream wrote up to %d of %d events in %d writes, want %d", st.last, len(evs), len(w.starts), batches)
	}
	for i, p := range w.starts {
		if p != w.starts[0] {
			t.Fatalf("write %d of %d is from another buffer than the first: the buffer was let go between batches", i+1, batches)
		}
	}
}

// TestStreamWritesFromPooledBuffers: a stream that has caught up holds no
// write buffer while it waits, and one that writes a few events, then
// waits, over and over, as each of a thousand clients of a busy run does,
// allocates nothing for its writes.
func TestStreamWritesFromPooledBuffers(t *testing.T) {
	evs := []runs.StoredEvent{
		{Seq: 1, Type: runs.EventMessageDelta, JSON: []byte(`{"type":"message.delta","data":{"text":"hello"}}`)},
		{Seq: 2, Type: runs.EventMessageDelta, JSON: []byte(`{"type":"message.delta","data":{"text":" world"}}`)},
	}
	w := &discardStream{h: http.Header{}}
	st := &Writer{w: w, rc: http.NewResponseController(w), enc: SSE{}, timeout: time.Minute}
	round := func() {
		st.last = 0
		if rest, done, err := st.writeBatch(evs); len(rest) != 0 || done || err != nil {
			t.Fatalf("writeBatch: %d left, done %v, %v", len(rest), done, err)
		}
		st.releaseBuf() // caught up: it waits
	}
	round()
	if st.buf != nil || st.bufBox != nil {
		t.Fatalf("a waiting stream holds a buffer of %d bytes", cap(st.buf))
	}
	if w.bytes == 0 || w.flushes != 1 {
		t.Fatalf("wrote %d bytes in %d flushes", w.bytes, w.flushes)
	}
	if raceEnabled {
		return // the race detector empties pools at random
	}
	if allocs := testing.AllocsPerRun(100, round); allocs != 0 {
		t.Errorf("writing two events and waiting allocates %v times a round", allocs)
	}
}
