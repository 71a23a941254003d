package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// postJSON posts body to path and returns the status and the body.
func (g *gateway) postJSON(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	resp, err := http.Post(g.URL+path, "application/json", rd)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// waitRecord polls the run until ok says its record is what the test
// waits for.
func (g *gateway) waitRecord(t *testing.T, id, what string, ok func(runs.Run) bool) runs.Run {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := g.get(t, id)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) || r.Status.Terminal() {
			t.Fatalf("run %s never %s: %+v", id, what, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestInteractiveAcrossReplicas drives an interactive Claude run that
// executes on one replica entirely through the other: two approvals, the
// first allowed and the second denied, a follow-up turn and the close,
// then checks the turns, the usage against the mock's billing, and the
// events a client streams.
func TestInteractiveAcrossReplicas(t *testing.T) {
	natsURL := startNATS(t)
	mock := startMock(t, anthropic.TwoTools("touch first.txt", "touch second.txt", "Done."))
	replica := func(name string) *gateway {
		s := gatewayEnv(t, t.TempDir())
		s["AGENTGATE_NATS_URL"] = natsURL
		s["AGENTGATE_REPLICA_ID"] = name
		return startGateway(t, s, mockCreds(mock))
	}
	owner, other := replica("replica-owner"), replica("replica-other")

	r := owner.post(t, `{"agent":"claude","prompt":"create first.txt, then second.txt","approvals":"ask","interactive":true}`)
	if !r.Interactive || r.Approvals != runs.ApprovalsAsk {
		t.Fatalf("created run = %+v", r)
	}
	answer := func(id, decision string) runs.ResolvedApproval {
		t.Helper()
		code, b := other.postJSON(t, "/v1/runs/"+r.ID+"/approvals/"+id, `{"decision":"`+decision+`"}`)
		if code != http.StatusOK {
			t.Fatalf("answer %s through the other replica = %d %s", decision, code, b)
		}
		var ra runs.ResolvedApproval
		if err := json.Unmarshal(b, &ra); err != nil {
			t.Fatal(err)
		}
		return ra
	}
	first := other.waitRecord(t, r.ID, "awaiting its first approval", func(r runs.Run) bool { return len(r.PendingApprovals) == 1 })
	if first.Activity != runs.AwaitingApproval || first.PendingApprovals[0].Tool != "Bash" {
		t.Fatalf("record awaiting approval = %+v", first)
	}
	firstID := first.PendingApprovals[0].ID
	if ra := answer(firstID, "allow"); ra.Decision != runs.Allow || ra.Reason != runs.ResolvedByClient {
		t.Fatalf("resolved = %+v", ra)
	}
	second := other.waitRecord(t, r.ID, "awaiting its second approval", func(r runs.Run) bool {
		return len(r.PendingApprovals) == 1 && r.PendingApprovals[0].ID != firstID
	})
	answer(second.PendingApprovals[0].ID, "deny")
	// Answering the first again is a conflict, wherever it is sent.
	if code, b := other.postJSON(t, "/v1/runs/"+r.ID+"/approvals/"+firstID, `{"decision":"deny"}`); code != http.StatusConflict ||
		!strings.Contains(string(b), `"approval_resolved"`) {
		t.Fatalf("second answer = %d %s", code, b)
	}
	other.waitRecord(t, r.ID, "idle after turn 1", func(r runs.Run) bool { return r.Activity == runs.Idle && len(r.Turns) == 1 })

	code, b := other.postJSON(t, "/v1/runs/"+r.ID+"/messages", `{"text":"Thanks. Anything else?"}`)
	if code != http.StatusAccepted {
		t.Fatalf("message through the other replica = %d %s", code, b)
	}
	var msg struct{ ID string }
	if err := json.Unmarshal(b, &msg); err != nil || msg.ID == "" {
		t.Fatalf("message answer %s: %v", b, err)
	}
	other.waitRecord(t, r.ID, "idle after turn 2", func(r runs.Run) bool { return r.Activity == runs.Idle && len(r.Turns) == 2 })
	if code, b := other.postJSON(t, "/v1/runs/"+r.ID+"/interrupt", ""); code != http.StatusConflict ||
		!strings.Contains(string(b), `"no_turn_running"`) {
		t.Fatalf("interrupt while idle = %d %s", code, b)
	}
	if code, b := other.postJSON(t, "/v1/runs/"+r.ID+"/close", ""); code != http.StatusAccepted {
		t.Fatalf("close = %d %s", code, b)
	}
	done := other.waitRun(t, r.ID, 30*time.Second)
	if done.Status != runs.Succeeded || len(done.Turns) != 2 || done.Turns[1].MessageID != msg.ID || len(done.PendingApprovals) != 0 {
		t.Fatalf("finished run = %+v", done)
	}
	billed := normalized(mock.Ledger().Messages().Billed())
	if done.Usage != billed || done.Turns[0].Usage.Add(done.Turns[1].Usage) != billed {
		t.Fatalf("usage %+v, turns %+v and %+v; the mock billed %+v", done.Usage, done.Turns[0].Usage, done.Turns[1].Usage, billed)
	}
	if code, b := other.postJSON(t, "/v1/runs/"+r.ID+"/messages", `{"text":"late"}`); code != http.StatusConflict ||
		!strings.Contains(string(b), `"run_ended"`) {
		t.Fatalf("message after the end = %d %s", code, b)
	}

	_, evs := other.stream(t, r.ID, "")
	var order []string
	for _, ev := range evs {
		switch runs.EventType(ev.Type) {
		case runs.EventTurnStarted, runs.EventTurnCompleted, runs.EventApprovalRequested, runs.EventApprovalResolved,
			runs.EventMessageQueued:
			order = append(order, ev.Type)
		}
	}
	want := "turn.started approval.requested approval.resolved approval.requested approval.resolved turn.completed " +
		"message.queued turn.started turn.completed"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("interactive events\n%s\nwant\n%s", got, want)
	}
	assertNoProcesses(t, r.ID)
}
