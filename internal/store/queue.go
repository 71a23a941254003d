package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The run queue every replica shares: a work-queue stream holding one
// message per queued run, on its own subject, and one durable pull consumer
// that all replicas pull from. A replica pulls only when a slot of its own
// is free, so a run waits for whichever replica frees a slot first, and a
// queued run belongs to no replica: it survives the loss of any of them.
const (
	queueStream   = "AGENTGATE_QUEUE"
	queuePrefix   = "agentgate.queue."
	queueConsumer = "agentgate-workers"
	// queueAckWait is how long a replica has between taking a run from
	// the queue and acknowledging it (after claiming the run's record).
	// A replica that dies in between leaves the message to be delivered
	// again, to another replica, after this long.
	queueAckWait = 30 * time.Second
	// queuePullWait bounds one pull request; Dequeue renews it.
	queuePullWait = 10 * time.Second
	defaultQueue  = 64
	// queueNakDelay keeps a run given back from going straight to the
	// replica that gave it back.
	queueNakDelay = 250 * time.Millisecond
)

func queueSubject(runID string) string { return queuePrefix + runID }

// openQueue creates the queue stream and its consumer, or brings them up to
// opts.
func (s *Store) openQueue(ctx context.Context, opts Options) error {
	size := opts.QueueSize
	if size <= 0 {
		size = defaultQueue
	}
	cfg := jetstream.StreamConfig{
		Name:        queueStream,
		Description: "agentgate runs waiting for a slot on any replica",
		Subjects:    []string{queuePrefix + "*"},
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
		Retention:   jetstream.WorkQueuePolicy,
		// A full queue refuses the run (429) instead of dropping the
		// oldest waiting one.
		MaxMsgs:    int64(size),
		Discard:    jetstream.DiscardNew,
		Duplicates: dedupeWindow,
	}
	err := s.ensure(ctx, "create stream "+queueStream, func(ctx context.Context) error {
		var err error
		s.queue, err = s.js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", queueStream, err)
	}
	consCfg := jetstream.ConsumerConfig{
		Durable:       queueConsumer,
		Description:   "agentgate replicas taking queued runs",
		FilterSubject: queuePrefix + "*",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       queueAckWait,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// Every free slot of every replica may wait on a pull at once.
		MaxWaiting:    4096,
		MaxAckPending: -1,
		Replicas:      opts.Replicas,
	}
	err = s.ensure(ctx, "create consumer "+queueConsumer, func(ctx context.Context) error {
		var err error
		s.workers, err = s.queue.CreateOrUpdateConsumer(ctx, consCfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", queueConsumer, err)
	}
	return nil
}

// Enqueue puts a recorded run in the shared queue. It fails with an error
// wrapping runs.ErrCapacity when the queue is full. Enqueueing a run twice
// within the de-duplication window queues it once.
func (s *Store) Enqueue(ctx context.Context, runID string, spec runs.Spec) error {
	return s.enqueue(ctx, runID, runID, spec)
}

// Requeue puts a run back in the queue after it was taken and not started
// (its replica stopped before starting it).
func (s *Store) Requeue(ctx context.Context, runID string, spec runs.Spec) error {
	return s.enqueue(ctx, runID, fmt.Sprintf("%s.requeue.%d", runID, time.Now().UnixNano()), spec)
}

// enqueue publishes the run's spec, whole, as its queue message: the
// replica that takes the run may be another one, and the run's record
// keeps only a bounded copy of the prompt.
func (s *Store) enqueue(ctx context.Context, runID, msgID string, spec runs.Spec) error {
	if err := checkID(runID); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("enqueue run %s: %w", runID, err)
	}
	if max := s.nc.MaxPayload(); max > 0 && int64(len(data)) > max-1024 {
		return fmt.Errorf("enqueue run %s: %w", runID, runs.Invalid("prompt",
			fmt.Sprintf("the run's spec is %d bytes, more than the event store's message limit (%d bytes) allows", len(data), max)))
	}
	// A retry after a lost ack is a duplicate the stream drops; 10158 (the
	// same id still in process, from a concurrent retry) is retried.
	err = s.retry(ctx, "enqueue run", func(ctx context.Context) error {
		_, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: queueSubject(runID), Data: data}, jetstream.WithMsgID(msgID))
		if err != nil && queueFull(err) {
			return fmt.Errorf("%w: %w", runs.ErrCapacity, err) // final
		}
		return err
	})
	if err != nil {
		if queueFull(err) {
			return fmt.Errorf("enqueue run %s: %w", runID, runs.ErrCapacity)
		}
		return fmt.Errorf("enqueue run %s: %w", runID, err)
	}
	return nil
}

// queueFull reports whether a publish failed because the stream holds its
// maximum of messages (DiscardNew).
func queueFull(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && strings.Contains(apiErr.Description, "maximum messages") {
		return true
	}
	return strings.Contains(err.Error(), "maximum messages exceeded")
}

