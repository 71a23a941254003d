package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// maxAtomicBatch is the most events one atomic batch holds: the server's
// default limit (1000).
const maxAtomicBatch = 1000

// lastEvent is a run's last stored event: its seq and its sequence in the
// stream.
type lastEvent struct{ seq, streamSeq uint64 }

// maxCachedRuns bounds the runs whose last event the store remembers.
const maxCachedRuns = 4096

// errStale marks an append that found the run's log other than this store
// thought: it is retried after reading the log's end again.
var errStale = errors.New("stale view of the run's log")

// AppendEvents stores the events at the end of the run's log, each with its
// seq and type in headers and Nats-Msg-Id "<run_id>.<seq>". Its contract:
//
//   - What is stored of a run is always a dense prefix 1..k in seq order.
//     On a cluster (Replicas > 1) a batch is stored whole or not at all
//     (one atomic batch publish); on one server its events are published
//     together and acknowledged after (publishChain). Either way a publish
//     lands only right after the run's last stored event: the first event
//     of each publish carries the stream sequence of that event as
//     Nats-Expected-Last-Subject-Sequence, and on one server each later
//     event the Nats-Msg-Id of the one before as Nats-Expected-Last-Msg-Id,
//     so a publish racing an election, or another writer, cannot land out
//     of order.
//   - A nil error means every event of the batch is stored, once.
//   - It is safe to call again with the same batch, or one overlapping what
//     is stored: events already stored (seq ≤ the run's last) are dropped.
//   - A batch whose first event would leave a gap after the run's last
//     stored event fails with runs.ErrInvalid, and so does a malformed one;
//     those are never retried.
//   - Transient failures (no leader, no responders, timeouts, a reconnect)
//     are retried with backoff within ctx's deadline, or Options.RetryFor
//     (30 s) when ctx has none: longer than an election. Its error after
//     that wraps the last failure; part of the batch may be stored then,
//     always as a prefix, and calling again completes it.
func (s *Store) AppendEvents(ctx context.Context, runID string, events []runs.StoredEvent) error {
	if err := checkID(runID); err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	var prev uint64
	for _, ev := range events {
		switch {
		case ev.Seq <= prev:
			return fmt.Errorf("append events to %s: %w", runID, runs.Invalid("seq", "must start above 0 and increase"))
		case len(ev.JSON) == 0:
			return fmt.Errorf("append events to %s: %w", runID, runs.Invalid("json", "empty event"))
		case ev.Type == "" || strings.ContainsAny(string(ev.Type), "\r\n"):
			return fmt.Errorf("append events to %s: %w", runID, runs.Invalid("type", fmt.Sprintf("malformed type %q", ev.Type)))
		}
		prev = ev.Seq
	}
	if len(events) == 0 {
		return nil
	}
	ctx, cancel := s.retryCtx(ctx)
	defer cancel()
	err := s.ensure(ctx, "append events", func(ctx context.Context) error {
		return s.appendOnce(ctx, runID, events)
	})
	if err != nil {
		return fmt.Errorf("append events %d..%d to %s: %w", events[0].Seq, events[len(events)-1].Seq, runID, err)
	}
	if fn := s.onAppend.Load(); fn != nil {
		(*fn)(runID, events)
	}
	return nil
}

// OnAppend has fn told of each batch AppendEvents stores, once it has
// stored it and before it returns: the events as they were given, now
// the run's log's, in order (a batch appended again may hold some that
// were stored before). It is how a replica's fan-out hub
// (fanout.Hub.Offer) hands its readers of the runs it writes their
// events from memory. fn must neither change the events nor block; a
// failed append tells it nothing. A later call replaces fn; nil removes
// it.
func (s *Store) OnAppend(fn func(runID string, events []runs.StoredEvent)) {
	if fn == nil {
		s.onAppend.Store(nil)
		return
	}
	s.onAppend.Store(&fn)
}

// appendOnce makes one attempt at storing what of events is not stored.
func (s *Store) appendOnce(ctx context.Context, runID string, events []runs.StoredEvent) error {
	last, cached := s.cachedLast(runID)
	if cached && events[0].Seq > last.seq+1 {
		// Another replica appended since this one last did (it took
		// the run over, or this one wrote run.queued and another ran
		// it): the cache is behind the log, not the log gapped.
		cached = false
	}
	if !cached {
		seq, streamSeq, err := s.lastStored(ctx, runID)
		if err != nil {
			return err
		}
		last = lastEvent{seq, streamSeq}
	}
	for len(events) > 0 && events[0].Seq <= last.seq {
		events = events[1:]
	}
	if len(events) == 0 {
		s.setLast(runID, last)
		return nil
	}
	if events[0].Seq != last.seq+1 {
		s.forgetLast(runID)
		return runs.Invalid("seq", fmt.Sprintf("event %d would follow event %d: a run's log has no gaps", events[0].Seq, last.seq))
	}
	for len(events) > 0 {
		limit := maxAtomicBatch
		if s.replicas == 1 {
			limit = maxPipeline
		}
		groups := groupEvents(runID, events, limit, s.eventsPerMessage, s.groupBytes)
		if s.replicas == 1 && len(groups) > 1 {
			// One server stages an atomic batch of a file stream in
			// files of its own, synced at the commit: a few ms per
			// batch, whatever its size. A chain of checked publishes
			// (publishChain) keeps the same guarantee without a
			// round trip per message.
			stored, streamSeq, err := s.publishChain(ctx, runID, groups, last.streamSeq)
			if stored > 0 {
				last = lastEvent{events[stored-1].Seq, streamSeq}
				s.setLast(runID, last)
				s.packed(runID, events[:stored])
				events = events[stored:]
			}
			if err != nil && !errors.Is(err, errInterleaved) {
				// What landed after the last ack is unknown: the
				// next attempt reads it.
				s.forgetLast(runID)
				return err
			}
			continue // the rest, if another run's event broke the chain
		}
		// One message, one round trip; on a cluster, several in one
		// atomic batch.
		streamSeq, err := s.publish(ctx, runID, groups, last.streamSeq)
		if err != nil {
			// What landed is unknown: the next attempt reads it.
			s.forgetLast(runID)
			return err
		}
		n := eventCount(groups)
		last = lastEvent{events[n-1].Seq, streamSeq}
		s.setLast(runID, last)
		s.packed(runID, events[:n])
		events = events[n:]
	}
	return nil
}

func (s *Store) cachedLast(runID string) (lastEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.last[runID]
	return l, ok
}

func (s *Store) setLast(runID string, l lastEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.last) >= maxCachedRuns {
		clear(s.last)
	}
	s.last[runID] = l
}

func (s *Store) forgetLast(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, runID)
}
