package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// cancelBuffer is how many cancel requests wait for their reader before
// more are dropped. Cancels are rare and their reader only looks each id
// up, so a full buffer means the reader is stuck.
const cancelBuffer = 256

// RequestCancel publishes a cancel request for the run to every replica, on
// core NATS: a replica that is not listening at that moment never hears of
// it. It returns once the server has the request.
func (s *Store) RequestCancel(ctx context.Context, runID string, by runs.Actor) error {
	if err := checkID(runID); err != nil {
		return fmt.Errorf("request cancel: %w", err)
	}
	var body []byte
	if !by.IsZero() {
		body, _ = json.Marshal(by) // who asked, for the run's audit trail
	}
	if err := s.nc.Publish(cancelPrefix+runID, body); err != nil {
		return fmt.Errorf("request cancel of %s: %w", runID, err)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if err := s.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("request cancel of %s: %w", runID, err)
	}
	return nil
}

// CancelRequests delivers the ids of runs whose cancel was requested on any
// replica, until ctx ends; the channel is closed then. It returns once the
// subscription is in place on the server. The NATS callback never blocks:
// a request that finds the channel full is dropped and logged.
func (s *Store) CancelRequests(ctx context.Context) (<-chan runs.CancelRequest, error) {
	ch, err := subscribe(ctx, s, cancelPrefix+"*", cancelBuffer, func(m *nats.Msg) (runs.CancelRequest, bool) {
		req := runs.CancelRequest{RunID: strings.TrimPrefix(m.Subject, cancelPrefix)}
		if err := checkID(req.RunID); err != nil {
			s.log.Warn("cancel request ignored", zap.String("subject", m.Subject), zap.Error(err))
			return req, false
		}
		if len(m.Data) > 0 {
			if err := json.Unmarshal(m.Data, &req.By); err != nil {
				s.log.Warn("cancel request: who asked is unreadable", zap.String("run_id", req.RunID), zap.Error(err))
			}
		}
		return req, true
	}, func(m *nats.Msg, req runs.CancelRequest) {
		s.log.Warn("cancel request dropped: reader is behind", zap.String("run_id", req.RunID))
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to cancel requests: %w", err)
	}
	return ch, nil
}

// subscribe delivers what read makes of each message on subject to a
// channel of size n, until ctx ends; the channel is closed then. read
// returns false for a message to ignore. The NATS callback never blocks: a
// message that finds the channel full goes to full instead. It returns
// once the subscription is in place on the server.
func subscribe[T any](ctx context.Context, s *Store, subject string, n int, read func(*nats.Msg) (T, bool), full func(*nats.Msg, T)) (<-chan T, error) {
	ch := make(chan T, n)
	var (
		mu     sync.Mutex
		closed bool
	)
	sub, err := s.nc.Subscribe(subject, func(m *nats.Msg) {
		v, ok := read(m)
		if !ok {
			return
		}
		// The lock orders this send before the close below.
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		select {
		case ch <- v:
		default:
			full(m, v)
		}
	})
	if err != nil {
		return nil, err
	}
	fctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if err := s.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	go func() {
		<-ctx.Done()
		// Fails only when the connection is closed, which ends the
		// subscription anyway.
		_ = sub.Unsubscribe()
		mu.Lock()
		closed = true
		close(ch)
		mu.Unlock()
	}()
	return ch, nil
}
