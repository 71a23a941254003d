package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/runs"
)

// approvalTimeout is the approval_timeout_seconds of the deadline case.
const approvalTimeout = 3 * time.Second

// interactiveCases are the suite's cases for interactive runs and
// approvals, with those of hibernation, for an agent that lists the
// fields; for one that does not, a single case checks that it refuses
// them.
func (s *suite) interactiveCases() []suiteCase {
	d := s.adapter.Describe()
	if !slices.Contains(d.Fields, runs.FieldInteractive) || !slices.Contains(d.Fields, runs.FieldApprovals) {
		return []suiteCase{{"interactive_refused", s.interactiveRefused}}
	}
	return append([]suiteCase{
		{"approval_allow_then_deny", s.allowThenDeny},
		{"approval_deadline_denies", s.approvalDeadline},
		{"approval_allow_session", s.allowSession},
		{"approval_pending_cancel", s.cancelPendingApproval},
		{"approval_pending_close", s.closePendingApproval},
		{"follow_up_turns", s.followUpTurns},
		{"interrupt_mid_tool", s.interruptMidTool},
		{"steer", s.steer},
	}, s.hibernateCases()...)
}

// interactiveRefused checks that an agent without interactive runs says so
// by name, rather than running a one-shot run instead.
func (s *suite) interactiveRefused(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: "hi"}, credentials)
	for field, spec := range map[string]runs.Spec{
		runs.FieldInteractive: {Agent: s.adapter.Name(), Prompt: "hi", Interactive: true},
		runs.FieldApprovals:   {Agent: s.adapter.Name(), Prompt: "hi", Approvals: runs.ApprovalsAsk},
	} {
		_, err := g.sup.Submit(context.Background(), spec)
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, runs.ErrUnsupported) {
			t.Errorf("%s: %v, want unsupported_option naming it", field, err)
		}
	}
}

// input sends in to the run and fails the test on an error.
func (g *gateway) input(t *testing.T, id string, in runs.Input) runs.InputResult {
	t.Helper()
	res, err := g.sup.Input(context.Background(), id, in)
	if err != nil {
		t.Fatalf("input %+v: %v; events %s", in, err, typesOf(g.events(t, id)))
	}
	return res
}

// waitEvents waits until the run has n events of type typ and returns
// them.
func (g *gateway) waitEvents(t *testing.T, id string, typ runs.EventType, n int, within time.Duration) []runs.Event {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		evs := of(g.events(t, id), typ)
		if len(evs) >= n {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s in run %s within %s, want %d: %s", len(evs), typ, id, within, n, typesOf(g.events(t, id)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// approval waits for the run's nth approval request.
func (g *gateway) approval(t *testing.T, id string, n int) runs.ApprovalRequestedData {
	t.Helper()
	evs := g.waitEvents(t, id, runs.EventApprovalRequested, n, quick)
	var a runs.ApprovalRequestedData
	decode(t, evs[n-1], &a)
	if a.ID == "" || a.Tool == "" || len(a.Options) == 0 || a.ExpiresAt.IsZero() {
		t.Fatalf("approval.requested = %+v", a)
	}
	return a
}

// turn waits for the run's nth turn.completed.
func (g *gateway) turn(t *testing.T, id string, n int) runs.TurnCompletedData {
	t.Helper()
	evs := g.waitEvents(t, id, runs.EventTurnCompleted, n, quick)
	var d runs.TurnCompletedData
	decode(t, evs[n-1], &d)
	if d.Turn != n {
		t.Fatalf("turn.completed %d is numbered %d", n, d.Turn)
	}
	return d
}

func decode(t *testing.T, ev runs.Event, v any) {
	t.Helper()
	raw, _ := ev.Data.(json.RawMessage)
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s %d: %v", ev.Type, ev.Seq, err)
	}
}

func resolutions(t *testing.T, evs []runs.Event) []runs.ApprovalResolvedData {
	t.Helper()
	var out []runs.ApprovalResolvedData
	for _, ev := range of(evs, runs.EventApprovalResolved) {
		var d runs.ApprovalResolvedData
		decode(t, ev, &d)
		out = append(out, d)
	}
	return out
}

func (g *gateway) exists(id, name string) bool {
	_, err := os.Stat(filepath.Join(g.root, id, name))
	return err == nil
}

// allowThenDeny: two tool calls in one run, the first allowed and the
// second denied. The first ran and the second did not; a deny is no
// failure of the run.
func (s *suite) allowThenDeny(t *testing.T) {
	g := s.start(t, Scenario{Kind: TwoTools, Command: "touch first.txt", Command2: "touch second.txt", Text: "done"}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Create first.txt, then second.txt.", Approvals: runs.ApprovalsAsk})
	first := g.approval(t, r.ID, 1)
	res := g.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: first.ID, Decision: runs.Allow})
	if res.Approval == nil || res.Approval.Decision != runs.Allow || res.Approval.Reason != runs.ResolvedByClient {
		t.Fatalf("answer = %+v", res)
	}
	second := g.approval(t, r.ID, 2)
	if second.ID == first.ID {
		t.Fatalf("the second approval has the first one's id %s", first.ID)
	}
	g.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: second.ID, Decision: runs.Deny, Message: "not that one"})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	if !g.exists(r.ID, "first.txt") || g.exists(r.ID, "second.txt") {
		t.Errorf("first.txt made: %v, second.txt made: %v; want only the allowed one", g.exists(r.ID, "first.txt"), g.exists(r.ID, "second.txt"))
	}
	if got := resolutions(t, evs); len(got) != 2 || got[1].Decision != runs.Deny || got[1].Reason != runs.ResolvedByClient {
		t.Errorf("approval.resolved = %+v", got)
	}
	// An approval that was answered cannot be answered again.
	_, err := g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: first.ID, Decision: runs.Deny})
	var ce *runs.ConflictError
	if !errors.As(err, &ce) {
		t.Errorf("answering again: %v, want a conflict", err)
	}
	g.wantUsage(t, r)
}

