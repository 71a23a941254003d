package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Defaults of a Proxy's bounds.
const (
	// DefaultDialTimeout bounds resolving and connecting to one target.
	DefaultDialTimeout = 10 * time.Second
	// DefaultHeaderTimeout cuts a client that does not send its request
	// line and headers in time; a tunnel, once open, has no timeout, as
	// agents stream for long.
	DefaultHeaderTimeout = 30 * time.Second
	// DefaultMaxConns bounds a run's open connections to its proxy: an
	// agent and its tools use a few dozen; beyond the bound the proxy
	// answers 503 rather than spend the gateway's descriptors.
	DefaultMaxConns = 256
	// maxHeaderBytes bounds a request's header; agents' requests are small.
	maxHeaderBytes = 64 << 10
	// idleTimeout closes a kept-alive client connection with no request.
	idleTimeout = 2 * time.Minute
	// maxDeniedKept bounds the distinct refused targets remembered per
	// Serve to report each once; beyond it new ones are only logged.
	maxDeniedKept = 1024
)

// Proxy is the egress proxy of runs: each Serve serves one run's
// listener under that run's policy.
type Proxy struct {
	Checker       *Checker
	Log           *zap.Logger
	DialTimeout   time.Duration // default DefaultDialTimeout
	HeaderTimeout time.Duration // default DefaultHeaderTimeout
	MaxConns      int           // default DefaultMaxConns
}

// Serve serves one run's listener until ctx ends or ln is closed, then
// closes ln and every connection it holds, waits for every goroutine it
// started, and returns: nil then, or the listener's error if Accept failed
// otherwise.
//
// It serves HTTP CONNECT (a tunnel, spliced both ways) and absolute-form
// plain HTTP requests (http://host:port/path, forwarded with keep-alive
// and streamed: each write of the response reaches the client at once). A
// refused target gets 403 with a one-line text body saying host, port and
// why; a target that cannot be resolved or reached, 502; any other request
// (origin-form, a bad CONNECT target, an https:// URL), 400; a connection
// beyond MaxConns, 503. denied is called for every refusal, with First
// set the first time a host:port is refused in this Serve (for at most
// 1024 of them: a refusal beyond is not First, and is logged), from the
// refused connection's goroutine: it may be called concurrently, and
// should not block.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener, pol Policy, denied func(Denial)) error {
	s := p.newSession(pol, denied)
	return s.serve(ctx, ln)
}

// Denial is one connection the policy refused.
type Denial struct {
	Host string
	Port int
	// Reason says why, as the 403's body does.
	Reason string
	// First: this host and port were not refused before in this Serve.
	First bool
}

// session is one Serve call's state.
type session struct {
	checker     *Checker
	log         *zap.Logger
	pol         Policy
	dialTimeout time.Duration
	transport   *http.Transport
	lim         *limitListener
	srv         *http.Server

	conns    sync.WaitGroup // the server's connections not yet closed or hijacked
	handlers sync.WaitGroup // handlers running, hijacked connections' included

	mu         sync.Mutex
	tunnelling map[net.Conn]struct{} // both ends of every tunnel
	closed     bool

	deniedMu   sync.Mutex
	denied     func(Denial)
	deniedSeen map[target]struct{}
}

func (p *Proxy) newSession(pol Policy, denied func(Denial)) *session {
	s := &session{
		checker:     p.Checker,
		log:         p.Log,
		pol:         pol,
		dialTimeout: orDefault(p.DialTimeout, DefaultDialTimeout),
		tunnelling:  map[net.Conn]struct{}{},
		denied:      denied,
		deniedSeen:  map[target]struct{}{},
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.checker == nil {
		s.checker = &Checker{}
	}
	s.transport = &http.Transport{
		Proxy:               nil, // never the gateway's own proxy settings
		DialContext:         s.dialChecked,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // pass the client's Accept-Encoding through as it is
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: orDefault(p.HeaderTimeout, DefaultHeaderTimeout),
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         s.connState,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}
	maxConns := p.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	s.lim = &limitListener{max: maxConns, refuseSlot: make(chan struct{}, maxRefusing)}
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (s *session) serve(ctx context.Context, ln net.Listener) error {
	base, cancel := context.WithCancel(ctx)
	defer cancel()
	s.srv.BaseContext = func(net.Listener) context.Context { return base }
	s.lim.Listener = ln
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.lim) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	_ = s.srv.Close() // the listener and every connection not hijacked
	cancel()          // requests being forwarded
	s.closeTunnels()
	if ctx.Err() != nil && err == nil {
		err = <-served
	}
	s.conns.Wait()
	s.handlers.Wait()
	s.transport.CloseIdleConnections()
	s.lim.wait()
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("egress proxy: %w", err)
}

// connState counts the server's connections, so that serve can wait for
// the goroutine of each: StateNew comes from the server's own goroutine
// before it starts the connection's, and never after Serve has returned.
func (s *session) connState(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.conns.Add(1)
	case http.StateHijacked, http.StateClosed:
		s.conns.Done()
	}
}

