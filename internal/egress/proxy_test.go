package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ioDeadline bounds a test's reads and writes, far above what a loaded
// machine needs: reaching it is a failure, never the expected path.
const ioDeadline = 30 * time.Second

// waitFor polls cond until it holds, failing the test after ioDeadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deniedLog records the denied calls of a Serve: calls the first of each
// target, all every one.
type deniedLog struct {
	mu    sync.Mutex
	calls []string
	all   int
}

func (d *deniedLog) record(r Denial) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all++
	if r.First {
		d.calls = append(d.calls, net.JoinHostPort(r.Host, strconv.Itoa(r.Port)))
	}
}

func (d *deniedLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.all
}

func (d *deniedLog) get() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

// runningProxy is a Serve under way on 127.0.0.1.
type runningProxy struct {
	addr   string
	denied *deniedLog
	stop   func() error // cancels Serve and returns what it returned
}

func startProxy(t *testing.T, p *Proxy, pol Policy) *runningProxy {
	t.Helper()
	if p.Log == nil {
		p.Log = zaptest.NewLogger(t)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rp := &runningProxy{addr: ln.Addr().String(), denied: &deniedLog{}}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, ln, pol, rp.denied.record) }()
	var once sync.Once
	var serveErr error
	rp.stop = func() error {
		once.Do(func() {
			cancel()
			serveErr = <-served
		})
		return serveErr
	}
	t.Cleanup(func() { _ = rp.stop() })
	return rp
}

// dial opens a raw connection to the proxy with the test's deadline.
func (rp *runningProxy) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", rp.addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(ioDeadline))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// request writes a raw request and reads the response's head; the body is
// left in br.
func request(t *testing.T, c net.Conn, raw string) (*http.Response, *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", raw, err)
	}
	return resp, br
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// connect sends a CONNECT for target and returns the answer.
func connect(t *testing.T, c net.Conn, target, early string) (*http.Response, *bufio.Reader) {
	t.Helper()
	return request(t, c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"+early)
}

// echoServer echoes each connection until EOF, then closes it, and counts
// the connections it accepted.
type echoServer struct {
	ln       net.Listener
	accepted chan struct{}
	wg       sync.WaitGroup
}

func startEcho(t *testing.T, addr string) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln, accepted: make(chan struct{}, 100)}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted <- struct{}{}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.wg.Wait()
	})
	return e
}

func (e *echoServer) port() int { return e.ln.Addr().(*net.TCPAddr).Port }

// startOrigin serves h on 127.0.0.1 and returns its port.
func startOrigin(t *testing.T, h http.HandlerFunc) int {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// originPolicy trusts origin.test, which the returned checker resolves to
// 127.0.0.1.
func originPolicy(t *testing.T) (Policy, *Checker, *fakeResolver) {
	res := newFakeResolver(map[string]string{"origin.test": "127.0.0.1"})
	return Policy{Mode: Model, Trusted: mustRules(t, "origin.test")}, &Checker{Resolver: res}, res
}

func TestProxyForwardsPlainHTTPWithKeepAlive(t *testing.T) {
	port := startOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s path=%s proxy-connection=%q", r.Host, r.URL.Path, r.Header.Get("Proxy-Connection"))
	})
	pol, checker, _ := originPolicy(t)
	rp := startProxy(t, &Proxy{Checker: checker}, pol)
	c := rp.dial(t)
	host := "origin.test:" + strconv.Itoa(port)
	var br *bufio.Reader
	for i, path := range []string{"/one", "/two"} {
		raw := "GET http://" + host + path + " HTTP/1.1\r\nHost: " + host + "\r\nProxy-Connection: keep-alive\r\n\r\n"
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		if br == nil {
			br = bufio.NewReader(c)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: %v", i+1, err)
		}
		want := "host=" + host + " path=" + path + ` proxy-connection=""`
		if got := readBody(t, resp); resp.StatusCode != 200 || got != want {
			t.Errorf("request %d: %d %q, want 200 %q", i+1, resp.StatusCode, got, want)
		}
	}
}

func TestProxyStreamsAResponseAsItComes(t *testing.T) {
	for _, contentType := range []string{"text/event-stream", "application/x-ndjson"} {
		t.Run(contentType, func(t *testing.T) { testStreaming(t, contentType) })
	}
}

