package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestCredentialsOfACommand(t *testing.T) {
	getenv := func(name string) string { return map[string]string{"A": "pass-through", "B": ""}[name] }
	got := CommandSecrets(runs.Command{PassEnv: []string{"A", "B"},
		Env: []string{"X_API_KEY=k1", "GH_TOKEN=t1", "MY_SECRET=s1", "DB_PASSWORD=p1", "GOOGLE_APPLICATION_CREDENTIALS=c1",
			"OAUTH_ID=o1", "HOME=/h", "EMPTY_TOKEN=", "LOG_LEVEL=debug", "malformed"},
		Secrets: []string{"mcp-header-value"}}, getenv)
	if want := "[mcp-header-value pass-through k1 t1 s1 p1 c1 o1]"; fmt.Sprint(got) != want {
		t.Errorf("CommandSecrets = %v, want %s", got, want)
	}
}

func TestRedactRunCopies(t *testing.T) {
	r := (*Redactor)(nil).With("secret-value-1")
	run := runs.Run{Result: "a secret-value-1", Diff: "+secret-value-1", StructuredOutput: json.RawMessage(`{"k":"secret-value-1"}`),
		Error: &runs.RunError{Message: "m secret-value-1", Hint: "h"},
		Turns: []runs.Turn{{Error: &runs.RunError{Message: "secret-value-1"}}}, PendingApprovals: []runs.Approval{{Input: json.RawMessage(`["secret-value-1"]`)}},
		Spec: runs.Spec{Prompt: "use secret-value-1"}}
	got := r.Run(run)
	b, _ := json.Marshal(struct {
		R runs.Run
		S runs.Spec
	}{got, got.Spec})
	if strings.Contains(string(b), "secret-value-1") || strings.Count(string(b), Mark) != 7 {
		t.Errorf("redacted run: %s", b)
	}
	if run.Error.Message != "m secret-value-1" || run.Turns[0].Error.Message != "secret-value-1" || string(run.PendingApprovals[0].Input) != `["secret-value-1"]` {
		t.Error("Run changed its argument")
	}
}

// A secret split across two deltas of one message is removed, and the
// deltas still add up to the message's text once another event releases
// what their stream held back.
func TestEventsScrubsASecretSplitAcrossDeltas(t *testing.T) {
	const secret = "split-secret-value-42"
	e := (*Redactor)(nil).With(secret).Events()
	delta := func(text string) runs.Event {
		return runs.Event{Type: runs.EventMessageDelta, Data: runs.MessageData{MessageID: "m1", Text: text}}
	}
	out := e.Scrub([]runs.Event{delta("the key is split-sec"), delta("ret-value-42, keep it")})
	out = append(out, e.Scrub([]runs.Event{{Type: runs.EventMessageCompleted, Data: runs.MessageData{MessageID: "m1", Text: "the key is " + secret}}})...)
	var deltas strings.Builder
	for _, ev := range out[:len(out)-1] {
		if ev.Type != runs.EventMessageDelta {
			t.Fatalf("event %d is %s, want deltas before the completed message", len(deltas.String()), ev.Type)
		}
		deltas.WriteString(ev.Data.(runs.MessageData).Text)
	}
	if want := "the key is " + Mark + ", keep it"; deltas.String() != want {
		t.Errorf("the deltas say %q, want %q", deltas.String(), want)
	}
	last := out[len(out)-1]
	if last.Type != runs.EventMessageCompleted || last.Data.(runs.MessageData).Text != "the key is "+Mark {
		t.Errorf("last event %s %+v, want the completed message redacted", last.Type, last.Data)
	}
}

func TestEventsWithoutSecretsPassEventsThrough(t *testing.T) {
	evs := []runs.Event{{Type: runs.EventMessageDelta, Data: runs.MessageData{Text: "hello"}}}
	if got := (*Redactor)(nil).Events().Scrub(evs); len(got) != 1 || got[0].Data.(runs.MessageData).Text != "hello" {
		t.Fatalf("Scrub = %+v, want the event as it was", got)
	}
}
