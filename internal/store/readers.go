package store

import (
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// The server cuts a client whose pending outbound bytes pass its
// max_pending (64 MiB by default), as a slow consumer. Cursors pull events
// in bulk: 50 cursors pulling 64 events of 64 KiB each are 200 MiB in
// flight toward one connection, and the cut took the store's writes with
// it. So cursors read on connections of their own, apart from the one
// that writes, each pull is bounded in bytes as well as in events, and a
// connection carries at most as many cursors as its pulls fit in half of
// max_pending.
const (
	serverMaxPending = 64 << 20
	// pullOverhead is what a pulled message costs the server beyond its
	// headers and payload: its subject and ack reply subject.
	pullOverhead = 1 << 10
)

// readers hands out the connections cursors read on, dialing them as
// needed with the options of the store's own connection.
type readers struct {
	base    *nats.Conn
	timeout time.Duration
	log     *zap.Logger

	mu     sync.Mutex
	conns  []*reader
	closed bool
}

// reader is one connection that cursors read on.
type reader struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	cursors int
}

func newReaders(base *nats.Conn, timeout time.Duration, log *zap.Logger) *readers {
	return &readers{base: base, timeout: timeout, log: log}
}

// pullBytes bounds one cursor's pull: one message of the largest size the
// server takes must fit, or the cursor would stall on it.
func (r *readers) pullBytes() int {
	return int(r.base.MaxPayload()) + pullOverhead
}

// perConn is how many cursors share one connection.
func (r *readers) perConn() int {
	return max(1, serverMaxPending/2/r.pullBytes())
}

// acquire returns a connection with room for one more cursor.
func (r *readers) acquire() (*reader, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nats.ErrConnectionClosed
	}
	limit := r.perConn()
	for _, rd := range r.conns {
		if rd.cursors < limit && !rd.nc.IsClosed() {
			rd.cursors++
			return rd, nil
		}
	}
	opts := r.base.Opts
	opts.Name += " cursors"
	// The callbacks of the store's connection are its owner's; these
	// connections are the store's.
	opts.ClosedCB, opts.ConnectedCB, opts.DisconnectedCB, opts.DisconnectedErrCB, opts.ReconnectedCB = nil, nil, nil, nil, nil
	opts.MaxReconnect = -1
	opts.DisconnectedErrCB = func(_ *nats.Conn, err error) {
		if err != nil {
			r.log.Warn("cursor connection lost", zap.Error(err))
		}
	}
	nc, err := opts.Connect()
	if err != nil {
		return nil, fmt.Errorf("dial a cursor connection: %w", err)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(r.timeout))
	if err != nil {
		nc.Close()
		return nil, err
	}
	rd := &reader{nc: nc, js: js, cursors: 1}
	r.conns = append(r.conns, rd)
	return rd, nil
}

// release gives back a cursor's place. A connection left without cursors
// is closed, but for the first, kept for the next cursor.
func (r *readers) release(rd *reader) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rd.cursors--
	if rd.cursors > 0 || r.closed || len(r.conns) == 0 || r.conns[0] == rd {
		return
	}
	for i, c := range r.conns {
		if c == rd {
			r.conns = append(r.conns[:i], r.conns[i+1:]...)
			rd.nc.Close()
			return
		}
	}
}

// close closes every connection; acquire fails after it.
func (r *readers) close() {
	r.mu.Lock()
	conns := r.conns
	r.conns, r.closed = nil, true
	r.mu.Unlock()
	for _, rd := range conns {
		rd.nc.Close()
	}
}
