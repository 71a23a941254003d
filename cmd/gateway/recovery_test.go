package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// tenantRuns are two tenants' runs in flight on one gateway: acme's runs
// a long tool, globex's waits for an answer to its approval.
type tenantRuns struct {
	acme, globex testKey
	tool, ask    string
	approval     string
}

// withTenants gives settings a keys file of two tenants, acme and globex,
// and returns their keys.
func withTenants(t *testing.T, settings map[string]string) (acme, globex testKey) {
	keysFile := filepath.Join(t.TempDir(), "api-keys")
	acme = newTestKey(t, "acme-write", "acme", auth.RoleWrite)
	globex = newTestKey(t, "globex-write", "globex", auth.RoleWrite)
	writeKeys(t, keysFile, acme, globex)
	settings["AGENTGATE_API_KEYS_FILE"] = keysFile
	return acme, globex
}

// startTenantRuns submits both runs to g and returns once acme's tool
// runs and globex's approval is pending. The mock serves anthropic.LongTool.
func startTenantRuns(t *testing.T, g *gateway, acme, globex testKey) tenantRuns {
	t.Helper()
	tr := tenantRuns{acme: acme, globex: globex}
	submit := func(key testKey, body string) string {
		st, b := call(t, "POST", g.URL+"/v1/runs", key, body)
		var r runs.Run
		if st != 201 || json.Unmarshal(b, &r) != nil || r.Tenant != key.tenant {
			t.Fatalf("POST /v1/runs as %s = %d %s", key.tenant, st, b)
		}
		return r.ID
	}
	tr.tool = submit(acme, `{"agent":"claude","prompt":"run the long command"}`)
	tr.ask = submit(globex, `{"agent":"claude","prompt":"run the long command","approvals":"ask","interactive":true}`)
	g.waitEventWith(t, tr.tool, acme, runs.EventToolCallStarted, 60*time.Second)
	waitForProcess(t, tr.tool, "perl")
	g.waitEventWith(t, tr.ask, globex, runs.EventApprovalRequested, 60*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for tr.approval == "" {
		st, b := call(t, "GET", g.URL+"/v1/runs/"+tr.ask, globex, "")
		var r runs.Run
		if st == 200 && json.Unmarshal(b, &r) == nil && len(r.PendingApprovals) == 1 {
			tr.approval = r.PendingApprovals[0].ID
		} else if time.Now().After(deadline) {
			t.Fatalf("globex's run never listed its pending approval: %d %s", st, b)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return tr
}

// checkInterrupted checks, through g, that both runs ended failed as
// interrupted (and that message, when not empty, names why), that their
// streams end with run.completed, and that globex's approval was resolved
// run_ended and answers so.
func (tr tenantRuns) checkInterrupted(t *testing.T, g *gateway, message string) {
	t.Helper()
	for _, c := range []struct {
		key testKey
		id  string
	}{{tr.acme, tr.tool}, {tr.globex, tr.ask}} {
		r := g.waitRunWith(t, c.id, c.key, 90*time.Second)
		if r.Status != runs.Failed || r.Error == nil || r.Error.Class != runs.Interrupted ||
			!strings.Contains(r.Error.Message, message) || len(r.PendingApprovals) != 0 {
			t.Errorf("%s's run %s: %s %+v, pending %v; want failed, interrupted, none pending",
				c.key.tenant, c.id, r.Status, r.Error, r.PendingApprovals)
		}
		// streamWith fails the test unless run.completed ends the stream.
		_, evs := g.streamWith(t, c.id, c.key, "")
		if c.id != tr.ask {
			continue
		}
		var resolved []string
		for _, ev := range evs[:len(evs)-1] {
			if ev.Type == string(runs.EventApprovalResolved) {
				var d runs.ApprovalResolvedData
				if err := ev.data(&d); err != nil {
					t.Fatal(err)
				}
				resolved = append(resolved, d.ID+":"+d.Reason)
			}
		}
		if want := tr.approval + ":" + runs.ResolvedRunEnded; len(resolved) != 1 || resolved[0] != want {
			t.Errorf("approvals resolved before run.completed: %v, want [%s]", resolved, want)
		}
	}
	st, b := call(t, "POST", g.URL+"/v1/runs/"+tr.ask+"/approvals/"+tr.approval, tr.globex, `{"decision":"allow"}`)
	if st != 409 || errCode(b) != runs.ConflictRunEnded {
		t.Errorf("answer to the approval after the run ended = %d %s, want 409 run_ended", st, b)
	}
}

// TestRestartWithKeysInterruptsEveryTenantsRun kills -9 a gateway with
// keys while two tenants' runs are in flight, one running a tool and one
// waiting on an approval, and starts it again on the same data: both end
// interrupted, as without keys, and the approval resolves run_ended.
func TestRestartWithKeysInterruptsEveryTenantsRun(t *testing.T) {
	mock := startMock(t, anthropic.LongTool())
	settings := gatewayEnv(t, t.TempDir())
	acme, globex := withTenants(t, settings)
	first, cmd := startGatewayProcess(t, settings, mockCreds(mock))
	tr := startTenantRuns(t, first, acme, globex)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	second := startGateway(t, settings, mockCreds(mock))
	tr.checkInterrupted(t, second, "the gateway stopped")
	assertNoProcesses(t, tr.tool)
	assertNoProcesses(t, tr.ask)
	// Each tenant still lists its own run alone.
	for _, c := range []struct {
		key testKey
		id  string
	}{{acme, tr.tool}, {globex, tr.ask}} {
		st, b := call(t, "GET", second.URL+"/v1/runs", c.key, "")
		var page runs.Page
		if st != 200 || json.Unmarshal(b, &page) != nil || len(page.Runs) != 1 || page.Runs[0].ID != c.id {
			t.Errorf("%s lists %d %s, want its run %s alone", c.key.tenant, st, b, c.id)
		}
	}
}