// approvalDeadline: an approval nobody answers is denied at its deadline,
// and the tool does not run.
func (s *suite) approvalDeadline(t *testing.T) {
	g := s.start(t, Scenario{Kind: Tool, Command: "touch late.txt", Text: "done"}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Create late.txt.", Approvals: runs.ApprovalsAsk,
		ApprovalTimeoutSeconds: int(approvalTimeout / time.Second)})
	a := g.approval(t, r.ID, 1)
	r, evs := g.wait(t, r.ID, approvalTimeout+quick)
	got := resolutions(t, evs)
	if len(got) != 1 || got[0].ID != a.ID || got[0].Reason != runs.ResolvedByTimeout || got[0].Decision != runs.Deny {
		t.Fatalf("approval.resolved = %+v; events %s", got, typesOf(evs))
	}
	if g.exists(r.ID, "late.txt") {
		t.Error("the tool ran although its approval was denied")
	}
	if r.Status != runs.Succeeded {
		t.Errorf("status %s, error %+v: a denied tool is no failure of the run", r.Status, r.Error)
	}
}

// allowSession: after allow_session, the same call again is not asked.
func (s *suite) allowSession(t *testing.T) {
	g := s.start(t, Scenario{Kind: TwoTools, Command: "touch same.txt", Command2: "touch same.txt", Text: "done"}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Touch same.txt twice.", Approvals: runs.ApprovalsAsk})
	a := g.approval(t, r.ID, 1)
	g.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: a.ID, Decision: runs.AllowSession})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	if n := len(of(evs, runs.EventApprovalRequested)); n != 1 {
		t.Errorf("%d approvals asked, want 1: the identical second call must not be asked; events %s", n, typesOf(evs))
	}
	if g.backend.Requests() < 3 {
		t.Errorf("the mock got %d requests: the second call did not come back", g.backend.Requests())
	}
	// Nothing about the decision is written into the run's directory.
	if entries, _ := os.ReadDir(filepath.Join(g.root, r.ID)); len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the run's directory holds %v, want only same.txt", names)
	}
	g.wantUsage(t, r)
}