// testStreaming has the origin send a first chunk and wait for the client
// to read it before it sends the rest: a proxy that held the response back
// would never deliver it.
func testStreaming(t *testing.T, contentType string) {
	firstRead := make(chan struct{})
	port := startOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		fmt.Fprint(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-firstRead:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: 2\n\n")
	})
	pol, checker, _ := originPolicy(t)
	rp := startProxy(t, &Proxy{Checker: checker}, pol)
	c := rp.dial(t)
	host := "origin.test:" + strconv.Itoa(port)
	resp, _ := request(t, c, "GET http://"+host+"/stream HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	body := bufio.NewReader(resp.Body)
	line, err := body.ReadString('\n')
	if err != nil || line != "data: 1\n" {
		t.Fatalf("first chunk: %q, %v (the proxy held the stream back?)", line, err)
	}
	close(firstRead)
	rest, err := io.ReadAll(body)
	if err != nil || string(rest) != "\ndata: 2\n\n" {
		t.Errorf("rest of the stream: %q, %v", rest, err)
	}
}

func TestProxyTunnelsConnect(t *testing.T) {
	echo := startEcho(t, "127.0.0.1:0")
	target := "127.0.0.1:" + strconv.Itoa(echo.port())
	rp := startProxy(t, &Proxy{Checker: &Checker{}}, Policy{Mode: Allow, Allowed: mustRules(t, "127.0.0.0/8")})
	c := rp.dial(t)
	// "early" rides in the same write as the CONNECT, as a TLS hello may.
	resp, br := connect(t, c, target, "early,")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %s", target, resp.Status)
	}
	if _, err := io.WriteString(c, "late"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "early,late" {
		t.Errorf("through the tunnel: %q, %v; want the echo of both writes, then EOF", got, err)
	}
}

func TestProxyRefusesAndReportsOnce(t *testing.T) {
	pol, checker, res := originPolicy(t)
	res.set("evil.example", "93.184.216.34")
	rp := startProxy(t, &Proxy{Checker: checker}, pol)
	for i, raw := range []string{
		"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
		"GET http://EVIL.example:443/x HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
	} {
		resp, _ := request(t, rp.dial(t), raw)
		body := readBody(t, resp)
		if resp.StatusCode != 403 || !strings.Contains(body, "evil.example:443") || !strings.Contains(body, "no rule") ||
			strings.Count(body, "\n") != 1 {
			t.Errorf("attempt %d: %d %q, want 403 with one line naming the target and why", i+1, resp.StatusCode, body)
		}
	}
	if got := rp.denied.get(); len(got) != 1 || got[0] != "evil.example:443" {
		t.Errorf("denied called first for %q, want once for evil.example:443", got)
	}
	if n := rp.denied.count(); n != 2 {
		t.Errorf("denied called %d times for two refusals", n)
	}
	if n := res.count("evil.example"); n != 0 {
		t.Errorf("evil.example was looked up %d times", n)
	}
}

func TestProxyGuardRefusesAPortARuleAllows(t *testing.T) {
	echo := startEcho(t, "127.0.0.1:0")
	guard, err := NewGuard(context.Background(), newFakeResolver(nil), []int{echo.port()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := "127.0.0.1:" + strconv.Itoa(echo.port())
	rp := startProxy(t, &Proxy{Checker: &Checker{Guard: guard}}, Policy{Mode: Allow, Allowed: mustRules(t, target)})
	resp, _ := connect(t, rp.dial(t), target, "")
	if body := readBody(t, resp); resp.StatusCode != 403 || !strings.Contains(body, "gateway's own port") {
		t.Errorf("CONNECT to a guarded port: %d %q, want 403", resp.StatusCode, body)
	}
	if len(echo.accepted) != 0 {
		t.Error("the guarded port got a connection")
	}
}

func TestProxyDialsTheAddressItChecked(t *testing.T) {
	echo := startEcho(t, "127.0.0.1:0")
	trap := startEcho(t, "127.0.0.2:"+strconv.Itoa(echo.port()))
	pol, checker, res := originPolicy(t)
	res.afterLookup = func(string) { res.set("origin.test", "127.0.0.2") } // rebinding
	rp := startProxy(t, &Proxy{Checker: checker}, pol)
	c := rp.dial(t)
	resp, br := connect(t, c, "origin.test:"+strconv.Itoa(echo.port()), "")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	_, _ = io.WriteString(c, "x")
	_ = c.(*net.TCPConn).CloseWrite()
	if got, err := io.ReadAll(br); err != nil || string(got) != "x" {
		t.Errorf("tunnel: %q, %v", got, err)
	}
	if len(trap.accepted) != 0 || len(echo.accepted) != 1 {
		t.Errorf("the second answer got %d connections and the checked one %d, want 0 and 1", len(trap.accepted), len(echo.accepted))
	}
}

func TestProxyForwardDialsTheAddressItChecked(t *testing.T) {
	port := startOrigin(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "origin") })
	trap := startEcho(t, "127.0.0.2:"+strconv.Itoa(port))
	pol, checker, res := originPolicy(t)
	res.afterLookup = func(string) { res.set("origin.test", "127.0.0.2") }
	rp := startProxy(t, &Proxy{Checker: checker}, pol)
	host := "origin.test:" + strconv.Itoa(port)
	resp, _ := request(t, rp.dial(t), "GET http://"+host+"/ HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	if body := readBody(t, resp); resp.StatusCode != 200 || body != "origin" || len(trap.accepted) != 0 {
		t.Errorf("GET: %d %q, second answer dialled %d times; want 200 from the checked address", resp.StatusCode, body, len(trap.accepted))
	}
}

