package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/tenants"
)

// send is h.do with the Host the request names.
func send(t *testing.T, h *harness, method, path, host string, header ...string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// raw sends one request as written, on a connection of its own, and
// returns the response's header and every byte that came after it, up to
// the connection's end.
func raw(t *testing.T, h *harness, request string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read the response: %v (so far %q)", err, all)
	}
	end := bytes.Index(all, []byte("\r\n\r\n"))
	if end < 0 {
		t.Fatalf("no response header in %q", all)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(all[:end+4])), &http.Request{Method: "HEAD"})
	if err != nil {
		t.Fatalf("response %q: %v", all, err)
	}
	return resp, all[end+4:]
}

func hostOf(h *harness) string { return h.srv.Listener.Addr().String() }

// TestEdgeCORS: a configured origin may call the API from its pages;
// another gets no CORS headers, and cannot change anything even with the
// simple requests a browser sends without asking first.
func TestEdgeCORS(t *testing.T) {
	const console, evil = "https://console.example", "https://evil.example"
	ts := newTenants(t)
	c := &calls{}
	cfg := ts.config()
	cfg.CORSOrigins = []string{console}
	h := newHarness(t, cfg, tenantService(t, c, nil))
	write := ts.bearer(t, keyID(tenantAcme, auth.RoleWrite))
	cancelPath := "/v1/runs/" + runA + "/cancel"

	t.Run("preflight from the console", func(t *testing.T) {
		for _, path := range []string{"/v1/runs", cancelPath, "/v1/runs/" + runA} {
			resp, b := h.do(t, "OPTIONS", path, "", "Origin", console, "Access-Control-Request-Method", "POST",
				"Access-Control-Request-Headers", "authorization, content-type, idempotency-key")
			if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
				t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
			}
			hd := resp.Header
			if got := hd.Get("Access-Control-Allow-Origin"); got != console {
				t.Errorf("Access-Control-Allow-Origin %q", got)
			}
			if !strings.Contains(hd.Get("Vary"), "Origin") {
				t.Errorf("Vary %q", hd.Values("Vary"))
			}
			for _, m := range []string{"GET", "HEAD", "POST", "DELETE"} {
				if !listHas(hd.Get("Access-Control-Allow-Methods"), m) {
					t.Errorf("Access-Control-Allow-Methods %q lacks %s", hd.Get("Access-Control-Allow-Methods"), m)
				}
			}
			for _, n := range []string{"Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"} {
				if !listHas(hd.Get("Access-Control-Allow-Headers"), n) {
					t.Errorf("Access-Control-Allow-Headers %q lacks %s", hd.Get("Access-Control-Allow-Headers"), n)
				}
			}
		}
	})
	t.Run("preflight from another origin", func(t *testing.T) {
		resp, b := h.do(t, "OPTIONS", cancelPath, "", "Origin", evil, "Access-Control-Request-Method", "POST")
		if resp.StatusCode != http.StatusForbidden || decodeError(t, b).Code != CodeOriginNotAllowed {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("Access-Control-Allow-Origin %q", got)
		}
	})
	t.Run("cross-site form POST", func(t *testing.T) {
		// A browser sends this without a preflight, and would send the
		// key too if the gateway took it from a cookie.
		for _, hdr := range [][]string{nil, write} {
			c.reset()
			resp, b := h.do(t, "POST", cancelPath, "x=1",
				append([]string{"Origin", evil, "Content-Type", "application/x-www-form-urlencoded"}, hdr...)...)
			if resp.StatusCode != http.StatusForbidden || decodeError(t, b).Code != CodeOriginNotAllowed {
				t.Errorf("%d %s", resp.StatusCode, b)
			}
			if n := c.cancel.Load() + c.get.Load(); n != 0 {
				t.Errorf("the service was called %d times", n)
			}
		}
		c.reset()
		resp, b := h.do(t, "DELETE", "/v1/runs/"+runA, "", append([]string{"Origin", evil}, ts.bearer(t, keyID(tenantAcme, auth.RoleAdmin))...)...)
		if resp.StatusCode != http.StatusForbidden || decodeError(t, b).Code != CodeOriginNotAllowed || c.delete.Load() != 0 {
			t.Errorf("cross-site DELETE: %d %s, %d deletes", resp.StatusCode, b, c.delete.Load())
		}
	})
	t.Run("same origin", func(t *testing.T) {
		c.reset()
		resp, b := h.do(t, "POST", cancelPath, "", append([]string{"Origin", h.srv.URL}, write...)...)
		if resp.StatusCode != http.StatusOK || c.cancel.Load() != 1 {
			t.Fatalf("%d %s, %d cancels", resp.StatusCode, b, c.cancel.Load())
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("Access-Control-Allow-Origin %q for the gateway's own origin", got)
		}
	})
	t.Run("the console's POST", func(t *testing.T) {
		c.reset()
		resp, b := h.do(t, "POST", cancelPath, "", append([]string{"Origin", console}, write...)...)
		if resp.StatusCode != http.StatusOK || c.cancel.Load() != 1 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != console {
			t.Errorf("Access-Control-Allow-Origin %q", got)
		}
		if !listHas(resp.Header.Get("Access-Control-Expose-Headers"), "Retry-After") || !listHas(resp.Header.Get("Access-Control-Expose-Headers"), "X-Diff-Truncated") {
			t.Errorf("Access-Control-Expose-Headers %q", resp.Header.Get("Access-Control-Expose-Headers"))
		}
	})
	t.Run("another origin reads without CORS headers", func(t *testing.T) {
		resp, b := h.do(t, "GET", "/v1/runs/"+runA, "", append([]string{"Origin", evil}, write...)...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		for name := range resp.Header {
			if strings.HasPrefix(name, "Access-Control-") {
				t.Errorf("%s: %q", name, resp.Header.Get(name))
			}
		}
	})
}