// cancelPendingApproval: cancel while an approval waits ends the run at
// once, and the approval is resolved run_ended.
func (s *suite) cancelPendingApproval(t *testing.T) {
	g := s.start(t, Scenario{Kind: Tool, Command: "touch never.txt", Text: "done"}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Create never.txt.", Approvals: runs.ApprovalsAsk, Interactive: true})
	a := g.approval(t, r.ID, 1)
	start := time.Now()
	if _, err := g.sup.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	r, evs := g.wait(t, r.ID, stopWithin)
	if r.Status != runs.Cancelled {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	if took := time.Since(start); took > stopWithin {
		t.Errorf("cancel took %s", took)
	}
	if got := resolutions(t, evs); len(got) != 1 || got[0].ID != a.ID || got[0].Reason != runs.ResolvedRunEnded {
		t.Errorf("approval.resolved = %+v", got)
	}
	if g.exists(r.ID, "never.txt") {
		t.Error("the tool ran although the run was cancelled")
	}
	wantNoProcesses(t, r.ID, "never.txt")
}

// closePendingApproval: close while an approval waits ends the run
// without waiting for the approval's deadline: the approval is resolved
// run_ended, the tool does not run, and the run ends with the status of
// its cut-short turn.
func (s *suite) closePendingApproval(t *testing.T) {
	g := s.start(t, Scenario{Kind: Tool, Command: "touch never.txt", Text: "done"}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Create never.txt.", Approvals: runs.ApprovalsAsk, Interactive: true})
	a := g.approval(t, r.ID, 1)
	g.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	r, evs := g.wait(t, r.ID, stopWithin)
	if got := resolutions(t, evs); len(got) != 1 || got[0].ID != a.ID || got[0].Reason != runs.ResolvedRunEnded {
		t.Errorf("approval.resolved = %+v; events %s", got, typesOf(evs))
	}
	if len(r.Turns) != 1 || r.Turns[0].Status != r.Status || r.Status == runs.Failed {
		t.Errorf("status %s, error %+v, turns %+v: want the cut-short turn's status", r.Status, r.Error, r.Turns)
	}
	if g.exists(r.ID, "never.txt") {
		t.Error("the tool ran although the run was closed")
	}
	wantNoProcesses(t, r.ID, "never.txt")
}

// followUpTurns: a second turn in the same process; each turn's usage is
// what the mock billed for it, and the run's is their sum. Close ends the
// run with its last turn's status.
func (s *suite) followUpTurns(t *testing.T) {
	g := s.start(t, Scenario{Kind: Turns, Text: "noted"}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Remember the number 7.", Interactive: true})
	one := g.turn(t, r.ID, 1)
	billed1 := g.backend.Billed()
	if one.Status != runs.Succeeded || one.Usage != g.turnBill(billed1) || billed1.InputTokens == 0 {
		t.Fatalf("turn 1 = %+v, the mock billed %+v", one, billed1)
	}
	rec, err := g.sup.Get(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Activity != runs.Idle && rec.Activity != runs.Stopping || len(rec.Turns) != 1 {
		// the record may lag the event by a moment; wait for it
		deadline := time.Now().Add(stopWithin)
		for (rec.Activity != runs.Idle || len(rec.Turns) != 1) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			rec, _ = g.sup.Get(context.Background(), r.ID)
		}
		if rec.Activity != runs.Idle {
			t.Fatalf("record after turn 1: activity %q, turns %+v", rec.Activity, rec.Turns)
		}
	}
	// While the run goes on, its record counts the turn that ended.
	if rec.Usage != g.turnBill(billed1) {
		t.Fatalf("the record's usage after turn 1 = %+v, the mock billed %+v", rec.Usage, billed1)
	}
	msg := g.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "What was the number?"})
	two := g.turn(t, r.ID, 2)
	billed2 := g.backend.Billed().Sub(billed1)
	if two.Status != runs.Succeeded || two.Usage != g.turnBill(billed2) || billed2.InputTokens == 0 {
		t.Fatalf("turn 2 = %+v, the mock billed %+v for it", two, billed2)
	}
	g.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	r, evs := g.wait(t, r.ID, stopWithin)
	if r.Status != runs.Succeeded || len(r.Turns) != 2 || r.Turns[1].MessageID != msg.MessageID {
		t.Fatalf("run = %+v; events %s", r, typesOf(evs))
	}
	g.wantUsage(t, r)
	if len(of(evs, runs.EventTurnStarted)) != 2 {
		t.Errorf("turn.started: %s", typesOf(evs))
	}
	_, err = g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputMessage, Text: "too late"})
	var ce *runs.ConflictError
	if !errors.As(err, &ce) || ce.Code != runs.ConflictRunEnded {
		t.Errorf("message after close: %v", err)
	}
}

