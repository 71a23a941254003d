package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// keyed makes one request to the rig with an API key and returns the
// status and body; status 0 when the request failed.
func keyed(method, url, secret, body string) (int, []byte) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	req.Header.Set("Authorization", "Bearer "+secret)
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

// keyedRun reads the run with the key.
func keyedRun(base, id, secret string) (runs.Run, error) {
	st, b := keyed("GET", base+"/v1/runs/"+id, secret, "")
	var r runs.Run
	if st != http.StatusOK {
		return r, fmt.Errorf("GET run %s = %d %s", id, st, b)
	}
	return r, json.Unmarshal(b, &r)
}

// keyedEvent is one event of a stream, its data left raw.
type keyedEvent struct {
	Type runs.EventType  `json:"type"`
	Data json.RawMessage `json:"data"`
}

// keyedEvents reads the run's NDJSON stream with the key from the start
// until stop says so or the stream ends, and returns its events.
func keyedEvents(base, id, secret string, within time.Duration, stop func(keyedEvent) bool) []keyedEvent {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/runs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []keyedEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var ev keyedEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		out = append(out, ev)
		if stop(ev) {
			break
		}
	}
	return out
}

// TestReplicasKilledWithKeys kills -9, on the rig with a keys file of two
// tenants, the replicas running acme's run (its tool under way) and
// globex's (its approval pending): the replicas left take both over once
// REPLICA_TTL is over; both end failed, interrupted, with run.completed
// last in their streams, and the approval resolves run_ended.
func TestReplicasKilledWithKeys(t *testing.T) {
	const ttl = 4 * time.Second
	keysFile := filepath.Join(t.TempDir(), "api-keys")
	secrets := map[string]string{}
	var lines strings.Builder
	for _, tenant := range []string{"acme", "globex"} {
		secret, err := auth.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		secrets[tenant] = secret
		lines.WriteString(auth.Line(tenant+"-write", tenant, auth.RoleWrite, secret) + "\n")
	}
	if err := os.WriteFile(keysFile, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, startMock(t), rigOptions{Env: map[string]string{
		"AGENTGATE_REPLICA_TTL": ttl.String(), "AGENTGATE_API_KEYS_FILE": keysFile,
	}})
	r.mustStart()
	submit := func(tenant, body string) string {
		st, b := keyed("POST", r.Nginx+"/v1/runs", secrets[tenant], body)
		var run runs.Run
		if st != http.StatusCreated || json.Unmarshal(b, &run) != nil || run.Tenant != tenant {
			t.Fatalf("POST as %s = %d %s", tenant, st, b)
		}
		r.track(run.ID)
		return run.ID
	}
	tool := submit("acme", runBody(120, "tenant-tool"))
	ask := submit("globex", `{"agent":"claude","prompt":"run the tool sleep:120 tenant-ask","approvals":"ask","interactive":true}`)
	typeIs := func(typ runs.EventType) func(keyedEvent) bool {
		return func(ev keyedEvent) bool { return ev.Type == typ || ev.Type == runs.EventRunCompleted }
	}
	if evs := keyedEvents(r.Nginx, tool, secrets["acme"], 90*time.Second, typeIs(runs.EventToolCallStarted)); len(evs) == 0 ||
		evs[len(evs)-1].Type != runs.EventToolCallStarted {
		t.Fatalf("acme's tool never started: %d events", len(evs))
	}
	var approval string
	if !waitFor(90*time.Second, func() bool {
		rec, err := keyedRun(r.Nginx, ask, secrets["globex"])
		if err == nil && len(rec.PendingApprovals) == 1 {
			approval = rec.PendingApprovals[0].ID
		}
		return approval != ""
	}) {
		t.Fatal("globex's approval was never pending")
	}
	if !waitFor(30*time.Second, func() bool { return r.owner(tool) != 0 && r.owner(ask) != 0 }) {
		t.Fatal("no gateway's process tree holds the runs")
	}
	killed := map[int]bool{r.owner(tool): true, r.owner(ask): true}
	for n := range killed {
		r.do("kill-gateway", n)
	}
	var problems []string
	for _, c := range []struct{ tenant, id string }{{"acme", tool}, {"globex", ask}} {
		var rec runs.Run
		waitFor(90*time.Second, func() bool {
			got, err := keyedRun(r.Nginx, c.id, secrets[c.tenant])
			rec = got
			return err == nil && rec.Status.Terminal()
		})
		if rec.Status != runs.Failed || rec.Error == nil || rec.Error.Class != runs.Interrupted || len(rec.PendingApprovals) != 0 {
			problems = append(problems, fmt.Sprintf("%s's run %s after its replica was killed: %s %+v, pending %v",
				c.tenant, c.id, rec.Status, rec.Error, rec.PendingApprovals))
			continue
		}
		evs := keyedEvents(r.Nginx, c.id, secrets[c.tenant], 30*time.Second, typeIs(runs.EventRunCompleted))
		if len(evs) == 0 || evs[len(evs)-1].Type != runs.EventRunCompleted {
			problems = append(problems, fmt.Sprintf("%s's stream does not end with run.completed (%d events)", c.tenant, len(evs)))
			continue
		}
		var resolved []string
		for _, ev := range evs {
			if ev.Type == runs.EventApprovalResolved {
				var d runs.ApprovalResolvedData
				json.Unmarshal(ev.Data, &d)
				resolved = append(resolved, d.ID+":"+d.Reason)
			}
		}
		if c.id == ask && (len(resolved) != 1 || resolved[0] != approval+":"+runs.ResolvedRunEnded) {
			problems = append(problems, fmt.Sprintf("globex's approvals resolved %v, want [%s:run_ended]", resolved, approval))
		}
	}
	if st, b := keyed("POST", r.Nginx+"/v1/runs/"+ask+"/approvals/"+approval, secrets["globex"], `{"decision":"allow"}`); st != http.StatusConflict ||
		!strings.Contains(string(b), `"run_ended"`) {
		problems = append(problems, fmt.Sprintf("answer after the end = %d %s, want 409 run_ended", st, b))
	}
	// The killed gateways come back on their data, which kills what
	// their runs left.
	for n := range killed {
		r.do("start-gateway", n)
	}
	for _, id := range []string{tool, ask} {
		if !waitFor(15*time.Second, func() bool { pids, _ := proctree.New().Find(id); return len(pids) == 0 }) {
			pids, _ := proctree.New().Find(id)
			problems = append(problems, fmt.Sprintf("run %s: processes left after its gateway started again: %s", id, describe(pids)))
			proctree.New().Kill(t.Context(), id)
		}
	}
	report(t, problems)
}
