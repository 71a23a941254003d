package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// serveTest serves h with newHTTPServer(opts) on 127.0.0.1 until the test
// ends, and returns its address.
func serveTest(t *testing.T, h http.Handler, opts serverOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(h, context.Background(), opts)
	// Every connection's goroutine ends before the test does, including
	// one that lingers after an error answer (the server waits a moment
	// before it closes such a connection).
	var conns sync.WaitGroup
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			conns.Done()
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done; conns.Wait() })
	return ln.Addr().String()
}

func dialTest(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer waits, far longer than the timeout under test, for the
// server to close c, and returns what it sent first.
func closedByServer(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open (read %q)", b)
	}
	return string(b)
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })

func TestServerClosesStalledHeaders(t *testing.T) {
	addr := serveTest(t, okHandler, serverOptions{ReadHeaderTimeout: 200 * time.Millisecond, Log: zap.NewNop()})
	for name, partial := range map[string]string{
		"nothing":      "",
		"request line": "GET /healthz HTTP/1.1\r\n",
		"headers":      "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c := dialTest(t, addr)
			if _, err := io.WriteString(c, partial); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got := closedByServer(t, c)
			if strings.Contains(got, " 200 ") {
				t.Fatalf("a stalled request was answered: %q", got)
			}
			t.Logf("closed after %v with %q", time.Since(start), got)
		})
	}
}

// A handler that answers without reading the body leaves the server to
// read the rest; a body trickled or stalled there is cut off by the body
// deadline, and the answer still goes out.
func TestServerBoundsAnUnreadStalledBody(t *testing.T) {
	addr := serveTest(t, okHandler, serverOptions{BodyTimeout: 200 * time.Millisecond})
	c := dialTest(t, addr)
	if _, err := io.WriteString(c, "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	got := closedByServer(t, c)
	if !strings.HasPrefix(got, "HTTP/1.1 200 ") || !strings.HasSuffix(got, "ok") {
		t.Fatalf("answer to a request whose body stalled: %q", got)
	}
}

// A handler that reads the body with a deadline of its own and lifts it
// when the body times out, as the API's readBody does, still gets its
// answer out, and the connection is closed rather than left reading the
// stalled rest of the body.
func TestServerBoundsABodyWhoseDeadlineWasLifted(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := io.ReadAll(r.Body)
		_ = rc.SetReadDeadline(time.Time{})
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusRequestTimeout)
	})
	addr := serveTest(t, h, serverOptions{BodyTimeout: time.Minute})
	c := dialTest(t, addr)
	if _, err := io.WriteString(c, "POST /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"agent\":"); err != nil {
		t.Fatal(err)
	}
	got := closedByServer(t, c)
	if !strings.HasPrefix(got, "HTTP/1.1 408 ") {
		t.Fatalf("answer to a request whose body timed out: %q", got)
	}
}

// A handler that takes a timed-out body for a client gone and answers
// nothing (the read cancelled the request's context) must not have net/http
// send its implicit 200: the edge answers 408 and closes.
func TestServerAnswersATimedOutBodyLeftUnanswered(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if err == nil || r.Context().Err() == nil {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	addr := serveTest(t, h, serverOptions{BodyTimeout: 200 * time.Millisecond})
	c := dialTest(t, addr)
	if _, err := io.WriteString(c, "POST /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"agent\":"); err != nil {
		t.Fatal(err)
	}
	got := closedByServer(t, c)
	if !strings.HasPrefix(got, "HTTP/1.1 408 ") || !strings.Contains(got, `"code":"body_timeout"`) {
		t.Fatalf("answer to a request whose body timed out, left unanswered: %q", got)
	}
}

// No read deadline is left on a request without a body: a stream outlives
// the header, body and idle timeouts, its context alive.
func TestServerStreamOutlivesTimeouts(t *testing.T) {
	const short = 100 * time.Millisecond
	release := make(chan struct{})
	ended := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
			_, _ = io.WriteString(w, "last\n")
			ended <- nil
		case <-r.Context().Done():
			ended <- r.Context().Err()
		}
	})
	addr := serveTest(t, h, serverOptions{ReadHeaderTimeout: short, BodyTimeout: short, IdleTimeout: short})
	c := dialTest(t, addr)
	if _, err := io.WriteString(c, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := bufio.NewReader(resp.Body)
	if l, err := body.ReadString('\n'); l != "first\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	// What is tested is that nothing happens: wait well past every
	// timeout, then the stream must still be there.
	select {
	case err := <-ended:
		t.Fatalf("the stream ended within 10× the timeouts: %v", err)
	case <-time.After(10 * short):
	}
	close(release)
	if err := <-ended; err != nil {
		t.Fatalf("stream: %v", err)
	}
	if l, err := body.ReadString('\n'); l != "last\n" {
		t.Fatalf("last line %q, %v", l, err)
	}
}

func TestServerBoundsHeaderBytes(t *testing.T) {
	addr := serveTest(t, okHandler, serverOptions{})
	c := dialTest(t, addr)
	big := "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2*defaultMaxHeaderBytes) + "\r\n\r\n"
	if _, err := io.WriteString(c, big); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("headers of %d bytes: %d, want 431", len(big), resp.StatusCode)
	}
	// The server closes the connection after a grace period; its
	// goroutine must be gone before the test ends.
	closedByServer(t, c)
}

func TestServerDefaults(t *testing.T) {
	srv := newHTTPServer(okHandler, context.Background(), serverOptions{})
	if srv.ReadHeaderTimeout != 10*time.Second || srv.IdleTimeout != 2*time.Minute || srv.MaxHeaderBytes != 32<<10 {
		t.Fatalf("defaults: header %v idle %v max header %d", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	if srv.ReadTimeout != 0 || srv.WriteTimeout != 0 {
		t.Fatalf("a ReadTimeout (%v) or WriteTimeout (%v) would cut event streams", srv.ReadTimeout, srv.WriteTimeout)
	}
}

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://user:s3cret@nats.internal:4222", "nats://user:xxxxx@nats.internal:4222"},
		{"nats://tok3n@nats:4222", "nats://xxxxx@nats:4222"},
		{"nats://nats:4222", "nats://nats:4222"},
		{"nats://a:p1@h1:4222,nats://b:p2@h2:4222", "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222"},
		{"nats://u:pa/ss@h:4222", "nats://xxxxx@h:4222"},
		{"nats://u:12/ss@h:4222", "nats://xxxxx@h:4222"},
		{"nats://u:p%zz@h", "nats://xxxxx@h"},
		{"u:p@h:4222", "xxxxx@h:4222"},
		{"", ""},
	} {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRedactURL: no password survives, whatever the URL.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"nats://u:pw@h:4222", "nats://pw@h", "nats://u:p/w@h", "x://u:pw@h,y://u:pw@h", "u:pw@h", "nats://h", "://@", "a@b@c"} {
		f.Add(s, "pw")
	}
	f.Fuzz(func(t *testing.T, host, secret string) {
		if len(secret) < 4 || strings.ContainsAny(secret, ",@:/?#%[]") || strings.Contains("nats://user:@"+host, secret) ||
			strings.Contains(secret, "xxxxx") || strings.Contains("xxxxx", secret) {
			return
		}
		for _, u := range []string{
			"nats://user:" + secret + "@" + host,
			"nats://" + secret + "@" + host,
		} {
			if got := redactURL(u); strings.Contains(got, secret) {
				t.Fatalf("redactURL(%q) = %q keeps the secret", u, got)
			}
		}
	})
}
