package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhooks"
)

// Webhook deliveries (webhooks.Store): the KV bucket "agentgate_webhooks"
// holds one record per delivery, "<run_id>.<webhook id>" → a JSON
// webhooks.Delivery, changed by compare-and-set on its revision; the
// work-queue stream "AGENTGATE_WEBHOOKS" holds, on
// "agentgate.webhooks.<run_id>.<webhook id>", one message per delivery
// still to be attempted: its body is the webhook's body, and the header
// Agentgate-Webhook-URL its whole URL. All replicas pull from one durable
// consumer; a replica gives a message back, due later, with a delayed
// nak, so a retry waits in the stream and is taken by whichever replica
// is up when it is due. One a replica took and neither acked nor gave
// back (it died) is delivered again after webhookAckWait. Records and
// messages expire after Options.MaxAge, if set.
const (
	webhooksBucket   = "agentgate_webhooks"
	webhooksStream   = "AGENTGATE_WEBHOOKS"
	webhooksPrefix   = "agentgate.webhooks."
	webhooksConsumer = "agentgate-webhook-senders"
	headerWebhookURL = "Agentgate-Webhook-URL"
	// webhookAckWait is how long a replica holds a message it took: more
	// than an attempt's bound (webhooks.MaxTimeout) and its recording. It
	// is also how late a retry can come after the NATS server restarts: a
	// message given back for later is due at its delay only once the
	// server has written that down, and otherwise after webhookAckWait
	// from when it was taken.
	webhookAckWait = 2 * time.Minute
)

var _ webhooks.Store = (*Store)(nil)

