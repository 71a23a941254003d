package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/api"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/triggers"
)

// A GitHub trigger through the whole gateway and the real CLI: a signed
// delivery starts a run whose prompt holds the title; a wrong
// signature is a 401 that starts nothing; the same delivery again starts
// no second run.
func TestGitHubTriggerThroughTheGateway(t *testing.T) {
	mock := startMock(t, anthropic.TextAnswer("Triaged."))
	settings := gatewayEnv(t, t.TempDir())
	acme, globex := withTenants(t, settings)
	g := startGateway(t, settings, mockCreds(mock))

	st, b := call(t, "POST", g.URL+"/v1/triggers", acme, `{"name":"issues","verify":"github",
		"run":{"agent":"claude","prompt":"Triage issue #{{.payload.issue.number}}: {{.payload.issue.title}}"}}`)
	var v triggers.View
	if st != 201 || json.Unmarshal(b, &v) != nil || v.Secret == "" || v.URL != g.URL+"/v1/triggers/"+v.ID+"/deliveries" {
		t.Fatalf("create = %d %s", st, b)
	}
	if st, b := call(t, "GET", g.URL+"/v1/triggers/"+v.ID, acme, ""); st != 200 || bytes.Contains(b, []byte(v.Secret)) {
		t.Fatalf("GET = %d %s: it must not show the secret", st, b)
	}
	if st, _ := call(t, "GET", g.URL+"/v1/triggers/"+v.ID, globex, ""); st != 404 {
		t.Fatalf("globex reads acme's trigger: %d", st)
	}

	body := `{"action":"opened","issue":{"number":7,"title":"Login fails after {{.headers}} upgrade"}}`
	st, b = deliver(t, v.URL, sign("not the secret", body), "g-1", body)
	if st != 401 || errorOf(t, b).Code != api.CodeUnauthenticated {
		t.Fatalf("a wrong signature = %d %s", st, b)
	}
	st, unknown := deliver(t, strings.Replace(v.URL, v.ID, "00000000-0000-4000-8000-000000000000", 1), sign(v.Secret, body), "g-1", body)
	if st != 401 || string(unknown) != string(b) {
		t.Fatalf("an unknown trigger = %d %s, want the wrong signature's answer %s", st, unknown, b)
	}
	st, b = deliver(t, v.URL, sign(v.Secret, body), "g-1", body)
	var d triggers.Delivery
	if st != 202 || json.Unmarshal(b, &d) != nil || d.Outcome != "started" || d.RunID == "" {
		t.Fatalf("a signed delivery = %d %s", st, b)
	}
	r := g.waitRunWith(t, d.RunID, acme, 3*time.Minute)
	if r.Status != runs.Succeeded || r.Tenant != "acme" || !strings.Contains(r.PromptPreview, "Triage issue #7: Login fails after {{.headers}} upgrade") {
		t.Fatalf("the delivery's run: %+v", r)
	}
	st, b = deliver(t, v.URL, sign(v.Secret, body), "g-1", body)
	var again triggers.Delivery
	if st != 200 || json.Unmarshal(b, &again) != nil || !again.Duplicate || again.RunID != d.RunID {
		t.Fatalf("the same delivery again = %d %s", st, b)
	}
	var list api.DeliveryList
	if st, b := call(t, "GET", g.URL+"/v1/triggers/"+v.ID+"/deliveries", acme, ""); st != 200 || json.Unmarshal(b, &list) != nil || len(list.Deliveries) != 1 {
		t.Fatalf("deliveries = %d %s: want the one", st, b)
	}
	page, err := g.listRuns(t, acme)
	if err != nil || len(page) != 1 {
		t.Fatalf("acme has %d runs (%v), want the one delivery's", len(page), err)
	}
	m := g.metrics(t)
	for outcome, want := range map[string]float64{"started": 1, "duplicate": 1, "unauthenticated": 2} {
		if got := m("agentgate_trigger_deliveries_total", map[string]string{"outcome": outcome}); got != want {
			t.Errorf("agentgate_trigger_deliveries_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
}

func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// deliver posts a GitHub delivery, with no API key.
func deliver(t *testing.T, url, signature, id, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", signature)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-GitHub-Event", "issues")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// listRuns lists the key's tenant's runs.
func (g *gateway) listRuns(t *testing.T, key testKey) ([]runs.Run, error) {
	st, b := call(t, "GET", g.URL+"/v1/runs", key, "")
	var page struct {
		Runs []runs.Run `json:"runs"`
	}
	if st != 200 {
		t.Fatalf("GET /v1/runs = %d %s", st, b)
	}
	return page.Runs, json.Unmarshal(b, &page)
}
