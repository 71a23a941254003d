package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// maxEventBytes bounds one line and one event's data. The gateway cuts
// each text of an event at 256 KiB; an envelope with several of them
// (run.completed with its result and diff) stays far below this.
const maxEventBytes = 16 << 20

// byteOrderMark is UTF-8's, which may begin a stream and is not part of it.
var byteOrderMark = []byte("\xEF\xBB\xBF")

// errEventTooLarge is a line or an event larger than the reader's bound.
var errEventTooLarge = errors.New("server-sent event larger than the bound")

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	// ID is the stream's last event ID when the event was dispatched: the
	// event's own id field, or the last one before it.
	ID string
	// Type is the event field; empty means the default type, "message".
	Type string
	// Data is the event's data lines, joined by "\n".
	Data []byte
}

// sseReader parses a text/event-stream as the HTML standard's
// EventSource does: lines end in CRLF, LF or CR; a line starting with ':'
// is a comment; an empty line dispatches the event; a field without a
// colon has an empty value; one leading space of a value is dropped; an
// id with a NUL is ignored; retry takes ASCII digits only; an event left
// incomplete at the end of the stream is dropped. Lines and events are
// bounded by max bytes.
type sseReader struct {
	r   *bufio.Reader
	max int

	line      []byte
	pendingCR bool // the last line ended in CR: a LF right after it belongs to it
	began     bool // the start was checked for a byte order mark

	lastID   string
	typ      []byte
	data     []byte
	hasData  bool
	retry    time.Duration
	hasRetry bool
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Retry returns the last retry field of the stream, if it had one.
func (s *sseReader) Retry() (time.Duration, bool) { return s.retry, s.hasRetry }

// Next returns the next event. At the end of the stream it returns io.EOF
// (an incomplete event is dropped), and any other read error as it is.
func (s *sseReader) Next() (sseEvent, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if ev, ok := s.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "event":
			s.typ = append(s.typ[:0], value...)
		case "data":
			if len(s.data)+len(value)+1 > s.max {
				return sseEvent{}, errEventTooLarge
			}
			if s.hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			s.hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.lastID = string(value)
			}
		case "retry":
			if ms, ok := asciiDigits(value); ok {
				s.retry, s.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
}

// dispatch ends the event being read; one without data is not dispatched.
func (s *sseReader) dispatch() (sseEvent, bool) {
	defer func() {
		s.typ, s.data, s.hasData = s.typ[:0], nil, false
	}()
	if !s.hasData {
		return sseEvent{}, false
	}
	// data is handed over and not reused: the caller may keep it.
	return sseEvent{ID: s.lastID, Type: string(s.typ), Data: s.data}, true
}

// readLine returns the next line without its end, valid until the next
// call.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	if !s.began {
		// The shortest event that dispatches, "data\n\n", is longer than
		// a byte order mark: waiting for three bytes delays none.
		s.began = true
		b, err := s.r.Peek(len(byteOrderMark))
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if bytes.Equal(b, byteOrderMark) {
			_, _ = s.r.Discard(len(byteOrderMark))
		}
	}
	for {
		if _, err := s.r.Peek(1); err != nil {
			if errors.Is(err, io.EOF) {
				// A line that the stream ends in the middle of is no
				// line: the event it belongs to is incomplete anyway.
				return nil, io.EOF
			}
			return nil, err
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		if s.pendingCR {
			s.pendingCR = false
			if buf[0] == '\n' {
				_, _ = s.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			if len(s.line)+len(buf) > s.max {
				return nil, errEventTooLarge
			}
			s.line = append(s.line, buf...)
			_, _ = s.r.Discard(len(buf))
			continue
		}
		if len(s.line)+i > s.max {
			return nil, errEventTooLarge
		}
		s.line = append(s.line, buf[:i]...)
		s.pendingCR = buf[i] == '\r'
		_, _ = s.r.Discard(i + 1)
		return s.line, nil
	}
}

// asciiDigits parses a non-empty string of ASCII digits that fits in
// int64 milliseconds' worth of a Duration.
func asciiDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// streamEvent is one event of a run as the follower delivers it: the
// envelope decoded, and its JSON as the gateway sent it.
type streamEvent struct {
	Env envelope
	Raw []byte
}

// follower reads a run's events from GET /v1/runs/{id}/events and
// delivers each exactly once, in order: on a dropped connection, an ended
// stream or a retryable error answer it reconnects with Last-Event-ID set
// to the last seq delivered, after a bounded backoff, and drops whatever
// it gets again at or below that seq.
type follower struct {
	c     *client
	runID string
	// last is the seq of the last event delivered, or the resume point.
	last uint64

	// minDelay and maxDelay bound the wait before a reconnection, which
	// doubles with each failure in a row; giveUp is how long the stream
	// may fail in a row (no event delivered) before follow returns.
	minDelay, maxDelay, giveUp time.Duration
	// idle is how long a connection may send nothing, not even the
	// gateway's ping (every 15 s), before it is taken for dead.
	idle time.Duration

	// deliver gets each new event; an error from it ends follow.
	deliver func(streamEvent) error
	// retrying is told of each reconnection before its wait.
	retrying func(err error, wait time.Duration)
	// sleep waits for d or until ctx ends.
	sleep func(ctx context.Context, d time.Duration) error
	// now is the clock of giveUp.
	now func() time.Time
}

// Defaults of a follower.
const (
	reconnectMinDelay = 250 * time.Millisecond
	reconnectMaxDelay = 5 * time.Second
	reconnectGiveUp   = 2 * time.Minute
	streamIdleTimeout = 45 * time.Second
)

func newFollower(c *client, runID string, after uint64, deliver func(streamEvent) error) *follower {
	return &follower{
		c: c, runID: runID, last: after,
		minDelay: reconnectMinDelay, maxDelay: reconnectMaxDelay, giveUp: reconnectGiveUp, idle: streamIdleTimeout,
		deliver:  deliver,
		retrying: func(error, time.Duration) {},
		sleep:    sleepCtx,
		now:      time.Now,
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errStreamEnded is a stream that ended cleanly before run.completed, as
// a draining gateway's does.
var errStreamEnded = errors.New("the event stream ended before run.completed")

// errIdle is a connection that sent nothing for the idle timeout.
var errIdle = errors.New("the event stream sent nothing, not even a ping, for too long")

// droppedError is a connection that failed while the stream was read.
type droppedError struct{ err error }

func (e *droppedError) Error() string { return "the event stream broke off: " + e.err.Error() }
func (e *droppedError) Unwrap() error { return e.err }

// attempt is the outcome of one connection.
type attempt struct {
	opened    bool      // the gateway answered 200
	delivered int       // new events delivered
	completed *envelope // run.completed, delivered by this connection
	finished  bool      // 204: the run has ended with nothing after the resume point
	err       error
}

// follow streams until run.completed, which it returns, and returns nil,
// nil when the gateway answers 204 (the run ended and nothing follows the
// resume point). Otherwise it returns the context's error, an error that
// retrying cannot mend (an *apiError such as not_found, a malformed
// stream, the deliver function's), a *connectError when the very first
// connection fails, or the last error once the stream has failed for
// giveUp in a row.
func (f *follower) follow(ctx context.Context) (*envelope, error) {
	everOpened := false
	failures := 0
	var failingSince time.Time
	for {
		a := f.connect(ctx)
		if a.completed != nil {
			return a.completed, nil
		}
		if a.finished {
			return nil, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		everOpened = everOpened || a.opened
		var ce *connectError
		if !retryable(a.err) || (!everOpened && errors.As(a.err, &ce)) {
			return nil, a.err
		}
		if a.delivered > 0 || failures == 0 {
			failures, failingSince = 0, f.now()
		}
		failures++
		if f.now().Sub(failingSince) > f.giveUp {
			return nil, fmt.Errorf("gave up on run %s's events after %d failures in a row over %s: %w",
				f.runID, failures-1, f.giveUp, a.err)
		}
		wait := f.backoff(failures, a.err)
		f.retrying(a.err, wait)
		if err := f.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// backoff is the wait before the n-th reconnection in a row: minDelay
// doubled n-1 times, at most maxDelay, or longer when the gateway asked
// for it with Retry-After.
func (f *follower) backoff(n int, err error) time.Duration {
	d := f.minDelay
	for i := 1; i < n && d < f.maxDelay; i++ {
		d *= 2
	}
	d = min(d, f.maxDelay)
	var ae *apiError
	if errors.As(err, &ae) && ae.RetryAfter > d {
		d = min(ae.RetryAfter, 30*time.Second)
	}
	return d
}

// retryable reports whether connecting again may mend err.
func retryable(err error) bool {
	var ae *apiError
	var ce *connectError
	var de *droppedError
	switch {
	case errors.As(err, &ae):
		return ae.retryable()
	case errors.As(err, &ce), errors.As(err, &de), errors.Is(err, errStreamEnded), errors.Is(err, errIdle):
		return true
	}
	return false
}

// connect opens the stream once and reads it until it ends.
func (f *follower) connect(ctx context.Context) (a attempt) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := f.c.request(ctx, http.MethodGet, runPath(f.runID, "events"), nil, nil)
	if err != nil {
		return attempt{err: err}
	}
	req.Header.Set("Accept", "text/event-stream")
	if f.last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(f.last, 10))
	}
	resp, err := f.c.send(req)
	if err != nil {
		return attempt{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return attempt{opened: true, finished: true}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return attempt{err: fmt.Errorf("the gateway answered the event stream with %q, not text/event-stream", resp.Header.Get("Content-Type"))}
	}
	a.opened = true

	// The watchdog: every read that brings bytes pushes it back.
	watchdog := time.AfterFunc(f.idle, func() { cancel(errIdle) })
	defer watchdog.Stop()
	body := &activityReader{r: resp.Body, touch: func() { watchdog.Reset(f.idle) }}
	rd := newSSEReader(body, maxEventBytes)
	for {
		ev, err := rd.Next()
		if err != nil {
			switch {
			case context.Cause(ctx) == errIdle:
				a.err = errIdle
			case ctx.Err() != nil:
				a.err = ctx.Err()
			case errors.Is(err, io.EOF):
				a.err = errStreamEnded
			case errors.Is(err, errEventTooLarge):
				a.err = fmt.Errorf("run %s after event %d: %w", f.runID, f.last, err)
			default:
				a.err = &droppedError{err: err}
			}
			return a
		}
		se, err := decodeEvent(ev)
		if err != nil {
			a.err = err
			return a
		}
		if se.Env.Seq <= f.last {
			continue // sent again after a resume: delivered already
		}
		if err := f.deliver(se); err != nil {
			a.err = err
			return a
		}
		f.last = se.Env.Seq
		a.delivered++
		if se.Env.Type == "run.completed" {
			env := se.Env
			a.completed = &env
			return a
		}
	}
}

// decodeEvent reads one event's envelope. Its seq is the id field (the
// gateway's Last-Event-ID), and must agree with the envelope's.
func decodeEvent(ev sseEvent) (streamEvent, error) {
	var env envelope
	if err := json.Unmarshal(ev.Data, &env); err != nil {
		return streamEvent{}, fmt.Errorf("event %q of the stream is not an envelope: %w", ev.ID, err)
	}
	if id, err := strconv.ParseUint(ev.ID, 10, 64); err == nil && id != env.Seq {
		return streamEvent{}, fmt.Errorf("event id %d carries an envelope of seq %d", id, env.Seq)
	}
	if env.Seq == 0 {
		return streamEvent{}, fmt.Errorf("event %q of the stream has no seq", ev.ID)
	}
	raw := ev.Data
	if bytes.ContainsAny(raw, "\r\n") {
		// The gateway splits an envelope with a line break over data
		// lines; one JSON line is what --json prints.
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err == nil {
			raw = c.Bytes()
		}
	}
	return streamEvent{Env: env, Raw: raw}, nil
}

// activityReader calls touch after every read that brought bytes.
type activityReader struct {
	r     io.Reader
	touch func()
}

func (a *activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.touch()
	}
	return n, err
}
