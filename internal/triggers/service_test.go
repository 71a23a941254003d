package triggers

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/autorun/autoruntest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/seal"
	"github.com/agentgate/agentgate/internal/webhooks"
)

type rig struct {
	svc  *Service
	mem  *autoruntest.Mem
	runs *autoruntest.Runs
}

func newRig(t *testing.T, cfg Config) *rig {
	key := []byte(strings.Repeat("s", 32))
	runBox, _ := seal.New(key, "trigger run")
	secretBox, err := seal.New(key, "trigger secret")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{mem: autoruntest.NewMem(), runs: autoruntest.NewRuns()}
	check := func(_ context.Context, spec runs.Spec) error {
		if spec.Agent != "fake" {
			return runs.Invalid("agent", "unknown agent")
		}
		return nil
	}
	r.svc = New(cfg, Deps{Records: r.mem, Claims: r.mem, Starter: autorun.NewStarter(r.runs, r.mem, nil, nil),
		Check: check, RunBox: runBox, Secrets: secretBox})
	return r
}

func admitAll() error { return nil }

func itoa(i int) string { return strconv.Itoa(i) }

var acme = runs.WithActor(context.Background(), runs.Actor{Tenant: "acme"})

const issuePrompt = `Triage issue {{.payload.issue.number}}: {{.payload.issue.title}} ({{index .headers "X-Github-Event"}})`

func githubTrigger(t *testing.T, r *rig, when autorun.WhenBusy) View {
	t.Helper()
	v, err := r.svc.Create(acme, Request{Name: "issues", Verify: VerifyGitHub, WhenBusy: when,
		Run: runs.Spec{Agent: "fake", Prompt: issuePrompt}})
	if err != nil || v.Secret == "" {
		t.Fatalf("Create = %+v, %v", v, err)
	}
	return v
}

// signed is a GitHub delivery of body signed with secret.
func signed(secret, deliveryID, body string) http.Header {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	h.Set("X-GitHub-Delivery", deliveryID)
	h.Set("X-GitHub-Event", "issues")
	h.Set("Content-Type", "application/json")
	return h
}

const issueBody = `{"action":"opened","issue":{"number":42,"title":"Crash on {{.headers}} start"}}`

func TestGitHubDeliveryStartsOneRunWithThePayloadInItsPrompt(t *testing.T) {
	r := newRig(t, Config{})
	v := githubTrigger(t, r, autorun.Skip)
	d, dup, err := r.svc.Deliver(context.Background(), v.ID, signed(v.Secret, "d-1", issueBody), []byte(issueBody), admitAll)
	if err != nil || dup || d.Outcome != autorun.Started || d.RunID == "" || d.DeliveryID != "d-1" || d.Event != "issues" {
		t.Fatalf("Deliver = %+v, %v, %v", d, dup, err)
	}
	subs := r.runs.Submitted()
	if len(subs) != 1 || subs[0].Prompt != "Triage issue 42: Crash on {{.headers}} start (issues)" || subs[0].Tenant != "acme" {
		t.Fatalf("runs %+v", subs)
	}
	r.runs.FinishAll()
	again, dup, err := r.svc.Deliver(context.Background(), v.ID, signed(v.Secret, "d-1", issueBody), []byte(issueBody), admitAll)
	if err != nil || !dup || again.RunID != d.RunID || len(r.runs.Submitted()) != 1 {
		t.Fatalf("the same delivery again = %+v, dup %v, %v; %d runs", again, dup, err, len(r.runs.Submitted()))
	}
	// GitHub signs the body alone: the signed body replayed under another
	// delivery id is the same delivery.
	replay, dup, err := r.svc.Deliver(context.Background(), v.ID, signed(v.Secret, "forged-id", issueBody), []byte(issueBody), admitAll)
	if err != nil || !dup || replay.RunID != d.RunID || len(r.runs.Submitted()) != 1 {
		t.Fatalf("the signed body replayed with a new delivery id = %+v, dup %v, %v", replay, dup, err)
	}
	for name, h := range map[string]http.Header{
		"wrong secret": signed("not the secret", "d-2", issueBody),
		"no signature": {"X-Github-Delivery": {"d-3"}},
	} {
		if _, _, err := r.svc.Deliver(context.Background(), v.ID, h, []byte(issueBody), admitAll); !errors.Is(err, ErrBadProof) {
			t.Errorf("%s: %v, want ErrBadProof", name, err)
		}
	}
	if _, _, err := r.svc.Deliver(context.Background(), "no-such-trigger", signed(v.Secret, "d-4", issueBody), []byte(issueBody), admitAll); !errors.Is(err, ErrBadProof) {
		t.Errorf("an unknown trigger: %v, want the same ErrBadProof", err)
	}
	if n := len(r.runs.Submitted()); n != 1 {
		t.Fatalf("%d runs after refused deliveries", n)
	}
	list, err := r.svc.Deliveries(acme, v.ID, 100)
	if err != nil || len(list) != 1 {
		t.Fatalf("Deliveries = %+v, %v: the refused ones are not kept", list, err)
	}
}