// TestEdgeCORSNoneByDefault: without CORSOrigins no origin is trusted.
func TestEdgeCORSNoneByDefault(t *testing.T) {
	ts := newTenants(t)
	h := newHarness(t, ts.config(), tenantService(t, &calls{}, nil))
	resp, b := h.do(t, "GET", "/v1/runs/"+runA, "", append([]string{"Origin", "https://console.example"},
		ts.bearer(t, keyID(tenantAcme, auth.RoleRead))...)...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	for name := range resp.Header {
		if strings.HasPrefix(name, "Access-Control-") {
			t.Errorf("%s: %q", name, resp.Header.Get(name))
		}
	}
	resp, b = h.do(t, "OPTIONS", "/v1/runs", "", "Origin", "https://console.example", "Access-Control-Request-Method", "POST")
	if resp.StatusCode != http.StatusForbidden || decodeError(t, b).Code != CodeOriginNotAllowed {
		t.Errorf("preflight: %d %s", resp.StatusCode, b)
	}
}

// listHas reports whether the comma-separated header value v lists name.
func listHas(v, name string) bool {
	for _, p := range strings.Split(v, ",") {
		if strings.EqualFold(strings.TrimSpace(p), name) {
			return true
		}
	}
	return false
}

// TestEdgeHost: a gateway on loopback answers only loopback names, so a
// page that rebinds its own name to 127.0.0.1 cannot reach it; the probes
// answer whatever the Host.
func TestEdgeHost(t *testing.T) {
	ts := newTenants(t)
	read := ts.bearer(t, keyID(tenantAcme, auth.RoleRead))
	check := func(t *testing.T, h *harness, hosts map[string]bool) {
		t.Helper()
		for host, ok := range hosts {
			resp, b := send(t, h, "GET", "/v1/agents", host, read...)
			switch {
			case ok && resp.StatusCode != http.StatusOK:
				t.Errorf("Host %q: %d %s", host, resp.StatusCode, b)
			case !ok && (resp.StatusCode != http.StatusMisdirectedRequest || decodeError(t, b).Code != CodeHostNotAllowed):
				t.Errorf("Host %q: %d %s, want 421 host_not_allowed", host, resp.StatusCode, b)
			}
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			if resp, b := send(t, h, "GET", path, "evil.example"); resp.StatusCode != http.StatusOK {
				t.Errorf("%s with Host evil.example: %d %s", path, resp.StatusCode, b)
			}
		}
	}
	t.Run("loopback only", func(t *testing.T) {
		cfg := ts.config()
		cfg.LoopbackHostsOnly = true
		h := newHarness(t, cfg, tenantService(t, &calls{}, nil))
		check(t, h, map[string]bool{
			"evil.example": false, "evil.example:8080": false, "localhost.evil.example": false,
			"127.0.0.1.nip.io": false, "10.0.0.1": false, "[::ffff:10.0.0.1]:80": false,
			"localhost:8080": true, "localhost": true, "LocalHost.:80": true, "app.localhost:1": true,
			"127.0.0.1:1": true, "127.0.0.1": true, "127.1.2.3:9": true, "[::1]:2": true, "[::1]": true,
			hostOf(h): true,
		})
		// Before the key is looked at: the page learns nothing.
		resp, b := send(t, h, "GET", "/v1/runs", "evil.example")
		if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("no key, Host evil.example: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
		}
	})
	t.Run("allowed hosts", func(t *testing.T) {
		cfg := ts.config()
		cfg.AllowedHosts = []string{"gateway.example", "10.1.2.3"}
		cfg.LoopbackHostsOnly = true // AllowedHosts wins
		h := newHarness(t, cfg, tenantService(t, &calls{}, nil))
		check(t, h, map[string]bool{
			"gateway.example": true, "gateway.example:443": true, "GATEWAY.example.": true, "10.1.2.3:8080": true,
			"evil.example": false, "gateway.example.evil.example": false, "localhost": false, "127.0.0.1:1": false,
			hostOf(h): false,
		})
	})
	t.Run("any host by default", func(t *testing.T) {
		h := newHarness(t, ts.config(), tenantService(t, &calls{}, nil))
		check(t, h, map[string]bool{"evil.example": true, "localhost": true})
	})
}

// TestEdgeSloppyInput: a query string Go's parser would half-read is
// refused, and HEAD answers a route's headers with no body, after the
// same checks as GET.
func TestEdgeSloppyInput(t *testing.T) {
	ts := newTenants(t)
	c := &calls{}
	h := newHarness(t, ts.config(), tenantService(t, c, nil))
	secret := ts.secrets[keyID(tenantAcme, auth.RoleRead)]
	read := []string{"Authorization", "Bearer " + secret}

	for _, path := range []string{"/v1/runs?status=failed;x", "/v1/runs?status=failed&agent=%zz", "/v1/runs/" + runA + "/events?after=1;2"} {
		c.reset()
		resp, b := h.do(t, "GET", path, "", read...)
		if resp.StatusCode != http.StatusBadRequest || decodeError(t, b).Code != CodeInvalidQuery {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		if n := c.list.Load() + c.events.Load(); n != 0 {
			t.Errorf("GET %s reached the service %d times", path, n)
		}
	}

	head := func(path, key string) string {
		req := "HEAD " + path + " HTTP/1.1\r\nHost: " + hostOf(h) + "\r\nConnection: close\r\n"
		if key != "" {
			req += "Authorization: Bearer " + key + "\r\n"
		}
		return req + "\r\n"
	}
	for _, tc := range []struct {
		name, path, key string
		status          int
		contentType     string
	}{
		{"a run", "/v1/runs/" + runA, secret, http.StatusOK, "application/json"},
		{"its events", "/v1/runs/" + runA + "/events", secret, http.StatusOK, contentTypeSSE},
		{"another tenant's run", "/v1/runs/" + runB, secret, http.StatusNotFound, "application/json"},
		{"another tenant's events", "/v1/runs/" + runB + "/events", secret, http.StatusNotFound, "application/json"},
		{"events without a key", "/v1/runs/" + runA + "/events", "", http.StatusUnauthorized, "application/json"},
	} {
		t.Run("HEAD "+tc.name, func(t *testing.T) {
			c.reset()
			resp, rest := raw(t, h, head(tc.path, tc.key))
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, tc.contentType) {
				t.Errorf("Content-Type %q, want %s", got, tc.contentType)
			}
			if len(rest) != 0 {
				t.Errorf("a HEAD answered with a body: %q", rest)
			}
			if n := c.events.Load(); n != 0 {
				t.Errorf("HEAD opened the events %d times", n)
			}
		})
	}
}

// TestEdgeTenantRate: a tenant past its rate gets 429 rate_limited with a
// Retry-After, while another tenant is served.
func TestEdgeTenantRate(t *testing.T) {
	ts := newTenants(t)
	cfg := ts.config()
	cfg.TenantRate, cfg.TenantBurst = 2, 2
	h := newHarness(t, cfg, tenantService(t, &calls{}, nil))
	acme := ts.bearer(t, keyID(tenantAcme, auth.RoleRead))

	start := time.Now()
	for i := range 2 {
		if resp, b := h.do(t, "GET", "/v1/agents", "", acme...); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d of the burst: %d %s", i+1, resp.StatusCode, b)
		}
	}
	// The third request is refused unless the bucket refilled meanwhile,
	// at 2 a second, which a loaded machine may take long enough for:
	// then the next ones are, and no more get through than the refill.
	extra := 0
	var limited *http.Response
	for limited == nil {
		resp, b := h.do(t, "GET", "/v1/agents", "", acme...)
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			if e := decodeError(t, b); e.Code != CodeRateLimited {
				t.Fatalf("429 with code %q", e.Code)
			}
			limited = resp
		case resp.StatusCode == http.StatusOK:
			extra++
			if refill := time.Since(start).Seconds() * cfg.TenantRate; float64(extra) > refill+1 {
				t.Fatalf("%d requests past the burst got through in %s", extra, time.Since(start))
			}
		default:
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	if n, err := strconv.Atoi(limited.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After %q, want whole seconds, at least 1", limited.Header.Get("Retry-After"))
	}
	if resp, b := h.do(t, "GET", "/v1/agents", "", ts.bearer(t, keyID(tenantGlobex, auth.RoleRead))...); resp.StatusCode != http.StatusOK {
		t.Errorf("globex while acme is limited: %d %s", resp.StatusCode, b)
	}
	if resp, b := h.do(t, "GET", "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("healthz while acme is limited: %d %s", resp.StatusCode, b)
	}
}

// openStream opens an event stream and returns once its header came; the
// stream stays open until close is called (or the test ends).
func openStream(t *testing.T, h *harness, path string, header ...string) (resp *http.Response, body []byte, stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", h.srv.URL+path, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err = h.srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stop = func() { cancel(); resp.Body.Close() }
	if resp.StatusCode != http.StatusOK {
		defer stop()
		body, _ = io.ReadAll(resp.Body)
		return resp, body, func() {}
	}
	t.Cleanup(stop)
	return resp, nil, stop
}

// TestEdgeTenantStreams: a tenant holds at most TenantStreams event
// streams open; another tenant is not held back by it, and a closed
// stream frees its place.
func TestEdgeTenantStreams(t *testing.T) {
	ts := newTenants(t)
	cfg := ts.config()
	cfg.TenantStreams = 1
	// Logs that never end: their streams stay open.
	logs := map[string]*memLog{
		runA: newMemLog(storedEvent(t, runA, 1, runs.EventRunQueued, runs.RunQueuedData{Agent: "claude", Position: 1})),
		runB: newMemLog(storedEvent(t, runB, 1, runs.EventRunQueued, runs.RunQueuedData{Agent: "claude", Position: 1})),
	}
	h := newHarness(t, cfg, tenantService(t, &calls{}, logs))
	acme := ts.bearer(t, keyID(tenantAcme, auth.RoleRead))
	events := "/v1/runs/" + runA + "/events"

	first, b, closeFirst := openStream(t, h, events, acme...)
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %d %s", first.StatusCode, b)
	}
	resp, b, _ := openStream(t, h, events, acme...)
	if resp.StatusCode != http.StatusTooManyRequests || decodeError(t, b).Code != CodeTooManyStreams {
		t.Fatalf("second stream of acme: %d %s", resp.StatusCode, b)
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	// A stream token is the same tenant's stream.
	tok := issueToken(t, h, ts, runA, keyID(tenantAcme, auth.RoleRead))
	if resp, b, _ := openStream(t, h, tok.URL); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("acme's stream by token: %d %s", resp.StatusCode, b)
	}
	globex, b, _ := openStream(t, h, "/v1/runs/"+runB+"/events", ts.bearer(t, keyID(tenantGlobex, auth.RoleRead))...)
	if globex.StatusCode != http.StatusOK {
		t.Fatalf("globex's stream while acme's is open: %d %s", globex.StatusCode, b)
	}

	closeFirst()
	// The request is recorded once its handler, and so its hold on the
	// place, is done.
	waitFor(t, "the first stream to end", func() bool {
		for _, r := range h.obs.observed() {
			if r.route == "/v1/runs/{id}/events" && r.status == http.StatusOK {
				return true
			}
		}
		return false
	})
	again, b, _ := openStream(t, h, events, acme...)
	if again.StatusCode != http.StatusOK {
		t.Fatalf("acme's stream after the first closed: %d %s", again.StatusCode, b)
	}
}

