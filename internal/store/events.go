package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// cursorBuffer is how many events a cursor holds ready for Next, which is
// also the most one Next returns: a replay moves in batches this large
// when its reader is the slower side. Events are bounded by runs.Limits,
// and the bytes held by cursorBufferBytes, so a cursor's memory is bounded
// too.
const cursorBuffer = 256

// pullBatch is how many messages a cursor asks the server for at once, and
// at most readers.pullBytes of them: a replay costs one round trip per
// pullBatch/2 messages (the client asks for more at half), not per 32.
const pullBatch = 1024

// pullTargetBytes bounds what a cursor's pulls ask for, in bytes: about
// the most it has pulled from the server and not yet taken, a reader's
// step (runs.ReaderStepBytes), or a message of several events, whichever
// is larger. Pulls were bounded by readers.pullBytes, the largest message
// the server takes (4 MiB on the embedded server), and a cursor of big
// events had that much in flight, copied again on the server's side: about
// 20 MiB of the gateway per lagging reader of 64 KiB events. A message
// larger than a pull's bound is never delivered (the server refuses the
// pull, and the client asks for the same again), so a cursor that waits
// stallWait for its next message while the server holds more for it goes
// back to readers.pullBytes (see nextMsg): a lone event bigger than this
// (runs.Limits allows up to MaxEncoded) costs its cursor that wait once.
const pullTargetBytes = max(runs.ReaderStepBytes, maxGroupBytes) + pullOverhead

// stallWait is how long a cursor with small pulls waits for a message
// before it asks the server whether one too big for them is waiting.
const stallWait = time.Second

// cursorBufferBytes bounds the events a cursor holds ready by their size
// too: a reader that does not call Next holds at most this (or one event),
// not cursorBuffer big events (64 MiB of 256 KiB ones).
const cursorBufferBytes = runs.ReaderStepBytes

// errCursorClosed is what Next returns after Close.
var errCursorClosed = errors.New("cursor closed")

func eventsSubject(runID string) string { return eventsPrefix + runID }

// maxAtomicBatch is the most events one atomic batch holds: the server's
// default limit (1000).
const maxAtomicBatch = 1000

// Headers of JetStream's atomic batch publish and optimistic concurrency.
const (
	headerBatchID      = "Nats-Batch-Id"
	headerBatchSeq     = "Nats-Batch-Sequence"
	headerBatchCommit  = "Nats-Batch-Commit"
	headerExpectSubSeq = "Nats-Expected-Last-Subject-Sequence"
	headerExpectLastID = "Nats-Expected-Last-Msg-Id"
)

// errCodeWrongLastMsgID is the server's answer to a publish whose
// Nats-Expected-Last-Msg-Id is not the stream's last message's.
const errCodeWrongLastMsgID jetstream.ErrorCode = 10070

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
	return nil
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

// maxPipeline bounds the publishes of one chain awaiting their acks. The
// client's async window (4,000 by default) is shared by every run, and a
// chain broken early resends what follows the break.
const maxPipeline = 256

// errInterleaved marks a chain broken by another run's event landing
// between two of its own: nothing is wrong, the rest is published again.
var errInterleaved = errors.New("another run's event came between two events of the chain")