func TestSecretsAreNotKeptInTheClear(t *testing.T) {
	r := newRig(t, Config{})
	gh := githubTrigger(t, r, autorun.Skip)
	tok, err := r.svc.Create(acme, Request{Name: "alerts", Verify: VerifyToken, Run: runs.Spec{Agent: "fake", Prompt: "alert: {{.payload.alert}}"}})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := r.mem.Keys(context.Background(), "trigger")
	for _, k := range keys {
		data, _, _ := r.mem.Get(context.Background(), k)
		if strings.Contains(string(data), gh.Secret) || strings.Contains(string(data), tok.Secret) {
			t.Fatalf("%s holds a secret in the clear", k)
		}
	}
	if got, _ := r.svc.Get(acme, tok.ID); got.Secret != "" {
		t.Fatal("GET shows the secret")
	}
	h := http.Header{"Authorization": {"Bearer " + tok.Secret}, "Idempotency-Key": {"a-1"}}
	if d, _, err := r.svc.Deliver(context.Background(), tok.ID, h, []byte(`{"alert":"disk full"}`), admitAll); err != nil || d.Outcome != autorun.Started {
		t.Fatalf("token delivery = %+v, %v", d, err)
	}
}

func TestRotationKeepsThePreviousSecretForItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		v := githubTrigger(t, r, autorun.CancelPrevious)
		old := v.Secret
		rotated, err := r.svc.Rotate(acme, v.ID, time.Hour)
		if err != nil || rotated.Secret == "" || rotated.Secret == old || rotated.PreviousSecretExpiresAt == nil {
			t.Fatalf("Rotate = %+v, %v", rotated, err)
		}
		for i, secret := range []string{old, rotated.Secret} {
			id := "r-" + string(rune('a'+i))
			if d, _, err := r.svc.Deliver(context.Background(), v.ID, signed(secret, id, issueBody), []byte(issueBody), admitAll); err != nil || d.DeliveryID != "r-a" {
				t.Fatalf("secret %d within the hour: %v", i, err)
			}
		}
		time.Sleep(time.Hour)
		if _, _, err := r.svc.Deliver(context.Background(), v.ID, signed(old, "r-c", issueBody), []byte(issueBody), admitAll); !errors.Is(err, ErrBadProof) {
			t.Fatalf("the old secret after its hour: %v", err)
		}
		if _, err := r.svc.Rotate(acme, v.ID, 8*24*time.Hour); err == nil {
			t.Fatal("kept a previous secret for 8 days")
		}
	})
}

