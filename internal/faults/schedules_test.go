package faults

// Schedules on the rig: every replica's loop looks for the fire times due
// each second and each fire time is claimed once in the cluster, so a
// schedule fires once per fire time whichever replicas live, and its
// when_busy rule holds across replicas.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/schedules"
)

// scheduleEvery is the interval of the cases' schedules: the shortest a
// schedule may have, so that a case sees several fires in a minute.
const scheduleEvery = 10 * time.Second

// quietMargin is how far from the next fire time a replica is killed:
// rig.sh takes a moment before its SIGKILL (longer on a loaded machine),
// and a kill that lands while the replica claims a fire is a takeover,
// which delays that fire by autorun.PendingLease.
const quietMargin = 2 * time.Second

// firesWithin bounds the wait for a fire time's record once the time has
// come: a fire claimed by a replica that died is taken over only after
// autorun.PendingLease, and a loaded machine adds to that.
const firesWithin = autorun.PendingLease + 2*time.Minute

// TestScheduleFiresOnceAcrossAReplicaKill makes a schedule every 10 s of a
// short run through nginx and, between two fires about 30 s in, kills -9
// the replica that claimed the last fire: the replicas left go on firing.
// Over the 65 s from the schedule's creation every fire time has one
// record, started, 10 s after the one before (6 or 7 of them); none is
// missed; each names its own run, which succeeds; and the gateway made no
// run but those.
func TestScheduleFiresOnceAcrossAReplicaKill(t *testing.T) {
	const window = 65 * time.Second
	r := newRig(t, startMock(t), rigOptions{Env: map[string]string{"AGENTGATE_REPLICA_TTL": takeoverTTL.String()}})
	r.mustStart()
	sc := r.mustCreateSchedule(map[string]any{"name": "every ten seconds", "every": scheduleEvery.String(),
		"run": json.RawMessage(runBody(0, "schedule-once"))})
	created := sc.CreatedAt
	t.Logf("schedule %s made at %s, first fire at %v", sc.ID, created.Format(time.RFC3339Nano), sc.NextFireAt)

	killed := r.killBetweenFires(sc.ID, created.Add(25*time.Second), created.Add(window-scheduleEvery))
	end := created.Add(window)
	r.waitFireNear(sc.ID, end)
	pausedAt := r.mustPause(sc.ID)
	t.Logf("paused %s after the schedule was made", pausedAt.Sub(created).Round(time.Millisecond))

	// The fires' runs are read to their end first: a fire a replica was
	// handling as the pause landed has its record by then.
	verified := startedRuns(r.mustFires(sc.ID))
	var problems []string
	problems = append(problems, r.verifyAll(t, verified, want{Status: runs.Succeeded}, settleWithin)...)
	fires := r.mustFires(sc.ID)
	started := startedRuns(fires)
	for _, id := range started {
		if !slices.Contains(verified, id) {
			problems = append(problems, r.verify(t, id, want{Status: runs.Succeeded}, settleWithin)...)
		}
	}
	for _, f := range slices.Backward(fires) {
		t.Logf("fire %s: %s run %s, submitted by gateway %d", f.FireTime.Format(time.TimeOnly), f.Outcome, f.RunID, r.submittedBy(f.RunID))
	}

	problems = append(problems, checkClockFires(fires, created)...)
	inWindow := 0
	for _, f := range fires {
		if !f.FireTime.After(end) {
			inWindow++
		}
		if f.Outcome != autorun.Started || f.RunID == "" {
			problems = append(problems, fmt.Sprintf("fire %s is %s (run %q, error %+v), want started with its run", f.FireTime, f.Outcome, f.RunID, f.Error))
		}
	}
	if inWindow != 6 && inWindow != 7 {
		problems = append(problems, fmt.Sprintf("%d fire times within %s of the schedule's creation, want 6 or 7 of a schedule every %s", inWindow, window, scheduleEvery))
	}
	if r.alive(fmt.Sprintf("GATEWAY%d", killed)) {
		problems = append(problems, fmt.Sprintf("gateway %d, killed, is running again", killed))
	}
	seen := map[string]bool{}
	for _, id := range started {
		if seen[id] {
			problems = append(problems, fmt.Sprintf("run %s is named by two fires", id))
		}
		seen[id] = true
	}
	problems = append(problems, runsMadeSince(r.Nginx, created, len(started))...)
	report(t, append(problems, checkListing(r.Nginx, started)...))
}

