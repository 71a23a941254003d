package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

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