func TestDeliveriesThatStartNothing(t *testing.T) {
	r := newRig(t, Config{})
	v, err := r.svc.Create(acme, Request{Name: "opened only", Verify: VerifyGitHub,
		Run: runs.Spec{Agent: "fake", Prompt: `{{if eq .payload.action "opened"}}Triage {{.payload.issue.title}}{{end}}`}})
	if err != nil {
		t.Fatal(err)
	}
	closed := `{"action":"closed","issue":{"title":"x"}}`
	d, _, err := r.svc.Deliver(context.Background(), v.ID, signed(v.Secret, "c-1", closed), []byte(closed), admitAll)
	if err != nil || d.Outcome != autorun.Ignored || d.Error == nil || d.Error.Code != "empty_prompt" {
		t.Fatalf("an event the template filters out = %+v, %v", d, err)
	}
	ping := signed(v.Secret, "p-1", `{"zen":"x"}`)
	ping.Set("X-GitHub-Event", "ping")
	if d, _, err := r.svc.Deliver(context.Background(), v.ID, ping, []byte(`{"zen":"x"}`), admitAll); err != nil || d.Outcome != autorun.Ignored {
		t.Fatalf("ping = %+v, %v", d, err)
	}
	bad := `{"action":"opened","issue":"not an object"}`
	if d, _, err := r.svc.Deliver(context.Background(), v.ID, signed(v.Secret, "b-1", bad), []byte(bad), admitAll); err != nil || d.Outcome != autorun.Refused || d.Error.Code != "template_failed" {
		t.Fatalf("a payload the template cannot read = %+v, %v", d, err)
	}
	if _, _, err := r.svc.Deliver(context.Background(), v.ID, signed(v.Secret, "j-1", "not json"), []byte("not json"), admitAll); err == nil {
		t.Fatal("took a body that is not JSON")
	}
	paused := true
	if _, err := r.svc.Update(acme, v.ID, Patch{Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	opened := `{"action":"opened","issue":{"title":"x"}}`
	if d, _, err := r.svc.Deliver(context.Background(), v.ID, signed(v.Secret, "o-1", opened), []byte(opened), admitAll); err != nil || d.Outcome != autorun.Ignored {
		t.Fatalf("a paused trigger = %+v, %v", d, err)
	}
	if n := len(r.runs.Submitted()); n != 0 {
		t.Fatalf("%d runs started", n)
	}
}

func TestQueuedDeliveryStartsWhenThePreviousRunEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		v := githubTrigger(t, r, autorun.Queue)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.svc.Run(ctx); close(done) }()
		for i, want := range []autorun.Outcome{autorun.Started, autorun.Queued, autorun.SkippedBusy} {
			id := "q-" + string(rune('a'+i))
			body := `{"action":"opened","issue":{"number":` + itoa(i) + `,"title":"t"}}`
			d, _, err := r.svc.Deliver(context.Background(), v.ID, signed(v.Secret, id, body), []byte(body), admitAll)
			if err != nil || d.Outcome != want {
				t.Fatalf("delivery %d = %+v, %v, want %s", i, d, err, want)
			}
		}
		state, _, _ := r.mem.Get(context.Background(), autorun.StateKey(Kind, v.ID))
		if strings.Contains(string(state), "Triage issue 1") {
			t.Fatal("the waiting delivery's prompt is kept in the clear")
		}
		r.runs.FinishAll()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		if subs := r.runs.Submitted(); len(subs) != 2 || !strings.HasPrefix(subs[1].Prompt, "Triage issue 1: t") {
			t.Fatalf("runs %+v, want the queued delivery started after the first, with its own prompt", subs)
		}
		list, _ := r.svc.Deliveries(acme, v.ID, 100)
		if list[0].Outcome != autorun.Started || list[0].DeliveryID != "q-b" {
			t.Fatalf("deliveries %+v: want q-b started last", list)
		}
	})
}

func TestCreateRefuses(t *testing.T) {
	r := newRig(t, Config{MaxPerTenant: 1})
	for _, c := range []struct {
		req   Request
		field string
	}{
		{Request{Name: "x", Verify: "hmac", Run: runs.Spec{Agent: "fake", Prompt: "p"}}, "verify"},
		{Request{Name: "x", Verify: VerifyToken, Run: runs.Spec{Agent: "fake", Prompt: "{{printf \"%d\" 1}}"}}, "run.prompt"},
		{Request{Name: "x", Verify: VerifyToken, Run: runs.Spec{Agent: "nobody", Prompt: "p"}}, "run.agent"},
		{Request{Name: "", Verify: VerifyToken, Run: runs.Spec{Agent: "fake", Prompt: "p"}}, "name"},
	} {
		_, err := r.svc.Create(acme, c.req)
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("Create(%+v) = %v, want an error on %s", c.req, err, c.field)
		}
	}
	if _, err := r.svc.Create(acme, Request{Name: "one", Verify: VerifyStandardWebhooks, Run: runs.Spec{Agent: "fake", Prompt: "p"}}); err != nil {
		t.Fatal(err)
	}
	var le *autorun.LimitError
	if _, err := r.svc.Create(acme, Request{Name: "two", Verify: VerifyToken, Run: runs.Spec{Agent: "fake", Prompt: "p"}}); !errors.As(err, &le) || le.Code != CodeTooMany {
		t.Fatalf("a second trigger over a bound of 1: %v", err)
	}
}