// TestEdgeQuotaErrors: a quota the service enforces is a 429 with a code
// naming the limit and the service's Retry-After.
func TestEdgeQuotaErrors(t *testing.T) {
	ts := newTenants(t)
	var err error
	svc := tenantService(t, &calls{}, nil)
	svc.submit = func(context.Context, runs.Spec) (runs.Run, error) { return runs.Run{}, err }
	h := newHarness(t, ts.config(), svc)
	for _, tc := range []struct {
		err        error
		code       string
		retryAfter string
	}{
		{&tenants.QuotaError{Limit: tenants.LimitRunning, Message: "acme has 4 runs running", RetryAfter: 7 * time.Second}, CodeTooManyRunning, "7"},
		{&tenants.QuotaError{Limit: tenants.LimitQueued, Message: "acme has 10 runs queued", RetryAfter: 1500 * time.Millisecond}, CodeTooManyQueued, "2"},
		{&tenants.QuotaError{Limit: tenants.LimitDailyBudget, Message: "acme spent its day", RetryAfter: 90 * time.Minute}, CodeDailyBudgetExceeded, "5400"},
		{fmt.Errorf("admit: %w", &tenants.QuotaError{Limit: tenants.LimitRunning, Message: "wrapped", RetryAfter: time.Second}), CodeTooManyRunning, "1"},
		// Without a RetryAfter of its own, the configured one.
		{&tenants.QuotaError{Limit: tenants.LimitQueued, Message: "no hint"}, CodeTooManyQueued, strconv.Itoa(int(DefaultRetryAfter.Seconds()))},
		{&tenants.QuotaError{Limit: "tokens_per_minute", Message: "a limit this API does not know", RetryAfter: 3 * time.Second}, CodeRateLimited, "3"},
	} {
		err = tc.err
		resp, b := h.do(t, "POST", "/v1/runs", `{"agent":"claude","prompt":"hi"}`,
			append(ts.bearer(t, keyID(tenantAcme, auth.RoleWrite)), "Content-Type", "application/json")...)
		e := decodeError(t, b)
		if resp.StatusCode != http.StatusTooManyRequests || e.Code != tc.code || resp.Header.Get("Retry-After") != tc.retryAfter {
			t.Errorf("%v: %d %q Retry-After %q, want 429 %q %q", tc.err, resp.StatusCode, e.Code,
				resp.Header.Get("Retry-After"), tc.code, tc.retryAfter)
		}
		var qe *tenants.QuotaError
		if errors.As(tc.err, &qe) && e.Message != qe.Message {
			t.Errorf("message %q, want the service's %q", e.Message, qe.Message)
		}
	}
}