// publishChain stores the messages of groups on one server without a round
// trip per message, and returns how many events it stored, those of a
// prefix of groups, and the stream sequence of the last message stored.
// The publishes go out together and their acks are awaited after. The first
// expects the run's last message at stream sequence after, as publish's
// do; every later one expects the stream's last message to be the one
// before it (Nats-Expected-Last-Msg-Id, which every message carries as its
// Nats-Msg-Id). So a message lands only right after its predecessor: once
// one fails, every later one fails too, and what is stored stays a dense
// prefix, which is the guarantee publish gives with a round trip per
// message.
//
// The stream's last message is any run's, so another run's message landing
// inside the chain breaks it with nothing wrong; that answer is
// errInterleaved, with what was stored before it.
func (s *Store) publishChain(ctx context.Context, runID string, groups []logGroup, after uint64) (int, uint64, error) {
	futures := make([]jetstream.PubAckFuture, 0, len(groups))
	var sendErr error
	for i, g := range groups {
		msg := g.msg
		if i == 0 {
			msg.Header.Set(headerExpectSubSeq, strconv.FormatUint(after, 10))
		} else {
			msg.Header.Set(headerExpectLastID, msgID(runID, groups[i-1].last))
		}
		f, err := s.js.PublishMsgAsync(msg)
		if err != nil {
			sendErr = err // those sent are still answered
			break
		}
		futures = append(futures, f)
	}
	stored, streamSeq := 0, uint64(0)
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				// Stored before, by an attempt whose ack was lost:
				// where the run ends is read again, after the acks
				// of the rest, which this one's answer makes fail.
				drain(ctx, futures[i+1:])
				return stored, streamSeq, fmt.Errorf("%w: events %d..%d stored before", errStale, groups[i].first, groups[i].last)
			}
			stored, streamSeq = stored+groups[i].n, ack.Sequence
		case err := <-f.Err():
			drain(ctx, futures[i+1:])
			var apiErr *jetstream.APIError
			if i > 0 && errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeWrongLastMsgID {
				return stored, streamSeq, fmt.Errorf("%w: %w", errInterleaved, err)
			}
			return stored, streamSeq, classifyPublish(err)
		case <-ctx.Done():
			return stored, streamSeq, ctx.Err()
		}
	}
	return stored, streamSeq, sendErr
}

// drain waits for the answers of a chain's publishes after its break, so
// that the next attempt does not race them.
func drain(ctx context.Context, futures []jetstream.PubAckFuture) {
	for _, f := range futures {
		select {
		case <-f.Ok():
		case <-f.Err():
		case <-ctx.Done():
			return
		}
	}
}

// msgID is the Nats-Msg-Id of the message of the run's log whose last
// event is seq.
func msgID(runID string, seq uint64) string { return runID + "." + strconv.FormatUint(seq, 10) }

// eventMsg is the message of a run's log holding ev alone.
func eventMsg(subject, runID string, ev runs.StoredEvent) *nats.Msg {
	return &nats.Msg{
		Subject: subject,
		Data:    ev.JSON,
		Header: nats.Header{
			headerSeq:             {strconv.FormatUint(ev.Seq, 10)},
			headerType:            {string(ev.Type)},
			jetstream.MsgIDHeader: {msgID(runID, ev.Seq)},
		},
	}
}

// publish stores the messages of groups, all or none, right after the run's
// message at stream sequence after (0: the run has none), and returns the
// stream sequence of the last.
func (s *Store) publish(ctx context.Context, runID string, groups []logGroup, after uint64) (uint64, error) {
	expect := strconv.FormatUint(after, 10)
	if len(groups) == 1 {
		msg := groups[0].msg
		msg.Header.Set(headerExpectSubSeq, expect)
		ack, err := s.js.PublishMsg(ctx, msg)
		if err != nil {
			return 0, classifyPublish(err)
		}
		if ack.Duplicate {
			// Stored before, by an attempt whose ack was lost; where
			// it ends is read again.
			return 0, fmt.Errorf("%w: events %d..%d stored before", errStale, groups[0].first, groups[0].last)
		}
		return ack.Sequence, nil
	}
	// One atomic batch: the messages before the commit are not answered;
	// the server stages them and stores them with the commit, or drops
	// them all (a leader change, a gap, a failed check).
	batchID := uuid.NewString()
	for i, g := range groups {
		msg := g.msg
		msg.Header.Set(headerBatchID, batchID)
		msg.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		if i == 0 {
			msg.Header.Set(headerExpectSubSeq, expect)
		}
		if i < len(groups)-1 {
			if err := s.nc.PublishMsg(msg); err != nil {
				return 0, err
			}
			continue
		}
		msg.Header.Set(headerBatchCommit, "1")
		reply, err := s.nc.RequestMsgWithContext(ctx, msg)
		if err != nil {
			return 0, err
		}
		var resp struct {
			Error *jetstream.APIError `json:"error"`
			Seq   uint64              `json:"seq"`
			Count int                 `json:"count"`
		}
		if err := json.Unmarshal(reply.Data, &resp); err != nil {
			return 0, fmt.Errorf("atomic batch: malformed reply %q: %w", reply.Data, err)
		}
		if resp.Error != nil {
			return 0, classifyPublish(resp.Error)
		}
		if resp.Count != len(groups) {
			return 0, fmt.Errorf("atomic batch: %d of %d messages stored", resp.Count, len(groups))
		}
		return resp.Seq, nil
	}
	panic("unreachable")
}