// TestScheduleSkipsWhileBusyAcrossReplicas makes a schedule every 10 s,
// when_busy skip, of a run whose tool sleeps two minutes: over 35 s the
// first fire starts the run and every later fire, whichever replica
// claims it, is skipped_busy naming that run; no second run of the
// schedule runs at any moment, and the run, cancelled, is the only one
// the gateway made.
func TestScheduleSkipsWhileBusyAcrossReplicas(t *testing.T) {
	const window = 35 * time.Second
	r := newRig(t, startMock(t), rigOptions{})
	r.mustStart()
	sc := r.mustCreateSchedule(map[string]any{"name": "long every ten seconds", "every": scheduleEvery.String(), "when_busy": "skip",
		"run": json.RawMessage(runBody(120, "tool-schedule-busy"))})
	created := sc.CreatedAt
	end := created.Add(window)
	t.Logf("schedule %s made at %s", sc.ID, created.Format(time.RFC3339Nano))

	// Each poll takes the runs running at that moment: two of them at
	// once is the fault, reported once for each set of runs.
	var problems []string
	running := map[string]bool{}
	overlaps := map[string]bool{}
	watched := waitFor(firesWithin+window, func() bool {
		now, err := runningRuns(r.Nginx)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(now)
		if together := strings.Join(now, " "); len(now) > 1 && !overlaps[together] {
			overlaps[together] = true
			problems = append(problems, fmt.Sprintf("%s after the schedule was made, %d runs running at once: %s", time.Since(created).Round(time.Millisecond), len(now), together))
		}
		for _, id := range now {
			running[id] = true
		}
		return !time.Now().Before(end) && fireNear(r.mustFires(sc.ID), end)
	})
	if !watched {
		t.Fatalf("schedule %s: no fire time within the last %s before %s recorded after %s: %+v", sc.ID, scheduleEvery, end, firesWithin, r.mustFires(sc.ID))
	}
	r.mustPause(sc.ID)
	fires := r.mustFires(sc.ID)
	if len(fires) == 0 || fires[len(fires)-1].Outcome != autorun.Started || fires[len(fires)-1].RunID == "" {
		t.Fatalf("schedule %s: the first fire started no run: %+v", sc.ID, fires)
	}
	run := fires[len(fires)-1].RunID
	r.track(run)
	if status, raw := postControl(r.Nginx, run, "cancel"); status != http.StatusOK {
		problems = append(problems, fmt.Sprintf("POST cancel of run %s = %d %s", run, status, raw))
	}
	problems = append(problems, r.verify(t, run, want{Status: runs.Cancelled, Class: runs.ClassCancelled}, settleWithin)...)
	// Read again once the run ended: a fire handled as the pause landed
	// has its record by then.
	fires = r.mustFires(sc.ID)
	for _, f := range slices.Backward(fires) {
		t.Logf("fire %s: %s run %q busy run %q", f.FireTime.Format(time.TimeOnly), f.Outcome, f.RunID, f.BusyRunID)
	}

	problems = append(problems, checkClockFires(fires, created)...)
	skipped := 0
	for _, f := range fires[:len(fires)-1] {
		if f.Outcome != autorun.SkippedBusy || f.BusyRunID != run || f.RunID != "" {
			problems = append(problems, fmt.Sprintf("fire %s is %s (run %q, busy run %q, error %+v), want skipped_busy naming run %s",
				f.FireTime, f.Outcome, f.RunID, f.BusyRunID, f.Error, run))
			continue
		}
		skipped++
	}
	if skipped < 2 {
		problems = append(problems, fmt.Sprintf("%d fires skipped_busy within %s of a schedule every %s whose run lasts minutes, want 2 or more", skipped, window, scheduleEvery))
	}
	for id := range running {
		if id != run {
			problems = append(problems, fmt.Sprintf("run %s ran, which no fire started (the schedule's run is %s)", id, run))
		}
	}
	if !running[run] {
		problems = append(problems, fmt.Sprintf("run %s was never seen running while its schedule fired: the fires skipped nothing that ran", run))
	}
	report(t, append(problems, checkListing(r.Nginx, []string{run})...))
}