// TestEdgeSlowBody: a body that stops arriving is a 408 body_timeout after
// BodyReadTimeout, and nothing is submitted.
func TestEdgeSlowBody(t *testing.T) {
	ts := newTenants(t)
	c := &calls{}
	cfg := ts.config()
	cfg.BodyReadTimeout = 200 * time.Millisecond
	h := newHarness(t, cfg, tenantService(t, c, nil))
	secret := ts.secrets[keyID(tenantAcme, auth.RoleWrite)]
	for _, path := range []string{"/v1/runs", "/v1/runs/" + runA + "/messages"} {
		t.Run(path, func(t *testing.T) {
			c.reset()
			conn, err := net.Dial("tcp", hostOf(h))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Fifty times the body's deadline: on a loaded machine too, an
			// answer that has not come by then is not coming.
			if err := conn.SetDeadline(time.Now().Add(50 * cfg.BodyReadTimeout)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			// Half a body of the length announced; the rest never comes.
			_, err = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: "+hostOf(h)+"\r\nAuthorization: Bearer "+secret+
				"\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{\"agent\":\"claude\",")
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body (the connection is held as long as the client likes): %v", err)
			}
			took := time.Since(start)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusRequestTimeout || decodeError(t, b).Code != CodeBodyTimeout {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if took < cfg.BodyReadTimeout {
				t.Errorf("answered after %s, before the body's %s were up", took, cfg.BodyReadTimeout)
			}
			if n := c.submit.Load() + c.input.Load(); n != 0 {
				t.Errorf("the service was called %d times", n)
			}
			// The rest of the body would never come: the connection is
			// closed, not kept for another request.
			if n, err := br.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("after the 408 the connection gave %d bytes, %v; want it closed", n, err)
			}
		})
	}
}
