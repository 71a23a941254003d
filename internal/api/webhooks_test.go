package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhooks"
)

// webhookService is a fakeService that lists a run's deliveries.
type webhookService struct {
	*fakeService
	list func(r runs.Run) ([]webhooks.Delivery, error)
}

func (w *webhookService) RunWebhooks(ctx context.Context, r runs.Run) ([]webhooks.Delivery, error) {
	return w.list(r)
}

func TestRunWebhooks(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	svc := &webhookService{fakeService: &fakeService{}, list: func(r runs.Run) ([]webhooks.Delivery, error) {
		switch r.ID {
		case artifactRun:
			return []webhooks.Delivery{{ID: "msg_01", RunID: r.ID, Event: runs.EventRunCompleted, State: webhooks.Delivered,
				URL: "https://hooks.example.com/x?…", CreatedAt: at,
				Attempts: []webhooks.Attempt{{At: at, StatusCode: 500, Error: "the receiver answered 500"}, {At: at, StatusCode: 204}}}}, nil
		case "0196f0c2-7e1a-7000-8000-0000000000bb":
			return nil, nil
		}
		return nil, errors.New("store down")
	}}
	h := newHarness(t, Config{}, svc)
	resp, body := h.do(t, http.MethodGet, "/v1/runs/"+artifactRun+"/webhooks", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET webhooks = %d %s", resp.StatusCode, body)
	}
	var got RunWebhooks
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Deliveries) != 1 || got.Deliveries[0].ID != "msg_01" || len(got.Deliveries[0].Attempts) != 2 ||
		got.Deliveries[0].Attempts[0].StatusCode != 500 || got.Deliveries[0].State != webhooks.Delivered {
		t.Errorf("body = %s", body)
	}
	resp, body = h.do(t, http.MethodGet, "/v1/runs/0196f0c2-7e1a-7000-8000-0000000000bb/webhooks", "")
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"deliveries":[]}` {
		t.Errorf("a run without webhooks = %d %s", resp.StatusCode, body)
	}
	resp, body = h.do(t, http.MethodGet, "/v1/runs/0196f0c2-7e1a-7000-8000-0000000000cc/webhooks", "")
	if resp.StatusCode != http.StatusInternalServerError || strings.Contains(string(body), "store down") {
		t.Errorf("a failing list = %d %s", resp.StatusCode, body)
	}

	// A service without webhooks: 404 in the API's shape.
	plain := newHarness(t, Config{}, &fakeService{})
	resp, body = plain.do(t, http.MethodGet, "/v1/runs/"+artifactRun+"/webhooks", "")
	wantCode(t, resp, string(body), http.StatusNotFound, CodeNotFound)
}

func TestCreateRunWebhookURL(t *testing.T) {
	var gotSpec runs.Spec
	svc := &fakeService{submit: func(ctx context.Context, spec runs.Spec) (runs.Run, error) {
		gotSpec = spec
		if strings.Contains(spec.WebhookURL, "10.0.0.1") {
			return runs.Run{}, &runs.FieldError{Field: runs.FieldWebhookURL, Kind: runs.ErrInvalid,
				Code: webhooks.CodeWebhookRefused, Reason: "10.0.0.1 is an internal address"}
		}
		return runs.Run{ID: artifactRun, Status: runs.Queued}, nil
	}}
	h := newHarness(t, Config{}, svc)
	post := func(body string) (*http.Response, []byte) {
		return h.do(t, http.MethodPost, "/v1/runs", body, "Content-Type", "application/json")
	}
	resp, body := post(`{"agent":"claude","prompt":"hi","webhook_url":"https://hooks.example.com/x?token=1"}`)
	if resp.StatusCode != http.StatusCreated || gotSpec.WebhookURL != "https://hooks.example.com/x?token=1" {
		t.Fatalf("POST with webhook_url = %d %s, spec %+v", resp.StatusCode, body, gotSpec)
	}
	if strings.Contains(string(body), "token=1") {
		t.Errorf("the answer shows the webhook URL: %s", body)
	}
	resp, body = post(`{"agent":"claude","prompt":"hi","webhook_url":"https://10.0.0.1/x"}`)
	wantCode(t, resp, string(body), http.StatusBadRequest, webhooks.CodeWebhookRefused)
	for _, bad := range []string{`""`, `5`, `["https://a.example/"]`, `"https://a.example/` + strings.Repeat("a", runs.MaxWebhookURLBytes) + `"`} {
		resp, body = post(`{"agent":"claude","prompt":"hi","webhook_url":` + bad + `}`)
		wantCode(t, resp, string(body), http.StatusBadRequest, CodeInvalidField)
		if !strings.Contains(string(body), `"field":"webhook_url"`) {
			t.Errorf("webhook_url %.40s: %s", bad, body)
		}
	}
}

// TestCreateRunUnusualWebhookHosts: a webhook_url whose host is an
// internal address or name in an unusual form (numeric, short, mapped,
// with a zone, a trailing dot, percent escapes, user info, full-width
// letters) is refused at POST /v1/runs with the 400 and code of its plain
// form, by the gateway's webhook check.
func TestCreateRunUnusualWebhookHosts(t *testing.T) {
	secret, err := webhooks.ParseSecret(webhooks.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))
	if err != nil {
		t.Fatal(err)
	}
	d := webhooks.New(nil, webhooks.Options{Secrets: []webhooks.Secret{secret}}) // never started: it only checks
	defer d.Close()
	submitted := 0
	svc := &fakeService{submit: func(ctx context.Context, spec runs.Spec) (runs.Run, error) {
		if err := d.CheckWebhookURL(spec.Tenant, spec.WebhookURL); err != nil {
			return runs.Run{}, err
		}
		submitted++
		return runs.Run{ID: artifactRun, Status: runs.Queued}, nil
	}}
	h := newHarness(t, Config{}, svc)
	post := func(url string) (*http.Response, string) {
		resp, body := h.do(t, http.MethodPost, "/v1/runs", `{"agent":"claude","prompt":"hi","webhook_url":"`+url+`"}`,
			"Content-Type", "application/json")
		return resp, string(body)
	}
	for host, plain := range map[string]string{
		"2130706433": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "0x7f.1": "127.0.0.1", "0x7f.0.0.1": "127.0.0.1",
		"127.1": "127.0.0.1", "0xa9fea9fe": "169.254.169.254", "10.0x0.0.01": "10.0.0.1", "127.0.0.1.": "127.0.0.1",
		"[::ffff:127.0.0.1]": "127.0.0.1", "[::ffff:7f00:1]": "127.0.0.1", "[::127.0.0.1]": "127.0.0.1",
		"[fe80::1%25eth0]": "[fe80::1]", "localhost.": "localhost", "LOCALHOST": "localhost",
		"example.internal.": "localhost", "%31%32%37.0.0.1": "127.0.0.1", "good.example@127.0.0.1": "127.0.0.1",
		"ｌｏｃａｌｈｏｓｔ": "localhost",
	} {
		for _, scheme := range []string{"https", "http"} {
			_, plainBody := post(scheme + "://" + plain + "/hook")
			var want ErrorResponse
			if err := json.Unmarshal([]byte(plainBody), &want); err != nil || want.Error.Code == "" {
				t.Fatalf("the plain form %s://%s: %s", scheme, plain, plainBody)
			}
			resp, body := post(scheme + "://" + host + "/hook")
			wantCode(t, resp, body, http.StatusBadRequest, want.Error.Code)
		}
	}
	if submitted != 0 {
		t.Errorf("%d runs with an internal webhook_url were submitted", submitted)
	}
}
