package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// A store with as many readers as it allows answers a new stream with a
// 503 too_many_streams and Retry-After, not a 500: the gateway is full,
// which is not the client's fault, and another replica may have room.
func TestEventsStoreOutOfReaders(t *testing.T) {
	svc := streamService(newMemLog(), fixed(runs.Running))
	svc.events = func(context.Context, string, uint64) (runs.Cursor, error) {
		return nil, fmt.Errorf("open cursor on %s: %w: %w", runA, runs.ErrStreamCapacity, fmt.Errorf("nats: maximum consumers limit reached"))
	}
	h := newHarness(t, Config{}, svc)
	resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events", "")
	if e := errorBody(t, b); resp.StatusCode != http.StatusServiceUnavailable || e.Code != CodeTooManyStreams {
		t.Fatalf("%d %+v, want 503 too_many_streams", resp.StatusCode, e)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
}

// A service that does not answer within RequestTimeout gets the client a
// 503 request_timeout, not silence: the client is still there.
func TestRequestTimeoutAnswers(t *testing.T) {
	svc := &fakeService{list: func(ctx context.Context, _ runs.Filter) (runs.Page, error) {
		<-ctx.Done() // a store that hangs
		return runs.Page{}, ctx.Err()
	}}
	h := newHarness(t, Config{RequestTimeout: 50 * time.Millisecond}, svc)
	resp, b := h.do(t, "GET", "/v1/runs", "")
	if e := errorBody(t, b); resp.StatusCode != http.StatusServiceUnavailable || e.Code != CodeRequestTimeout {
		t.Fatalf("%d %+v, want 503 request_timeout", resp.StatusCode, e)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
}

// A page on this machine (another local port) and the gateway's own origin
// behind a proxy that rewrote Host may change things; another site may not.
func TestOriginsThatMayChangeThings(t *testing.T) {
	svc := &fakeService{cancel: func(_ context.Context, id string) (runs.Run, error) {
		return runs.Run{ID: id, Status: runs.Cancelled}, nil
	}}
	h := newHarness(t, Config{}, svc)
	path := "/v1/runs/" + runA + "/cancel"
	for _, c := range []struct {
		headers []string
		want    int
	}{
		{[]string{"Origin", "http://127.0.0.1:35613"}, http.StatusOK},
		{[]string{"Origin", "http://localhost:3000"}, http.StatusOK},
		{[]string{"Origin", "https://gw.example", "X-Forwarded-Host", "gw.example"}, http.StatusOK},
		{[]string{"Origin", "https://evil.example", "X-Forwarded-Host", "gw.example"}, http.StatusForbidden},
		{[]string{"Origin", "http://127.0.0.1.evil.example"}, http.StatusForbidden},
	} {
		if resp, b := h.do(t, "POST", path, "", c.headers...); resp.StatusCode != c.want {
			t.Errorf("%v: %d %s, want %d", c.headers, resp.StatusCode, b, c.want)
		}
	}
}
