package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/autorun/autoruntest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/schedules"
	"github.com/agentgate/agentgate/internal/seal"
	"github.com/agentgate/agentgate/internal/triggers"
)

// autorunService is a gateway's service with real schedules and triggers
// over an in-memory store and runs.
type autorunService struct {
	*fakeService
	sched *schedules.Service
	trig  *triggers.Service
	runs  *autoruntest.Runs
}

func newAutorunService(t *testing.T) *autorunService {
	t.Helper()
	mem, rs := autoruntest.NewMem(), autoruntest.NewRuns()
	key := []byte(strings.Repeat("k", 32))
	box := func(purpose string) *seal.Box {
		b, err := seal.New(key, purpose)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	check := func(_ context.Context, spec runs.Spec) error {
		if spec.Agent != "claude" {
			return runs.ErrUnknownAgent
		}
		return nil
	}
	starter := autorun.NewStarter(rs, mem, Explain, nil)
	return &autorunService{fakeService: &fakeService{}, runs: rs,
		sched: schedules.New(schedules.Config{}, schedules.Deps{Records: mem, Claims: mem, Starter: starter, Check: check, Box: box("s")}),
		trig: triggers.New(triggers.Config{}, triggers.Deps{Records: mem, Claims: mem, Starter: starter, Check: check,
			RunBox: box("r"), Secrets: box("t")}),
	}
}

func (a *autorunService) CreateSchedule(ctx context.Context, req schedules.Request) (schedules.View, error) {
	return a.sched.Create(ctx, req)
}
func (a *autorunService) GetSchedule(ctx context.Context, id string) (schedules.View, error) {
	return a.sched.Get(ctx, id)
}
func (a *autorunService) ListSchedules(ctx context.Context) ([]schedules.View, error) {
	return a.sched.List(ctx)
}
func (a *autorunService) UpdateSchedule(ctx context.Context, id string, p schedules.Patch) (schedules.View, error) {
	return a.sched.Update(ctx, id, p)
}
func (a *autorunService) DeleteSchedule(ctx context.Context, id string) error {
	return a.sched.Delete(ctx, id)
}
func (a *autorunService) FireSchedule(ctx context.Context, id, key string) (schedules.Fire, error) {
	return a.sched.FireNow(ctx, id, key)
}
func (a *autorunService) ScheduleFires(ctx context.Context, id string, limit int) ([]schedules.Fire, error) {
	return a.sched.Fires(ctx, id, limit)
}
func (a *autorunService) CreateTrigger(ctx context.Context, req triggers.Request) (triggers.View, error) {
	return a.trig.Create(ctx, req)
}
func (a *autorunService) GetTrigger(ctx context.Context, id string) (triggers.View, error) {
	return a.trig.Get(ctx, id)
}
func (a *autorunService) ListTriggers(ctx context.Context) ([]triggers.View, error) {
	return a.trig.List(ctx)
}
func (a *autorunService) UpdateTrigger(ctx context.Context, id string, p triggers.Patch) (triggers.View, error) {
	return a.trig.Update(ctx, id, p)
}
func (a *autorunService) DeleteTrigger(ctx context.Context, id string) error {
	return a.trig.Delete(ctx, id)
}
func (a *autorunService) RotateTrigger(ctx context.Context, id string, keep time.Duration) (triggers.View, error) {
	return a.trig.Rotate(ctx, id, keep)
}
func (a *autorunService) TriggerDeliveries(ctx context.Context, id string, limit int) ([]triggers.Delivery, error) {
	return a.trig.Deliveries(ctx, id, limit)
}
func (a *autorunService) Deliver(ctx context.Context, id string, h http.Header, body []byte, admit func() error) (triggers.Delivery, bool, error) {
	return a.trig.Deliver(ctx, id, h, body, admit)
}
func (a *autorunService) DeliveryRefused(outcome string) { a.trig.Refused(outcome) }

var jsonBody = []string{"Content-Type", "application/json"}

// Every answer of the schedules' routes is what openapi.yaml says.
func TestScheduleRoutesAnswerAsTheSpecSays(t *testing.T) {
	h := newHarness(t, Config{}, newAutorunService(t))
	resp, b := h.do(t, "POST", "/v1/schedules", `{"name":"nightly","cron":"0 3 * * *","timezone":"Europe/Paris","run":{"agent":"claude","prompt":"go"}}`, jsonBody...)
	if resp.StatusCode != 201 || !strings.HasPrefix(resp.Header.Get("Location"), "/v1/schedules/") {
		t.Fatalf("create = %d %s", resp.StatusCode, b)
	}
	validateOpenAPI(t, "Schedule", b)
	var v schedules.View
	_ = json.Unmarshal(b, &v)
	for _, c := range []struct {
		method, path, body, schema string
		status                     int
	}{
		{"GET", "/v1/schedules", "", "ScheduleList", 200},
		{"GET", "/v1/schedules/" + v.ID, "", "Schedule", 200},
		{"POST", "/v1/schedules/" + v.ID + "/run", "", "Fire", 201},
		{"POST", "/v1/schedules/" + v.ID + "/run", "", "Fire", 200}, // skipped_busy
		{"GET", "/v1/schedules/" + v.ID + "/fires?limit=1", "", "FireList", 200},
		{"PATCH", "/v1/schedules/" + v.ID, `{"every":"15m","paused":true}`, "Schedule", 200},
		{"PATCH", "/v1/schedules/" + v.ID, `{"every":"5s"}`, "Error", 400},
		{"PATCH", "/v1/schedules/" + v.ID, `{"run":{"agent":"claude","promt":"x"}}`, "Error", 400},
		{"POST", "/v1/schedules", `{"name":"x","every":"1h","run":{"agent":"other","prompt":"x"}}`, "Error", 400},
		{"POST", "/v1/schedules", `{"name":"x","every":"1h"}`, "Error", 400},
		{"GET", "/v1/schedules/" + v.ID + "/fires?limit=101", "", "Error", 400},
		{"GET", "/v1/schedules/not-a-uuid", "", "Error", 404},
		{"GET", "/v1/schedules/00000000-0000-4000-8000-000000000000", "", "Error", 404},
		{"DELETE", "/v1/schedules/" + v.ID, "", "", 204},
		{"GET", "/v1/schedules/" + v.ID, "", "Error", 404},
	} {
		hdr := []string{}
		if c.body != "" {
			hdr = jsonBody
		}
		resp, b := h.do(t, c.method, c.path, c.body, hdr...)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s %s = %d %s, want %d", c.method, c.path, c.body, resp.StatusCode, b, c.status)
			continue
		}
		if c.schema != "" {
			validateOpenAPI(t, c.schema, b)
		}
	}
}

