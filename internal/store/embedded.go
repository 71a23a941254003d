package store

import (
	"fmt"
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
type Embedded struct {
	srv *server.Server

	mu    sync.Mutex
	conns []*nats.Conn
}

// StartEmbedded starts a NATS server with JetStream, keeping its files under
// dir (created if missing), and waits until it accepts connections. The
// server logs only through log.
func StartEmbedded(dir string, log *zap.Logger) (*Embedded, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	srv, err := server.NewServer(&server.Options{
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
	})
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
	return &Embedded{srv: srv}, nil
}

// Connect returns a new client connection to the server, over an in-process
// pipe. Shutdown closes it if the caller has not.
func (e *Embedded) Connect() (*nats.Conn, error) {
	nc, err := nats.Connect("", nats.InProcessServer(e.srv), nats.Name("agentgate"))
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
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
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
