package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

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
