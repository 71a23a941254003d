package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// errUnexpected is what a fake answers a call it was not made for.
var errUnexpected = errors.New("unexpected call")

// promisedStepBytes is what docs/security.md promises a stream's write
// holds at most (or one event): a literal, so that a bound grown back
// fails here rather than moving the test with it.
const promisedStepBytes = 256 << 10

// fakeCursor is a Cursor whose methods are function fields.
type fakeCursor struct {
	next  func(ctx context.Context, max int) ([]runs.StoredEvent, error)
	close func() error
}

func (c *fakeCursor) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	return c.next(ctx, max)
}

func (c *fakeCursor) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// sliceCursor returns a cursor that hands out evs in batches as large as
// asked, each a copy when copied (as the store's decoding of a pack makes
// one), and then waits for its context to end.
func sliceCursor(evs []runs.StoredEvent, copied bool) *fakeCursor {
	pos := 0
	return &fakeCursor{next: func(ctx context.Context, max int) ([]runs.StoredEvent, error) {
		if pos == len(evs) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		n := min(max, len(evs)-pos)
		pos += n
		if copied {
			return append([]runs.StoredEvent(nil), evs[pos-n:pos]...), nil
		}
		return evs[pos-n : pos], nil
	}}
}

// storedEvent is an event of a run as the store holds it.
func storedEvent(t testing.TB, seq uint64, typ runs.EventType, data any) runs.StoredEvent {
	t.Helper()
	b, err := json.Marshal(runs.Event{
		V: runs.EnvelopeVersion, RunID: "0196a7c8-5a3e-7b1e-9d0a-2f4c6b8e1a3d", Seq: seq,
		Time: time.Date(2025, 5, 1, 12, 0, 0, int(seq), time.UTC), Type: typ, Agent: "claude", Data: data,
	})
	if err != nil {
		t.Fatal(err)
	}
	return runs.StoredEvent{Seq: seq, Type: typ, JSON: b}
}

// bigLog is a run's log of n events whose envelopes are each about size
// bytes where every says so, every one different, ending with
// run.completed.
func bigLog(t testing.TB, n, size int, every func(seq int) bool) []runs.StoredEvent {
	t.Helper()
	evs := []runs.StoredEvent{storedEvent(t, 1, runs.EventRunQueued, runs.RunQueuedData{Agent: "claude", Position: 1})}
	for i := 2; i < n; i++ {
		text := fmt.Sprintf("delta %d", i)
		if every(i) {
			text = strings.Repeat(string(rune('a'+i%26)), size) + text
		}
		evs = append(evs, storedEvent(t, uint64(i), runs.EventMessageDelta, runs.MessageData{MessageID: "m1", Text: text}))
	}
	return append(evs, storedEvent(t, uint64(n), runs.EventRunCompleted, runs.RunCompletedData{Status: runs.Succeeded}))
}
