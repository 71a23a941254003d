package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrJetStreamDown is what Health and RestartJetStream report about an
// embedded server whose JetStream is off.
var ErrJetStreamDown = errors.New("embedded nats: jetstream is disabled")

// ErrRestarting is what Health reports while RestartJetStream replaces the
// server.
var ErrRestarting = errors.New("embedded nats: restarting its jetstream")

// Health reports whether the embedded server's JetStream can still store
// what it is sent. It returns nil, ErrRestarting, an error wrapping
// ErrJetStreamDown, or an error naming every stream that met a write error.
//
// Ping cannot tell: nats-server 2.15.2, not clustered, meets a failed write
// (ENOSPC above all) by logging "critical write error" and marking the
// stream with a write error that never clears. From then on it stores
// nothing on that stream and answers no publish to it, so every write times
// out, while JetStream stays enabled and answers account info. The mark
// outlives the full disk: only reloading the stream from its files, which
// RestartJetStream does, clears it. The server's own health check
// (Healthz) does list marked streams, and Health reads it.
func (e *Embedded) Health() error {
	if !e.restart.TryRLock() {
		// The old server, shutting down, has let go of its streams and
		// would name each as "could not be recovered".
		return ErrRestarting
	}
	defer e.restart.RUnlock()
	srv := e.server()
	if !srv.JetStreamEnabled() {
		return ErrJetStreamDown
	}
	h := healthz(srv)
	if len(h.Errors) == 0 && (h.Status == "ok" || h.Status == "") {
		return nil
	}
	why := make([]string, 0, len(h.Errors)+1)
	for _, he := range h.Errors {
		why = append(why, he.Error)
	}
	if len(why) == 0 {
		why = append(why, h.Error)
	}
	return fmt.Errorf("embedded nats: %s", strings.Join(why, "; "))
}

// healthz is the server's own health check, asked again when it says the
// server is not ready although it is. nats-server 2.15.2 waits for an
// in-process server's startup with a select between "startup complete"
// and a 1 ms timer; on a busy machine both are ready by the time the
// select runs, it picks one at random, and a server that started long
// ago reads as "failed to be ready for connections".
func healthz(srv *server.Server) *server.HealthStatus {
	opts := &server.HealthzOptions{Details: true}
	h := srv.Healthz(opts)
	for try := 0; try < 5 && strings.Contains(h.Error, "startup did not complete") && srv.ReadyForConnections(readyTimeout); try++ {
		h = srv.Healthz(opts)
	}
	return h
}

// RestartJetStream replaces the embedded server with a new one on the same
// directory and JetStream limits, which reloads every stream and bucket
// from its files and clears the write errors Health reports. Data that was
// stored stays; a write that failed stays lost.
//
// The connections made by Connect reconnect to the new server by
// themselves, and stores opened on them go on working without being opened
// again. Requests made during the restart, which takes a moment on a small
// store, fail and may be retried; an open cursor's ordered consumer is made
// again from where the cursor was, missing nothing.
//
// The restart needs room on the disk for the streams' index files: call it
// once space is back. It must not be called concurrently with itself, and
// it fails with ErrJetStreamDown when the running server has JetStream
// off.
func (e *Embedded) RestartJetStream() error {
	old := e.server()
	limits := old.JetStreamConfig()
	if limits == nil && old.Running() {
		return fmt.Errorf("restart jetstream: %w", ErrJetStreamDown)
	}
	if limits == nil {
		// A restart that failed left no server: the last one's limits.
		limits = &e.limits
	}
	// The whole server is replaced, not only its JetStream: re-enabling
	// JetStream on a running server races with the API requests still
	// arriving on the old one's subscriptions (nats-server 2.15.2's
	// setJetStreamExportSubs and apiDispatch, seen by the race
	// detector).
	opts := e.opts.Clone()
	// The limit JetStream derived at start from the free space then (75%
	// of it) is kept: deriving it again now, on a disk that was just full,
	// would set it below what the streams already hold and refuse every
	// write as "insufficient resources".
	opts.JetStreamMaxStore, opts.JetStreamMaxMemory = limits.MaxStore, limits.MaxMemory
	e.limits = *limits
	e.restart.Lock()
	defer e.restart.Unlock()
	old.Shutdown()
	old.WaitForShutdown()
	srv, err := startServer(opts, e.log)
	if err != nil {
		// Nothing runs now: the connections keep trying, and a later
		// restart may succeed.
		return fmt.Errorf("restart jetstream: %w", err)
	}
	e.mu.Lock()
	e.srv = srv
	e.mu.Unlock()
	return nil
}
