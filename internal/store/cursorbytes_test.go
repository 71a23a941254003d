package store

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// A cursor whose reader does not call Next holds about cursorBufferBytes
// of events, not cursorBuffer of them however big: 50 slow readers of a
// run of 256 KiB events must not hold 16 MiB each. Every event still
// comes, in order, once the reader reads.
func TestCursorHoldsBoundedBytes(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	if err := e.s.CreateRun(ctx(t), runs.Run{ID: id, Agent: "claude", Status: runs.Running, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const n, size = 40, 256 << 10
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
	if held := c.held.Load(); held > cursorBufferBytes+size+1024 {
		t.Fatalf("the cursor holds %d bytes of events, want at most about %d", held, cursorBufferBytes)
	}
	if got := len(c.events); got >= cursorBuffer || got > cursorBufferBytes/size+1 {
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
