package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go/jetstream"
)

// mkEvents returns events from..to of a run, each with distinct JSON.
func mkEvents(runID string, from, to uint64) []runs.StoredEvent {
	var evs []runs.StoredEvent
	for seq := from; seq <= to; seq++ {
		typ := runs.EventMessageDelta
		if seq == 1 {
			typ = runs.EventRunQueued
		}
		evs = append(evs, runs.StoredEvent{
			Seq:  seq,
			Type: typ,
			JSON: fmt.Appendf(nil, `{"run_id":%q,"seq":%d,"type":%q}`, runID, seq, typ),
		})
	}
	return evs
}

func appendEvents(t *testing.T, s *Store, runID string, from, to uint64) {
	t.Helper()
	if err := s.AppendEvents(ctx(t), runID, mkEvents(runID, from, to)); err != nil {
		t.Fatal(err)
	}
}

func openCursor(t *testing.T, s *Store, runID string, after uint64) *cursor {
	t.Helper()
	c, err := s.OpenCursor(ctx(t), runID, after)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*cursor)
}

// read reads until it has the events from..to of runID and checks each.
func read(t *testing.T, c runs.Cursor, runID string, from, to uint64) {
	t.Helper()
	want := mkEvents(runID, from, to)
	var got []runs.StoredEvent
	for len(got) < len(want) {
		batch, err := c.Next(ctx(t), 100)
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		if len(batch) == 0 {
			t.Fatal("empty batch with nil error")
		}
		got = append(got, batch...)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || string(got[i].JSON) != string(want[i].JSON) {
			t.Fatalf("event %d = {%d %s %s}, want {%d %s %s}", i,
				got[i].Seq, got[i].Type, got[i].JSON, want[i].Seq, want[i].Type, want[i].JSON)
		}
	}
}

// expectNothing checks that the cursor has nothing more for a while.
func expectNothing(t *testing.T, c runs.Cursor) {
	t.Helper()
	wait, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	batch, err := c.Next(wait, 100)
	if !errors.Is(err, context.DeadlineExceeded) || batch != nil {
		t.Fatalf("Next = %d events, %v; want nothing", len(batch), err)
	}
}

func TestAppendAndReadFromStart(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	if last, err := e.s.LastEvent(ctx(t), id); err != nil || last.Seq != 0 {
		t.Fatalf("LastEvent of a run without events = %d, %v", last.Seq, err)
	}
	appendEvents(t, e.s, id, 1, 5)
	appendEvents(t, e.s, id, 6, 6)
	want := mkEvents(id, 6, 6)[0]
	if last, err := e.s.LastEvent(ctx(t), id); err != nil || last.Seq != 6 || last.Type != want.Type || last.Type == "" {
		t.Fatalf("LastEvent = %d %q, %v; want 6 %q", last.Seq, last.Type, err, want.Type)
	}
	c := openCursor(t, e.s, id, 0)
	read(t, c, id, 1, 6)
	expectNothing(t, c)
}

