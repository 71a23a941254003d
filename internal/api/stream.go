package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// Media types of the event stream.
const (
	contentTypeSSE    = "text/event-stream"
	contentTypeNDJSON = "application/x-ndjson"
)

// runEvents answers GET /v1/runs/{id}/events with the run's events, from
// the start or after the larger of Last-Event-ID and ?after=N, as SSE or,
// for Accept: application/x-ndjson, as JSON lines. It ends after
// run.completed. A run that has ended with nothing newer than the cursor
// answers 204, which tells an EventSource to stop reconnecting.
func (s *server) runEvents(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// Opened in a call of its own: what it looks at on the way (the run,
	// the request's fields) is off the stack before the stream begins,
	// and a thousand parked streams each keep a smaller one.
	id, st, cur, ok := s.openEvents(ctx, w, r)
	if !ok {
		return
	}
	s.obs.SSEClientsAdd(1)
	defer s.obs.SSEClientsAdd(-1)
	s.streamEnded(w, id, st, st.serve(ctx, cancel, cur, &s.cfg))
}

// streamEnded logs why a stream ended, if it says anything worth knowing.
// It is a call of its own for the same reason as openEvents.
//
//go:noinline
func (s *server) streamEnded(w http.ResponseWriter, id string, st *stream, err error) {
	log := s.log.With(zap.String("run_id", id))
	if errors.Is(err, errDrained) {
		log.Debug("event stream ended by the drain", zap.Uint64("last_seq", st.last))
		err = nil
	}
	var dropped *clientError
	switch {
	case errors.As(err, &dropped):
		log.Debug("event stream client dropped", zap.Uint64("last_seq", st.last), zap.Error(err))
	case err != nil:
		log.Warn("event stream ended early", zap.Uint64("last_seq", st.last), zap.Error(err))
		if rec, ok := w.(*recorder); ok {
			rec.err = err
		}
	}
}

// openEvents checks the request and opens the run's cursor on ctx, or
// answers the request itself (an error, or 204) and reports !ok.
//
//go:noinline
func (s *server) openEvents(ctx context.Context, w http.ResponseWriter, r *http.Request) (id string, st *stream, cur runs.Cursor, ok bool) {
	// AG-UI events (agui.go) are opened on their own: their resume
	// point is another kind of id, and their cursor starts at the first
	// event.
	if ag, err := aguiRequested(r); err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	} else if ag {
		return s.openAGUIEvents(ctx, w, r)
	}
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	}
	after, err := resumeAfter(r)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	}
	ndjson := prefersNDJSON(r.Header.Values("Accept"))

	if s.draining() {
		s.fail(w, r, fmt.Errorf("open events of run %s: %w", id, runs.ErrShuttingDown))
		return "", nil, nil, false
	}

	// The tenant check has just read the run: a stream opens with one
	// read of the record, not two.
	run, found := ownedRun(r.Context())
	if !found {
		if run, err = s.svc.Get(ctx, id); err != nil {
			s.fail(w, r, noRun(id, err))
			return "", nil, nil, false
		}
	}
	// The cursor starts at most at the log's end: a client resumed past
	// the end of a running run (a Last-Event-ID from a log that was
	// lost, or made up) still sees run.completed, and its stream ends
	// with the run; only events after its resume point are written.
	from := after
	if after > 0 || run.Status.Terminal() {
		last, err := s.svc.LastEventSeq(ctx, id)
		if err != nil {
			s.fail(w, r, fmt.Errorf("last event of run %s: %w", id, err))
			return "", nil, nil, false
		}
		if run.Status.Terminal() && last <= after {
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusNoContent)
			return "", nil, nil, false
		}
		from = min(after, last)
	}

	cur, err = s.svc.Events(ctx, id, from)
	if err != nil {
		s.fail(w, r, fmt.Errorf("open events of run %s: %w", id, err))
		return "", nil, nil, false
	}
	releaseOwnedRun(r.Context())
	return id, &stream{
		w:       w,
		rc:      http.NewResponseController(w),
		ndjson:  ndjson,
		last:    after,
		timeout: s.cfg.WriteTimeout,
	}, cur, true
}

