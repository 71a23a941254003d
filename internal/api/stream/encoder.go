package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Media types of the event stream.
const (
	ContentTypeSSE    = "text/event-stream"
	ContentTypeNDJSON = "application/x-ndjson"
)

// Encoder frames a stream's events for one media type. The Writer does the
// rest (the cursor, batching, pings, the drain, writes and their deadline)
// the same for every framing.
type Encoder interface {
	// ContentType is the response's media type.
	ContentType() string
	// Open is what the response starts with, written with the header
	// (nothing at all is fine): a client that reconnects should wait
	// reconnect.
	Open(reconnect time.Duration) []byte
	// Encode puts the events of evs that the client has not had into buf,
	// until buf holds about maxBatchBytes, and returns buf, the events it
	// did not reach (to encode next, in a slice of their own) and whether
	// the stream is complete. *last is the seq of the last event the
	// client has had (at first its resume point); Encode moves it. Encode
	// takes a whole batch, not an event, as a framing may keep state from
	// event to event and end the stream in the middle of a batch.
	Encode(buf []byte, evs []runs.StoredEvent, last *uint64) (out []byte, rest []runs.StoredEvent, done bool)
	// Ping is the keepalive written while the stream waits; nil turns
	// keepalives off.
	Ping() []byte
	// Drained is what tells the client that the gateway is going away and
	// that it should come back after delay, to another replica; nil writes
	// nothing.
	Drained(delay time.Duration) []byte
}

// eventOverhead is about what the SSE framing adds to an event's envelope:
// its id, event and data fields.
const eventOverhead = 64

// SSE frames the run's events as server-sent events: id the seq, event the
// type, data the stored envelope.
type SSE struct{}

// ContentType implements Encoder.
func (SSE) ContentType() string { return ContentTypeSSE }

// Open implements Encoder: the EventSource's reconnect delay.
func (SSE) Open(reconnect time.Duration) []byte {
	return fmt.Appendf(nil, "retry: %d\n\n", reconnect.Milliseconds())
}

// Encode implements Encoder.
func (SSE) Encode(buf []byte, evs []runs.StoredEvent, last *uint64) ([]byte, []runs.StoredEvent, bool) {
	return encodeEach(buf, evs, last, appendSSE)
}

// Ping implements Encoder: a comment, which an EventSource ignores.
func (SSE) Ping() []byte { return []byte(": ping\n\n") }

// Drained implements Encoder: a comment for a person, and the delay as the
// EventSource's next reconnect delay.
func (SSE) Drained(delay time.Duration) []byte {
	return fmt.Appendf(nil, ": the gateway is shutting down; reconnect with Last-Event-ID\nretry: %d\n\n",
		delay.Milliseconds())
}

// NDJSON frames the run's events as JSON lines, each the stored envelope.
// An NDJSON client does not reconnect by itself, and gets no keepalives:
// nothing but events may be a line.
type NDJSON struct{}

// ContentType implements Encoder.
func (NDJSON) ContentType() string { return ContentTypeNDJSON }

// Open implements Encoder: nothing.
func (NDJSON) Open(time.Duration) []byte { return nil }

// Encode implements Encoder.
func (NDJSON) Encode(buf []byte, evs []runs.StoredEvent, last *uint64) ([]byte, []runs.StoredEvent, bool) {
	return encodeEach(buf, evs, last, appendNDJSON)
}

// Ping implements Encoder: none.
func (NDJSON) Ping() []byte { return nil }

// Drained implements Encoder: nothing; the stream just ends.
func (NDJSON) Drained(time.Duration) []byte { return nil }

// encodeEach is Encode of a framing that writes each event on its own with
// frame: it puts the events of evs newer than *last into buf, up to
// maxBatchBytes, and returns the events that did not fit. done reports that
// run.completed was among those encoded; nothing after it is written. A
// run.completed at or before *last (the client resumed past it) is not
// written, and still ends the stream.
func encodeEach(buf []byte, evs []runs.StoredEvent, last *uint64, frame func([]byte, runs.StoredEvent) []byte) ([]byte, []runs.StoredEvent, bool) {
	// Sized once for the whole write: a client that lags gets batches
	// larger than the buffer kept between writes, and growing it event by
	// event would copy it over and over.
	size := 0
	for _, ev := range evs {
		if size > 0 && size+len(ev.JSON)+eventOverhead > maxBatchBytes {
			break
		}
		size += len(ev.JSON) + eventOverhead
	}
	buf = slices.Grow(buf, size)
	for i, ev := range evs {
		if ev.Seq <= *last {
			if ev.Type == runs.EventRunCompleted {
				return buf, nil, true
			}
			continue
		}
		if len(buf) > 0 && len(buf)+len(ev.JSON)+eventOverhead > maxBatchBytes {
			// A copy, so that the events written here are not kept
			// alive by the rest's backing array.
			return buf, slices.Clone(evs[i:]), false
		}
		buf = frame(buf, ev)
		*last = ev.Seq
		if ev.Type == runs.EventRunCompleted {
			return buf, nil, true
		}
	}
	return buf, nil, false
}

// appendSSE appends ev as one SSE event: id is the seq, event the type,
// data the stored envelope as it was stored. The envelope is one line of
// JSON; should it hold line breaks, each line becomes a data line, which an
// EventSource joins back with "\n", an equivalent JSON text.
func appendSSE(buf []byte, ev runs.StoredEvent) []byte {
	buf = append(buf, "id: "...)
	buf = strconv.AppendUint(buf, ev.Seq, 10)
	buf = append(buf, '\n')
	if t := string(ev.Type); t != "" && !strings.ContainsAny(t, "\r\n") {
		buf = append(buf, "event: "...)
		buf = append(buf, t...)
		buf = append(buf, '\n')
	}
	data := ev.JSON
	if bytes.IndexByte(data, '\n') < 0 && bytes.IndexByte(data, '\r') < 0 {
		// The usual envelope, one line: two vectorised scans, rather
		// than IndexAny's byte by byte, for every event to every client.
		buf = append(buf, "data: "...)
		buf = append(buf, data...)
		return append(buf, '\n', '\n')
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			buf = append(buf, "data: "...)
			buf = append(buf, data...)
			buf = append(buf, '\n')
			break
		}
		buf = append(buf, "data: "...)
		buf = append(buf, data[:i]...)
		buf = append(buf, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return append(buf, '\n')
}

// appendNDJSON appends ev's stored envelope as one line. An envelope with a
// line break in it (which the store should never hold) is compacted rather
// than split.
func appendNDJSON(buf []byte, ev runs.StoredEvent) []byte {
	if bytes.ContainsAny(ev.JSON, "\r\n") {
		var c bytes.Buffer
		if json.Compact(&c, ev.JSON) == nil {
			return append(append(buf, c.Bytes()...), '\n')
		}
		return buf
	}
	return append(append(buf, ev.JSON...), '\n')
}
