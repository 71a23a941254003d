package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhooks"
)

// testWebhookSecret is the first Standard Webhooks test vector's secret.
const testWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookReceiver is a webhook receiver on 127.0.0.1 that verifies what it
// gets as a receiver would, and answers the first run.completed with 503
// to make the gateway retry it.
type hookReceiver struct {
	srv *httptest.Server
	got chan hookRequest

	mu        sync.Mutex
	completed int
}

type hookRequest struct {
	id, typ string
	query   string
	body    []byte
	err     error // the verifier's verdict
	status  int   // what the receiver answered
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	secret, err := webhooks.ParseSecret(testWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	ver, _ := webhooks.NewVerifier(secret)
	h := &hookReceiver{got: make(chan hookRequest, 16)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := hookRequest{id: r.Header.Get(webhooks.HeaderID), query: r.URL.RawQuery, body: body, err: ver.Verify(r.Header, body), status: http.StatusOK}
		var p struct{ Type string }
		_ = json.Unmarshal(body, &p)
		req.typ = p.Type
		if p.Type == string(runs.EventRunCompleted) {
			h.mu.Lock()
			h.completed++
			if h.completed == 1 {
				req.status = http.StatusServiceUnavailable
			}
			h.mu.Unlock()
		}
		if req.err != nil {
			req.status = http.StatusUnauthorized
		}
		w.WriteHeader(req.status)
		select {
		case h.got <- req:
		default: // a test that stopped reading must not hold the server
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// hookGuard bounds each wait for a webhook, or for what the gateway says
// of one. It only catches a hang: at load 30 on 2 cores (two suites and
// more) a claude run alone took 75 s, and its webhook had not come 90 s
// after the request.
const hookGuard = 5 * time.Minute

// next returns the next request of type typ; after hookGuard it fails the
// test with what explain says.
func (h *hookReceiver) next(t *testing.T, typ runs.EventType, explain func() string) hookRequest {
	t.Helper()
	timeout := time.After(hookGuard)
	for {
		select {
		case r := <-h.got:
			if r.err != nil {
				t.Fatalf("webhook %s (%s) does not verify: %v", r.id, r.typ, r.err)
			}
			if r.typ == string(typ) {
				return r
			}
		case <-timeout:
			t.Fatalf("no %s webhook; %s", typ, explain())
		}
	}
}

// TestWebhooksEndToEnd: a Claude run that asks for an approval and names
// a webhook_url gets approval.requested, which the test answers from its
// payload alone, and run.completed, retried once after a 503, every
// request signed; GET /v1/runs/{id}/webhooks lists both deliveries and
// their attempts, and the metrics count them.
func TestWebhooksEndToEnd(t *testing.T) {
	hooks := newHookReceiver(t)
	mock := startMock(t, anthropic.ToolTurn("touch made.txt", "done"))
	settings := gatewayEnv(t, t.TempDir())
	settings["AGENTGATE_WEBHOOK_SECRET"] = testWebhookSecret
	settings["AGENTGATE_WEBHOOK_ALLOW_HOSTS"] = "127.0.0.1"
	settings["AGENTGATE_WEBHOOK_RETRY_MIN"] = "50ms"
	settings["AGENTGATE_WEBHOOK_RETRY_MAX"] = "200ms"
	g := startGateway(t, settings, mockCreds(mock))

	// Refused at submission: a literal internal address, plain http to a
	// host not allowed.
	for body, code := range map[string]string{
		`{"agent":"claude","prompt":"x","webhook_url":"https://169.254.169.254/latest"}`: webhooks.CodeWebhookRefused,
		`{"agent":"claude","prompt":"x","webhook_url":"http://hooks.example.com/x"}`:     "invalid_field",
	} {
		status, b := g.postJSON(t, "/v1/runs", body)
		if status != http.StatusBadRequest || !strings.Contains(string(b), `"code":"`+code+`"`) || !strings.Contains(string(b), `"field":"webhook_url"`) {
			t.Errorf("POST %s = %d %s, want 400 %s", body, status, b, code)
		}
	}

	r := g.post(t, `{"agent":"claude","prompt":"create made.txt","approvals":"ask","metadata":{"ticket":"T-7"},`+
		`"webhook_url":"`+hooks.srv.URL+`/hook?token=s3cr3t"}`)

	explain := func() string {
		run := g.get(t, r.ID)
		resp, err := http.Get(g.URL + "/v1/runs/" + r.ID + "/webhooks")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("the run is %s (%v, activity %q); its deliveries: %s", run.Status, run.Error, run.Activity, b)
	}
	ask := hooks.next(t, runs.EventApprovalRequested, explain)
	if ask.query != "token=s3cr3t" || !strings.HasPrefix(ask.id, "msg_") {
		t.Errorf("approval webhook: id %q, query %q", ask.id, ask.query)
	}
	var ap struct {
		Data struct {
			RunID      string            `json:"run_id"`
			Metadata   map[string]string `json:"metadata"`
			AnswerPath string            `json:"answer_path"`
			Approval   struct{ ID, Tool string }
		}
	}
	if err := json.Unmarshal(ask.body, &ap); err != nil {
		t.Fatal(err)
	}
	if ap.Data.RunID != r.ID || ap.Data.Approval.Tool != "Bash" || ap.Data.Metadata["ticket"] != "T-7" || ap.Data.AnswerPath == "" {
		t.Fatalf("approval.requested payload = %s", ask.body)
	}
	if status, b := g.postJSON(t, ap.Data.AnswerPath, `{"decision":"allow"}`); status != http.StatusOK {
		t.Fatalf("answer from the webhook's answer_path = %d %s", status, b)
	}

	first := hooks.next(t, runs.EventRunCompleted, explain)
	second := hooks.next(t, runs.EventRunCompleted, explain)
	if first.status != http.StatusServiceUnavailable || second.status != http.StatusOK || first.id != second.id || string(first.body) != string(second.body) {
		t.Errorf("run.completed attempts: %q %d, %q %d", first.id, first.status, second.id, second.status)
	}
	var done struct {
		Data struct {
			ID     string     `json:"id"`
			Status runs.State `json:"status"`
			Result string     `json:"result"`
			Seq    uint64     `json:"seq"`
		}
	}
	if err := json.Unmarshal(second.body, &done); err != nil {
		t.Fatal(err)
	}
	run := g.get(t, r.ID)
	if done.Data.ID != r.ID || done.Data.Status != runs.Succeeded || done.Data.Status != run.Status || done.Data.Result != run.Result || done.Data.Seq == 0 {
		t.Errorf("run.completed payload %s; the run is %+v", second.body, run)
	}

	// The deliveries, as a client reads them.
	var list struct{ Deliveries []webhooks.Delivery }
	deadline := time.Now().Add(hookGuard)
	for {
		resp, err := http.Get(g.URL + "/v1/runs/" + r.ID + "/webhooks")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET webhooks = %d %s", resp.StatusCode, b)
		}
		if strings.Contains(string(b), "s3cr3t") {
			t.Fatalf("the deliveries show the URL's token: %s", b)
		}
		list.Deliveries = nil
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Deliveries) == 2 && list.Deliveries[0].State == webhooks.Delivered && list.Deliveries[1].State == webhooks.Delivered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries never both delivered: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	byEvent := map[runs.EventType]webhooks.Delivery{}
	for _, d := range list.Deliveries {
		byEvent[d.Event] = d
	}
	a, c := byEvent[runs.EventApprovalRequested], byEvent[runs.EventRunCompleted]
	if a.ID != ask.id || len(a.Attempts) != 1 || a.Attempts[0].StatusCode != 200 || a.URL != hooks.srv.URL+"/hook?…" {
		t.Errorf("approval delivery = %+v", a)
	}
	if c.ID != first.id || len(c.Attempts) != 2 || c.Attempts[0].StatusCode != 503 || c.Attempts[0].NextRetryAt == nil ||
		c.Attempts[1].StatusCode != 200 || c.Target != webhooks.TargetRun {
		t.Errorf("run.completed delivery = %+v", c)
	}
	waitMetric(t, g, `agentgate_webhook_deliveries_total{outcome="delivered"} 2`)
	waitMetric(t, g, `agentgate_webhook_attempts_total{result="5xx"} 1`)
}

// waitMetric polls /metrics until it has line.
func waitMetric(t *testing.T, g *gateway, line string) {
	t.Helper()
	deadline := time.Now().Add(hookGuard)
	for {
		resp, err := http.Get(g.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), line+"\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never has %s", line)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTenantWebhookEndToEnd: the operator's webhooks file gives the
// gateway's one tenant a hook with a secret of its own, and no gateway
// secret is set: a run that names no webhook_url is still reported there,
// signed with the tenant's secret.
func TestTenantWebhookEndToEnd(t *testing.T) {
	const tenantSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	secret, _ := webhooks.ParseSecret(tenantSecret)
	ver, _ := webhooks.NewVerifier(secret)
	got := make(chan error, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := ver.Verify(r.Header, body)
		if err == nil && !strings.Contains(string(body), `"type":"run.completed"`) {
			err = fmt.Errorf("unexpected webhook %s", body)
		}
		select {
		case got <- err:
		default:
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := dir + "/webhooks"
	if err := os.WriteFile(file, []byte("# the anonymous tenant\n- "+srv.URL+"/tenant "+tenantSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mock := startMock(t, anthropic.TextAnswer("hello"))
	settings := gatewayEnv(t, dir+"/data")
	settings["AGENTGATE_WEBHOOKS_FILE"] = file
	settings["AGENTGATE_WEBHOOK_ALLOW_HOSTS"] = "127.0.0.1"
	g := startGateway(t, settings, mockCreds(mock))
	r := g.post(t, `{"agent":"claude","prompt":"say hello"}`)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hookGuard):
		t.Fatalf("no webhook at the tenant's URL; the run is %+v", g.get(t, r.ID))
	}
}

func TestWebhookConfig(t *testing.T) {
	base := func() config {
		return config{WebhookTimeout: 15 * time.Second, WebhookMaxAttempts: 16, WebhookRetryMin: 5 * time.Second,
			WebhookRetryMax: time.Hour, WebhookRetryFor: 24 * time.Hour, WebhookWorkers: 4}
	}
	if errs := (func() []error { c := base(); c.WebhookSecret = testWebhookSecret; return c.validateWebhooks() })(); len(errs) != 0 {
		t.Fatalf("a valid configuration: %v", errs)
	}
	for name, c := range map[string]struct {
		set  func(*config)
		says string
	}{
		"secret without prefix": {func(c *config) { c.WebhookSecret = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }, "AGENTGATE_WEBHOOK_SECRET:"},
		"short secret":          {func(c *config) { c.WebhookSecret = "whsec_c2hvcnQ=" }, "24 to 64 bytes"},
		"previous alone":        {func(c *config) { c.WebhookSecretPrevious = testWebhookSecret }, "without AGENTGATE_WEBHOOK_SECRET"},
		"bad previous": {func(c *config) { c.WebhookSecret, c.WebhookSecretPrevious = testWebhookSecret, "whsec_x" },
			"AGENTGATE_WEBHOOK_SECRET_PREVIOUS:"},
		"allow list":    {func(c *config) { c.WebhookAllowHosts = []string{"http://x/"} }, "AGENTGATE_WEBHOOK_ALLOW_HOSTS"},
		"long timeout":  {func(c *config) { c.WebhookTimeout = 5 * time.Minute }, "AGENTGATE_WEBHOOK_TIMEOUT"},
		"no attempts":   {func(c *config) { c.WebhookMaxAttempts = 0 }, "AGENTGATE_WEBHOOK_MAX_ATTEMPTS"},
		"max below min": {func(c *config) { c.WebhookRetryMax = time.Second }, "AGENTGATE_WEBHOOK_RETRY_MAX"},
		"no window":     {func(c *config) { c.WebhookRetryFor = 0 }, "AGENTGATE_WEBHOOK_RETRY_FOR"},
		"no workers":    {func(c *config) { c.WebhookWorkers = 0 }, "AGENTGATE_WEBHOOK_WORKERS"},
	} {
		cfg := base()
		c.set(&cfg)
		errs := cfg.validateWebhooks()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.says) {
			t.Errorf("%s: %v, want one error saying %q", name, errs, c.says)
		}
		if len(errs) == 1 && strings.Contains(errs[0].Error(), "MfKQ9r8GKYqrTwjUPD8IL") {
			t.Errorf("%s: the error quotes the secret: %v", name, errs[0])
		}
	}
}
