package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/agentgate/agentgate/internal/netguard"
)

// serverOptions are the HTTP edge's timeouts and bounds. A zero field is
// its default.
type serverOptions struct {
	// ReadHeaderTimeout bounds reading a request's headers, from its
	// first byte (or, on a kept-alive connection, from the end of the
	// idle wait). A client that trickles or stalls its headers is cut
	// off when it passes: the slowloris defence.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection. It should exceed a load balancer's own keep-alive
	// timeout (nginx's upstream keepalive_timeout is 60 s), so that the
	// balancer, not the gateway, closes an idle connection and never
	// sends a request on one being closed.
	IdleTimeout time.Duration
	// BodyTimeout is the read deadline set on a request with a body
	// before its handler runs. A handler that reads the body sets its own
	// (the API's readBody does, and lifts it after); one that answers
	// without reading leaves this one, which bounds the server's own
	// read of the unread rest (up to 256 KiB, to keep the connection),
	// a read that otherwise has no deadline at all.
	BodyTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers; more is a 431.
	MaxHeaderBytes int
	// Log receives the server's own errors (accept failures, bad TLS,
	// panics in handlers).
	Log *zap.Logger
}

// Defaults of serverOptions.
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultIdleTimeout       = 2 * time.Minute
	defaultBodyTimeout       = 30 * time.Second
	defaultMaxHeaderBytes    = 32 << 10
)

// newHTTPServer returns the gateway's HTTP server for handler, whose
// requests hang off baseCtx.
//
// It sets no ReadTimeout and no WriteTimeout, on purpose. Either would cut
// every event stream: WriteTimeout is a deadline on the whole response, and
// ReadTimeout a read deadline from the start of the request that outlives
// the headers: once a handler has the request, the server keeps reading
// the connection in the background to notice a client that hangs up, and
// that read failing at ReadTimeout cancels the request's context, which
// ends the stream. Instead each part has its own bound: the headers
// ReadHeaderTimeout, a body BodyTimeout (and the API's readBody), each
// batch of events the SSE writer's write deadline, and the wait between
// requests IdleTimeout.
func newHTTPServer(handler http.Handler, baseCtx context.Context, opts serverOptions) *http.Server {
	opts = opts.withDefaults()
	srv := &http.Server{
		Handler:           bodyDeadline(handler, opts.BodyTimeout),
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	if opts.Log != nil {
		// Warn: under a flood these are many, and none is the gateway's
		// own failure.
		if l, err := zap.NewStdLogAt(opts.Log, zapcore.WarnLevel); err == nil {
			srv.ErrorLog = l
		}
	}
	return srv
}

func (o serverOptions) withDefaults() serverOptions {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = defaultReadHeaderTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = defaultIdleTimeout
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = defaultBodyTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	return o
}

// unreadBodyGrace bounds the server's read of what a handler left of a
// body, after it returned. That read only saves a reconnection: a client
// whose body is still on its way after the answer loses the connection
// instead.
const unreadBodyGrace = 2 * time.Second

// bodyDeadline sets a read deadline of timeout on a request that has a
// body, before h runs, and one of unreadBodyGrace (at most timeout) after:
// once a handler returns, the server reads up to 256 KiB of the body it
// left, to keep the connection, and answers only then. A handler may have
// lifted its own deadline by then (readBody does, for its answer's sake,
// even after the body timed out), which would leave that read, and the
// connection, waiting for ever on a body that stalled. A request without
// a body gets no deadline: its connection is read in the background while
// the handler runs, to notice a client that hangs up, and a deadline there
// would end an event stream.
func bodyDeadline(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		body := &bodyWatch{ReadCloser: r.Body}
		r.Body = body
		aw := &answerWatch{ResponseWriter: w}
		h.ServeHTTP(aw, r)
		_ = rc.SetReadDeadline(time.Now().Add(min(timeout, unreadBodyGrace)))
		if !aw.wrote && body.timedOut.Load() {
			// A read that times out cancels the request's context
			// (net/http takes any read error for a dead connection),
			// and a handler that then takes the client for gone
			// answers nothing, which net/http would send as a 200.
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Connection", "close")
			w.WriteHeader(http.StatusRequestTimeout)
			_, _ = io.WriteString(w, `{"error":{"code":"body_timeout","message":"the request body did not arrive in time"}}`+"\n")
		}
	})
}

// bodyWatch notes whether a read of the request body timed out.
type bodyWatch struct {
	io.ReadCloser
	timedOut atomic.Bool
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		b.timedOut.Store(true)
	}
	return n, err
}

// answerWatch notes whether the handler began its answer. Unwrap keeps
// http.ResponseController working through it.
type answerWatch struct {
	http.ResponseWriter
	wrote bool
}

func (a *answerWatch) WriteHeader(code int) {
	if code >= 200 {
		a.wrote = true
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWatch) Write(p []byte) (int, error) {
	a.wrote = true
	return a.ResponseWriter.Write(p)
}

func (a *answerWatch) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// listenGuarded listens on addr behind a netguard.Listener: at most
// perClient connections per client (0: netguard's default; negative: no
// bound, behind a load balancer that bounds each client itself) and total
// in all (0: derived from the descriptor limit, leaving room for maxRuns
// runs; negative: no bound). It logs the limits in force.
func listenGuarded(addr string, perClient, total, maxRuns int, log *zap.Logger) (*netguard.Listener, error) {
	// The runtime has raised the soft limit already (see RaiseNoFile);
	// this reports it, and raises it where the runtime could not.
	nofile, raised, err := netguard.RaiseNoFile()
	if err != nil {
		log.Warn("descriptor limit not raised", zap.Error(err))
	}
	if total == 0 {
		total = netguard.DefaultTotal(nofile, maxRuns)
	}
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	ln := netguard.Listen(inner, netguard.Options{PerClient: perClient, Total: total})
	pc, tc := ln.Bounds()
	log.Info("connections bounded", zap.Int("per_client", pc), zap.Int("total", tc),
		zap.Uint64("nofile", nofile), zap.Bool("nofile_raised", raised))
	return ln, nil
}

// redactURL returns u with its credentials replaced by "xxxxx", for logs
// and errors: a NATS URL may carry a user and password, or a token as the
// user. A list of URLs (NATS takes them comma-separated) is redacted URL by
// URL. One that does not parse, or parses with an "@" that is not in its
// userinfo (a password with a raw "/" in it), loses everything between
// "://" and its last "@".
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, part := range parts {
		parts[i] = redactOne(part)
	}
	return strings.Join(parts, ",")
}

func redactOne(u string) string {
	p, err := url.Parse(u)
	if err == nil && p.User != nil && !strings.Contains(p.Host+p.RawPath+p.Path+p.RawQuery+p.Fragment, "@") {
		// The user name stays when there is a password to hide, unless
		// it holds an "@": then the userinfo split is a guess (the "@" of
		// a token, or of a host, was taken for its end) and all of it goes.
		if pw, _ := p.User.Password(); pw != "" && !strings.Contains(p.User.Username(), "@") {
			return p.Redacted()
		}
		p.User = url.User("xxxxx")
		return p.String()
	}
	i := strings.Index(u, "://")
	if i < 0 {
		if at := strings.LastIndex(u, "@"); at >= 0 {
			return "xxxxx" + u[at:]
		}
		return u
	}
	if at := strings.LastIndex(u[i+3:], "@"); at >= 0 {
		return u[:i+3] + "xxxxx" + u[i+3+at:]
	}
	return u
}
