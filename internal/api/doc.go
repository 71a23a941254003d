// Package api is agentgate's HTTP edge: the chi router, the handlers of the
// /v1 REST API and of the event stream (written by internal/api/stream, as
// SSE, NDJSON or AG-UI events), request metrics and logging, and the one
// function that maps errors to an HTTP status and a stable error code.
//
// The package declares what it consumes: Service, implemented by the
// supervisor, and Observer, implemented by internal/metrics. It imports runs
// and nothing of the adapters, the store or the supervisor.
//
// # Requests
//
// A run request is checked syntactically here (types, enums, ranges,
// unknown and repeated fields) and answered with a 400 that names the
// field; everything that needs knowledge of the agents, the workspace or the
// queue is the service's to check, and comes back as a runs sentinel error.
//
// # Event streams
//
// GET /v1/runs/{id}/events pulls from the run's stored log with its own
// cursor (Service.Events) and never subscribes to a publisher: a client that
// stops reading lags only itself. Each batch of events is written as one
// buffer under a write deadline and flushed once, so a stuck client is
// dropped after Config.WriteTimeout and reconnects with Last-Event-ID, on
// any replica, since every replica reads the same log. A stream ends after
// run.completed, or when the request context ends: to end open streams on
// shutdown, cancel the http.Server's BaseContext, and clients reconnect
// elsewhere. The per-batch deadline replaces the server's WriteTimeout for
// the rest of a stream, so a server-wide WriteTimeout does not cut streams.
package api
