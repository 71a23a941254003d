package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// cursorBuffer is how many events a cursor holds ready for Next, which is
// also the most one Next returns: a replay moves in batches this large
// when its reader is the slower side. Events are bounded by runs.Limits,
// and the bytes held by cursorBufferBytes, so a cursor's memory is bounded
// too.
const cursorBuffer = 256

// cursorBufferBytes bounds the events a cursor holds ready by their size
// too: a reader that does not call Next holds at most this (or one event),
// not cursorBuffer big events (64 MiB of 256 KiB ones).
const cursorBufferBytes = runs.ReaderStepBytes

// errCursorClosed is what Next returns after Close.
var errCursorClosed = errors.New("cursor closed")

// OpenCursor reads the run's log from the event after seq `after`. Where
// the run's packs hold the events it must deliver (see packs.go), it reads
// those, one get per pack with the next one fetched while the reader takes
// the last, and only at the first pack missing (or unreadable, or partial)
// goes on through an ordered consumer filtered on the run's subject, which
// then also follows the live tail. That consumer is created only then, so
// a replay served by packs costs no consumer, and one that ends at the
// run's run.completed none at all unless its reader asks for more: an
// error creating it (the server's consumer limit, as
// runs.ErrStreamCapacity) comes from Next. Without a pack for after+1 the
// consumer is created here, and its error returned. The consumer starts at
// the stored position of the next event to deliver (cursorStart finds it
// with a few reads of single messages, whatever the run's length), so a
// late join or a resume costs the same on a run of a million events as on
// one of ten. A reader that is caught up (after ≥ LastSeq, the usual
// reconnect) starts right after the run's last event.
func (s *Store) OpenCursor(ctx context.Context, runID string, after uint64) (runs.Cursor, error) {
	if err := checkID(runID); err != nil {
		return nil, fmt.Errorf("open cursor: %w", err)
	}
	rd, err := s.readers.acquire()
	if err != nil {
		return nil, fmt.Errorf("open cursor on %s: %w", runID, err)
	}
	pumpCtx, cancel := context.WithCancel(context.Background())
	c := &cursor{
		s:         s,
		runID:     runID,
		rd:        rd,
		cancel:    cancel,
		events:    make(chan runs.StoredEvent, cursorBuffer),
		room:      make(chan struct{}, 1),
		want:      make(chan struct{}, 1),
		log:       s.log.With(zap.String("run_id", runID)),
		pullBytes: min(pullTargetBytes, s.readers.pullBytes()),
	}
	pack, err := c.getPack(ctx, packOf(after+1))
	if err == nil && pack[len(pack)-1].Seq > after {
		go c.pump(pumpCtx, after, pack)
		return c, nil
	}
	cfg, err := s.cursorStart(ctx, runID, after)
	if err == nil {
		err = c.startConsumer(ctx, cfg)
	}
	if err != nil {
		cancel()
		s.readers.release(rd)
		return nil, fmt.Errorf("open cursor on %s: %w", runID, err)
	}
	go c.pump(pumpCtx, after, nil)
	return c, nil
}

// cursor is a runs.Cursor. Its pump goroutine moves events from the run's
// packs, then from the consumer's iterator, into events, which gives Next a
// non-blocking look at what has arrived: that is what lets Next return a
// batch. A single pump keeps the order, and the bounded channel gives
// backpressure: a reader that does not call Next stops the pump, and then
// the gets and pulls.
type cursor struct {
	s      *Store
	runID  string
	rd     *reader // the connection it reads on
	cancel context.CancelFunc
	events chan runs.StoredEvent // closed when the pump ends
	err    error                 // why the pump ended; read after events is closed
	log    *zap.Logger
	// cfg, cons and it are the consumer, nil until the cursor needs
	// one; the pump owns them once it runs.
	cfg  jetstream.OrderedConsumerConfig
	cons jetstream.Consumer
	it   jetstream.MessagesContext
	// pullBytes bounds the consumer's pulls in bytes (see
	// pullTargetBytes); pulledTo is the stream sequence of the last
	// message the pump took from the iterator.
	pullBytes int
	pulledTo  atomic.Uint64
	// held is the bytes of the events in events; room is poked when
	// Next takes some, for a pump waiting for held to fall.
	held atomic.Int64
	room chan struct{}
	// want is poked by a Next that found nothing to take, after it set
	// asked to the events its reader had taken before (taken, which
	// took counts): the pump of a replay that ended at run.completed
	// waits for a poke with every event it delivered taken before it
	// creates a consumer. delivered is the pump's own count.
	want      chan struct{}
	taken     atomic.Uint64
	asked     atomic.Uint64
	delivered uint64

	closeOnce sync.Once
}