// killBetweenFires waits for a quiet moment from after on: the latest fire
// of the schedule started a run that has ended, and the next fire time is
// at least quietMargin away. It then kills -9 the gateway that submitted
// that run, the one that claimed the fire (the replica whose tick falls
// first after each whole second claims most fires), waits until that
// gateway is gone, and returns it. It fails the test when no quiet moment comes
// before by.
func (r *rig) killBetweenFires(id string, after, by time.Time) int {
	r.t.Helper()
	var latest schedules.Fire
	quiet := waitFor(time.Until(by), func() bool {
		fires := r.mustFires(id)
		if len(fires) == 0 || fires[0].FireTime.Before(after) {
			return false
		}
		latest = fires[0]
		if latest.Outcome != autorun.Started {
			r.t.Fatalf("schedule %s: fire %s is %s (%+v), want started; the fires: %+v", id, latest.FireTime, latest.Outcome, latest.Error, fires)
		}
		rec, _, err := getRun(r.Nginx, latest.RunID)
		return err == nil && rec.Status.Terminal() && time.Until(latest.FireTime.Add(scheduleEvery)) >= quietMargin
	})
	if !quiet {
		r.t.Fatalf("schedule %s: no moment between fires with its run ended and the next fire %s away before %s (latest fire %+v)",
			id, quietMargin, by.Format(time.TimeOnly), latest)
	}
	n := r.submittedBy(latest.RunID)
	if n == 0 {
		r.t.Fatalf("run %s of fire %s: no gateway logged its submission", latest.RunID, latest.FireTime)
	}
	r.do("kill-gateway", n)
	role := fmt.Sprintf("GATEWAY%d", n)
	if !waitFor(30*time.Second, func() bool { return !r.alive(role) }) {
		r.t.Fatalf("gateway %d still alive after kill -9", n)
	}
	r.t.Logf("killed gateway %d, which submitted the run of fire %s, %s before the next fire",
		n, latest.FireTime.Format(time.TimeOnly), time.Until(latest.FireTime.Add(scheduleEvery)).Round(time.Millisecond))
	return n
}

// waitFireNear waits until end has come and the schedule has a record of
// a fire time in the scheduleEvery before end: fires are handled in
// order, so every earlier fire time has its record too.
func (r *rig) waitFireNear(id string, end time.Time) {
	r.t.Helper()
	if !waitFor(time.Until(end)+firesWithin, func() bool { return !time.Now().Before(end) && fireNear(r.mustFires(id), end) }) {
		r.t.Fatalf("schedule %s: no fire time within the last %s before %s recorded after %s: %+v", id, scheduleEvery, end, firesWithin, r.mustFires(id))
	}
}

// fireNear reports whether fires hold one whose time is in the
// scheduleEvery up to end.
func fireNear(fires []schedules.Fire, end time.Time) bool {
	for _, f := range fires {
		if f.FireTime.After(end.Add(-scheduleEvery)) && !f.FireTime.After(end) {
			return true
		}
	}
	return false
}

// checkClockFires checks what every schedule's fires must be: clock
// fires, the first within scheduleEvery (and the second of truncation) of
// the schedule's creation, each scheduleEvery after the one before (no
// fire time twice, none left out), none missed.
func checkClockFires(fires []schedules.Fire, created time.Time) []string {
	var problems []string
	if len(fires) == 0 {
		return []string{"no fires"}
	}
	oldest := slices.Clone(fires)
	slices.Reverse(oldest)
	if first := oldest[0].FireTime; !first.After(created.Add(-time.Second)) || first.After(created.Add(scheduleEvery)) {
		problems = append(problems, fmt.Sprintf("first fire time %s, want within %s of the schedule's creation at %s", first, scheduleEvery, created))
	}
	for i, f := range oldest {
		if f.Manual {
			problems = append(problems, fmt.Sprintf("fire %s is manual; nothing fired the schedule by hand", f.FireTime))
		}
		if f.Outcome == autorun.Missed {
			problems = append(problems, fmt.Sprintf("fire %s missed (%+v) while replicas ran", f.FireTime, f.Error))
		}
		if i > 0 {
			if gap := f.FireTime.Sub(oldest[i-1].FireTime); gap != scheduleEvery {
				problems = append(problems, fmt.Sprintf("fire %s comes %s after fire %s, want %s: a fire time twice or one left out",
					f.FireTime, gap, oldest[i-1].FireTime, scheduleEvery))
			}
		}
	}
	return problems
}

