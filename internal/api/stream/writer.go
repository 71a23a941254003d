// Package stream writes a run's events to an HTTP client: it reads them
// from the run's cursor in batches, frames each batch with an Encoder
// (server-sent events, JSON lines or AG-UI events), writes it with one
// write and one flush within a deadline, keeps the connection alive while
// it waits, and ends the stream at the run's end, the client's going, a
// failure or the gateway's drain. It frames the HTTP API's responses
// (internal/api), and nothing else.
package stream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Config is what a stream needs of the gateway's configuration.
type Config struct {
	// BatchSize is the most events read from the log and written at once.
	BatchSize int
	// PingInterval is how long a stream waits before it writes a
	// keepalive (for an encoder that has one).
	PingInterval time.Duration
	// ReconnectDelay is how long a client that lost its stream should
	// wait before it comes back (for an encoder that can tell it).
	ReconnectDelay time.Duration
	// WriteTimeout is how long a client may take to accept a write before
	// it is dropped.
	WriteTimeout time.Duration
	// Draining, when set, is closed as the gateway begins to shut down:
	// open streams then end at once, with the encoder's hint to come back.
	Draining <-chan struct{}
}

// drainReconnectDelay is the delay a stream ended by a drain tells its
// client: it should come back at once, to another replica.
const drainReconnectDelay = 250 * time.Millisecond

// ClientError is a failed write: the client is gone or too slow.
type ClientError struct{ err error }

func (e *ClientError) Error() string { return "write to client: " + e.err.Error() }
func (e *ClientError) Unwrap() error { return e.err }

// ErrDrained ends a stream because the gateway is shutting down.
var ErrDrained = errors.New("stream ended: the gateway is shutting down")

// Writer writes one client's events. Only the handler's goroutine uses it.
type Writer struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	enc Encoder
	cfg *Config
	// timeout is cfg.WriteTimeout, and deadline the connection's write
	// deadline, zero before the first write (see write).
	timeout  time.Duration
	deadline time.Time
	// last is the seq of the last event written (or the resume point):
	// nothing at or below it is written again.
	last uint64
	// buf is the write buffer, from writeBufs while the stream writes;
	// bufBox is the pool's box of it, given back with it (see releaseBuf).
	buf    []byte
	bufBox *[]byte
}

// New returns the Writer of a stream to w, framed by enc, of the events
// after the seq after. cfg must outlive the stream.
func New(w http.ResponseWriter, enc Encoder, after uint64, cfg *Config) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w), enc: enc, cfg: cfg, timeout: cfg.WriteTimeout, last: after}
}

// Last is the seq of the last event written, or the resume point if none
// was.
func (st *Writer) Last() uint64 { return st.last }

// Serve streams cur to the client until the encoder completes the stream
// (run.completed), ctx ends, a write fails (a *ClientError) or the cursor
// fails, or the gateway drains (ErrDrained). It calls cancel, and closes
// cur, before it returns.
func (st *Writer) Serve(ctx context.Context, cancel context.CancelFunc, cur runs.Cursor) error {
	src := newBatchSource(cur, st.cfg.BatchSize)
	defer func() {
		cancel()
		src.close()
		st.releaseBuf()
	}()
	if err := st.open(); err != nil {
		return err
	}
	var ticks <-chan time.Time
	ping := st.enc.Ping()
	if ping != nil {
		t := time.NewTicker(st.cfg.PingInterval)
		defer t.Stop()
		ticks = t.C
	}

	// pending is the rest of a batch that did not fit in one write; it
	// goes out, a write at a time, before the next batch is taken.
	var pending []runs.StoredEvent
	for {
		var done bool
		var err error
		if len(pending) == 0 {
			evs, wake, in, err := src.take(ctx)
			if err != nil {
				return readFailed(ctx, err)
			}
			if len(evs) == 0 {
				if !src.behind {
					st.releaseBuf() // caught up, waiting: see writeBufs
				}
				evs, end, err := st.wait(ctx, src, wake, in, ticks, ping)
				if end {
					return err
				}
				if len(evs) == 0 {
					continue // woken, or pinged: look again
				}
				// A batch waited for is written at once.
				if pending, done, err = st.writeBatch(evs); err != nil || done {
					return err
				}
				continue
			}
			pending = evs
		}
		// Something to write: the drain and the client's going are still
		// seen first, as a wait would see them.
		select {
		case <-ctx.Done():
			return nil
		case <-st.cfg.Draining:
			return st.drained()
		default:
		}
		if pending, done, err = st.writeBatch(pending); err != nil || done {
			return err
		}
	}
}