func (c *cursor) pump(ctx context.Context, after uint64, pack []runs.StoredEvent) {
	defer close(c.events)
	if pack != nil {
		last, lastType, err := c.replayPacks(ctx, after, pack)
		if err == nil {
			err = c.switchToConsumer(ctx, last, lastType)
		}
		if err != nil {
			if ctx.Err() != nil {
				err = errCursorClosed
			}
			c.err = err
			return
		}
		after = last
	}
	last := after
	first := true
	var evs []runs.StoredEvent
	names := typeNames{}
	for {
		var msg jetstream.Msg
		var err error
		if first {
			msg, err = c.firstMsg(ctx)
			first = false
		} else {
			msg, err = c.nextMsg(ctx)
		}
		if err == nil {
			c.pulledTo.Store(streamSeq(msg))
		}
		if err != nil {
			if ctx.Err() != nil {
				err = errCursorClosed
			}
			c.err = err
			return
		}
		evs, err = logEvents(msg.Headers(), msg.Data(), names, evs[:0])
		if err != nil {
			c.log.Warn("message of the run's log skipped", zap.String("subject", msg.Subject()),
				zap.Uint64("stream_seq", streamSeq(msg)), zap.Error(err))
			continue
		}
		for _, ev := range evs {
			switch {
			case ev.Seq <= after:
				// Seen by the reader: delivered only to a cursor
				// opened before the run had events, or from the
				// message holding the reader's next event, or on a
				// log whose event after the reader's was not found
				// (cursorStart).
				continue
			case ev.Seq <= last:
				// AppendEvents never stores this; a log written by
				// an earlier version may hold it. Skipped, never
				// silently.
				c.log.Warn("event out of order skipped", zap.Uint64("seq", ev.Seq), zap.Uint64("after_seq", last),
					zap.Uint64("stream_seq", streamSeq(msg)))
				continue
			case ev.Seq > last+1:
				c.log.Warn("gap in the run's log", zap.Uint64("seq", ev.Seq), zap.Uint64("after_seq", last),
					zap.Uint64("stream_seq", streamSeq(msg)))
			}
			last = ev.Seq
			if err := c.deliver(ctx, ev); err != nil {
				c.err = err
				return
			}
		}
	}
}

// deliver hands ev to Next, waiting while the events held are full.
func (c *cursor) deliver(ctx context.Context, ev runs.StoredEvent) error {
	for c.held.Load() > 0 && c.held.Load()+int64(len(ev.JSON)) > cursorBufferBytes {
		select {
		case <-c.room:
		case <-ctx.Done():
			return errCursorClosed
		}
	}
	c.held.Add(int64(len(ev.JSON)))
	select {
	case c.events <- ev:
		c.delivered++
		return nil
	case <-ctx.Done():
		return errCursorClosed
	}
}

// getPack reads pack k of the cursor's run, within the store's timeout.
// Several may run at once.
func (c *cursor) getPack(ctx context.Context, k uint64) ([]runs.StoredEvent, error) {
	ctx, cancel := c.s.withTimeout(ctx)
	defer cancel()
	evs, err := getPack(ctx, c.rd.nc, c.runID, k, typeNames{})
	st := &c.s.packStats
	switch {
	case err == nil:
		st.read.Add(1)
	case errors.Is(err, errNoPack):
		st.missed.Add(1)
	case errors.Is(err, errBadPack):
		st.damaged.Add(1)
		c.log.Warn("pack damaged, its range is read from the log", zap.Uint64("pack", k), zap.Error(err))
	case err != nil && !errors.Is(err, errNoPack) && ctx.Err() == nil:
		// A timeout, an election: the log is read instead, as it
		// would be if the pack were not stored.
		c.log.Debug("pack not read", zap.Uint64("pack", k), zap.Error(err))
	}
	return evs, err
}

// switchToConsumer gives a cursor whose packs ended at seq last a consumer
// from the event after it. A replay that ended with the run's run.completed
// first waits for its reader to ask for more, which the gateway's do not:
// a finished run replayed from packs then costs no consumer at all.
func (c *cursor) switchToConsumer(ctx context.Context, last uint64, lastType runs.EventType) error {
	for lastType == runs.EventRunCompleted && c.asked.Load() < c.delivered {
		// A poke from before the reader took the end is not a
		// request for more.
		select {
		case <-c.want:
		case <-ctx.Done():
			return errCursorClosed
		}
	}
	cfg, err := c.s.cursorStart(ctx, c.runID, last)
	if err != nil {
		return err
	}
	return c.startConsumer(ctx, cfg)
}

// took tells the pump that Next took evs: there is room again.
func (c *cursor) took(evs []runs.StoredEvent) {
	n := 0
	for _, ev := range evs {
		n += len(ev.JSON)
	}
	c.held.Add(-int64(n))
	c.taken.Add(uint64(len(evs)))
	select {
	case c.room <- struct{}{}:
	default:
	}
}

// streamSeq is the message's sequence in the stream, for logs.
func streamSeq(msg jetstream.Msg) uint64 {
	md, err := msg.Metadata()
	if err != nil {
		return 0
	}
	return md.Sequence.Stream
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
	default:
		c.asked.Store(c.taken.Load())
		select {
		case c.want <- struct{}{}:
		default:
		}
		select {
		case ev, ok := <-c.events:
			if !ok {
				return nil, fmt.Errorf("read events: %w", c.err)
			}
			first = ev
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// Sized by what has arrived, not by max: a reader keeping up with a
	// fast replay finds a few events each time, and a batch of
	// cursorBuffer would be allocated and cleared for them.
	batch := make([]runs.StoredEvent, 1, min(max, len(c.events)+1))
	batch[0] = first
	defer func() { c.took(batch) }()
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

// Close stops the pump, waits for it to end and deletes the consumer, if
// the cursor has one.
func (c *cursor) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		for range c.events {
			// Wait for the pump to end: it owns it and cons until then.
		}
		if c.it != nil {
			c.it.Stop()
			c.s.deleteConsumer(c.cons)
		}
		c.s.readers.release(c.rd)
	})
	return nil
}
