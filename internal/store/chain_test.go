package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Runs appending batches at once on one server break each other's chains
// (publishChain): each run still ends with every event, once, in order.
func TestChainsOfRunsInterleave(t *testing.T) {
	e := newEnv(t)
	const runsAtOnce, batches, size = 4, 20, 50
	ids := make([]string, runsAtOnce)
	var wg sync.WaitGroup
	errs := make(chan error, runsAtOnce)
	for i := range ids {
		ids[i] = newID(t)
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			for b := range uint64(batches) {
				if err := e.s.AppendEvents(ctx(t), id, mkEvents(id, b*size+1, (b+1)*size)); err != nil {
					errs <- err
					return
				}
			}
		}(ids[i])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, id := range ids {
		checkStored(t, e.s, id, batches*size)
	}
}

// checkStored checks, reading the stream message by message, that it
// holds the run's events 1..n, once each, in order, and nothing else.
func checkStored(t *testing.T, s *Store, id string, n uint64) {
	t.Helper()
	want := mkEvents(id, 1, n)
	var pos uint64 = 1
	for i, w := range want {
		m, err := s.events.GetMsg(ctx(t), pos, jetstream.WithGetMsgSubject(eventsSubject(id)))
		if err != nil {
			t.Fatalf("run %s: event %d: %v", id, w.Seq, err)
		}
		seq, err := parseSeq(m.Header)
		if err != nil || seq != w.Seq || string(m.Data) != string(w.JSON) {
			t.Fatalf("run %s: stored event %d is seq %d (%v) %s, want %d %s", id, i, seq, err, m.Data, w.Seq, w.JSON)
		}
		pos = m.Sequence + 1
	}
	if _, err := s.events.GetMsg(ctx(t), pos, jetstream.WithGetMsgSubject(eventsSubject(id))); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("run %s: something stored after event %d (%v)", id, n, err)
	}
}

// An event the server refuses in the middle of a chain leaves what follows
// it unstored, so the run's log stays a dense prefix. The refusal here is
// the stream's dedupe: another message already carries the event's
// Nats-Msg-Id, so the server answers "duplicate" and stores nothing.
func TestChainStopsAtARefusedEvent(t *testing.T) {
	e := newEnv(t)
	id, other := newID(t), newID(t)
	nc := e.connect()
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	squatter := &nats.Msg{Subject: eventsSubject(other), Data: []byte(`{}`),
		Header: nats.Header{jetstream.MsgIDHeader: {msgID(id, 3)}}}
	if _, err := js.PublishMsg(ctx(t), squatter); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	err = e.s.AppendEvents(c, id, mkEvents(id, 1, 6))
	if err == nil {
		t.Fatal("append of an event the stream takes for a duplicate succeeded")
	}
	if !errors.Is(err, errStale) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append failed with %v, want a stale view retried until the deadline", err)
	}
	last, err := e.s.LastEvent(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if last.Seq != 2 {
		t.Fatalf("the run's last stored event is %d, want 2: events after the refused one landed", last.Seq)
	}
	checkStored(t, e.s, id, 2)
}

// A chain cut by a stale view (another writer stored the first events)
// completes from where the log ends, each event once.
func TestChainAfterAnotherWriter(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	appendEvents(t, e.s, id, 1, 3)
	// A second store on the same stream, which has not seen the run.
	other, err := Open(ctx(t), e.connect(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.AppendEvents(ctx(t), id, mkEvents(id, 1, 10)); err != nil {
		t.Fatal(err)
	}
	// The first store's view (3) is stale now.
	if err := e.s.AppendEvents(ctx(t), id, mkEvents(id, 4, 20)); err != nil {
		t.Fatal(err)
	}
	checkStored(t, e.s, id, 20)
}