func (s *Store) openWebhooks(ctx context.Context, opts Options) error {
	kvCfg := jetstream.KeyValueConfig{
		Bucket:      webhooksBucket,
		Description: "agentgate webhook deliveries and their attempts",
		History:     1,
		TTL:         opts.MaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
	}
	err := s.ensure(ctx, "create bucket "+webhooksBucket, func(ctx context.Context) error {
		var err error
		s.hooks, err = s.js.CreateOrUpdateKeyValue(ctx, kvCfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("bucket %s: %w", webhooksBucket, err)
	}
	dedupe := dedupeWindow
	if opts.MaxAge > 0 && opts.MaxAge < dedupe {
		dedupe = opts.MaxAge
	}
	streamCfg := jetstream.StreamConfig{
		Name:        webhooksStream,
		Description: "agentgate webhook deliveries waiting for an attempt",
		Subjects:    []string{webhooksPrefix + "*.*"},
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
		Retention:   jetstream.WorkQueuePolicy,
		MaxAge:      opts.MaxAge,
		Duplicates:  dedupe,
	}
	var stream jetstream.Stream
	err = s.ensure(ctx, "create stream "+webhooksStream, func(ctx context.Context) error {
		var err error
		stream, err = s.js.CreateOrUpdateStream(ctx, streamCfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", webhooksStream, err)
	}
	consCfg := jetstream.ConsumerConfig{
		Durable:       webhooksConsumer,
		Description:   "agentgate replicas sending webhooks",
		FilterSubject: webhooksPrefix + "*.*",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cmp.Or(opts.webhookAckWait, webhookAckWait),
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxWaiting:    4096,
		// Messages waiting for their retry count as pending.
		MaxAckPending: -1,
		Replicas:      opts.Replicas,
	}
	err = s.ensure(ctx, "create consumer "+webhooksConsumer, func(ctx context.Context) error {
		var err error
		s.senders, err = stream.CreateOrUpdateConsumer(ctx, consCfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", webhooksConsumer, err)
	}
	return nil
}

// checkWebhookID accepts the ids webhooks makes: "msg_" and hex.
func checkWebhookID(id string) error {
	hexPart, ok := strings.CutPrefix(id, "msg_")
	if !ok || hexPart == "" || len(id) > maxIDLen {
		return runs.Invalid("webhook_id", "malformed")
	}
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return runs.Invalid("webhook_id", "malformed")
		}
	}
	return nil
}

func webhookKey(runID, id string) (string, error) {
	if err := checkID(runID); err != nil {
		return "", err
	}
	if err := checkWebhookID(id); err != nil {
		return "", err
	}
	return runID + "." + id, nil
}

// CreateDelivery records d and queues m for its first attempt. A
// delivery recorded already is left as it is; if it has had no attempt
// yet its message is queued again, which the stream drops as a duplicate
// within its de-duplication window: a replica that recorded it and died
// before queueing it leaves it to the next that sees the event.
func (s *Store) CreateDelivery(ctx context.Context, d webhooks.Delivery, m webhooks.Message) error {
	key, err := webhookKey(d.RunID, d.ID)
	if err != nil {
		return fmt.Errorf("create webhook delivery: %w", err)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("create webhook delivery: %w", err)
	}
	err = s.retry(ctx, "create webhook delivery", func(ctx context.Context) error {
		_, err := s.hooks.Create(ctx, key, data)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Not found: another replica's create of it is in flight, not
		// yet readable (see errCreateInFlight), and may yet fail. Its
		// message is queued here too; the stream keeps one of the two.
		cur, _, gerr := s.Delivery(ctx, d.RunID, d.ID)
		if (gerr != nil && !errors.Is(gerr, runs.ErrNotFound)) || (gerr == nil && (cur.State != webhooks.Pending || len(cur.Attempts) > 0)) {
			return nil
		}
	} else if err != nil {
		return fmt.Errorf("create webhook delivery %s: %w", key, err)
	}
	msg := &nats.Msg{Subject: webhooksPrefix + key, Data: m.Body, Header: nats.Header{}}
	msg.Header.Set(headerWebhookURL, m.URL)
	if max := s.nc.MaxPayload(); max > 0 && int64(len(m.Body)+len(m.URL)) > max-1024 {
		return fmt.Errorf("queue webhook delivery %s: %d bytes, more than the server's message limit", key, len(m.Body))
	}
	err = s.retry(ctx, "queue webhook delivery", func(ctx context.Context) error {
		_, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(d.ID))
		return err
	})
	if err != nil {
		return fmt.Errorf("queue webhook delivery %s: %w", key, err)
	}
	return nil
}

// Delivery returns the delivery's record and revision.
func (s *Store) Delivery(ctx context.Context, runID, id string) (webhooks.Delivery, uint64, error) {
	key, err := webhookKey(runID, id)
	if err != nil {
		return webhooks.Delivery{}, 0, fmt.Errorf("webhook delivery: %w", err)
	}
	var e jetstream.KeyValueEntry
	err = s.retry(ctx, "read webhook delivery", func(ctx context.Context) error {
		var err error
		e, err = s.hooks.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return webhooks.Delivery{}, 0, fmt.Errorf("webhook delivery %s: %w", key, runs.ErrNotFound)
	}
	if err != nil {
		return webhooks.Delivery{}, 0, fmt.Errorf("webhook delivery %s: %w", key, err)
	}
	var d webhooks.Delivery
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return webhooks.Delivery{}, 0, fmt.Errorf("webhook delivery %s: decode: %w", key, err)
	}
	return d, e.Revision(), nil
}

// UpdateDelivery stores d if its record is still at rev.
func (s *Store) UpdateDelivery(ctx context.Context, d webhooks.Delivery, rev uint64) error {
	key, err := webhookKey(d.RunID, d.ID)
	if err != nil {
		return fmt.Errorf("update webhook delivery: %w", err)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("update webhook delivery: %w", err)
	}
	err = s.retry(ctx, "update webhook delivery", func(ctx context.Context) error {
		_, err := s.hooks.Update(ctx, key, data, rev)
		return err
	})
	if err != nil && (isWrongSequence(err) || wrongRevision(err)) {
		// A retry whose first try landed finds its own write: the
		// record is what this update stored.
		if cur, _, gerr := s.Delivery(ctx, d.RunID, d.ID); gerr == nil && sameDelivery(cur, d) {
			return nil
		}
		return fmt.Errorf("update webhook delivery %s: %w", key, webhooks.ErrStale)
	}
	if err != nil {
		return fmt.Errorf("update webhook delivery %s: %w", key, err)
	}
	return nil
}

func sameDelivery(a, b webhooks.Delivery) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// Deliveries returns the run's deliveries, oldest first.
func (s *Store) Deliveries(ctx context.Context, runID string) ([]webhooks.Delivery, error) {
	if err := checkID(runID); err != nil {
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	var out []webhooks.Delivery
	err := s.retry(ctx, "list webhook deliveries", func(ctx context.Context) error {
		out = out[:0]
		w, err := s.hooks.WatchFiltered(ctx, []string{runID + ".*"}, jetstream.IgnoreDeletes())
		if err != nil {
			return err
		}
		defer w.Stop() //nolint:errcheck // nothing to do about it
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case e, ok := <-w.Updates():
				if !ok {
					return errors.New("webhook deliveries: watch closed")
				}
				if e == nil {
					return nil // every record there is was read
				}
				var d webhooks.Delivery
				if err := json.Unmarshal(e.Value(), &d); err != nil {
					s.log.Warn("webhook delivery skipped: undecodable")
					continue
				}
				out = append(out, d)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("webhook deliveries of %s: %w", runID, err)
	}
	slices.SortStableFunc(out, func(a, b webhooks.Delivery) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
			return c
		}
		return strings.Compare(a.Target, b.Target)
	})
	if out == nil {
		out = []webhooks.Delivery{}
	}
	return out, nil
}

// TakeDelivery waits for a message that is due and takes it for this
// replica: until its Done or Later, or webhookAckWait.
func (s *Store) TakeDelivery(ctx context.Context) (webhooks.Taken, error) {
	for {
		if err := ctx.Err(); err != nil {
			return webhooks.Taken{}, err
		}
		msg, err := s.senders.Next(jetstream.FetchContext(ctxWithMax(ctx, queuePullWait)))
		if err != nil {
			if ctx.Err() != nil {
				return webhooks.Taken{}, ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
				continue
			}
			select {
			case <-ctx.Done():
				return webhooks.Taken{}, ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		runID, id, ok := strings.Cut(strings.TrimPrefix(msg.Subject(), webhooksPrefix), ".")
		if _, err := webhookKey(runID, id); !ok || err != nil {
			_ = msg.Term()
			s.log.Warn("webhook message dropped: malformed subject")
			continue
		}
		return webhooks.Taken{
			RunID: runID, ID: id,
			Message: webhooks.Message{URL: msg.Headers().Get(headerWebhookURL), Body: msg.Data()},
			Done: func() error {
				actx, cancel := context.WithTimeout(context.Background(), s.timeout)
				defer cancel()
				return msg.DoubleAck(actx)
			},
			Later: func(delay time.Duration) error {
				var err error
				if delay <= 0 {
					err = msg.Nak()
				} else {
					err = msg.NakWithDelay(delay)
				}
				if err != nil {
					return err
				}
				// A nak is only published, not answered: flushed, it has
				// reached the server before a replica that stops closes
				// its connection. Lost, the message would come back only
				// after webhookAckWait.
				return s.nc.FlushTimeout(s.timeout)
			},
		}, nil
	}
}
