package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Runs appending batches at once on one server break each other's chains
// (publishChain): each run still ends with every event, once, in order.
func TestChainsOfRunsInterleave(t *testing.T) {
	perMessage(t, newEnv(t), testChainsOfRunsInterleave)
}

func testChainsOfRunsInterleave(t *testing.T, s *Store, _ int) {
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
				if err := s.AppendEvents(ctx(t), id, mkEvents(id, b*size+1, (b+1)*size)); err != nil {
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
		checkStored(t, s, id, batches*size)
	}
}

// checkStored checks, reading the stream message by message, that it
// holds the run's events 1..n, once each, in order, and nothing else.
func checkStored(t *testing.T, s *Store, id string, n uint64) {
	t.Helper()
	want := mkEvents(id, 1, n)
	got, msgs := storedEvents(t, s, id)
	for i, w := range want {
		if i >= len(got) {
			t.Fatalf("run %s: %d events stored in %d messages, want %d", id, len(got), msgs, n)
		}
		if g := got[i]; g.Seq != w.Seq || g.Type != w.Type || string(g.JSON) != string(w.JSON) {
			t.Fatalf("run %s: stored event %d is seq %d %q %s, want %d %q %s", id, i, g.Seq, g.Type, g.JSON, w.Seq, w.Type, w.JSON)
		}
	}
	if len(got) > len(want) {
		t.Fatalf("run %s: %d events stored after event %d", id, len(got)-len(want), n)
	}
}

// storedEvents reads the run's log message by message, and returns its
// events and how many messages held them.
func storedEvents(t *testing.T, s *Store, id string) ([]runs.StoredEvent, int) {
	t.Helper()
	var evs []runs.StoredEvent
	msgs := 0
	for pos := uint64(1); ; msgs++ {
		m, err := s.events.GetMsg(ctx(t), pos, jetstream.WithGetMsgSubject(eventsSubject(id)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return evs, msgs
		}
		if err != nil {
			t.Fatalf("run %s: message at %d or after: %v", id, pos, err)
		}
		if evs, err = logEvents(m.Header, m.Data, nil, evs); err != nil {
			t.Fatalf("run %s: message at %d: %v", id, m.Sequence, err)
		}
		pos = m.Sequence + 1
	}
}

// perMessage runs test on a store on e's server whose messages hold at most
// each of 1 (every event alone, as before grouping), 4 and the default
// events.
func perMessage(t *testing.T, e *env, test func(t *testing.T, s *Store, per int)) {
	for _, per := range []int{1, 4, defaultEventsPerMessage} {
		t.Run(fmt.Sprintf("per message %d", per), func(t *testing.T) {
			s, err := Open(ctx(t), e.nc, Options{EventsPerMessage: per})
			if err != nil {
				t.Fatal(err)
			}
			test(t, s, per)
		})
	}
}

// A message the server refuses in the middle of a chain leaves what follows
// it unstored, so the run's log stays a dense prefix. The refusal here is
// the stream's dedupe: another message already carries the Nats-Msg-Id of
// the message holding events 3.., so the server answers "duplicate" and
// stores nothing.
func TestChainStopsAtARefusedEvent(t *testing.T) {
	e := newEnv(t)
	for _, per := range []int{1, 2} {
		t.Run(fmt.Sprintf("per message %d", per), func(t *testing.T) {
			s, err := Open(ctx(t), e.nc, Options{EventsPerMessage: per})
			if err != nil {
				t.Fatal(err)
			}
			testChainStopsAtARefusedEvent(t, e, s, per)
		})
	}
}

func testChainStopsAtARefusedEvent(t *testing.T, e *env, s *Store, per int) {
	id, other := newID(t), newID(t)
	nc := e.connect()
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	squatter := &nats.Msg{Subject: eventsSubject(other), Data: []byte(`{}`),
		Header: nats.Header{jetstream.MsgIDHeader: {msgID(id, uint64(2+per))}}}
	if _, err := js.PublishMsg(ctx(t), squatter); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	err = s.AppendEvents(c, id, mkEvents(id, 1, 6))
	if err == nil {
		t.Fatal("append of an event the stream takes for a duplicate succeeded")
	}
	if !errors.Is(err, errStale) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append failed with %v, want a stale view retried until the deadline", err)
	}
	last, err := s.LastEvent(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if last.Seq != 2 {
		t.Fatalf("the run's last stored event is %d, want 2: events after the refused one landed", last.Seq)
	}
	checkStored(t, s, id, 2)
}

// A chain cut by a stale view (another writer stored the first events)
// completes from where the log ends, each event once.
func TestChainAfterAnotherWriter(t *testing.T) {
	e := newEnv(t)
	perMessage(t, e, func(t *testing.T, s *Store, per int) { testChainAfterAnotherWriter(t, e, s, per) })
}

func testChainAfterAnotherWriter(t *testing.T, e *env, s *Store, per int) {
	id := newID(t)
	appendEvents(t, s, id, 1, 3)
	// A second store on the same stream, which has not seen the run.
	other, err := Open(ctx(t), e.connect(), Options{EventsPerMessage: per})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.AppendEvents(ctx(t), id, mkEvents(id, 1, 10)); err != nil {
		t.Fatal(err)
	}
	// The first store's view (3) is stale now.
	if err := s.AppendEvents(ctx(t), id, mkEvents(id, 4, 20)); err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, id, 20)
}
