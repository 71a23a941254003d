package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// What a first-time user met following the README, each a small mismatch
// between the spec and the gateway.

func TestListCursorMustBeOneTheListingGaveOut(t *testing.T) {
	listed := false
	svc := &fakeService{list: func(ctx context.Context, f runs.Filter) (runs.Page, error) {
		listed = true
		return runs.Page{}, nil
	}}
	h := newHarness(t, Config{}, svc)
	for _, c := range []string{"zzz", "00000000-0000-0000-0000-00000000000", "6F9619FF-8B86-D011-B42D-00C04FC964FF"} {
		resp, b := h.do(t, "GET", "/v1/runs?cursor="+c, "")
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("cursor %q: status %d, want 400", c, resp.StatusCode)
		}
		if e := errorBody(t, b); e.Code != CodeInvalidField || e.Field != "cursor" {
			t.Errorf("cursor %q: error %+v, want invalid_field on cursor", c, e)
		}
	}
	if listed {
		t.Error("a malformed cursor reached the service")
	}
	resp, _ := h.do(t, "GET", "/v1/runs?cursor=6f9619ff-8b86-d011-b42d-00c04fc964ff", "")
	if resp.StatusCode != http.StatusOK || !listed {
		t.Errorf("a run id as cursor: status %d, listed %v; want 200 from the service", resp.StatusCode, listed)
	}
}

func TestHeadOnProbes(t *testing.T) {
	svc := &fakeService{ready: func(context.Context) error { return nil }}
	h := newHarness(t, Config{}, svc)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, b := h.do(t, "HEAD", path, "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s: %d, want 200", path, resp.StatusCode)
		}
		if len(b) != 0 {
			t.Errorf("HEAD %s: a body of %d bytes", path, len(b))
		}
	}
}

// A run that is not there is one sentence, not the error's every layer.
func TestRunNotFoundSaysItOnce(t *testing.T) {
	const id = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
	svc := &fakeService{get: func(ctx context.Context, got string) (runs.Run, error) {
		return runs.Run{}, fmt.Errorf("get run %s: %w", got, runs.ErrNotFound)
	}}
	h := newHarness(t, Config{}, svc)
	for _, path := range []string{"/v1/runs/" + id, "/v1/runs/" + id + "/events", "/v1/runs/" + id + "/diff"} {
		resp, b := h.do(t, "GET", path, "")
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET %s: %d, want 404", path, resp.StatusCode)
		}
		e := errorBody(t, b)
		if e.Code != CodeNotFound || strings.Count(e.Message, id) != 1 || strings.Contains(e.Message, "get run") {
			t.Errorf("GET %s: %+v, want not_found naming the run once", path, e)
		}
	}
}

// The gateway serves its own description without a key, byte for byte
// the files in the repository, and a page that renders it.
func TestServesItsSpec(t *testing.T) {
	h := newHarness(t, Config{}, &fakeService{})
	yamlFile, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	schemaFile, err := os.ReadFile("../../events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{"/openapi.yaml": yamlFile, "/events.schema.json": schemaFile} {
		resp, b := h.do(t, "GET", path, "")
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, want) {
			t.Errorf("GET %s: %d, %d bytes; want 200 and the repository's file (%d bytes)", path, resp.StatusCode, len(b), len(want))
		}
	}
	resp, b := h.do(t, "GET", "/openapi.json", "")
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &doc) != nil || doc.Paths["/v1/runs"] == nil || doc.Paths["/openapi.yaml"] == nil {
		t.Errorf("GET /openapi.json: %d %.200s", resp.StatusCode, b)
	}
	resp, b = h.do(t, "GET", "/docs", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(b), `src="/docs/docs.js"`) || resp.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("GET /docs: %d %q", resp.StatusCode, resp.Header)
	}
	resp, b = h.do(t, "GET", "/docs/docs.js", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "/openapi.json") {
		t.Errorf("GET /docs/docs.js: %d", resp.StatusCode)
	}
}