// startedRuns are the runs the fires started, oldest first.
func startedRuns(fires []schedules.Fire) []string {
	var ids []string
	for _, f := range slices.Backward(fires) {
		if f.RunID != "" {
			ids = append(ids, f.RunID)
		}
	}
	return ids
}

// runsMadeSince checks that the gateway made want runs of the tenant
// (the rig's only one, with no keys) since when.
func runsMadeSince(base string, since time.Time, want int) []string {
	all, err := listAll(base)
	if err != nil {
		return []string{err.Error()}
	}
	made := 0
	for _, r := range all {
		if !r.CreatedAt.Before(since) {
			made++
		}
	}
	if made != want {
		return []string{fmt.Sprintf("%d runs made since the schedule was, for %d fires that started one", made, want)}
	}
	return nil
}

// runningRuns lists the ids of the runs running now.
func runningRuns(base string) ([]string, error) {
	status, b := call(http.MethodGet, base+"/v1/runs?status=running&limit=100", "")
	var page runs.Page
	if status != http.StatusOK || json.Unmarshal(b, &page) != nil {
		return nil, fmt.Errorf("GET running runs = %d %s", status, b)
	}
	var ids []string
	for _, r := range page.Runs {
		ids = append(ids, r.ID)
	}
	return ids, nil
}

// mustCreateSchedule makes a schedule through nginx.
func (r *rig) mustCreateSchedule(body map[string]any) schedules.View {
	r.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		r.t.Fatal(err)
	}
	status, raw := call(http.MethodPost, r.Nginx+"/v1/schedules", string(b))
	var v schedules.View
	if status != http.StatusCreated || json.Unmarshal(raw, &v) != nil || v.ID == "" || v.CreatedAt.IsZero() {
		r.t.Fatalf("POST /v1/schedules through nginx = %d %s", status, raw)
	}
	return v
}

// mustPause pauses the schedule through nginx and returns when the answer
// came.
func (r *rig) mustPause(id string) time.Time {
	r.t.Helper()
	status, raw := call(http.MethodPatch, r.Nginx+"/v1/schedules/"+url.PathEscape(id), `{"paused":true}`)
	var v schedules.View
	if status != http.StatusOK || json.Unmarshal(raw, &v) != nil || !v.Paused || v.NextFireAt != nil {
		r.t.Fatalf("PATCH schedule %s {\"paused\":true} through nginx = %d %s", id, status, raw)
	}
	return time.Now()
}

// mustFires lists the schedule's fires through nginx, newest first.
func (r *rig) mustFires(id string) []schedules.Fire {
	r.t.Helper()
	status, raw := call(http.MethodGet, r.Nginx+"/v1/schedules/"+url.PathEscape(id)+"/fires", "")
	var list struct {
		Fires []schedules.Fire `json:"fires"`
	}
	if status != http.StatusOK || json.Unmarshal(raw, &list) != nil {
		r.t.Fatalf("GET the fires of schedule %s through nginx = %d %s", id, status, raw)
	}
	return list.Fires
}

// submittedBy returns the gateway (1-3) whose log records the run's
// submission, 0 when none does: a schedule's run is submitted by the
// replica that claimed its fire.
func (r *rig) submittedBy(id string) int {
	if id == "" {
		return 0
	}
	for n := 1; n <= 3; n++ {
		b, err := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("gateway%d", n), "log"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			var line struct {
				Msg   string `json:"msg"`
				RunID string `json:"run_id"`
			}
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "run queued" && line.RunID == id {
				return n
			}
		}
	}
	return 0
}

// call makes one request with a JSON body (none when empty) and returns
// the status and body; status 0 when the request failed.
func call(method, u, body string) (int, []byte) {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
