package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// cursorBuffer is how many events a cursor holds ready for Next, and also
// how many it asks the server for at once. Events are bounded by
// runs.Limits, so a cursor's memory is bounded too.
const cursorBuffer = 64

// errCursorClosed is what Next returns after Close.
var errCursorClosed = errors.New("cursor closed")

func eventsSubject(runID string) string { return eventsPrefix + runID }

// AppendEvents publishes the events to the run's subject, in order, each
// with its seq and type in headers and Nats-Msg-Id "<run_id>.<seq>". It
// sends them all before waiting for the acks, so a batch costs one round
// trip. A batch that failed part way may be appended again as a whole: the
// server drops the events it already has, if the retry comes within two
// minutes (the dedupe window), and cursors skip repeated seqs in any case.
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

	subject := eventsSubject(runID)
	acks := make([]jetstream.PubAckFuture, 0, len(events))
	for _, ev := range events {
		seq := strconv.FormatUint(ev.Seq, 10)
		msg := &nats.Msg{
			Subject: subject,
			Data:    ev.JSON,
			Header:  nats.Header{headerSeq: {seq}, headerType: {string(ev.Type)}},
		}
		ack, err := s.js.PublishMsgAsync(msg, jetstream.WithMsgID(runID+"."+seq))
		if err != nil {
			return fmt.Errorf("append event %d to %s: %w", ev.Seq, runID, err)
		}
		acks = append(acks, ack)
	}
	for i, ack := range acks {
		select {
		case <-ack.Ok():
		case err := <-ack.Err():
			return fmt.Errorf("append event %d to %s: %w", events[i].Seq, runID, err)
		case <-ctx.Done():
			return fmt.Errorf("append events to %s: %w", runID, ctx.Err())
		}
	}
	return nil
}

// LastEvent returns the seq and type of the run's last stored event, read
// from its headers; the zero StoredEvent when the run has none.
func (s *Store) LastEvent(ctx context.Context, runID string) (runs.StoredEvent, error) {
	if err := checkID(runID); err != nil {
		return runs.StoredEvent{}, fmt.Errorf("last event: %w", err)
	}
	m, err := s.events.GetLastMsgForSubject(ctx, eventsSubject(runID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return runs.StoredEvent{}, nil
	}
	if err != nil {
		return runs.StoredEvent{}, fmt.Errorf("last event of %s: %w", runID, err)
	}
	seq, err := parseSeq(m.Header)
	if err != nil {
		return runs.StoredEvent{}, fmt.Errorf("last event of %s: %w", runID, err)
	}
	return runs.StoredEvent{Seq: seq, Type: runs.EventType(m.Header.Get(headerType))}, nil
}

// last returns the run's last event's seq and its stream sequence, zeros
// when the run has no events.
func (s *Store) last(ctx context.Context, runID string) (seq, streamSeq uint64, err error) {
	m, err := s.events.GetLastMsgForSubject(ctx, eventsSubject(runID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	seq, err = parseSeq(m.Header)
	if err != nil {
		return 0, 0, err
	}
	return seq, m.Sequence, nil
}

func parseSeq(h nats.Header) (uint64, error) {
	v := h.Get(headerSeq)
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("malformed %s header %q", headerSeq, v)
	}
	return seq, nil
}

// OpenCursor reads the run's log from the event after seq `after`. It reads
// through an ordered consumer filtered on the run's subject. When the
// reader is caught up (after ≥ LastSeq, the usual reconnect) the consumer
// starts right after the run's last event; otherwise it replays the run
// from its start and skips what the reader has seen.
func (s *Store) OpenCursor(ctx context.Context, runID string, after uint64) (runs.Cursor, error) {
	if err := checkID(runID); err != nil {
		return nil, fmt.Errorf("open cursor: %w", err)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{eventsSubject(runID)}}
	if after > 0 {
		seq, streamSeq, err := s.last(ctx, runID)
		if err != nil {
			return nil, fmt.Errorf("open cursor on %s: %w", runID, err)
		}
		if streamSeq > 0 && seq <= after {
			cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
			cfg.OptStartSeq = streamSeq + 1
		}
	}
	cons, err := s.events.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open cursor on %s: %w", runID, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(cursorBuffer))
	if err != nil {
		s.deleteConsumer(cons)
		return nil, fmt.Errorf("open cursor on %s: %w", runID, err)
	}
	pumpCtx, cancel := context.WithCancel(context.Background())
	c := &cursor{
		s:      s,
		cons:   cons,
		it:     it,
		cancel: cancel,
		events: make(chan runs.StoredEvent, cursorBuffer),
		log:    s.log.With(zap.String("run_id", runID)),
	}
	go c.pump(pumpCtx, after)
	return c, nil
}

// deleteConsumer removes a cursor's consumer from the server at once, instead
// of leaving it until the server drops it as inactive (after 5 minutes).
func (s *Store) deleteConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	// Without a connection the delete would only wait out its timeout;
	// the server drops the consumer as inactive instead.
	if info == nil || s.nc.Status() != nats.CONNECTED {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	err := s.js.DeleteConsumer(ctx, eventsStream, info.Name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		s.log.Debug("cursor consumer not deleted", zap.String("consumer", info.Name), zap.Error(err))
	}
}

// cursor is a runs.Cursor. Its pump goroutine moves events from the
// consumer's iterator into events, which gives Next a non-blocking look at
// what has arrived: that is what lets Next return a batch. A single pump
// keeps the order, and the bounded channel gives backpressure: a reader that
// does not call Next stops the pump, and then the pulls.
type cursor struct {
	s      *Store
	cons   jetstream.Consumer
	it     jetstream.MessagesContext
	cancel context.CancelFunc
	events chan runs.StoredEvent // closed when the pump ends
	err    error                 // why the pump ended; read after events is closed
	log    *zap.Logger

	closeOnce sync.Once
}

func (c *cursor) pump(ctx context.Context, after uint64) {
	defer close(c.events)
	last := after
	for {
		msg, err := c.it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				err = errCursorClosed
			}
			c.err = err
			return
		}
		seq, err := parseSeq(msg.Headers())
		if err != nil {
			c.log.Warn("event skipped", zap.String("subject", msg.Subject()), zap.Error(err))
			continue
		}
		// Skips what the reader has seen, and any event stored twice (a
		// retry after the dedupe window).
		if seq <= last {
			continue
		}
		last = seq
		ev := runs.StoredEvent{
			Seq:  seq,
			Type: runs.EventType(msg.Headers().Get(headerType)),
			JSON: msg.Data(),
		}
		select {
		case c.events <- ev:
		case <-ctx.Done():
			c.err = errCursorClosed
			return
		}
	}
}

// Next returns the events that have arrived, at most max, waiting for the
// first one until ctx ends. After the cursor fails, it returns the events it
// still holds, then the failure.
func (c *cursor) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	if max <= 0 {
		return nil, runs.Invalid("max", "must be positive")
	}
	var first runs.StoredEvent
	select {
	case ev, ok := <-c.events:
		if !ok {
			return nil, fmt.Errorf("read events: %w", c.err)
		}
		first = ev
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	batch := make([]runs.StoredEvent, 1, min(max, cursorBuffer))
	batch[0] = first
	for len(batch) < max {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return batch, nil
			}
			batch = append(batch, ev)
		default:
			return batch, nil
		}
	}
	return batch, nil
}

// Close stops the pump, waits for it to end and deletes the consumer.
func (c *cursor) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.it.Stop()
		for range c.events {
			// Wait for the pump to end.
		}
		c.s.deleteConsumer(c.cons)
	})
	return nil
}
