package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// eventsSubject is the subject of the run's log.
func eventsSubject(runID string) string { return eventsPrefix + runID }

// LastEvent returns the seq and type of the run's last stored event, read
// from its headers; the zero StoredEvent when the run has none.
func (s *Store) LastEvent(ctx context.Context, runID string) (runs.StoredEvent, error) {
	if err := checkID(runID); err != nil {
		return runs.StoredEvent{}, fmt.Errorf("last event: %w", err)
	}
	m, err := s.lastRaw(ctx, runID)
	if err != nil {
		return runs.StoredEvent{}, fmt.Errorf("last event of %s: %w", runID, err)
	}
	if m == nil {
		return runs.StoredEvent{}, nil
	}
	_, seq, err := msgSeqs(m.Header)
	if err != nil {
		return runs.StoredEvent{}, fmt.Errorf("last event of %s: %w", runID, err)
	}
	return runs.StoredEvent{Seq: seq, Type: lastType(m.Header)}, nil
}

// lastStored returns the run's last event's seq and the stream sequence of
// the message holding it, zeros when the run has no events.
func (s *Store) lastStored(ctx context.Context, runID string) (seq, streamSeq uint64, err error) {
	last, err := s.lastMessage(ctx, runID)
	return last.seq, last.pos, err
}

// lastMsg is where a run's log ends: its last message, at stream sequence
// pos, holding events first..seq.
type lastMsg struct{ first, seq, pos uint64 }

// lastMessage returns the run's last message, zeros when the run has no
// events.
func (s *Store) lastMessage(ctx context.Context, runID string) (lastMsg, error) {
	m, err := s.lastRaw(ctx, runID)
	if err != nil || m == nil {
		return lastMsg{}, err
	}
	first, seq, err := msgSeqs(m.Header)
	if err != nil {
		return lastMsg{}, err
	}
	return lastMsg{first, seq, m.Sequence}, nil
}

// lastRaw returns the last message of the run's log, nil when the run
// has no events.
func (s *Store) lastRaw(ctx context.Context, runID string) (*jetstream.RawStreamMsg, error) {
	var m *jetstream.RawStreamMsg
	err := s.retry(ctx, "last event", func(ctx context.Context) error {
		var err error
		m, err = s.events.GetLastMsgForSubject(ctx, eventsSubject(runID))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

func parseSeq(h nats.Header) (uint64, error) {
	v := h.Get(headerSeq)
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("malformed %s header %q", headerSeq, v)
	}
	return seq, nil
}
