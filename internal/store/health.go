package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrJetStreamDown is what Health and RestartJetStream report about an
// embedded server whose JetStream is off.
var ErrJetStreamDown = errors.New("embedded nats: jetstream is disabled")

// Health reports whether the embedded server's JetStream can still store
// what it is sent. It returns nil, an error wrapping ErrJetStreamDown, or an
// error naming every stream that met a write error.
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
	if !e.srv.JetStreamEnabled() {
		return ErrJetStreamDown
	}
	h := e.srv.Healthz(&server.HealthzOptions{Details: true})
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

// RestartJetStream stops the embedded server's JetStream and starts it
// again on the same directory and limits, which reloads every stream and
// bucket from its files and clears the write errors Health reports. Data
// that was stored stays; a write that failed stays lost.
//
// The server and its client connections stay up, and stores opened on them
// go on working without being opened again. Requests made during the
// restart, which takes milliseconds on a small store, fail and may be
// retried. An open cursor's consumer is lost with JetStream; the client
// notices by its missed heartbeats and makes a new one from where the cursor
// was, so a cursor stalls for about 10 s and then goes on, missing nothing.
//
// The restart needs room on the disk for the streams' index files: call it
// once space is back. It must not be called concurrently with itself, and
// it fails with ErrJetStreamDown when JetStream is already off, since the
// server no longer says where its files are.
func (e *Embedded) RestartJetStream() error {
	cfg := e.srv.JetStreamConfig()
	if cfg == nil {
		return fmt.Errorf("restart jetstream: %w", ErrJetStreamDown)
	}
	// The server keeps its files in StoreDir/jetstream and adds that last
	// element again to the directory it is given.
	dir := cfg.StoreDir
	if filepath.Base(dir) == server.JetStreamStoreDir {
		dir = filepath.Dir(dir)
	}
	next := &server.JetStreamConfig{
		StoreDir: dir,
		// The limit JetStream derived at start from the free space then
		// (75% of it) is kept: deriving it again now, on a disk that was
		// just full, would set it below what the streams already hold and
		// refuse every write as "insufficient resources".
		MaxStore:     cfg.MaxStore,
		MaxMemory:    cfg.MaxMemory,
		SyncInterval: cfg.SyncInterval,
		SyncAlways:   cfg.SyncAlways,
		Domain:       cfg.Domain,
		UniqueTag:    cfg.UniqueTag,
		Strict:       cfg.Strict,
		CompressOK:   cfg.CompressOK,
	}
	if err := e.srv.ShutdownJetStream(); err != nil {
		return fmt.Errorf("restart jetstream: stop: %w", err)
	}
	if err := e.srv.EnableJetStream(next); err != nil {
		return fmt.Errorf("restart jetstream: start: %w", err)
	}
	return nil
}