func TestCursorAfter(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	appendEvents(t, e.s, id, 1, 5)

	t.Run("in the middle", func(t *testing.T) {
		c := openCursor(t, e.s, id, 3)
		read(t, c, id, 4, 5)
		expectNothing(t, c)
	})
	t.Run("caught up", func(t *testing.T) {
		c := openCursor(t, e.s, id, 5)
		// The consumer starts after the run's last message instead of
		// replaying the run.
		_, pos, err := e.s.lastStored(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		cfg := c.cons.CachedInfo().Config
		if cfg.DeliverPolicy != jetstream.DeliverByStartSequencePolicy || cfg.OptStartSeq != pos+1 {
			t.Errorf("consumer starts with %v at %d, want by start sequence at %d", cfg.DeliverPolicy, cfg.OptStartSeq, pos+1)
		}
		expectNothing(t, c)
		appendEvents(t, e.s, id, 6, 7)
		read(t, c, id, 6, 7)
	})
	t.Run("ahead of the log", func(t *testing.T) {
		c := openCursor(t, e.s, id, 9)
		appendEvents(t, e.s, id, 8, 10)
		read(t, c, id, 10, 10)
		expectNothing(t, c)
	})
	t.Run("run without events", func(t *testing.T) {
		other := newID(t)
		c := openCursor(t, e.s, other, 2)
		appendEvents(t, e.s, other, 1, 4)
		read(t, c, other, 3, 4)
	})
}

func TestCursorWaitsForLiveAppend(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	c := openCursor(t, e.s, id, 0)
	appended := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		appended <- e.s.AppendEvents(context.Background(), id, mkEvents(id, 1, 3))
	}()
	start := time.Now()
	read(t, c, id, 1, 3)
	if waited := time.Since(start); waited < 90*time.Millisecond {
		t.Errorf("Next returned after %s, before the append", waited)
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
}

func TestCursorBatches(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	appendEvents(t, e.s, id, 1, 10)
	c := openCursor(t, e.s, id, 0)
	// Wait until the cursor holds all ten, so the sizes below are exact.
	for deadline := time.Now().Add(5 * time.Second); len(c.events) < 10; {
		if time.Now().After(deadline) {
			t.Fatalf("cursor holds %d events, want 10", len(c.events))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, tc := range []struct{ max, from, to int }{{4, 1, 4}, {100, 5, 10}} {
		batch, err := c.Next(ctx(t), tc.max)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) != tc.to-tc.from+1 || batch[0].Seq != uint64(tc.from) || batch[len(batch)-1].Seq != uint64(tc.to) {
			t.Fatalf("Next(%d) returned %d events from %d", tc.max, len(batch), batch[0].Seq)
		}
	}
	if _, err := c.Next(ctx(t), 0); !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("Next(0) = %v, want ErrInvalid", err)
	}
}

func TestTwoCursors(t *testing.T) {
	e := newEnv(t)
	a, b := newID(t), newID(t)
	ca1 := openCursor(t, e.s, a, 0)
	ca2 := openCursor(t, e.s, a, 0)
	cb := openCursor(t, e.s, b, 0)
	appendEvents(t, e.s, a, 1, 3)
	appendEvents(t, e.s, b, 1, 2)
	read(t, ca1, a, 1, 3)
	read(t, ca2, a, 1, 3)
	read(t, cb, b, 1, 2)
	expectNothing(t, cb)
}

func TestAppendIsDeduplicated(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	appendEvents(t, e.s, id, 1, 3)
	appendEvents(t, e.s, id, 1, 3)
	appendEvents(t, e.s, id, 2, 4)
	checkStored(t, e.s, id, 4)
	read(t, openCursor(t, e.s, id, 0), id, 1, 4)
}

func TestAppendRejectsBadBatches(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	ok := runs.StoredEvent{Seq: 2, Type: runs.EventWarning, JSON: []byte(`{}`)}
	for name, evs := range map[string][]runs.StoredEvent{
		"seq 0":           {{Seq: 0, Type: runs.EventWarning, JSON: []byte(`{}`)}},
		"not increasing":  {ok, ok},
		"decreasing":      {ok, {Seq: 1, Type: runs.EventWarning, JSON: []byte(`{}`)}},
		"empty json":      {{Seq: 1, Type: runs.EventWarning}},
		"empty type":      {{Seq: 1, JSON: []byte(`{}`)}},
		"newline in type": {{Seq: 1, Type: "a\r\nNats-Msg-Id: x", JSON: []byte(`{}`)}},
	} {
		if err := e.s.AppendEvents(ctx(t), id, evs); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := e.s.AppendEvents(ctx(t), id, nil); err != nil {
		t.Errorf("empty batch: %v", err)
	}
	if last, err := e.s.LastEvent(ctx(t), id); err != nil || last.Seq != 0 {
		t.Errorf("LastEvent = %d, %v; want nothing stored", last.Seq, err)
	}
}

// OnAppend's fn is told of each batch AppendEvents stored, as it was
// given, and of nothing when an append fails or stores nothing; nil stops
// it.
func TestOnAppendToldOfStoredBatches(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	type batch struct {
		runID       string
		first, last uint64
		n           int
	}
	var told []batch
	e.s.OnAppend(func(runID string, evs []runs.StoredEvent) {
		told = append(told, batch{runID, evs[0].Seq, evs[len(evs)-1].Seq, len(evs)})
	})
	appendEvents(t, e.s, id, 1, 3)
	appendEvents(t, e.s, id, 2, 5) // overlaps what is stored
	if err := e.s.AppendEvents(ctx(t), id, mkEvents(id, 9, 9)); !errors.Is(err, runs.ErrInvalid) {
		t.Fatalf("append after a gap: %v, want ErrInvalid", err)
	}
	if err := e.s.AppendEvents(ctx(t), id, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	e.s.OnAppend(nil)
	appendEvents(t, e.s, id, 6, 6)
	want := []batch{{id, 1, 3, 3}, {id, 2, 5, 4}}
	if !slices.Equal(told, want) {
		t.Errorf("told of %+v, want %+v", told, want)
	}
	checkStored(t, e.s, id, 6)
}

func TestCursorClose(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	appendEvents(t, e.s, id, 1, 3)
	c := openCursor(t, e.s, id, 0)
	// Close with events still held and the pump blocked or running.
	if batch, err := c.Next(ctx(t), 1); err != nil || len(batch) != 1 {
		t.Fatalf("Next = %d events, %v", len(batch), err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := c.Next(ctx(t), 10); !errors.Is(err, errCursorClosed) {
		t.Errorf("Next after Close = %v, want cursor closed", err)
	}
	info, err := e.s.events.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Errorf("%d consumers left after Close", info.State.Consumers)
	}
}

func TestCursorEndsWithConnection(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	nc := e.connect()
	s, err := Open(ctx(t), nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := openCursor(t, s, id, 0)
	nc.Close()
	_, err = c.Next(ctx(t), 10)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on a closed connection = %v, want a prompt error", err)
	}
	t.Logf("Next on a closed connection: %v", err)
}

// A replica that appended a run's first events, while another replica
// appended the rest, appends after them: its memory of the run's last
// event is behind the log, and the log has no gap. (A replica that takes
// over a run whose owner died, having written its run.queued, does this.)
func TestAppendAfterAnotherReplicaAppended(t *testing.T) {
	e := newEnv(t)
	other, err := Open(ctx(t), e.connect(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := newID(t)
	appendEvents(t, e.s, id, 1, 1)
	appendEvents(t, other, id, 2, 16)
	appendEvents(t, e.s, id, 17, 17)
	// A real gap is still refused, from memory or from the log.
	if err := e.s.AppendEvents(ctx(t), id, mkEvents(id, 19, 19)); !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("appending 19 after 17 = %v, want ErrInvalid", err)
	}
	c := openCursor(t, e.s, id, 0)
	read(t, c, id, 1, 17)
	expectNothing(t, c)
}
