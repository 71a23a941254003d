// Package proxytest is a logging forward proxy for the tests that check
// whether an agent CLI, the commands its tools run and its MCP clients go
// through the proxy their environment names (HTTP_PROXY, HTTPS_PROXY,
// ALL_PROXY). It forwards absolute-form requests and tunnels CONNECT,
// records every request it carries (in a tunnel, the plain HTTP request
// lines it sees pass), and dials loopback addresses only: anything else
// is refused with 403 and recorded as refused, so a test never reaches
// past the machine.
package proxytest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Request is one request the proxy carried or refused.
type Request struct {
	// Method is the request's, CONNECT for a tunnel.
	Method string
	// Target is the host:port it was for.
	Target string
	// Path is the request's path; "" for CONNECT itself.
	Path string
	// Tunnel is true for a request seen inside a CONNECT tunnel.
	Tunnel bool
	// Refused is true when the proxy would not dial Target.
	Refused bool
}

func (r Request) String() string {
	s := r.Method + " " + r.Target + r.Path
	if r.Tunnel {
		s += " (tunnelled)"
	}
	if r.Refused {
		s += " (refused)"
	}
	return s
}

// Proxy is a running proxy; Start closes it when the test ends.
type Proxy struct {
	// URL is the proxy's, for HTTP_PROXY: http://127.0.0.1:<port>.
	URL string

	srv     *http.Server
	forward *httputil.ReverseProxy
	wg      sync.WaitGroup // tunnels

	mu       sync.Mutex
	requests []Request
	conns    map[net.Conn]bool
	closed   bool
}

// Start starts a proxy on 127.0.0.1.
func Start(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), conns: map[net.Conn]bool{}}
	p.forward = &httputil.ReverseProxy{
		Rewrite:       func(*httputil.ProxyRequest) {}, // the outgoing request is the absolute-form one as it came
		Transport:     &http.Transport{DialContext: dialLoopback, Proxy: nil},
		FlushInterval: -1, // model answers are event streams
	}
	p.srv = &http.Server{Handler: p}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = p.srv.Close()
		<-done
		p.closeTunnels()
		p.wg.Wait()
	})
	return p
}

// Env returns the proxy variables, upper and lower case, that point a
// process at p, and NO_PROXY and no_proxy empty.
func (p *Proxy) Env() []string {
	var env []string
	for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, name+"="+p.URL, strings.ToLower(name)+"="+p.URL)
	}
	return append(env, "NO_PROXY=", "no_proxy=")
}

// Requests returns what the proxy carried or refused so far, in order.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

// To returns the requests for target (host:port) with a path, carried
// either way.
func (p *Proxy) To(target string) []Request {
	var out []Request
	for _, r := range p.Requests() {
		if r.Target == target && r.Path != "" && !r.Refused {
			out = append(out, r)
		}
	}
	return out
}

func (p *Proxy) record(r Request) {
	p.mu.Lock()
	p.requests = append(p.requests, r)
	p.mu.Unlock()
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() {
		http.Error(w, "proxytest: not an absolute-form request", http.StatusBadRequest)
		return
	}
	target := hostPort(r.URL.Host, r.URL.Scheme)
	req := Request{Method: r.Method, Target: target, Path: r.URL.RequestURI()}
	if !isLoopback(target) {
		req.Refused = true
		p.record(req)
		http.Error(w, "proxytest: only loopback targets", http.StatusForbidden)
		return
	}
	p.record(req)
	p.forward.ServeHTTP(w, r)
}

// connect tunnels a CONNECT to a loopback target.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	target := hostPort(r.Host, "https")
	if !isLoopback(target) {
		p.record(Request{Method: r.Method, Target: target, Refused: true})
		http.Error(w, "proxytest: only loopback targets", http.StatusForbidden)
		return
	}
	p.record(Request{Method: r.Method, Target: target})
	up, err := dialLoopback(r.Context(), "tcp", target)
	if err != nil {
		http.Error(w, "proxytest: "+err.Error(), http.StatusBadGateway)
		return
	}
	down, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if !p.track(up, down) {
		return
	}
	_, _ = down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	p.wg.Add(2)
	go p.pipe(up, io.MultiReader(buf.Reader, down), &sniffer{p: p, target: target})
	go p.pipe(down, up, io.Discard)
}

// pipe copies from to to, teeing what it copies into seen, and closes
// both ends when either ends.
func (p *Proxy) pipe(to net.Conn, from io.Reader, seen io.Writer) {
	defer p.wg.Done()
	_, _ = io.Copy(to, io.TeeReader(from, seen))
	p.untrack(to)
}

// track keeps the tunnel's connections for closing; false when the
// proxy is closed already (and both were closed).
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) closeTunnels() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// requestLine matches a plain HTTP/1 request line.
var requestLine = regexp.MustCompile(`(?m)^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (/\S*) HTTP/1\.[01]\r?$`)

// sniffer records the request lines a tunnel's client sends. A line cut
// between two reads is missed; a client writes a request's head in one.
type sniffer struct {
	p      *Proxy
	target string
}

func (s *sniffer) Write(b []byte) (int, error) {
	for _, m := range requestLine.FindAllSubmatch(b, -1) {
		s.p.record(Request{Method: string(m[1]), Target: s.target, Path: string(m[2]), Tunnel: true})
	}
	return len(b), nil
}

// dialLoopback dials addr when it is a loopback address, and refuses
// anything else without resolving it.
func dialLoopback(ctx context.Context, network, addr string) (net.Conn, error) {
	if !isLoopback(addr) {
		return nil, fmt.Errorf("proxytest dials loopback addresses only, not %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// isLoopback says whether hostport's host is a loopback IP address or
// "localhost".
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostPort adds the scheme's port to host when it has none.
func hostPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	port := "443"
	if scheme == "http" {
		port = "80"
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}

// StartSink starts a server on 127.0.0.1 that answers every request with
// "sink": the target of a tool's command in a test, which the proxy
// records when the command goes through it. It returns the sink's URL.
func StartSink(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "sink")
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// Target returns the host:port of an http URL such as StartSink's.
func Target(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return hostPort(u.Host, u.Scheme)
}

// Unexpected returns the requests for targets not in allowed: what a CLI
// reached beyond what it was meant to.
func (p *Proxy) Unexpected(allowed ...string) []Request {
	var out []Request
	for _, r := range p.Requests() {
		if !slices.Contains(allowed, r.Target) {
			out = append(out, r)
		}
	}
	return out
}