// classifyPublish marks the answers that mean the store's view of the
// run's end was stale: retried after reading it again.
func classifyPublish(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant,
			10201: // atomic batch contains a duplicate message id: stored before
			return fmt.Errorf("%w: %w", errStale, err)
		}
	}
	return err
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

// LastEvent returns the seq and type of the run's last stored event, read
// from its headers; the zero StoredEvent when the run has none.
func (s *Store) LastEvent(ctx context.Context, runID string) (runs.StoredEvent, error) {
	if err := checkID(runID); err != nil {
		return runs.StoredEvent{}, fmt.Errorf("last event: %w", err)
	}
	var m *jetstream.RawStreamMsg
	err := s.retry(ctx, "last event", func(ctx context.Context) error {
		var err error
		m, err = s.events.GetLastMsgForSubject(ctx, eventsSubject(runID))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return runs.StoredEvent{}, nil
	}
	if err != nil {
		return runs.StoredEvent{}, fmt.Errorf("last event of %s: %w", runID, err)
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
	var m *jetstream.RawStreamMsg
	err := s.retry(ctx, "last event", func(ctx context.Context) error {
		var err error
		m, err = s.events.GetLastMsgForSubject(ctx, eventsSubject(runID))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return lastMsg{}, nil
	}
	if err != nil {
		return lastMsg{}, err
	}
	first, seq, err := msgSeqs(m.Header)
	if err != nil {
		return lastMsg{}, err
	}
	return lastMsg{first, seq, m.Sequence}, nil
}

func parseSeq(h nats.Header) (uint64, error) {
	v := h.Get(headerSeq)
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("malformed %s header %q", headerSeq, v)
	}
	return seq, nil
}

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

// createFirstWait is how long the first attempt to create a cursor's
// consumer waits for the server's answer. A create is answered within
// milliseconds, even on a busy machine, but a clustered server now and
// then never answers one (nats-server issue 8350): a late client's stream
// then stalled for the whole store timeout, 5s, before the second
// attempt, answered at once.
const createFirstWait = time.Second

// startConsumer gives the cursor its consumer, from cfg.
//
// Every attempt creates the consumer under the same name: cfg's
// NamePrefix, set here, is what the ordered consumer names its first
// consumer by. So an attempt given up on while the server still handles
// it, or whose answer was lost, and the attempt after it create one
// consumer, not an orphan for the server to drop as inactive minutes
// later, counted against its limit until then.
func (c *cursor) startConsumer(ctx context.Context, cfg jetstream.OrderedConsumerConfig) error {
	cfg.NamePrefix = rand.Text()
	var cons jetstream.Consumer
	err := c.s.retryFrom(ctx, "open cursor", createFirstWait, func(ctx context.Context) error {
		var err error
		cons, err = c.rd.js.OrderedConsumer(ctx, eventsStream, cfg)
		return err
	})
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeMaximumConsumersLimit {
			// Every stream is a consumer, and the server has as many
			// as it allows: the gateway is full of readers, which is
			// not this request's fault.
			err = fmt.Errorf("%w: %w", runs.ErrStreamCapacity, err)
		}
		return err
	}
	// Bounded in bytes too: see readers.
	it, err := cons.Messages(c.pullOpt())
	if err != nil {
		c.s.deleteConsumer(cons)
		return err
	}
	c.cfg, c.cons, c.it = cfg, cons, it
	return nil
}

// pullOpt bounds the cursor's pulls: pullBatch messages, and pullBytes.
func (c *cursor) pullOpt() jetstream.PullMessagesOpt {
	return jetstream.PullMaxMessagesWithBytesLimit(pullBatch, c.pullBytes)
}

// nextMsg is the consumer's next message. While the cursor's pulls are
// smaller than the largest message the server takes, a wait of stallWait
// with messages pending for the consumer and none coming is taken for a
// message too big for them: the consumer is replaced, from the message
// after the last one taken, by one that pulls readers.pullBytes.
func (c *cursor) nextMsg(ctx context.Context) (jetstream.Msg, error) {
	for {
		full := c.s.readers.pullBytes()
		if c.pullBytes >= full {
			return c.it.Next(jetstream.NextContext(ctx))
		}
		wctx, cancel := context.WithTimeout(ctx, stallWait)
		msg, err := c.it.Next(jetstream.NextContext(wctx))
		cancel()
		if err == nil || ctx.Err() != nil || wctx.Err() == nil {
			return msg, err
		}
		ictx, cancel := context.WithTimeout(ctx, c.s.timeout)
		info, err := c.cons.Info(ictx)
		cancel()
		if err != nil || info.NumPending == 0 {
			continue // nothing waiting, or the server will tell again
		}
		if err := c.widenPulls(ctx, full); err != nil {
			return nil, err
		}
	}
}

// widenPulls replaces the consumer by one pulling bytes at once, from the
// message after the last one the pump took.
func (c *cursor) widenPulls(ctx context.Context, bytes int) error {
	cfg := c.cfg
	if last := c.pulledTo.Load(); last > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = last + 1
	}
	old, oldIt, oldBytes := c.cons, c.it, c.pullBytes
	c.pullBytes = bytes
	if err := c.startConsumer(ctx, cfg); err != nil {
		c.cons, c.it, c.pullBytes = old, oldIt, oldBytes
		return fmt.Errorf("replace the cursor's consumer for larger pulls: %w", err)
	}
	oldIt.Stop()
	c.s.deleteConsumer(old)
	c.log.Info("cursor pulls the largest messages now", zap.Int("pull_bytes", bytes))
	return nil
}