// eventStreamKey marks a request for a run's event stream (see
// eventStreamRoute).
type eventStreamKey struct{}

// eventStreamRoute marks the requests of the event stream's route, so that
// fail answers one whose store failed the way an EventSource can come back
// from (see reconnectLater).
func eventStreamRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), eventStreamKey{}, true)))
	})
}

// reconnectable reports whether a failure to open r's stream that is the
// store's should be answered by reconnectLater: r is for the event stream,
// as server-sent events. An NDJSON client does not reconnect by itself,
// and gets the error.
func reconnectable(r *http.Request) bool {
	marked, _ := r.Context().Value(eventStreamKey{}).(bool)
	return marked && !prefersNDJSON(r.Header.Values("Accept"))
}

// reconnectLater answers an event stream that could not be opened for a
// failure of the store (what problem maps to a 500, such as a timeout or
// a cluster without a leader, or the gateway's own request timeout) with
// an empty stream that tells the client to come back after the reconnect
// delay, as a stream that fails after it began does: an EventSource gives
// up for good on any status but 200, and would stay down after an outage
// that its next attempt outlives.
func (s *server) reconnectLater(w http.ResponseWriter, err error) {
	s.log.Warn("event stream not opened; the client is told to reconnect", zap.Error(err))
	h := w.Header()
	h.Set("Content-Type", contentTypeSSE)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, ": the event store did not answer; reconnect with Last-Event-ID\nretry: %d\n\n", s.cfg.ReconnectDelay.Milliseconds())
	_ = http.NewResponseController(w).Flush()
}

// stream writes one client's events. Only the handler's goroutine uses it.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	ndjson  bool
	timeout time.Duration
	// deadline is the connection's write deadline, zero before the first
	// write (see write).
	deadline time.Time
	// last is the seq of the last event written (or the resume point):
	// nothing at or below it is written again.
	last uint64
	// buf is the write buffer, from writeBufs while the stream writes;
	// bufBox is the pool's box of it, given back with it (see releaseBuf).
	buf    []byte
	bufBox *[]byte
	// agui, when set, writes the events as AG-UI events (agui.go).
	agui *aguiStream
}

// clientError is a failed write: the client is gone or too slow.
type clientError struct{ err error }

func (e *clientError) Error() string { return "write to client: " + e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }

// batch is one result of Cursor.Next. full reports that it held all the
// events asked for: the cursor may well have more at once.
type batch struct {
	events []runs.StoredEvent
	full   bool
	err    error
}

// pollingCursor is a cursor that tells, without waiting, what it has now
// and when to look again: the fan-out hub's readers are. A stream on one
// waits on that channel in its own loop, and needs no goroutine of its
// own to wait in Next: with a thousand clients on a run, that is a
// thousand fewer goroutines, and one goroutine switch fewer per batch.
type pollingCursor interface {
	// Poll returns the events available now, at most max, in a slice
	// the cursor may use again at the next Poll. With none, it returns a
	// channel closed when there may be more, or, when it cannot tell
	// without waiting, no channel: the caller calls Next then.
	Poll(max int) ([]runs.StoredEvent, <-chan struct{}, error)
}

// batchSource is where serve takes its batches: Poll while the cursor
// answers it, and otherwise a goroutine that waits in Next (started once,
// the first time it is needed), so that pings go out while it waits. The
// goroutine hands over one batch at a time, and the cursor is closed only
// after it has returned, since a cursor has one reader.
type batchSource struct {
	cur   runs.Cursor
	poll  pollingCursor // nil: the cursor is read by the goroutine only
	limit int
	next  int // how many events to ask for next
	// behind reports that the last batch was full: the stream is
	// behind its run (a replay, a client catching up), and the next
	// batch is likely there at once.
	behind bool

	batches chan batch // from the goroutine, once started
}

