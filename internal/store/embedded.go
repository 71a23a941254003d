package store

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// readyTimeout bounds how long StartEmbedded waits for the server, which
// includes recovering the JetStream store from disk.
const readyTimeout = 30 * time.Second

// Embedded is a NATS server with JetStream running inside this process. It
// opens no port: clients reach it through in-process pipes made by Connect.
// RestartJetStream replaces the server with a new one on the same files;
// the connections reach whichever runs (Embedded is their
// nats.InProcessConnProvider) and reconnect across the restart.
type Embedded struct {
	opts *server.Options
	log  *zap.Logger
	// limits are the JetStream limits the first server derived, kept
	// across restarts (only RestartJetStream, never concurrently, uses
	// them).
	limits server.JetStreamConfig

	mu    sync.Mutex
	srv   *server.Server
	conns []*nats.Conn
	// restart is held by RestartJetStream while it replaces srv, and
	// read-held by Health while it asks srv: a server shutting down has
	// let go of its streams, and what it says of them is not the store's
	// state.
	restart sync.RWMutex
}

// StartEmbedded starts a NATS server with JetStream, keeping its files under
// dir (created if missing), and waits until it accepts connections. The
// server logs only through log.
func StartEmbedded(dir string, log *zap.Logger) (*Embedded, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	opts := &server.Options{
		ServerName: "agentgate",
		DontListen: true,
		// A queued run's message carries its whole spec, up to the
		// API's 2 MiB body limit; the default 1 MB would refuse the
		// largest prompts.
		MaxPayload: 4 << 20,
		JetStream:  true,
		StoreDir:   dir,
		// The gateway handles signals itself.
		NoSigs: true,
		// Every client is this process, over an in-process pipe: a write
		// the server cannot finish means the process is starved of CPU,
		// not that a consumer is slow. The default 10 s cut the cursors'
		// connection, with 17 MB of big events pending, on a machine at
		// load 25, and every reader on it failed.
		WriteDeadline: 2 * time.Minute,
	}
	srv, err := startServer(opts, log)
	if err != nil {
		return nil, err
	}
	e := &Embedded{opts: opts, log: log, srv: srv}
	if cfg := srv.JetStreamConfig(); cfg != nil {
		e.limits = *cfg
	}
	return e, nil
}

// startServer starts a server with opts and waits until it accepts
// connections.
func startServer(opts *server.Options, log *zap.Logger) (*server.Server, error) {
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	srv.SetLoggerV2(serverLog{log.Named("nats").Sugar()}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("start embedded nats: not ready after %s", readyTimeout)
	}
	return srv, nil
}

// server is the server that runs now.
func (e *Embedded) server() *server.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv
}

// InProcessConn makes a client connection to the server that runs now: a
// connection that reconnects after RestartJetStream finds the new one.
func (e *Embedded) InProcessConn() (net.Conn, error) { return e.server().InProcessConn() }

// reconnectWait is how soon a connection tries again while the server
// restarts; a restart takes a moment on a small store.
const reconnectWait = 50 * time.Millisecond

// Connect returns a new client connection to the server, over an in-process
// pipe. Shutdown closes it if the caller has not.
func (e *Embedded) Connect() (*nats.Conn, error) {
	nc, err := nats.Connect("", nats.InProcessServer(e), nats.Name("agentgate"),
		nats.MaxReconnects(-1), nats.ReconnectWait(reconnectWait), nats.ReconnectJitter(0, 0))
	if err != nil {
		return nil, fmt.Errorf("connect to embedded nats: %w", err)
	}
	e.mu.Lock()
	e.conns = append(e.conns, nc)
	e.mu.Unlock()
	return nc, nil
}

// Shutdown closes the connections made by Connect, stops the server and
// waits until it has stopped and flushed its files.
func (e *Embedded) Shutdown() {
	e.mu.Lock()
	conns := e.conns
	e.conns = nil
	e.mu.Unlock()
	// Close clients first: a client left open would keep trying to
	// reconnect to a server that is gone.
	for _, nc := range conns {
		nc.Close()
	}
	srv := e.server()
	srv.Shutdown()
	srv.WaitForShutdown()
}

// serverLog routes the server's log lines to zap.
type serverLog struct{ l *zap.SugaredLogger }

// Noticef logs at debug: the server's notices are its start-up banner and
// routine state, noise in the gateway's log. A slow consumer is the
// exception: the server has cut a client, which is logged at warn.
func (s serverLog) Noticef(format string, v ...any) {
	if strings.Contains(format, "Slow Consumer") {
		s.l.Warnf(format, v...)
		return
	}
	s.l.Debugf(format, v...)
}
func (s serverLog) Warnf(format string, v ...any)  { s.l.Warnf(format, v...) }
func (s serverLog) Errorf(format string, v ...any) { s.l.Errorf(format, v...) }
func (s serverLog) Debugf(format string, v ...any) { s.l.Debugf(format, v...) }
func (s serverLog) Tracef(format string, v ...any) { s.l.Debugf(format, v...) }

// Fatalf logs at error level and does not exit: the process decides how to
// end, and a server that cannot go on fails its readiness check.
func (s serverLog) Fatalf(format string, v ...any) { s.l.Errorf(format, v...) }