// cursorStart returns the configuration of the consumer of a cursor on the
// run's events after seq after: delivering from the stream sequence of
// event after+1, from the run's first stored event when after is 0 or
// older than what is stored, or from right after the run's last event when
// the reader has seen it.
//
// A log that is not a dense prefix in seq order (written by an earlier
// version) may hide event after+1 from the search; the cursor then replays
// the run from its first event and drops what the reader has seen, as
// every cursor did before the search, which delivers the same events.
func (s *Store) cursorStart(ctx context.Context, runID string, after uint64) (jetstream.OrderedConsumerConfig, error) {
	subject := eventsSubject(runID)
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}
	if after == 0 {
		return cfg, nil
	}
	last, err := s.lastMessage(ctx, runID)
	if err != nil {
		return cfg, err
	}
	if last.pos == 0 {
		// Nothing stored yet: the run's first event is the first to
		// come, and the pump drops it if the reader has seen it.
		return cfg, nil
	}
	cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
	if last.seq <= after {
		cfg.OptStartSeq = last.pos + 1
		return cfg, nil
	}
	pos, probes, err := s.findEvent(ctx, subject, after+1, last)
	if err != nil {
		return cfg, err
	}
	if pos == 0 {
		s.log.Warn("event not found by its seq, cursor replays the run", zap.String("run_id", runID),
			zap.Uint64("seq", after+1), zap.Int("probes", probes))
		return jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}, nil
	}
	cfg.OptStartSeq = pos
	return cfg, nil
}