func TestStandardWebhooksDelivery(t *testing.T) {
	r := newRig(t, Config{})
	v, err := r.svc.Create(acme, Request{Name: "events", Verify: VerifyStandardWebhooks, Run: runs.Spec{Agent: "fake", Prompt: "event {{.payload.type}}"}})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhooks.ParseSecret(v.Secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"build.failed"}`)
	h := http.Header{}
	webhooks.SetHeaders(h, []webhooks.Secret{secret}, "msg_1", time.Now(), body)
	d, _, err := r.svc.Deliver(context.Background(), v.ID, h, body, admitAll)
	if err != nil || d.Outcome != autorun.Started || d.DeliveryID != "msg_1" || r.runs.Submitted()[0].Prompt != "event build.failed" {
		t.Fatalf("Deliver = %+v, %v", d, err)
	}
}

// A delivery id is known as long as its claim lives, not only while it is
// among the last hundred deliveries listed.
func TestADeliveryIDIsKnownPastTheListedHundred(t *testing.T) {
	r := newRig(t, Config{})
	v, err := r.svc.Create(acme, Request{Name: "alerts", Verify: VerifyToken, Run: runs.Spec{Agent: "fake", Prompt: "{{.payload.n}}"}})
	if err != nil {
		t.Fatal(err)
	}
	send := func(id string) (Delivery, bool) {
		h := http.Header{"Authorization": {"Bearer " + v.Secret}, "Idempotency-Key": {id}}
		d, dup, err := r.svc.Deliver(context.Background(), v.ID, h, []byte(`{"n":1}`), admitAll)
		if err != nil {
			t.Fatal(err)
		}
		return d, dup
	}
	first, _ := send("first")
	for i := range autorun.MaxRecent + 5 {
		send("other-" + itoa(i))
	}
	if list, _ := r.svc.Deliveries(acme, v.ID, 100); len(list) != autorun.MaxRecent || list[len(list)-1].DeliveryID == "first" {
		t.Fatalf("the list keeps %d, the oldest %+v", len(list), list[len(list)-1])
	}
	again, dup := send("first")
	if !dup || again.ID != first.ID || len(r.runs.Submitted()) != 1 {
		t.Fatalf("the first delivery again = %+v, dup %v; %d runs", again, dup, len(r.runs.Submitted()))
	}
}

// A start that waits is started once its run ends even after the
// trigger stopped queueing meanwhile.
func TestAWaitingDeliveryOutlivesAChangeOfRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		v := githubTrigger(t, r, autorun.Queue)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.svc.Run(ctx); close(done) }()
		for i, want := range []autorun.Outcome{autorun.Started, autorun.Queued} {
			body := `{"action":"opened","issue":{"number":` + itoa(i) + `,"title":"t"}}`
			if d, _, err := r.svc.Deliver(context.Background(), v.ID, signed(v.Secret, "w-"+itoa(i), body), []byte(body), admitAll); err != nil || d.Outcome != want {
				t.Fatalf("delivery %d = %+v, %v, want %s", i, d, err, want)
			}
		}
		skip := autorun.Skip
		if _, err := r.svc.Update(acme, v.ID, Patch{WhenBusy: &skip}); err != nil {
			t.Fatal(err)
		}
		r.runs.FinishAll()
		time.Sleep(everyTrigger * time.Second)
		synctest.Wait()
		cancel()
		<-done
		if n := len(r.runs.Submitted()); n != 2 {
			t.Fatalf("%d runs: the delivery that waited was left waiting", n)
		}
	})
}
