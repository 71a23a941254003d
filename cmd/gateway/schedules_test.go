package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/api"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/schedules"
)

// A schedule through the whole gateway: made, listed for its tenant only,
// fired now and by the clock with the real CLI, paused, deleted.
func TestSchedulesThroughTheGateway(t *testing.T) {
	mock := startMock(t, anthropic.TextAnswer("Dependencies are current."))
	settings := gatewayEnv(t, t.TempDir())
	acme, globex := withTenants(t, settings)
	g := startGateway(t, settings, mockCreds(mock))

	st, b := call(t, "POST", g.URL+"/v1/schedules", acme, `{"name":"bad","every":"1h","run":{"agent":"nobody","prompt":"x"}}`)
	if e := errorOf(t, b); st != 400 || e.Field != "run.agent" || e.Code != "unknown_agent" {
		t.Fatalf("a schedule of an unknown agent = %d %s", st, b)
	}
	st, b = call(t, "POST", g.URL+"/v1/schedules", acme, `{"name":"bad","every":"5s","run":{"agent":"claude","prompt":"x"}}`)
	if e := errorOf(t, b); st != 400 || e.Field != "every" {
		t.Fatalf("every 5s = %d %s", st, b)
	}
	st, b = call(t, "POST", g.URL+"/v1/schedules", acme, `{"name":"bad","every":"1h","run":{"agent":"claude","promt":"x"}}`)
	if e := errorOf(t, b); st != 400 || e.Field != "run.promt" || e.Code != api.CodeUnknownField {
		t.Fatalf("a typo in the run = %d %s", st, b)
	}
	v := scheduleOf(t, 201)(call(t, "POST", g.URL+"/v1/schedules", acme,
		`{"name":"nightly deps","every":"10s","run":{"agent":"claude","prompt":"bump the dependencies"}}`))
	if v.NextFireAt == nil || v.WhenBusy != "skip" || v.Run.Prompt != "bump the dependencies" {
		t.Fatalf("created %+v", v)
	}
	if st, b := call(t, "GET", g.URL+"/v1/schedules/"+v.ID, globex, ""); st != 404 {
		t.Fatalf("globex reads acme's schedule: %d %s", st, b)
	}
	if st, b := call(t, "POST", g.URL+"/v1/schedules/"+v.ID+"/run", globex, ""); st != 404 {
		t.Fatalf("globex fires acme's schedule: %d %s", st, b)
	}
	var list api.ScheduleList
	if st, b := call(t, "GET", g.URL+"/v1/schedules", globex, ""); st != 200 || json.Unmarshal(b, &list) != nil || len(list.Schedules) != 0 {
		t.Fatalf("globex lists %d %s", st, b)
	}

	// The clock's first fire, by whichever replica's loop: this one's.
	clock := waitFire(t, g, acme, v.ID, func(f schedules.Fire) bool { return !f.Manual && f.Outcome == "started" })
	if r := g.waitRunWith(t, clock.RunID, acme, 3*time.Minute); r.Status != runs.Succeeded || r.Tenant != "acme" {
		t.Fatalf("the clock's run ended %+v", r)
	}
	st, b = call(t, "POST", g.URL+"/v1/schedules/"+v.ID+"/run", acme, "")
	var now schedules.Fire
	if st != 201 || json.Unmarshal(b, &now) != nil || now.Outcome != "started" || !now.Manual || now.RunID == "" {
		t.Fatalf("fire now = %d %s", st, b)
	}
	g.waitRunWith(t, now.RunID, acme, 3*time.Minute)

	paused := scheduleOf(t, 200)(call(t, "PATCH", g.URL+"/v1/schedules/"+v.ID, acme, `{"paused":true}`))
	if !paused.Paused || paused.NextFireAt != nil || len(paused.LastFires) < 2 {
		t.Fatalf("paused %+v", paused)
	}
	if st, b := call(t, "DELETE", g.URL+"/v1/schedules/"+v.ID, acme, ""); st != 204 {
		t.Fatalf("DELETE = %d %s", st, b)
	}
	if st, _ := call(t, "GET", g.URL+"/v1/schedules/"+v.ID, acme, ""); st != 404 {
		t.Fatalf("a deleted schedule answers %d", st)
	}
	if n := g.metrics(t)("agentgate_schedule_fires_total", map[string]string{"outcome": "started"}); n < 2 {
		t.Fatalf("agentgate_schedule_fires_total{outcome=started} = %v, want 2 or more", n)
	}
}

func errorOf(t *testing.T, b []byte) api.ErrorDetail {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not an error body: %s", b)
	}
	return e.Error
}

func scheduleOf(t *testing.T, want int) func(int, []byte) schedules.View {
	return func(st int, b []byte) schedules.View {
		t.Helper()
		var v schedules.View
		if st != want || json.Unmarshal(b, &v) != nil || v.ID == "" {
			t.Fatalf("answer %d %s, want %d and a schedule", st, b, want)
		}
		return v
	}
}

// waitFire waits for a fire of the schedule that ok accepts: the clock's
// own time, which the test cannot move through the gateway's process.
func waitFire(t *testing.T, g *gateway, key testKey, id string, ok func(schedules.Fire) bool) schedules.Fire {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, b := call(t, "GET", g.URL+"/v1/schedules/"+id+"/fires", key, "")
		var list api.FireList
		if st != http.StatusOK || json.Unmarshal(b, &list) != nil {
			t.Fatalf("fires = %d %s", st, b)
		}
		for _, f := range list.Fires {
			if ok(f) {
				return f
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no such fire within 2 min: %s", strings.TrimSpace(string(b)))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The console's schedules page, in Chromium: the schedule the API made is
// listed, fired now (the run it started is the gateway's record of the
// fire) and paused with the keyboard.
func TestConsoleSchedules(t *testing.T) {
	consoleTools(t)
	mock := startMock(t, anthropic.TextAnswer("Checked."))
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))
	v := scheduleOf(t, 201)(call(t, "POST", g.URL+"/v1/schedules", testKey{},
		`{"name":"nightly console check","every":"1h","run":{"agent":"claude","prompt":"Check the console."}}`))
	rep := runConsoleScript(t, g.URL+"/", artifactDir(t), map[string]any{"flow": "schedules", "schedule": v.Name})
	if !rep.OK || rep.RunID == "" {
		t.Fatalf("the page: %+v", rep)
	}
	got := scheduleOf(t, 200)(call(t, "GET", g.URL+"/v1/schedules/"+v.ID, testKey{}, ""))
	if !got.Paused || got.NextFireAt != nil {
		t.Fatalf("after the page paused it: %+v", got)
	}
	if len(got.LastFires) == 0 || !got.LastFires[0].Manual || got.LastFires[0].Outcome != "started" || got.LastFires[0].RunID != rep.RunID {
		t.Fatalf("fires %+v, want the page's fire of run %s newest", got.LastFires, rep.RunID)
	}
	g.waitRun(t, rep.RunID, 3*time.Minute)
	assertNoProcesses(t, rep.RunID)
}