// wait waits for the first of: ctx's end, the drain, the time to ping,
// wake (closed when the cursor may have more) and a batch from in. It
// returns the batch's events, or end with the error the stream ends with,
// if any.
func (st *Writer) wait(ctx context.Context, src *batchSource, wake <-chan struct{}, in <-chan batch,
	ticks <-chan time.Time, ping []byte) (evs []runs.StoredEvent, end bool, err error) {
	select {
	case <-ctx.Done():
		return nil, true, nil
	case <-st.cfg.Draining:
		return nil, true, st.drained()
	case <-ticks:
		if err := st.write(ping); err != nil {
			return nil, true, err
		}
	case <-wake:
	case b, ok := <-in:
		if !ok {
			return nil, true, nil
		}
		if b.err != nil {
			return nil, true, readFailed(ctx, b.err)
		}
		src.behind = b.full
		return b.events, false, nil
	}
	return nil, false, nil
}

// open writes the response's header and the encoder's opening.
func (st *Writer) open() error {
	h := st.w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Content-Type", st.enc.ContentType())
	st.w.WriteHeader(http.StatusOK)
	return st.write(st.enc.Open(st.cfg.ReconnectDelay))
}

// readFailed is the error of a stream whose cursor failed with err: none
// when ctx has ended, as that is what made it fail.
func readFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("read events: %w", err)
}

// drained tells the client that the replica is going away, so that it
// comes back at once and resumes on another one.
func (st *Writer) drained() error {
	if hint := st.enc.Drained(drainReconnectDelay); hint != nil {
		if err := st.write(hint); err != nil {
			return err
		}
	}
	return ErrDrained
}

// writeBatch writes as much of evs as one write holds and returns the
// rest; done reports that the stream is complete (run.completed was
// written, or skipped as already seen).
func (st *Writer) writeBatch(evs []runs.StoredEvent) (rest []runs.StoredEvent, done bool, err error) {
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

// encode puts what one write of evs holds into st.buf, and returns the
// events left for the next write.
func (st *Writer) encode(evs []runs.StoredEvent) (rest []runs.StoredEvent, done bool) {
	st.buf, rest, done = st.enc.Encode(st.takeBuf(), evs, &st.last)
	return rest, done
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
func (st *Writer) takeBuf() []byte {
	if st.buf == nil {
		st.bufBox = writeBufs.Get().(*[]byte)
		st.buf = *st.bufBox
	}
	return st.buf[:0]
}

// releaseBuf gives the stream's write buffer back to writeBufs, unless it
// is larger than maxPooledBytes, and leaves the stream without one.
func (st *Writer) releaseBuf() {
	if st.bufBox != nil && cap(st.buf) <= maxPooledBytes {
		*st.bufBox = st.buf[:0]
		writeBufs.Put(st.bufBox)
	}
	st.buf, st.bufBox = nil, nil
}

// write sends p (possibly nothing) and flushes, within the write timeout.
// A client that does not take it in time gets a ClientError and is
// dropped.
//
// The connection's deadline moves only when less than the write timeout
// is left before it, and then to one and a half timeouts ahead: each write
// has at least the timeout and at most half as long again, and a stream
// that writes a thousand times a second moves it a few times a minute
// rather than at every write. Moving it was 7% of the gateway's CPU with
// a thousand clients on one run.
func (st *Writer) write(p []byte) error {
	if now := time.Now(); st.deadline.Sub(now) < st.timeout {
		st.deadline = now.Add(st.timeout + st.timeout/2)
		if err := st.rc.SetWriteDeadline(st.deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return &ClientError{err}
		}
	}
	if len(p) > 0 {
		if _, err := st.w.Write(p); err != nil {
			return &ClientError{err}
		}
	}
	if err := st.rc.Flush(); err != nil {
		return &ClientError{err}
	}
	return nil
}
