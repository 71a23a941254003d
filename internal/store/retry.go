package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Backoff between attempts of a retried operation: it doubles from
// retryMin up to retryMax, with jitter so that replicas started together
// do not retry in step.
const (
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
	// defaultRetryFor is how long a write whose ctx has no deadline is
	// retried: longer than a JetStream leader election (seconds) and a
	// node's restart.
	defaultRetryFor = 30 * time.Second
)

// JetStream error codes (server/errors.json) that a retry can outlive.
var transientCodes = map[jetstream.ErrorCode]bool{
	10004: true, // cluster: incomplete results
	10005: true, // no suitable peers for placement: on a cold start the peers are not all known yet
	10007: true, // cluster not assigned to this server
	10008: true, // JetStream system temporarily unavailable (no meta leader yet)
	10009: true, // not leader
	10023: true, // insufficient resources: peers not yet known
	10039: true, // JetStream not enabled for account: not yet, on a starting server
	10058: true, // stream name already in use: another replica's create won the race
	10059: true, // stream not found: its create is racing this update
	10075: true, // peer remap failed
	10076: true, // JetStream not enabled: not yet
	10118: true, // stream is offline
	10158: true, // duplicate message id is in process
	10163: true, // expected last sequence per subject temporarily unavailable
	10167: true, // too many requests
	10176: true, // atomic batch incomplete: the leader changed under it
	10194: true, // stream is offline
	10202: true, // cluster member change is in progress
	10210: true, // atomic publish: too many in flight
}

// errCreateInFlight is a create of a key refused while the leader of a
// replicated stream has another write of that key proposed and not yet
// applied (a create from another replica at the same moment): the leader
// answers "wrong last sequence", yet a read of the key finds nothing until
// the other write is applied, or ever, if it fails. Trying the create
// again settles it either way.
var errCreateInFlight = errors.New("another create of the key is in flight")

// createOrRead creates key in kv with value, unless it is there: then it
// returns what is stored, and false. Of several creates of one key at
// once, from any replicas, one is made and the others read it. A create
// refused while another is in flight, whose key cannot be read yet, is
// tried again, as is one refused for a key that expired before the read.
func (s *Store) createOrRead(ctx context.Context, what string, kv jetstream.KeyValue, key string, value []byte) (stored []byte, created bool, err error) {
	err = s.retry(ctx, what, func(ctx context.Context) error {
		_, err := kv.Create(ctx, key, value)
		if err == nil {
			stored, created = value, true
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return errCreateInFlight
		case err != nil:
			return err
		}
		stored = e.Value()
		return nil
	})
	return stored, created, err
}

// transient reports whether err may go away by itself, so that the
// operation that returned it is worth trying again. Timeouts, missing
// responders, a connection that is reconnecting, elections and create
// races are transient. Configuration errors are not: any other error the
// server answers with (an invalid config, replicas > 1 on a server that is
// not clustered, subjects overlapping another stream, …), a name the client
// rejects, and a closed connection, which never comes back.
func transient(err error) bool {
	if errors.Is(err, errStale) || errors.Is(err, errCreateInFlight) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return transientCodes[apiErr.ErrorCode]
	}
	switch {
	case errors.Is(err, context.Canceled),
		errors.Is(err, runs.ErrNotFound),
		// A key that is not there is an answer, not a failure: a
		// session or tenant never recorded must not wait out the retry.
		errors.Is(err, jetstream.ErrKeyNotFound),
		errors.Is(err, jetstream.ErrKeyExists),
		errors.Is(err, runs.ErrInvalid),
		errors.Is(err, ErrExists),
		errors.Is(err, errConflict),
		errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrBadSubject),
		errors.Is(err, nats.ErrMaxPayload),
		errors.Is(err, jetstream.ErrInvalidBucketName),
		errors.Is(err, jetstream.ErrInvalidStreamName),
		errors.Is(err, jetstream.ErrStreamNameRequired),
		errors.Is(err, jetstream.ErrHistoryTooLarge):
		return false
	}
	return true
}

// ensure runs op until it succeeds, returns an error that is not transient,
// or ctx ends, backing off between attempts. Each attempt gets the store's
// timeout, so that one lost request costs one timeout, not the whole ctx.
// A ctx without a deadline is retried for as long as it lasts: Open uses
// that to wait for a cluster that is still forming. The error returned is
// op's last, wrapped with ctx's when ctx ended.
func (s *Store) ensure(ctx context.Context, what string, op func(ctx context.Context) error) error {
	return s.ensureFrom(ctx, what, s.timeout, op)
}

// ensureFrom is ensure with a first attempt of first, at most the store's
// timeout, and each later one twice the one before, up to that timeout:
// for a request that the server answers within milliseconds or, now and
// then, never, which would otherwise cost a whole timeout before the
// attempt that is answered. op must be safe to repeat while an attempt
// abandoned before it is still in flight.
func (s *Store) ensureFrom(ctx context.Context, what string, first time.Duration, op func(ctx context.Context) error) error {
	wait := retryMin
	start := time.Now()
	warned := false
	budget := min(first, s.timeout)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, budget)
		err := op(actx)
		cancel()
		budget = min(2*budget, s.timeout)
		if err == nil {
			if warned {
				s.log.Info("store ready after retries", zap.String("op", what), zap.Int("attempts", attempt),
					zap.Duration("waited", time.Since(start)))
			}
			return nil
		}
		if !transient(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (gave up after %d attempts: %w)", err, attempt, ctx.Err())
		}
		// A warning once it is more than a blip; the attempts before are
		// the routine of a cluster starting or electing.
		if !warned && time.Since(start) > 5*time.Second {
			warned = true
			s.log.Warn("store not ready, retrying", zap.String("op", what), zap.Int("attempts", attempt), zap.Error(err))
		} else {
			s.log.Debug("store op retried", zap.String("op", what), zap.Int("attempt", attempt), zap.Error(err))
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up after %d attempts: %w)", err, attempt, ctx.Err())
		}
		wait = min(2*wait, retryMax)
	}
}

// readRetryFor is how long a read whose ctx has no deadline is retried:
// long enough for a leader election, short enough for a client waiting on
// a request.
const readRetryFor = 15 * time.Second

// retry runs op as ensure does, through an election, for ctx's deadline
// or readRetryFor when it has none. Reads, and the small writes of the
// queue and of idempotency keys, go through it.
func (s *Store) retry(ctx context.Context, what string, op func(ctx context.Context) error) error {
	return s.retryFrom(ctx, what, s.timeout, op)
}

// retryFrom is retry with ensureFrom's attempts.
func (s *Store) retryFrom(ctx context.Context, what string, first time.Duration, op func(ctx context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, readRetryFor)
		defer cancel()
	}
	return s.ensureFrom(ctx, what, first, op)
}

// retryCtx bounds how long a write is retried: ctx's own deadline, or the
// store's RetryFor when it has none.
func (s *Store) retryCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.retryFor)
}