// Unqueue removes the run from the shared queue, if it is there.
func (s *Store) Unqueue(ctx context.Context, runID string) error {
	if err := checkID(runID); err != nil {
		return fmt.Errorf("unqueue: %w", err)
	}
	err := s.retry(ctx, "unqueue run", func(ctx context.Context) error {
		return s.queue.Purge(ctx, jetstream.WithPurgeSubject(queueSubject(runID)))
	})
	if err != nil {
		return fmt.Errorf("unqueue run %s: %w", runID, err)
	}
	return nil
}

// QueueLength returns how many runs wait in the shared queue, counting
// those a replica has taken and not yet acknowledged.
func (s *Store) QueueLength(ctx context.Context) (int, error) {
	var info *jetstream.StreamInfo
	err := s.retry(ctx, "queue length", func(ctx context.Context) error {
		var err error
		info, err = s.queue.Info(ctx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("queue length: %w", err)
	}
	return int(info.State.Msgs), nil
}

// QueuePosition returns the run's place in the shared queue, 1 for the next
// run to be taken, or 0 when the run is not in the queue.
func (s *Store) QueuePosition(ctx context.Context, runID string) (int, error) {
	if err := checkID(runID); err != nil {
		return 0, fmt.Errorf("queue position: %w", err)
	}
	var m *jetstream.RawStreamMsg
	var info *jetstream.StreamInfo
	err := s.retry(ctx, "queue position", func(ctx context.Context) error {
		var err error
		if m, err = s.queue.GetLastMsgForSubject(ctx, queueSubject(runID)); err != nil {
			return err
		}
		info, err = s.queue.Info(ctx, jetstream.WithDeletedDetails(true))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("queue position of %s: %w", runID, err)
	}
	st := info.State
	if m.Sequence < st.FirstSeq {
		return 0, nil // taken meanwhile
	}
	// Runs taken or removed out of order leave holes between the first
	// message and this one; they are not ahead of it.
	ahead := m.Sequence - st.FirstSeq
	for _, d := range st.Deleted {
		if d >= st.FirstSeq && d < m.Sequence {
			ahead--
		}
	}
	return int(ahead) + 1, nil
}

// Dequeue waits until a run is in the shared queue and returns it, taken
// for this replica until its Ack, Nak, or queueAckWait. It returns ctx's
// error once ctx ends.
func (s *Store) Dequeue(ctx context.Context) (runs.QueuedRun, error) {
	for {
		if err := ctx.Err(); err != nil {
			return runs.QueuedRun{}, err
		}
		msg, err := s.workers.Next(jetstream.FetchContext(ctxWithMax(ctx, queuePullWait)))
		if err != nil {
			if ctx.Err() != nil {
				return runs.QueuedRun{}, ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
				continue // nothing queued; pull again
			}
			// The connection is down or the consumer is being
			// moved: wait a little before pulling again.
			select {
			case <-ctx.Done():
				return runs.QueuedRun{}, ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		id := strings.TrimPrefix(msg.Subject(), queuePrefix)
		if checkID(id) != nil {
			_ = msg.Term()
			s.log.Warn("queue message dropped: malformed subject")
			continue
		}
		var spec *runs.Spec
		if d := msg.Data(); len(d) > 0 && d[0] == '{' {
			var sp runs.Spec
			if err := json.Unmarshal(d, &sp); err == nil {
				spec = &sp
			}
		}
		return runs.QueuedRun{
			RunID: id,
			Spec:  spec,
			Ack:   func() error { return msg.DoubleAck(context.WithoutCancel(ctx)) },
			Nak:   func() error { return msg.NakWithDelay(queueNakDelay) },
		}, nil
	}
}

// ctxWithMax bounds one pull by d without leaking a timer: the pull's own
// context is cancelled by the caller's or after d.
func ctxWithMax(ctx context.Context, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(ctx, d)
	context.AfterFunc(c, cancel)
	return c
}

// ClaimRun makes replica the owner of a queued run that no replica owns,
// atomically: of replicas claiming one run at once, one wins. It fails with
// an error wrapping runs.ErrClaimed when the run is owned or not queued,
// and runs.ErrNotFound when it is not stored.
func (s *Store) ClaimRun(ctx context.Context, runID, replica string) (runs.Run, error) {
	return s.claim(ctx, "claim run", runID, replica, func(r runs.Run) bool { return r.Status == runs.Queued && r.Owner == "" }, nil)
}

// TakeOverRun makes replica the owner of a running run whose owner is
// from, a replica that died: of several replicas that try at once, one
// does, and the others get an error wrapping runs.ErrClaimed.
func (s *Store) TakeOverRun(ctx context.Context, runID, from, replica string) (runs.Run, error) {
	return s.claim(ctx, "take over run", runID, replica, func(r runs.Run) bool { return r.Status == runs.Running && r.Owner == from }, nil)
}

// ClaimHibernated makes replica the owner of a hibernated run (owned by
// from, unless from is empty) and sets its activity to next: a replica
// waking it, closing it, or keeping its timer for a replica that died.
// Of several at once, one does; the others get an error wrapping
// runs.ErrClaimed.
func (s *Store) ClaimHibernated(ctx context.Context, runID, from, replica string, next runs.Activity) (runs.Run, error) {
	free := func(r runs.Run) bool {
		return r.Status == runs.Running && r.Activity == runs.Hibernated && (from == "" || r.Owner == from)
	}
	return s.claim(ctx, "claim hibernated run", runID, replica, free, func(r *runs.Run) {
		r.Activity = next
		if next != runs.Hibernated {
			r.HibernatedAt, r.ClosesAt = nil, nil
		}
	})
}

// claim makes replica the owner of the run, if free says it may have it,
// with a write that fails when another came first; change, if not nil,
// changes the record in the same write.
func (s *Store) claim(ctx context.Context, what, runID, replica string, free func(runs.Run) bool, change func(*runs.Run)) (runs.Run, error) {
	if err := checkID(runID); err != nil {
		return runs.Run{}, fmt.Errorf("%s: %w", what, err)
	}
	for {
		// From the leader, as GetRun reads: a direct get from a copy
		// that has not yet seen the run's creation would say it does
		// not exist, and the run would be dropped from the queue.
		var (
			data []byte
			rev  uint64
		)
		err := s.retry(ctx, what, func(ctx context.Context) error {
			var err error
			data, rev, err = s.getRecordRev(ctx, runID)
			return err
		})
		if err != nil {
			return runs.Run{}, fmt.Errorf("%s %s: %w", what, runID, err)
		}
		r, err := decodeRun(data)
		if err != nil {
			return runs.Run{}, fmt.Errorf("%s %s: decode: %w", what, runID, err)
		}
		if !free(r) {
			return r, fmt.Errorf("%s %s (%s, owner %q): %w", what, runID, r.Status, r.Owner, runs.ErrClaimed)
		}
		before := r.Status
		r.Owner = replica
		if change != nil {
			change(&r)
		}
		claimed, err := encodeRun(r)
		if err != nil {
			return runs.Run{}, fmt.Errorf("%s %s: %w", what, runID, err)
		}
		var next uint64
		err = s.retry(ctx, what, func(ctx context.Context) error {
			var err error
			next, err = s.kv.Update(ctx, runID, claimed, rev)
			return err
		})
		if err == nil {
			s.wrote(r, next)
			return r, nil
		}
		// A retry after a lost ack meets its own write: the record says
		// this replica owns it.
		if cur, gerr := s.GetRun(ctx, runID); gerr == nil && cur.Owner == replica && cur.Status == before && cur.Activity == r.Activity {
			return cur, nil
		}
		if !wrongRevision(err) {
			return runs.Run{}, fmt.Errorf("%s %s: %w", what, runID, err)
		}
		// Someone else wrote the record first: read it again.
	}
}

// wrongRevision reports whether a KV update failed its revision check.
func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return true
	}
	return strings.Contains(err.Error(), "wrong last sequence")
}

// DeleteRun removes a run's record, events and packs: a submission that
// was recorded but could not be queued. A pack this store sent is awaited
// first, so that it cannot land after the purge.
func (s *Store) DeleteRun(ctx context.Context, runID string) error {
	if err := checkID(runID); err != nil {
		return fmt.Errorf("delete run: %w", err)
	}
	if f := s.packs.forget(runID); f != nil {
		select {
		case <-f.Ok():
		case <-f.Err():
		case <-ctx.Done():
			return fmt.Errorf("delete packs of %s: %w", runID, ctx.Err())
		}
	}
	if err := s.retry(ctx, "delete events", func(ctx context.Context) error {
		return s.events.Purge(ctx, jetstream.WithPurgeSubject(eventsSubject(runID)))
	}); err != nil {
		return fmt.Errorf("delete events of %s: %w", runID, err)
	}
	if err := s.retry(ctx, "delete packs", func(ctx context.Context) error {
		if err := s.packStream.Purge(ctx, jetstream.WithPurgeSubject(packsFilter(runID))); err != nil {
			return err
		}
		return s.events.Purge(ctx, jetstream.WithPurgeSubject(legacyPacksFilter(runID)))
	}); err != nil {
		return fmt.Errorf("delete packs of %s: %w", runID, err)
	}
	s.forgetLast(runID)
	s.forgetRev(runID)
	if err := s.retry(ctx, "delete run", func(ctx context.Context) error {
		return s.kv.Purge(ctx, runID)
	}); err != nil {
		return fmt.Errorf("delete run %s: %w", runID, err)
	}
	return nil
}