// findEvent returns the stream sequence of the message holding the run's
// event of seq t, given its last message, whose last event is t or later,
// subject being the run's: the first stored message when its first seq is t
// or more (older ones expired), 0 when the log does not hold t where a
// dense prefix in seq order would. It also returns how many reads it made.
//
// Each read is one get of "the run's first message at stream sequence x
// or later", which the server answers from its index of subjects without
// reading what lies between; the seq headers of what it finds say on which
// side of t it landed, or that it holds t, since seqs rise with stream
// sequences. The reads
// estimate where t lies from the run's density in the stream (stream
// sequences per event) and aim just after where event t-1 would be: a run
// alone in the stream takes one read, one interleaved with others at a
// steady rate two to four. Until a read lands below t, the estimates go
// down from the run's end, at first with density 1, the least a dense log
// allows, so that the first never passes t, then with the density measured
// between the run's last event and the lowest one read, doubled after each
// read that found no event of the run closer to t. So a read near
// the run's end stays near it: it does not read the run's first event,
// whose file block, on a long run, is out of the server's cache (loading
// one costs about 10 ms), unless nothing after it is below t. Once t is
// bracketed, steps alternate between interpolating and halving, which
// bounds the reads by about twice the bits of the stream's length; three
// times when the run's messages hold very different numbers of events,
// since every guess above t also steps back at least twice as far from the
// run's end as the one before.
func (s *Store) findEvent(ctx context.Context, subject string, t uint64, last lastMsg) (pos uint64, probes int, err error) {
	return searchEvent(t, last.first, last.seq, last.pos, func(x uint64) (pos, first, last uint64, ok bool, err error) {
		var m *jetstream.RawStreamMsg
		err = s.retry(ctx, "find event", func(ctx context.Context) error {
			var err error
			m, err = s.events.GetMsg(ctx, x, jetstream.WithGetMsgSubject(subject))
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, 0, 0, false, nil
		}
		if err != nil {
			return 0, 0, 0, false, err
		}
		first, last, perr := msgSeqs(m.Header)
		if perr != nil {
			return 0, 0, 0, false, nil
		}
		return m.Sequence, first, last, true, nil
	})
}

// probeFunc returns the run's first message at stream sequence x or
// later: its stream sequence and the seqs of its first and last events; ok
// is false when there is none or its seqs are unreadable.
type probeFunc func(x uint64) (pos, first, last uint64, ok bool, err error)

// searchEvent is findEvent's search, reading the log through probe, given
// the run's last message: at stream sequence lastPos, holding events
// lastFirst..lastSeq.
func searchEvent(t, lastFirst, lastSeq, lastPos uint64, read probeFunc) (pos uint64, probes int, err error) {
	probe := func(x uint64) (uint64, uint64, uint64, bool, error) {
		probes++
		return read(x)
	}
	// Invariant: the run's first message at stream sequence hi or later
	// holds t or later events, starts at seq hiSeq and is at found; the
	// message at lo, once lo > 0, ends at loSeq, below t. The search ends
	// when found's message holds t (hiSeq ≤ t).
	hi, hiSeq, found := lastPos, lastFirst, lastPos
	var lo, loSeq uint64
	misses, above := 0, 0
	for step := 0; hiSeq > t; step++ {
		if lo == 0 && hi <= 1 {
			// Nothing of the run before found: t expired.
			return found, probes, nil
		}
		if lo > 0 && hi-lo <= 1 {
			break
		}
		var x float64
		switch {
		case lo == 0:
			k := 1.0
			if hiSeq < lastSeq {
				k = max(1, float64(lastPos-found)/float64(lastSeq-hiSeq))
			}
			k *= float64(uint64(1) << min(misses, 62))
			x = float64(found) - float64(hiSeq-t)*k - (k-1)/2
			// And at least twice as far back from the run's end as
			// the guess before: the density measured near the end
			// can be far off nearer t (messages of many events
			// there, of one event each and far apart earlier), and
			// this bounds the guesses above t by the bits of the
			// stream's length.
			x = min(x, float64(lastPos)-float64(uint64(1)<<min(above, 62))+1)
			above++
		case step%2 == 0:
			k := float64(hi-lo) / float64(hiSeq-loSeq)
			x = float64(lo) + float64(t-loSeq)*k - (k-1)/2
		default:
			x = float64(lo + (hi-lo)/2)
		}
		// Within what is left: after lo, before hi.
		at := lo + 1
		if x > float64(at) {
			at = min(uint64(x), hi-1)
		}
		at = min(at, hi-1)
		p, first, last, ok, err := probe(at)
		if err != nil || !ok {
			return 0, probes, err
		}
		switch {
		case last >= t:
			if p == found {
				// Nothing of the run between at and found: the
				// others' share is larger than guessed.
				misses++
			} else {
				misses = 0
			}
			hi, hiSeq, found = at, first, p
		case p >= hi:
			// An earlier event after a later one, or events expiring
			// under the search: not a dense prefix.
			return 0, probes, nil
		default:
			lo, loSeq = p, last
		}
	}
	if hiSeq > t {
		return 0, probes, nil
	}
	return found, probes, nil
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

// firstWait is how long a cursor waits for its first event before it asks
// the server whether its pull was lost.
const firstWait = 300 * time.Millisecond

// firstMsg waits for the cursor's first message. On a cluster the first pull
// of a new consumer is sometimes lost: the consumer's node has not yet told
// the client's node of its interest when the pull arrives there, and the
// ordered consumer only notices after two missed heartbeats (10 s). So a
// cursor that has waited firstWait asks for its consumer's state, and one
// that has events pending and no pull waiting is replaced by a new
// consumer from the same start, until its first message comes.
func (c *cursor) firstMsg(ctx context.Context) (jetstream.Msg, error) {
	for wait := firstWait; ; wait = min(2*wait, 5*time.Second) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		msg, err := c.it.Next(jetstream.NextContext(wctx))
		cancel()
		if err == nil || ctx.Err() != nil || wctx.Err() == nil {
			return msg, err
		}
		if c.rd.nc.IsClosed() {
			// The iterator may not have seen it yet.
			return nil, nats.ErrConnectionClosed
		}
		ictx, cancel := context.WithTimeout(ctx, c.s.timeout)
		info, err := c.cons.Info(ictx)
		cancel()
		if err != nil || info.NumPending == 0 || info.NumWaiting > 0 {
			// Nothing stored yet to deliver, or the pull is there: the
			// consumer is fine, or its own heartbeat check will tell.
			continue
		}
		if full := c.s.readers.pullBytes(); c.pullBytes < full {
			// Or the first message is too big for the cursor's pulls.
			if err := c.widenPulls(ctx, full); err != nil {
				return nil, err
			}
			continue
		}
		c.log.Info("cursor pull lost, consumer replaced", zap.String("consumer", info.Name),
			zap.Uint64("pending", info.NumPending))
		// A name of its own: under the old one the create would
		// answer with the consumer it replaces.
		cfg := c.cfg
		cfg.NamePrefix = rand.Text()
		cctx, cancel := context.WithTimeout(ctx, c.s.timeout)
		cons, err := c.rd.js.OrderedConsumer(cctx, eventsStream, cfg)
		cancel()
		if err != nil {
			continue
		}
		it, err := cons.Messages(c.pullOpt())
		if err != nil {
			c.s.deleteConsumer(cons)
			continue
		}
		c.it.Stop()
		c.s.deleteConsumer(c.cons)
		c.cons, c.it = cons, it
	}
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