// turnBill is the usage a turn the mock billed b for must report: b, or
// none for an agent that reports no usage.
func (g *gateway) turnBill(b runs.Usage) runs.Usage {
	if g.usageUnknown {
		return runs.Usage{}
	}
	return b
}

// interruptMidTool: interrupting a turn in the middle of its tool leaves
// none of the tool's processes, and the next turn works.
func (s *suite) interruptMidTool(t *testing.T) {
	marker := "conformance-" + uuid.NewString()
	g := s.start(t, Scenario{Kind: LongTool, Marker: marker, Text: "back again"}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Run the long command.", Interactive: true})
	g.waitFor(t, r.ID, runs.EventToolCallStarted, quick)
	deadline := time.Now().Add(quick)
	for len(agenttest.ProcessesMatching(marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the tool's process never ran: %s", typesOf(g.events(t, r.ID)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.input(t, r.ID, runs.Input{Kind: runs.InputInterrupt})
	one := g.turn(t, r.ID, 1)
	if one.Status != runs.Cancelled {
		t.Errorf("interrupted turn = %+v", one)
	}
	deadline = time.Now().Add(stopWithin)
	for left := agenttest.ProcessesMatching(marker); len(left) > 0; left = agenttest.ProcessesMatching(marker) {
		if time.Now().After(deadline) {
			t.Fatalf("the interrupted tool's processes are left: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "Never mind. Just say hi."})
	if two := g.turn(t, r.ID, 2); two.Status != runs.Succeeded {
		t.Fatalf("the turn after the interrupt = %+v", two)
	}
	g.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	r, evs := g.wait(t, r.ID, stopWithin)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	wantNoProcesses(t, r.ID, marker)
}

// steer: where the agent can, a message steered into a running turn
// reaches the model in that turn; where it cannot, it is refused by name.
func (s *suite) steer(t *testing.T) {
	marker := "conformance-" + uuid.NewString()
	g := s.start(t, Scenario{Kind: LongTool, Marker: marker, Text: "steered"}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Run the long command.", Interactive: true})
	g.waitFor(t, r.ID, runs.EventToolCallStarted, quick)
	text := "STEER-" + uuid.NewString()
	_, err := g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputMessage, Text: text, Mode: runs.MessageSteer})
	if !s.adapter.Describe().Interaction.Steer {
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != "mode" || !errors.Is(err, runs.ErrUnsupported) {
			t.Fatalf("steer on an agent without it: %v, want unsupported_option on mode", err)
		}
		_, _ = g.sup.Cancel(context.Background(), r.ID)
		g.wait(t, r.ID, stopWithin)
		wantNoProcesses(t, r.ID, marker)
		return
	}
	if err != nil {
		t.Fatalf("steer: %v", err)
	}
	// The steered text reaches the model within the running turn, in the
	// request that carries the tool's result.
	steered := time.Now()
	for !g.backend.Seen(text) {
		if time.Since(steered) > quick {
			t.Fatalf("the steered text never reached the model: %s", typesOf(g.events(t, r.ID)))
		}
		if time.Since(steered) > 2*time.Second {
			// End the tool, as a short command would have ended: the
			// CLI adds the text at the tool's boundary.
			for _, pid := range agenttest.ProcessesMatching(marker) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.turn(t, r.ID, 1)
	g.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	r, evs := g.wait(t, r.ID, stopWithin)
	if n, m := len(of(evs, runs.EventTurnStarted)), len(of(evs, runs.EventTurnCompleted)); n != 1 || m != 1 {
		t.Errorf("%d turn.started and %d turn.completed, want one each: a steered message is no turn of its own; events %s", n, m, typesOf(evs))
	}
	if q := of(evs, runs.EventMessageQueued); len(q) != 1 {
		t.Errorf("message.queued: %s", typesOf(evs))
	}
	wantNoProcesses(t, r.ID, marker)
}