// ServeHTTP checks each request's target and tunnels or forwards it.
func (s *session) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Counted so that serve waits for it: a handler goes on after its
	// connection is hijacked (a tunnel, an upgraded forward), when the
	// server no longer counts the connection.
	s.handlers.Add(1)
	defer s.handlers.Done()
	t, err := parseTarget(r.Method, r.RequestURI)
	if err == nil && r.Method != http.MethodConnect {
		// net/http read the URL too, and the forwarded request is its
		// reading: refuse one it read otherwise.
		if u, uerr := parseAuthority(r.URL.Host, 80); uerr != nil || u != t {
			err = errors.New("the request target's host is ambiguous")
		}
	}
	if err != nil {
		s.reply(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.dialTimeout)
	d := s.checker.Check(ctx, s.pol, t.host, t.port)
	cancel()
	switch {
	case d.Unresolved:
		s.reply(w, http.StatusBadGateway, "cannot reach "+t.String()+": "+d.Reason)
	case !d.Allowed:
		s.refuse(w, t, d.Reason)
	case r.Method == http.MethodConnect:
		s.tunnel(w, r, t, d.Addr)
	default:
		s.forward(w, r, t, d.Addr)
	}
}

// refuse answers a refused target and reports it, as First the first
// time.
func (s *session) refuse(w http.ResponseWriter, t target, reason string) {
	s.log.Debug("egress refused", zap.Stringer("target", t), zap.String("reason", reason))
	s.reply(w, http.StatusForbidden, "refused "+t.String()+": "+reason)
	s.deniedMu.Lock()
	_, seen := s.deniedSeen[t]
	first := !seen && len(s.deniedSeen) < maxDeniedKept
	if first {
		s.deniedSeen[t] = struct{}{}
	}
	full := !seen && !first
	s.deniedMu.Unlock()
	switch {
	case first:
		s.log.Info("egress refused", zap.Stringer("target", t), zap.String("reason", reason))
	case full:
		s.log.Warn("egress refused, not reported as new: too many distinct refused targets", zap.Stringer("target", t))
	}
	if s.denied != nil {
		s.denied(Denial{Host: t.host, Port: t.port, Reason: reason, First: first})
	}
}

// reply writes a one-line text answer.
func (s *session) reply(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "egress proxy: %s\n", msg)
}

// forward sends a plain HTTP request on to addr, the address checked for
// t, streaming the response back as it comes.
func (s *session) forward(w http.ResponseWriter, r *http.Request, t target, addr netip.AddrPort) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The transport dials the URL's host: make it the checked
			// address, so that nothing resolves t again; the Host
			// header stays the client's.
			pr.Out.URL.Host = addr.String()
			pr.Out.Host = r.Host
		},
		Transport:     s.transport,
		FlushInterval: -1,
		ErrorLog:      zap.NewStdLog(s.log.Named("forward")),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			s.reply(w, http.StatusBadGateway, "cannot reach "+t.String()+": "+err.Error())
		},
	}
	rp.ServeHTTP(w, r)
}

// dialChecked dials an address the transport was given by forward: always
// an address already checked, never a name.
func (s *session) dialChecked(ctx context.Context, network, addr string) (net.Conn, error) {
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return nil, fmt.Errorf("egress proxy: refusing to dial unchecked %q", addr)
	}
	d := net.Dialer{Timeout: s.dialTimeout}
	return d.DialContext(ctx, network, addr)
}
