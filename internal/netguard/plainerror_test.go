package netguard

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// What net/http answers by itself, before any handler, comes in the
// gateway's JSON error shape with a machine code; a handler's own answers
// pass untouched.
func TestServerErrorsAreJSON(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(inner, Options{PerClient: 16, Total: 64})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Connection", "close")
			io.WriteString(w, "handler says hi")
		}),
		MaxHeaderBytes:    1 << 10,
		ReadHeaderTimeout: 10 * time.Second,
	}
	// The server's connection goroutines linger a moment after an error
	// answer (net/http waits for the client to read it): the test ends
	// when every connection has closed.
	var open sync.WaitGroup
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Done()
		}
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); open.Wait() })

	for _, c := range []struct {
		name, req string
		status    int
		code      string
	}{
		{"malformed Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "bad_request"},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400, "bad_request"},
		{"bad header line", "GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400, "bad_request"},
		{"headers too large", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", 431, "headers_too_large"},
		{"bad transfer encoding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"},
		{"HTTP/2 preface-less", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := roundTrip(t, ln.Addr().String(), c.req)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			b, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Code != c.code || e.Error.Message == "" {
				t.Errorf("body %q: want code %s and a message (%v)", b, c.code, err)
			}
		})
	}
	t.Run("handler answer untouched", func(t *testing.T) {
		resp := roundTrip(t, ln.Addr().String(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "handler says hi" || resp.Header.Get("Date") == "" {
			t.Errorf("%d %q %v", resp.StatusCode, b, resp.Header)
		}
	})
}

func roundTrip(t *testing.T, addr, req string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestRewritePlainErrorLeavesOthers(t *testing.T) {
	for _, p := range []string{
		"",
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nok",
		"HTTP/1.1 400 Bad Request\r\nDate: x\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400",
		"HTTP/1.1 4",
		"garbage",
	} {
		if q, ok := rewritePlainError([]byte(p)); ok {
			t.Errorf("%q rewritten to %q", p, q)
		}
	}
}

func FuzzRewritePlainError(f *testing.F) {
	f.Add([]byte("HTTP/1.1 400 Bad Request" + plainErrorHeaders + "400 Bad Request: missing required Host header"))
	f.Add([]byte("HTTP/1.1 431 Request Header Fields Too Large" + plainErrorHeaders + "431 Request Header Fields Too Large"))
	f.Fuzz(func(t *testing.T, p []byte) {
		q, ok := rewritePlainError(p)
		if !ok {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(q))), nil)
		if err != nil {
			t.Fatalf("rewritten %q is not a response: %v", q, err)
		}
		var e map[string]map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e["error"]["code"] == "" {
			t.Fatalf("rewritten %q: body %v, %v", q, e, err)
		}
	})
}
