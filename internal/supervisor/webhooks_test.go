package supervisor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// fakeWebhooks records what the supervisor hands it.
type fakeWebhooks struct {
	mu      sync.Mutex
	checked []string
	got     []notified
}

type notified struct {
	run runs.Run
	ev  runs.StoredEvent
}

func (f *fakeWebhooks) CheckWebhookURL(tenant, url string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked = append(f.checked, url)
	if strings.Contains(url, "refused") {
		return &runs.FieldError{Field: runs.FieldWebhookURL, Kind: runs.ErrInvalid, Code: "webhook_url_refused", Reason: "internal"}
	}
	return nil
}

func (f *fakeWebhooks) NotifyWebhooks(r runs.Run, ev runs.StoredEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, notified{r, ev})
}

func (f *fakeWebhooks) notified() []notified {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]notified(nil), f.got...)
}

func TestWebhooksGetRunCompleted(t *testing.T) {
	hooks := &fakeWebhooks{}
	h := newHarness(t, Config{Webhooks: hooks})
	r, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hello", WebhookURL: "https://hooks.example.com/x"})
	if err != nil {
		t.Fatal(err)
	}
	h.wait(t, r.ID, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for len(hooks.notified()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := hooks.notified()
	if len(got) != 1 {
		t.Fatalf("notified %d events, want run.completed alone: %+v", len(got), got)
	}
	n := got[0]
	var stored runs.StoredEvent
	for _, e := range h.store.eventsOf(r.ID) {
		if e.Type == runs.EventRunCompleted {
			stored = e
		}
	}
	if n.ev.Type != runs.EventRunCompleted || n.ev.Seq != stored.Seq || string(n.ev.JSON) != string(stored.JSON) {
		t.Errorf("notified %s %d %s; stored %d %s", n.ev.Type, n.ev.Seq, n.ev.JSON, stored.Seq, stored.JSON)
	}
	if n.run.ID != r.ID || n.run.Status != runs.Succeeded || n.run.Result != "2 lines" || n.run.FinishedAt == nil ||
		n.run.Spec.WebhookURL != "https://hooks.example.com/x" {
		t.Errorf("notified run = %+v", n.run)
	}
	if len(hooks.checked) != 1 {
		t.Errorf("checked %v", hooks.checked)
	}
}

func TestWebhookURLChecked(t *testing.T) {
	hooks := &fakeWebhooks{}
	h := newHarness(t, Config{Webhooks: hooks})
	_, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "x", WebhookURL: "https://refused.example/"})
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Code != "webhook_url_refused" || fe.Field != runs.FieldWebhookURL {
		t.Fatalf("refused URL = %v", err)
	}
	for _, bad := range []string{"ftp://hooks.example.com/", "hooks.example.com", "https://h.example/" + strings.Repeat("a", runs.MaxWebhookURLBytes)} {
		if _, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "x", WebhookURL: bad}); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("Submit with webhook_url %.30q = %v", bad, err)
		}
	}
	if len(hooks.checked) != 1 {
		t.Errorf("the hook checked %v; syntax errors are Validate's", hooks.checked)
	}

	none := newHarness(t, Config{})
	_, err = none.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "x", WebhookURL: "https://hooks.example.com/"})
	if !errors.As(err, &fe) || fe.Code != "webhooks_disabled" {
		t.Fatalf("a gateway without webhooks = %v", err)
	}
	// A run without one is not the hook's business at submission.
	r, err := none.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hello"})
	if err != nil {
		t.Fatal(err)
	}
	none.wait(t, r.ID, 10*time.Second)
}
