package store

import (
	"fmt"
	"strconv"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The log's messages: a run's log is the messages on its events subject,
// each holding a run of its consecutive events. A message of one event
// (every message of versions before grouping, and a lone event now) is the
// event's JSON envelope as its body, with headers Agentgate-Seq and
// Agentgate-Type. A message of several has Agentgate-Seq and Agentgate-Type
// of its first event, Agentgate-Last-Seq and Agentgate-Last-Type of its
// last, and a pack's framing as its body (packs.go: version, first seq,
// each event's type and JSON, CRC-32C). Either way its Nats-Msg-Id is
// "<run_id>.<seq of its last event>".
//
// Grouping is what an event costs: JetStream stores, acknowledges and
// delivers each message on its own, about 20 µs of CPU between client and
// server whatever its size, so a batch of 256 events in one message costs
// about what one event did.

// Headers of a message holding more than one event.
const (
	headerLastSeq  = "Agentgate-Last-Seq"
	headerLastType = "Agentgate-Last-Type"
)

// defaultEventsPerMessage is how many events one message of a run's log
// holds at most, unless Options.EventsPerMessage says otherwise.
const defaultEventsPerMessage = 256

// maxGroupBytes bounds the body of a message of several events: a bigger
// batch is cut into several messages, and an event bigger than this goes
// alone, in a message of its own as every event once did.
const maxGroupBytes = 256 << 10

// groupOverhead is the most the pack framing adds to an event: two
// uvarints.
const groupOverhead = 2 * 10

// logGroup is one message of a run's log being written: the events it
// holds and its message.
type logGroup struct {
	msg         *nats.Msg
	first, last uint64 // seqs of its events
	n           int    // how many
}

// groupEvents cuts events, consecutive events of runID, into the messages
// of its log: at most maxMsgs of them, each of at most perMsg events and
// maxBytes of body. What does not fit in maxMsgs is left for another call.
// A message of one event is the event's own, as before grouping.
func groupEvents(runID string, events []runs.StoredEvent, maxMsgs, perMsg, maxBytes int) []logGroup {
	subject := eventsSubject(runID)
	var groups []logGroup
	for len(events) > 0 && len(groups) < maxMsgs {
		n, size := 1, len(events[0].Type)+len(events[0].JSON)+groupOverhead
		for n < len(events) && n < perMsg {
			add := len(events[n].Type) + len(events[n].JSON) + groupOverhead
			if size+add > maxBytes {
				break
			}
			n, size = n+1, size+add
		}
		g := events[:n]
		events = events[n:]
		if n == 1 {
			groups = append(groups, logGroup{msg: eventMsg(subject, runID, g[0]), first: g[0].Seq, last: g[0].Seq, n: 1})
			continue
		}
		body := startPack(make([]byte, 0, size+16), g[0].Seq)
		for _, ev := range g {
			body = appendPackEvent(body, ev)
		}
		first, last := g[0], g[n-1]
		groups = append(groups, logGroup{
			msg: &nats.Msg{
				Subject: subject,
				Data:    finishPack(body),
				Header: nats.Header{
					headerSeq:             {strconv.FormatUint(first.Seq, 10)},
					headerType:            {string(first.Type)},
					headerLastSeq:         {strconv.FormatUint(last.Seq, 10)},
					headerLastType:        {string(last.Type)},
					jetstream.MsgIDHeader: {msgID(runID, last.Seq)},
				},
			},
			first: first.Seq, last: last.Seq, n: n,
		})
	}
	return groups
}

// eventCount is how many events groups hold.
func eventCount(groups []logGroup) int {
	n := 0
	for _, g := range groups {
		n += g.n
	}
	return n
}

// msgSeqs returns the seqs of the first and last events a message of a
// run's log holds, from its headers.
func msgSeqs(h nats.Header) (first, last uint64, err error) {
	first, err = parseSeq(h)
	if err != nil {
		return 0, 0, err
	}
	v := h.Get(headerLastSeq)
	if v == "" {
		return first, first, nil
	}
	last, err = strconv.ParseUint(v, 10, 64)
	if err != nil || last <= first {
		return 0, 0, fmt.Errorf("malformed %s header %q after %s %d", headerLastSeq, v, headerSeq, first)
	}
	return first, last, nil
}

// lastType is the type of the last event a message of a run's log holds.
func lastType(h nats.Header) runs.EventType {
	if t := h.Get(headerLastType); t != "" {
		return runs.EventType(t)
	}
	return runs.EventType(h.Get(headerType))
}

// logEvents appends the events a message of a run's log holds to evs. Their
// JSON points into data, which must not change after. A message whose
// body does not hold the events its headers name is an error, and adds
// nothing.
func logEvents(h nats.Header, data []byte, names typeNames, evs []runs.StoredEvent) ([]runs.StoredEvent, error) {
	first, last, err := msgSeqs(h)
	if err != nil {
		return evs, err
	}
	if first == last {
		return append(evs, runs.StoredEvent{Seq: first, Type: runs.EventType(h.Get(headerType)), JSON: data}), nil
	}
	start := len(evs)
	evs, err = decodePack(data, names, evs)
	if err != nil {
		return evs[:start], err
	}
	if got := evs[start:]; got[0].Seq != first || got[len(got)-1].Seq != last {
		return evs[:start], fmt.Errorf("%w: events %d..%d in a message of %d..%d", errBadPack,
			got[0].Seq, got[len(got)-1].Seq, first, last)
	}
	return evs, nil
}
