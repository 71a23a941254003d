package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// While the gateway starts, it is alive and not ready: every request but
// /healthz gets a 503 not_ready with Retry-After, so that a load balancer
// sends it elsewhere at once instead of waiting on an unserved port; then
// the API takes over.
func TestStartingHandlerThenAPI(t *testing.T) {
	var h swapHandler
	h.set(startingHandler())
	for _, c := range []struct {
		method, path string
		want         int
	}{{"GET", "/healthz", 200}, {"GET", "/readyz", 503}, {"POST", "/v1/runs", 503}, {"GET", "/v1/runs/x/events", 503}} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.want {
			t.Errorf("%s %s while starting: %d, want %d", c.method, c.path, rec.Code, c.want)
		}
		if c.want == 503 {
			var body struct{ Error struct{ Code string } }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code != "not_ready" || rec.Header().Get("Retry-After") == "" {
				t.Errorf("%s %s while starting: %q %v", c.method, c.path, rec.Body, rec.Header())
			}
		}
	}
	h.set(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/runs", nil))
	if rec.Code != http.StatusTeapot {
		t.Fatalf("after the swap: %d", rec.Code)
	}
}