func TestProxyAnswersBadRequests400(t *testing.T) {
	rp := startProxy(t, &Proxy{Checker: &Checker{}}, Policy{Mode: Open})
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"CONNECT example.com:99999 HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET http://user@example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
	} {
		resp, _ := request(t, rp.dial(t), raw)
		if body := readBody(t, resp); resp.StatusCode != 400 || !strings.HasPrefix(body, "egress proxy: ") {
			t.Errorf("%q: %d %q, want 400 with a sentence", strings.SplitN(raw, "\r", 2)[0], resp.StatusCode, body)
		}
	}
}

func TestProxyAnswersUnreachable502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	pol, checker, _ := originPolicy(t)
	pol.Trusted = append(pol.Trusted, mustRule(t, closed), mustRule(t, "gone.test"))
	rp := startProxy(t, &Proxy{Checker: checker}, pol)
	for _, target := range []string{closed, "gone.test:443"} {
		resp, _ := connect(t, rp.dial(t), target, "")
		if body := readBody(t, resp); resp.StatusCode != 502 || !strings.Contains(body, "cannot reach "+target) {
			t.Errorf("CONNECT %s: %d %q, want 502", target, resp.StatusCode, body)
		}
	}
	if got := rp.denied.get(); len(got) != 0 {
		t.Errorf("denied called for unreachable targets: %q", got)
	}
}

func TestProxyBoundsConnections(t *testing.T) {
	rp := startProxy(t, &Proxy{Checker: &Checker{}, MaxConns: 2}, Policy{Mode: None})
	held := []net.Conn{rp.dial(t), rp.dial(t)}
	over := rp.dial(t)
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("a third connection over a bound of 2: %v", err)
	}
	if body := readBody(t, resp); resp.StatusCode != 503 || !strings.Contains(body, "2 connections") {
		t.Errorf("a third connection: %d %q, want 503", resp.StatusCode, body)
	}
	_ = held[0].Close()
	waitFor(t, "a slot freed by a closed connection", func() bool {
		resp, _ := request(t, rp.dial(t), "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
		return resp.StatusCode == 403
	})
}

func TestProxyCutsAClientThatSendsNoRequest(t *testing.T) {
	rp := startProxy(t, &Proxy{Checker: &Checker{}, HeaderTimeout: 100 * time.Millisecond}, Policy{Mode: None})
	c := rp.dial(t)
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("a silent client's read: %v, want the proxy to close the connection", err)
	}
}

func TestProxyServeEndsEverything(t *testing.T) {
	echo := startEcho(t, "127.0.0.1:0")
	streaming := make(chan struct{})
	port := startOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quick" {
			fmt.Fprint(w, "ok")
			return
		}
		fmt.Fprint(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		close(streaming)
		<-r.Context().Done()
	})
	before := goleak.IgnoreCurrent()
	pol, checker, _ := originPolicy(t)
	rp := startProxy(t, &Proxy{Checker: checker}, pol)

	tunnel := rp.dial(t)
	if resp, _ := connect(t, tunnel, "origin.test:"+strconv.Itoa(echo.port()), ""); resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	stream := rp.dial(t)
	host := "origin.test:" + strconv.Itoa(port)
	request(t, stream, "GET http://"+host+"/ HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	<-streaming
	silent := rp.dial(t)
	// A request done leaves its upstream connection idle in the pool.
	quick, _ := request(t, rp.dial(t), "GET http://"+host+"/quick HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	if body := readBody(t, quick); body != "ok" {
		t.Fatalf("quick request: %q", body)
	}

	if err := rp.stop(); err != nil {
		t.Errorf("Serve returned %v after its context ended", err)
	}
	for name, c := range map[string]net.Conn{"tunnel": tunnel, "stream": stream, "silent": silent} {
		// Closed, or reset when the proxy closed it unread (the silent
		// one may still have been in the listener's queue): not timed out.
		var ne net.Error
		if _, err := io.ReadAll(c); errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s connection after Serve returned: %v, want it closed", name, err)
		}
	}
	var leaks error
	deadline := time.Now().Add(ioDeadline)
	for leaks = goleak.Find(before); leaks != nil && time.Now().Before(deadline); leaks = goleak.Find(before) {
	}
	if leaks != nil {
		t.Errorf("goroutines left after Serve returned: %v", leaks)
	}
}
