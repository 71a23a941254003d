package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go/jetstream"
)

// promisedStepBytes is what docs/security.md promises each layer of a
// reader holds (runs.ReaderStepBytes): a literal, so that a cursor's bound
// grown back fails here rather than moving the test with it.
const promisedStepBytes = 256 << 10

// A cursor whose reader does not call Next holds about promisedStepBytes
// of events, not cursorBuffer of them however big: 50 slow readers of a
// run of 64 KiB events must not hold 16 MiB each. Every event still
// comes, in order, once the reader reads.
func TestCursorHoldsBoundedBytes(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	if err := e.s.CreateRun(ctx(t), runs.Run{ID: id, Agent: "claude", Status: runs.Running, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const n, size = 40, 64 << 10
	pad := bytes.Repeat([]byte("x"), size)
	for seq := uint64(1); seq <= n; seq++ {
		ev := runs.StoredEvent{Seq: seq, Type: runs.EventMessageDelta,
			JSON: fmt.Appendf(nil, `{"run_id":%q,"seq":%d,"type":"message.delta","data":{"text":%q}}`, id, seq, pad)}
		if err := e.s.AppendEvents(ctx(t), id, []runs.StoredEvent{ev}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := e.s.OpenCursor(ctx(t), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	c := cur.(*cursor)
	// The pump fills what it may, then waits for room: the channel holds
	// at most cursorBufferBytes and one event more.
	deadline := time.Now().Add(30 * time.Second)
	for len(c.events) < cursorBufferBytes/(size+64) {
		if time.Now().After(deadline) {
			t.Fatalf("the pump holds %d events, want it to fill up to its byte bound", len(c.events))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if held := c.held.Load(); held > promisedStepBytes {
		t.Fatalf("the cursor holds %d bytes of events, want at most %d", held, promisedStepBytes)
	}
	if got := len(c.events); got >= cursorBuffer || got > promisedStepBytes/size {
		t.Fatalf("the cursor holds %d events of %d bytes", got, size)
	}
	var next uint64 = 1
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for next <= n {
		evs, err := cur.Next(rctx, 256)
		if err != nil {
			t.Fatalf("after seq %d: %v", next-1, err)
		}
		for _, ev := range evs {
			if ev.Seq != next {
				t.Fatalf("seq %d, want %d", ev.Seq, next)
			}
			next++
		}
	}
	if held := c.held.Load(); held != 0 {
		t.Errorf("%d bytes held after every event was read", held)
	}
}

// A cursor whose reader does not call Next has at most about
// promisedStepBytes pulled from the server and not yet taken, however big
// its run's events: a pull's byte bound must fit the largest message the
// server takes (4 MiB on the embedded server), and 50 lagging readers of
// 64 KiB events each had that much in flight, copied on the server's side
// of the gateway too. Every event still comes, once, in order, with the
// same bytes.
//
// With pulls of readers.pullBytes, 3.0 MiB of this run was in flight here;
// with pulls of 1 MiB, about 1 MiB.
func TestCursorPullsBoundedBytes(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	const n, size = 120, 64 << 10
	want := make([]runs.StoredEvent, 0, n)
	for seq := uint64(1); seq <= n; seq++ {
		pad := bytes.Repeat([]byte{byte('a' + seq%26)}, size)
		ev := runs.StoredEvent{Seq: seq, Type: runs.EventMessageDelta,
			JSON: fmt.Appendf(nil, `{"run_id":%q,"seq":%d,"type":"message.delta","data":{"text":%q}}`, id, seq, pad)}
		want = append(want, ev)
		if err := e.s.AppendEvents(ctx(t), id, []runs.StoredEvent{ev}); err != nil {
			t.Fatal(err)
		}
	}
	cur := openCursor(t, e.s, id, 0)
	info := waitPullServed(t, e, cur, id)
	if inFlight := pulledNotTaken(t, e, id, cur.pulledTo.Load(), info.Delivered.Stream); inFlight > promisedStepBytes+pullOverhead {
		t.Fatalf("the cursor has %d bytes pulled and not taken (stream seqs %d..%d), want at most about %d",
			inFlight, cur.pulledTo.Load()+1, info.Delivered.Stream, promisedStepBytes)
	}

	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < n; {
		evs, err := cur.Next(rctx, 256)
		if err != nil {
			t.Fatalf("after seq %d: %v", i, err)
		}
		for _, ev := range evs {
			if ev.Seq != want[i].Seq || ev.Type != want[i].Type || !bytes.Equal(ev.JSON, want[i].JSON) {
				t.Fatalf("event %d: seq %d type %s, %d bytes; want seq %d, the bytes appended", i, ev.Seq, ev.Type, len(ev.JSON), want[i].Seq)
			}
			i++
		}
	}
}

// waitPullServed waits until the pump of cur, whose reader reads nothing,
// has filled its buffer and the server has served every pull of the run's
// consumer, and returns the consumer's state then.
func waitPullServed(t *testing.T, e *env, cur *cursor, id string) *jetstream.ConsumerInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if len(cur.events) > 0 && cur.held.Load() >= cursorBufferBytes/2 {
			if info := runConsumer(t, e, id); info != nil && info.NumWaiting == 0 && info.Delivered.Stream > cur.pulledTo.Load() {
				return info
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cursor's pulls were not served: it holds %d bytes, took up to stream seq %d; consumer %+v",
				cur.held.Load(), cur.pulledTo.Load(), runConsumer(t, e, id))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runConsumer is the state of the one consumer reading run id, or nil when
// there is none (or a replaced one is still being deleted).
func runConsumer(t *testing.T, e *env, id string) *jetstream.ConsumerInfo {
	t.Helper()
	var found []*jetstream.ConsumerInfo
	l := e.s.events.ListConsumers(ctx(t))
	for info := range l.Info() {
		if slices.Contains(info.Config.FilterSubjects, eventsSubject(id)) || info.Config.FilterSubject == eventsSubject(id) {
			found = append(found, info)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

// pulledNotTaken is the bytes of run id's messages after stream seq from,
// up to and including to.
func pulledNotTaken(t *testing.T, e *env, id string, from, to uint64) int {
	t.Helper()
	total := 0
	for seq := from + 1; seq <= to; seq++ {
		msg, err := e.s.events.GetMsg(ctx(t), seq)
		if err != nil {
			t.Fatalf("get stream seq %d: %v", seq, err)
		}
		if msg.Subject == eventsSubject(id) {
			total += len(msg.Data)
		}
	}
	return total
}

// A message bigger than a cursor's pulls (a log written under larger event
// bounds) does not stall the cursor: it goes back to pulls of the largest
// message the server takes, and reads on, in order, from where it was.
func TestCursorReadsAMessageBiggerThanItsPulls(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	var want []runs.StoredEvent
	for seq := uint64(1); seq <= 6; seq++ {
		size := 100
		if seq == 2 || seq == 5 {
			size = pullTargetBytes + 512<<10
		}
		pad := bytes.Repeat([]byte{byte('a' + seq)}, size)
		ev := runs.StoredEvent{Seq: seq, Type: runs.EventMessageDelta,
			JSON: fmt.Appendf(nil, `{"run_id":%q,"seq":%d,"type":"message.delta","data":{"text":%q}}`, id, seq, pad)}
		want = append(want, ev)
		if err := e.s.AppendEvents(ctx(t), id, []runs.StoredEvent{ev}); err != nil {
			t.Fatal(err)
		}
	}
	for _, after := range []uint64{0, 3} {
		cur := openCursor(t, e.s, id, after)
		for i := int(after); i < len(want); {
			evs, err := cur.Next(ctx(t), 256)
			if err != nil {
				t.Fatalf("after %d, at seq %d: %v", after, i, err)
			}
			for _, ev := range evs {
				if ev.Seq != want[i].Seq || !bytes.Equal(ev.JSON, want[i].JSON) {
					t.Fatalf("after %d: seq %d (%d bytes), want seq %d (%d bytes)", after, ev.Seq, len(ev.JSON), want[i].Seq, len(want[i].JSON))
				}
				i++
			}
		}
		if cur.pullBytes != e.s.readers.pullBytes() {
			t.Errorf("after %d: the cursor pulls %d bytes, want %d after a bigger message", after, cur.pullBytes, e.s.readers.pullBytes())
		}
	}
}
