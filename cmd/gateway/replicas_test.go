package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// startNATS runs a JetStream server on a loopback port, as an external
// server or cluster would be.
func startNATS(t testing.TB) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns.ClientURL()
}

// TestTwoReplicasShareRuns runs two gateways on one JetStream server, as
// behind a load balancer: a run executing on one is streamed, resumed and
// cancelled through the other.
func TestTwoReplicasShareRuns(t *testing.T) {
	natsURL := startNATS(t)
	mock := startMock(t, anthropic.LongTool())
	replica := func(name string) *gateway {
		s := gatewayEnv(t, t.TempDir())
		s["AGENTGATE_NATS_URL"] = natsURL
		s["AGENTGATE_REPLICA_ID"] = name
		return startGateway(t, s, mockCreds(mock))
	}
	a, b := replica("replica-a"), replica("replica-b")

	r := a.post(t, `{"agent":"claude","prompt":"run the long command"}`)
	// B follows A's run live, from the shared log.
	b.waitEvent(t, r.ID, runs.EventToolCallStarted, 30*time.Second)
	waitForProcess(t, r.ID, "perl")
	if got := b.get(t, r.ID); got.Status != runs.Running {
		t.Fatalf("run seen from the other replica: %s", got.Status)
	}
	// B forwards the cancel to A, which owns the process.
	resp, err := http.Post(b.URL+"/v1/runs/"+r.ID+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel through the other replica = %v %v", resp, err)
	}
	resp.Body.Close()
	done := b.waitRun(t, r.ID, 20*time.Second)
	if done.Status != runs.Cancelled || done.Error == nil || done.Error.Class != runs.ClassCancelled {
		t.Fatalf("run %s %+v", done.Status, done.Error)
	}
	assertNoProcesses(t, r.ID)

	// Either replica replays the whole stream and resumes it by
	// Last-Event-ID, and both answer 204 once it is over.
	_, fromA := a.stream(t, r.ID, "")
	_, fromB := b.stream(t, r.ID, "2")
	if len(fromB) != len(fromA)-2 || fromB[0].ID != 3 {
		t.Fatalf("replica B resumed after 2 with %d events from %d; replica A has %d", len(fromB), fromB[0].ID, len(fromA))
	}
	for i := range fromB {
		if fromB[i].Data != fromA[i+2].Data {
			t.Fatalf("event %d differs between replicas", fromB[i].ID)
		}
	}
	last := strconv.FormatUint(fromA[len(fromA)-1].ID, 10)
	for _, g := range []*gateway{a, b} {
		if code, _ := g.stream(t, r.ID, last); code != http.StatusNoContent {
			t.Fatalf("%s: stream after the end = %d, want 204", g.URL, code)
		}
	}
	// The run list is shared too.
	resp, err = http.Get(b.URL + "/v1/runs?agent=claude&status=cancelled")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page runs.Page
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list = %d %v", resp.StatusCode, err)
	}
	if len(page.Runs) != 1 || page.Runs[0].ID != r.ID {
		t.Fatalf("replica B lists %+v, want the one run of replica A", page.Runs)
	}
}

// TestDeadReplicaRunsAreTakenOver SIGKILLs a replica mid-run and never
// starts it again: once its heartbeat expires, another replica marks its
// run interrupted, so the run and its streams end.
func TestDeadReplicaRunsAreTakenOver(t *testing.T) {
	natsURL := startNATS(t)
	mock := startMock(t, anthropic.LongTool())
	replica := func(name string) map[string]string {
		s := gatewayEnv(t, t.TempDir())
		s["AGENTGATE_NATS_URL"] = natsURL
		s["AGENTGATE_REPLICA_ID"] = name
		// Short, for the test to end soon, yet a loaded machine (two
		// suites under -race) can delay a beat by a second or two: at
		// 2s the live replica took the other, still running, for dead
		// and interrupted its run before its tool started.
		s["AGENTGATE_REPLICA_TTL"] = "5s"
		return s
	}
	dead, cmd := startGatewayProcess(t, replica("replica-dead"), mockCreds(mock))
	live := startGateway(t, replica("replica-live"), mockCreds(mock))
	r := dead.post(t, `{"agent":"claude","prompt":"run the long command"}`)
	live.waitEvent(t, r.ID, runs.EventToolCallStarted, 30*time.Second)
	// The tool the dead replica leaves behind on its own machine is no
	// business of the live replica's; clean it up here.
	t.Cleanup(func() { proctree.New().Kill(context.Background(), r.ID) })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	done := live.waitRun(t, r.ID, time.Minute)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.Interrupted ||
		!strings.Contains(done.Error.Message, "replica-dead") {
		t.Fatalf("run of the dead replica: %s %+v", done.Status, done.Error)
	}
	_, evs := live.stream(t, r.ID, "")
	if evs[len(evs)-1].Type != string(runs.EventRunCompleted) {
		t.Fatalf("events end with %s", evs[len(evs)-1].Type)
	}
}

// TestDeadReplicaRunsOfTenantsAreTakenOver is TestDeadReplicaRunsAreTakenOver
// with keys: two tenants' runs, one running a tool and one waiting on an
// approval, on a replica killed with SIGKILL and never started again. The
// live replica takes both over once the dead one's heartbeat expires.
func TestDeadReplicaRunsOfTenantsAreTakenOver(t *testing.T) {
	natsURL := startNATS(t)
	mock := startMock(t, anthropic.LongTool())
	deadSettings := gatewayEnv(t, t.TempDir())
	acme, globex := withTenants(t, deadSettings)
	replica := func(s map[string]string, name string) map[string]string {
		s["AGENTGATE_NATS_URL"] = natsURL
		s["AGENTGATE_REPLICA_ID"] = name
		s["AGENTGATE_REPLICA_TTL"] = "5s" // as TestDeadReplicaRunsAreTakenOver
		return s
	}
	liveSettings := gatewayEnv(t, t.TempDir())
	liveSettings["AGENTGATE_API_KEYS_FILE"] = deadSettings["AGENTGATE_API_KEYS_FILE"]
	dead, cmd := startGatewayProcess(t, replica(deadSettings, "replica-dead"), mockCreds(mock))
	live := startGateway(t, replica(liveSettings, "replica-live"), mockCreds(mock))
	tr := startTenantRuns(t, dead, acme, globex)
	// What the dead replica leaves behind on its own machine is no
	// business of the live replica's; clean it up here.
	t.Cleanup(func() {
		proctree.New().Kill(context.Background(), tr.tool)
		proctree.New().Kill(context.Background(), tr.ask)
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	tr.checkInterrupted(t, live, "replica-dead")
}
