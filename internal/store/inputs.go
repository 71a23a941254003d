package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// inputPrefix is the subject of input for one replica's runs: approval
// decisions, messages, interrupts, closes. Unlike a cancel, which any
// replica may hear and ignore, input is a request to exactly the run's
// owner, which answers it.
const inputPrefix = "agentgate.input."

// inputBuffer is how many input requests wait for their reader. Each is
// answered in milliseconds, so a full buffer means the reader is stuck;
// the request is then answered as undeliverable rather than left to time
// out.
const inputBuffer = 256

// errNoReader is the reply body of an input that found its reader's
// buffer full.
var errNoReader = errors.New("input reader is behind")

// SendInput delivers body, an input for run runID, to replica and returns
// its reply. It fails with an error wrapping runs.ErrOwnerUnavailable when
// no process of that replica listens: it is gone, or cut off from NATS.
func (s *Store) SendInput(ctx context.Context, replica, runID string, body []byte) ([]byte, error) {
	if err := checkID(runID); err != nil {
		return nil, fmt.Errorf("send input: %w", err)
	}
	msg := nats.NewMsg(inputPrefix + replicaKey(replica))
	msg.Header.Set(headerRun, runID)
	msg.Data = body
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	reply, err := s.nc.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("input for run %s: replica %s: %w", runID, replica, runs.ErrOwnerUnavailable)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("input for run %s: replica %s did not answer: %w", runID, replica, runs.ErrOwnerUnavailable)
	case err != nil:
		return nil, fmt.Errorf("input for run %s: %w", runID, err)
	}
	if reply.Header.Get(headerError) != "" {
		return nil, fmt.Errorf("input for run %s: replica %s: %s: %w", runID, replica, reply.Header.Get(headerError), runs.ErrOwnerUnavailable)
	}
	return reply.Data, nil
}

// Inputs delivers the input requests addressed to replica until ctx ends;
// the channel is closed then. Each request must be answered once, with
// Reply. A request that finds the channel full is answered at once as
// undeliverable. It returns once the subscription is in place on the
// server.
func (s *Store) Inputs(ctx context.Context, replica string) (<-chan runs.InputRequest, error) {
	ch, err := subscribe(ctx, s, inputPrefix+replicaKey(replica), inputBuffer, func(m *nats.Msg) (runs.InputRequest, bool) {
		id := m.Header.Get(headerRun)
		if err := checkID(id); err != nil {
			s.log.Warn("input ignored", zap.String("subject", m.Subject), zap.Error(err))
			return runs.InputRequest{}, false
		}
		return runs.InputRequest{RunID: id, Body: m.Data, Reply: func(b []byte) {
			if err := m.Respond(b); err != nil {
				s.log.Warn("answer input", zap.String("run_id", id), zap.Error(err))
			}
		}}, true
	}, func(m *nats.Msg, req runs.InputRequest) {
		s.log.Warn("input refused: reader is behind", zap.String("run_id", req.RunID))
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set(headerError, errNoReader.Error())
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to input: %w", err)
	}
	return ch, nil
}