// Every answer of the triggers' routes is what openapi.yaml says, and a
// delivery needs the trigger's proof and no key.
func TestTriggerRoutesAnswerAsTheSpecSays(t *testing.T) {
	svc := newAutorunService(t)
	h := newHarness(t, Config{TriggerMaxBodyBytes: 256, TriggerRate: 0.001, TriggerBurst: 4}, svc)
	resp, b := h.do(t, "POST", "/v1/triggers", `{"name":"alerts","verify":"token","run":{"agent":"claude","prompt":"{{.payload.alert}}"}}`, jsonBody...)
	if resp.StatusCode != 201 {
		t.Fatalf("create = %d %s", resp.StatusCode, b)
	}
	validateOpenAPI(t, "Trigger", b)
	var v triggers.View
	_ = json.Unmarshal(b, &v)
	if v.Secret == "" || v.URL != h.srv.URL+"/v1/triggers/"+v.ID+"/deliveries" {
		t.Fatalf("created %+v", v)
	}
	deliveries := "/v1/triggers/" + v.ID + "/deliveries"
	auth := []string{"Content-Type", "application/json", "Authorization", "Bearer " + v.Secret, "Idempotency-Key", "alert-1"}
	for _, c := range []struct {
		name, body string
		header     []string
		schema     string
		status     int
	}{
		{"a delivery", `{"alert":"disk full"}`, auth, "Delivery", 202},
		{"the same again", `{"alert":"disk full"}`, auth, "Delivery", 200},
		{"no proof", `{"alert":"x"}`, jsonBody, "Error", 401},
		{"no proof, again", `{"alert":"x"}`, jsonBody, "Error", 401}, // a stranger spends no rate
		{"not JSON", `alert: x`, append(auth[:4:4], "Idempotency-Key", "alert-2"), "Error", 400},
		{"too large", `{"alert":"` + strings.Repeat("x", 300) + `"}`, auth, "Error", 413},
		{"another", `{"alert":"y"}`, append(auth[:4:4], "Idempotency-Key", "alert-3"), "Delivery", 202},
		{"rate limited", `{"alert":"z"}`, append(auth[:4:4], "Idempotency-Key", "alert-4"), "Error", 429},
	} {
		resp, b := h.do(t, "POST", deliveries, c.body, c.header...)
		if resp.StatusCode != c.status {
			t.Errorf("%s = %d %s, want %d", c.name, resp.StatusCode, b, c.status)
			continue
		}
		validateOpenAPI(t, c.schema, b)
	}
	if n := len(svc.runs.Submitted()); n != 1 {
		t.Fatalf("%d runs, want the first delivery's (the other was skipped: the first runs)", n)
	}
	for _, c := range []struct {
		method, path, body, schema string
		status                     int
	}{
		{"GET", "/v1/triggers", "", "TriggerList", 200},
		{"GET", "/v1/triggers/" + v.ID, "", "Trigger", 200},
		{"GET", deliveries, "", "DeliveryList", 200},
		{"PATCH", "/v1/triggers/" + v.ID, `{"paused":true}`, "Trigger", 200},
		{"PATCH", "/v1/triggers/" + v.ID, `{"verify":"github"}`, "Error", 400},
		{"POST", "/v1/triggers/" + v.ID + "/rotate", `{"keep_previous_seconds":60}`, "Trigger", 200},
		{"POST", "/v1/triggers/" + v.ID + "/rotate", `{"keep_previous_seconds":-1}`, "Error", 400},
		{"POST", "/v1/triggers", `{"name":"x","verify":"hmac","run":{"agent":"claude","prompt":"x"}}`, "Error", 400},
		{"POST", "/v1/triggers", `{"name":"x","verify":"token","run":{"agent":"claude","prompt":"{{printf \"%d\" 1}}"}}`, "Error", 400},
		{"DELETE", "/v1/triggers/" + v.ID, "", "", 204},
		{"GET", "/v1/triggers/" + v.ID, "", "Error", 404},
	} {
		hdr := []string{}
		if c.body != "" {
			hdr = jsonBody
		}
		resp, b := h.do(t, c.method, c.path, c.body, hdr...)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s %s = %d %s, want %d", c.method, c.path, c.body, resp.StatusCode, b, c.status)
			continue
		}
		if c.schema != "" {
			validateOpenAPI(t, c.schema, b)
		}
	}
}