func newBatchSource(cur runs.Cursor, limit int) *batchSource {
	src := &batchSource{cur: cur, limit: limit, next: limit}
	src.poll, _ = cur.(pollingCursor)
	return src
}

// take returns the events available now without waiting, if the cursor
// can tell; otherwise, or with none, the channel to wait on: wake, closed
// when it is worth polling again, or batches, which hands over a batch.
func (src *batchSource) take(ctx context.Context) (evs []runs.StoredEvent, wake <-chan struct{}, batches <-chan batch, err error) {
	if src.poll != nil && src.batches == nil {
		evs, wake, err := src.poll.Poll(src.next)
		if len(evs) > 0 {
			src.behind = len(evs) >= src.next
		}
		if len(evs) > 0 || wake != nil || err != nil {
			src.next = batchLen(evs, src.limit)
			return evs, wake, nil, err
		}
	}
	if src.batches == nil {
		src.start(ctx)
	}
	return nil, nil, src.batches, nil
}

// start runs the goroutine that reads the cursor with Next until ctx ends
// or the cursor fails.
func (src *batchSource) start(ctx context.Context) {
	src.batches = make(chan batch)
	go func() {
		defer close(src.batches)
		n := src.next
		for {
			evs, err := src.cur.Next(ctx, n)
			full := len(evs) >= n
			n = batchLen(evs, src.limit)
			select {
			case src.batches <- batch{events: evs, full: full, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
}

// close waits for the goroutine, if any (ctx must have ended), and closes
// the cursor.
func (src *batchSource) close() {
	if src.batches != nil {
		for range src.batches {
		}
	}
	_ = src.cur.Close()
}

// serve streams cur to the client until run.completed, ctx ends, a write
// fails or the cursor fails.
func (st *stream) serve(ctx context.Context, cancel context.CancelFunc, cur runs.Cursor, cfg *Config) error {
	src := newBatchSource(cur, cfg.BatchSize)
	defer func() {
		cancel()
		src.close()
		st.releaseBuf()
	}()

	h := st.w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	var ping <-chan time.Time
	if st.ndjson {
		h.Set("Content-Type", contentTypeNDJSON)
		st.w.WriteHeader(http.StatusOK)
		if err := st.write(nil); err != nil {
			return err
		}
	} else {
		h.Set("Content-Type", contentTypeSSE)
		st.w.WriteHeader(http.StatusOK)
		retry := fmt.Appendf(nil, "retry: %d\n\n", cfg.ReconnectDelay.Milliseconds())
		if err := st.write(retry); err != nil {
			return err
		}
		t := time.NewTicker(cfg.PingInterval)
		defer t.Stop()
		ping = t.C
	}

	// pending is the rest of a batch that did not fit in one write; it
	// goes out, a write at a time, before the next batch is taken.
	var pending []runs.StoredEvent
	for {
		var wake <-chan struct{}
		var in <-chan batch
		if len(pending) == 0 {
			evs, w, b, err := src.take(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("read events: %w", err)
			}
			pending, wake, in = evs, w, b
		}
		if len(pending) > 0 {
			// Something to write: the drain and the client's going are
			// still seen first, as a wait would see them.
			select {
			case <-ctx.Done():
				return nil
			case <-cfg.Draining:
				return st.drained()
			default:
			}
			var done bool
			var err error
			if pending, done, err = st.writeBatch(pending); err != nil || done {
				return err
			}
			continue
		}
		if !src.behind {
			st.releaseBuf() // caught up, waiting: see writeBufs
		}
		select {
		case <-ctx.Done():
			return nil
		case <-cfg.Draining:
			return st.drained()
		case <-ping:
			if err := st.write([]byte(": ping\n\n")); err != nil {
				return err
			}
		case <-wake:
		case b, ok := <-in:
			if !ok {
				return nil
			}
			if b.err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("read events: %w", b.err)
			}
			pending, src.behind = b.events, b.full
			var done bool
			var err error
			if pending, done, err = st.writeBatch(pending); err != nil || done {
				return err
			}
		}
	}
}

// drained tells the client that the replica is going away, so that it
// comes back at once and resumes on another one.
func (st *stream) drained() error {
	if !st.ndjson {
		hint := fmt.Appendf(nil, ": the gateway is shutting down; reconnect with Last-Event-ID\nretry: %d\n\n",
			drainReconnectDelay.Milliseconds())
		if err := st.write(hint); err != nil {
			return err
		}
	}
	return errDrained
}

// writeBatch writes as much of evs as one write holds and returns the
// rest; done reports that run.completed was written (or skipped as
// already seen), which ends the stream.
func (st *stream) writeBatch(evs []runs.StoredEvent) (rest []runs.StoredEvent, done bool, err error) {
	rest, done = st.encode(evs)
	if len(st.buf) > 0 {
		if err := st.write(st.buf); err != nil {
			return nil, false, err
		}
	}
	// The buffer is kept for the next batch, however large it grew: a
	// stream that is behind (a replay, a client catching up) writes
	// batch after batch of about the same size. It is let go once the
	// stream has caught up and waits (see writeBufs).
	return rest, done, nil
}

// errDrained ends a stream because the gateway is shutting down.
var errDrained = errors.New("stream ended: the gateway is shutting down")

// Bounds of one client's memory: what a stream holds is its write buffer,
// the rest of the batch being written and the next batch, read ahead.
const (
	// maxBatchBytes bounds one write: events are added to it while it
	// holds less, so a write is at most this or one event, whichever is
	// larger. A client that reads slowly (or not at all, until its write
	// deadline) then holds this much, not BatchSize events' worth: 64 MiB
	// of 256 KiB events.
	maxBatchBytes = runs.ReaderStepBytes
	// maxPooledBytes is the largest write buffer kept in writeBufs: a
	// steady stream's batches and a lagging one's fit in it, a replay's
	// megabyte does not.
	maxPooledBytes = 64 << 10
	// eventOverhead is about what the SSE framing adds to an event's
	// envelope: its id, event and data fields.
	eventOverhead = 64
)

// batchLen is how many events to ask the cursor for after it gave evs: at
// most limit, and no more than maxBatchBytes of events as big as the largest
// in evs, so that a stream of big events does not read far ahead of what
// it can write.
func batchLen(evs []runs.StoredEvent, limit int) int {
	largest := 0
	for _, ev := range evs {
		largest = max(largest, len(ev.JSON)+eventOverhead)
	}
	if largest == 0 {
		return limit
	}
	return min(limit, max(1, maxBatchBytes/largest))
}

// encode puts the events of evs newer than st.last into st.buf, up to
// maxBatchBytes, and returns the events that did not fit, to encode next.
// done reports that run.completed was among those encoded; nothing after
// it is written. A run.completed at or before st.last (the client resumed
// past it) is not written, and still ends the stream.
func (st *stream) encode(evs []runs.StoredEvent) (rest []runs.StoredEvent, done bool) {
	if st.agui != nil {
		return st.agui.encode(st, evs)
	}
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
	st.buf = slices.Grow(st.takeBuf(), size)
	for i, ev := range evs {
		if ev.Seq <= st.last {
			if ev.Type == runs.EventRunCompleted {
				return nil, true
			}
			continue
		}
		if len(st.buf) > 0 && len(st.buf)+len(ev.JSON)+eventOverhead > maxBatchBytes {
			// A copy, so that the events written here are not kept
			// alive by the rest's backing array.
			return slices.Clone(evs[i:]), false
		}
		if st.ndjson {
			st.buf = appendNDJSON(st.buf, ev)
		} else {
			st.buf = appendSSE(st.buf, ev)
		}
		st.last = ev.Seq
		if ev.Type == runs.EventRunCompleted {
			return nil, true
		}
	}
	return nil, false
}

// writeBufs holds the write buffers of streams that wait, caught up, for
// streams that have events to write. A stream that is behind (a replay,
// a client catching up) keeps its buffer from batch to batch; one that
// has caught up gives it back before it waits. With a thousand clients
// of a busy run, each waking several hundred times a second a few dozen
// events behind, a buffer made for each write and dropped at each wait
// was, with the fan-out's batches, most of what the gateway allocated,
// and the collection it drove about a quarter of its CPU. Pooled, a
// thousand waiting clients hold no buffer at all.
var writeBufs = sync.Pool{New: func() any { return new([]byte) }}

// takeBuf returns st.buf emptied, from writeBufs when the stream has none.
func (st *stream) takeBuf() []byte {
	if st.buf == nil {
		st.bufBox = writeBufs.Get().(*[]byte)
		st.buf = *st.bufBox
	}
	return st.buf[:0]
}

// releaseBuf gives the stream's write buffer back to writeBufs, unless it
// is larger than maxPooledBytes, and leaves the stream without one.
func (st *stream) releaseBuf() {
	if st.bufBox != nil && cap(st.buf) <= maxPooledBytes {
		*st.bufBox = st.buf[:0]
		writeBufs.Put(st.bufBox)
	}
	st.buf, st.bufBox = nil, nil
}

// write sends p (possibly nothing) and flushes, within the write timeout.
// A client that does not take it in time gets a clientError and is
// dropped.
//
// The connection's deadline moves only when less than the write timeout
// is left before it, and then to one and a half timeouts ahead: each write
// has at least the timeout and at most half as long again, and a stream
// that writes a thousand times a second moves it a few times a minute
// rather than at every write. Moving it was 7% of the gateway's CPU with
// a thousand clients on one run.
func (st *stream) write(p []byte) error {
	if now := time.Now(); st.deadline.Sub(now) < st.timeout {
		st.deadline = now.Add(st.timeout + st.timeout/2)
		if err := st.rc.SetWriteDeadline(st.deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return &clientError{err}
		}
	}
	if len(p) > 0 {
		if _, err := st.w.Write(p); err != nil {
			return &clientError{err}
		}
	}
	if err := st.rc.Flush(); err != nil {
		return &clientError{err}
	}
	return nil
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

// resumeAfter returns the seq to stream after: the larger of the
// Last-Event-ID header and ?after=N, 0 when neither is given. The larger
// wins because an EventSource reconnects to the same URL, ?after included,
// with the Last-Event-ID it reached since, and must not get again what it
// already has.
func resumeAfter(r *http.Request) (uint64, error) {
	var after uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, ok := parseSeq(v)
		if !ok {
			return 0, invalidField("Last-Event-ID", "must be an event id, a decimal integer")
		}
		after = n
	}
	q := r.URL.Query()["after"]
	if len(q) > 1 {
		return 0, invalidField("after", "appears more than once")
	}
	if len(q) == 1 && q[0] != "" {
		n, ok := parseSeq(q[0])
		if !ok {
			return 0, invalidField("after", "must be an event id, a decimal integer")
		}
		after = max(after, n)
	}
	return after, nil
}

// parseSeq parses an event id: decimal digits only, within uint64.
func parseSeq(s string) (uint64, bool) {
	if !isDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// prefersNDJSON reports whether the Accept headers rank
// application/x-ndjson above text/event-stream. Anything else, including
// no Accept at all, gets SSE.
func prefersNDJSON(accept []string) bool {
	sse, nd := -1.0, -1.0
	for _, h := range accept {
		for _, part := range strings.Split(h, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(v, 64); err != nil {
					continue
				}
			}
			switch mt {
			case contentTypeSSE:
				sse = max(sse, q)
			case contentTypeNDJSON:
				nd = max(nd, q)
			}
		}
	}
	return nd > 0 && nd > sse
}

// draining reports whether the gateway has begun to shut down.
func (s *server) draining() bool {
	select {
	case <-s.cfg.Draining:
		return true
	default:
		return false
	}
}
