package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// sessAdapter drives talkingAgent (which echoes each stdin line as
// {"text":"got <line>"}) through a Session: a scripted CLI whose turns,
// approvals and interrupts are lines the decoder wrote and reads back.
type sessAdapter struct{ fakeAdapter }

func (sessAdapter) Name() string { return "sess" }
func (sessAdapter) Describe() runs.Description {
	d := fakeAdapter{}.Describe()
	d.Name = "sess"
	d.Fields = append(d.Fields, runs.FieldInteractive, runs.FieldApprovals)
	d.Interaction = runs.Interaction{Steer: true}
	return d
}
func (sessAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	return runs.Command{Env: []string{fakeAgentEnv + "=talk"}}, nil
}
func (sessAdapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	return &sessDecoder{prompt: inv.Spec.Prompt, pending: map[string]bool{}}
}

// sessDecoder: a turn whose text contains "ask" asks one approval, and
// ends when it is answered; any other turn ends at once. Each turn bills
// 10 input tokens.
// sessDecoder must stay a Session: the supervisor finds out by assertion.
var _ runs.Session = (*sessDecoder)(nil)

type sessDecoder struct {
	prompt  string
	out     []byte
	done    bool
	n       int
	pending map[string]bool
	turns   int
	last    runs.State
}

func (d *sessDecoder) write(s string) { d.out = append(d.out, s+"\n"...) }
func (d *sessDecoder) Open() []byte   { return []byte("prompt:" + d.prompt + "\n") }
func (d *sessDecoder) Pending() ([]byte, bool) {
	out := d.out
	d.out = nil
	return out, d.done
}
func (d *sessDecoder) Interrupt() []byte { return []byte("interrupt\n") }

func (d *sessDecoder) turnDone(st runs.State) runs.Event {
	d.turns++
	d.last = st
	return runs.NewEvent(runs.EventTurnCompleted, runs.TurnCompletedData{Status: st, Usage: runs.Usage{InputTokens: 10}})
}

func (d *sessDecoder) Decode(line []byte) []runs.Event {
	var v struct{ Text string }
	_ = json.Unmarshal(line, &v)
	got, ok := strings.CutPrefix(v.Text, "got ")
	if !ok {
		return nil
	}
	kind, arg, _ := strings.Cut(got, ":")
	switch kind {
	case "prompt", "send":
		if strings.Contains(arg, "ask") {
			d.n++
			id := fmt.Sprintf("a%d", d.n)
			d.pending[id] = true
			return []runs.Event{runs.NewEvent(runs.EventApprovalRequested, runs.ApprovalRequestedData{ID: id, Tool: "shell",
				Input: json.RawMessage(`{"command":"touch x"}`)})}
		}
		return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: "answer to " + arg}), d.turnDone(runs.Succeeded)}
	case "answer":
		id, decision, _ := strings.Cut(arg, ":")
		delete(d.pending, id)
		if runs.Decision(decision) == runs.DenyAndStop {
			return []runs.Event{d.turnDone(runs.Cancelled)}
		}
		return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: decision}), d.turnDone(runs.Succeeded)}
	case "steer":
		return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: "steered " + arg})}
	case "interrupt":
		var evs []runs.Event
		for id := range d.pending {
			delete(d.pending, id)
			evs = append(evs, runs.NewEvent(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: id, Reason: runs.ResolvedWithdrawn}))
		}
		return append(evs, d.turnDone(runs.Cancelled))
	}
	return nil
}

func (d *sessDecoder) Answer(id string, dec runs.Decision, msg string) error {
	if !d.pending[id] {
		return fmt.Errorf("approval %s: %w", id, runs.ErrNotFound)
	}
	d.write("answer:" + id + ":" + string(dec))
	return nil
}
func (d *sessDecoder) Send(text string, images []runs.Image, steer bool) error {
	if strings.Contains(text, "refuse") {
		return runs.Unsupported("sess", runs.FieldAttachments, "this CLI drops what the message carries")
	}
	if steer {
		d.write("steer:" + text)
	} else {
		d.write("send:" + text)
	}
	return nil
}
func (d *sessDecoder) InterruptTurn() error { d.write("interrupt"); return nil }
func (d *sessDecoder) Close()               { d.done = true }
func (d *sessDecoder) Finish(exit runs.Exit, tail []byte) runs.Outcome {
	st := d.last
	if st == "" {
		st = runs.Failed
	}
	out := runs.Outcome{Status: st, NumTurns: d.turns, Usage: runs.Usage{InputTokens: int64(10 * d.turns)}}
	if st == runs.Failed {
		out.Error = runs.NewRunError(runs.AgentCrashed, "no turn ended", "")
	}
	return out
}

// newSessionHarness is a harness whose supervisor runs the sess agent as
// replica, over store (a new one when nil).
func newSessionHarness(t *testing.T, store *memStore, replica string) *harness {
	t.Helper()
	if store == nil {
		store = newMemStore()
	}
	root := t.TempDir()
	cfg := Config{Replica: replica, WorkspaceRoot: root, Path: os.Getenv("PATH"), Reaper: os.Args[0], KillGrace: 2 * time.Second}
	agent := &Agent{Adapter: sessAdapter{}, Bin: os.Args[0], Home: t.TempDir()}
	sup := New(cfg, store, []*Agent{agent}, nopObserver{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = sup.Shutdown(sctx)
		cancel()
		sup.loops.Wait()
	})
	return &harness{sup: sup, store: store, root: root}
}

func (h *harness) submitSpec(t *testing.T, spec runs.Spec) runs.Run {
	t.Helper()
	spec.Agent = "sess"
	r, err := h.sup.Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitRecord waits until the run's stored record satisfies ok.
func (h *harness) waitRecord(t *testing.T, id string, what string, ok func(runs.Run) bool) runs.Run {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r, err := h.store.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(r) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	r, _ := h.store.GetRun(context.Background(), id)
	t.Fatalf("run %s: never %s; record %+v", id, what, r)
	return runs.Run{}
}

func (h *harness) input(t *testing.T, id string, in runs.Input) runs.InputResult {
	t.Helper()
	res, err := h.sup.Input(context.Background(), id, in)
	if err != nil {
		t.Fatalf("input %+v: %v", in, err)
	}
	return res
}

func awaiting(r runs.Run) bool { return len(r.PendingApprovals) > 0 }
func idle(r runs.Run) bool     { return r.Activity == runs.Idle }

func (h *harness) eventsOfType(t *testing.T, id string, typ runs.EventType) []runs.Event {
	t.Helper()
	var out []runs.Event
	for _, e := range h.store.eventsOf(id) {
		if e.Type != typ {
			continue
		}
		var env runs.Event
		if err := json.Unmarshal(e.JSON, &env); err != nil {
			t.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

func conflictCode(err error) string {
	var ce *runs.ConflictError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func TestSessionApprovalFollowUpAndClose(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "ask first", Interactive: true, Approvals: runs.ApprovalsAsk})
	rec := h.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	if rec.Activity != runs.AwaitingApproval || len(rec.Turns) != 1 || rec.Turns[0].Turn != 1 || !rec.Interactive {
		t.Fatalf("record while awaiting = %+v", rec)
	}
	a := rec.PendingApprovals[0]
	if a.Tool != "shell" || a.ExpiresAt.Sub(a.CreatedAt) != runs.DefaultApprovalTimeout || len(a.Options) != 4 {
		t.Fatalf("pending approval = %+v", a)
	}
	res := h.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: a.ID, Decision: runs.Allow})
	if res.Approval == nil || res.Approval.Decision != runs.Allow || res.Approval.Reason != runs.ResolvedByClient {
		t.Fatalf("answer = %+v", res)
	}
	// A second answer to the same approval is a conflict; an unknown one
	// is not found.
	_, err := h.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: a.ID, Decision: runs.Deny})
	if conflictCode(err) != runs.ConflictApprovalResolved {
		t.Fatalf("second answer: %v", err)
	}
	if _, err := h.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: "nope", Decision: runs.Deny}); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("unknown approval: %v", err)
	}
	h.waitRecord(t, r.ID, "idle after turn 1", idle)
	msg := h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "second"})
	if msg.MessageID == "" {
		t.Fatal("no message id")
	}
	h.waitRecord(t, r.ID, "idle after turn 2", func(r runs.Run) bool { return idle(r) && len(r.Turns) == 2 })
	h.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	done := h.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Succeeded || done.Usage.InputTokens != 20 || done.NumTurns != 2 || len(done.Turns) != 2 {
		t.Fatalf("finished run = %+v", done)
	}
	if done.Turns[1].MessageID != msg.MessageID || done.Turns[1].Status != runs.Succeeded || done.Turns[1].Usage.InputTokens != 10 {
		t.Fatalf("turn 2 = %+v", done.Turns[1])
	}
	got := fmt.Sprint(h.types(r.ID))
	want := fmt.Sprint([]runs.EventType{runs.EventRunQueued, runs.EventRunStarted, runs.EventTurnStarted, runs.EventApprovalRequested,
		runs.EventApprovalResolved, runs.EventMessageCompleted, runs.EventTurnCompleted, runs.EventMessageQueued, runs.EventTurnStarted,
		runs.EventMessageCompleted, runs.EventTurnCompleted, runs.EventRunCompleted})
	if got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	for i, ev := range h.eventsOfType(t, r.ID, runs.EventTurnCompleted) {
		var d runs.TurnCompletedData
		b, _ := json.Marshal(ev.Data)
		_ = json.Unmarshal(b, &d)
		if d.Turn != i+1 {
			t.Fatalf("turn.completed %d numbered %d", i, d.Turn)
		}
	}
	if _, err := h.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputMessage, Text: "late"}); conflictCode(err) != runs.ConflictRunEnded {
		t.Fatalf("message after the end: %v", err)
	}
	assertNoProcesses(t, r.ID)
}

func TestSessionApprovalDeniedAtItsDeadline(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "ask", Approvals: runs.ApprovalsAsk, ApprovalTimeoutSeconds: 1})
	done := h.wait(t, r.ID, 30*time.Second)
	if done.Status != runs.Succeeded {
		t.Fatalf("run = %+v", done)
	}
	res := h.eventsOfType(t, r.ID, runs.EventApprovalResolved)
	if len(res) != 1 || !strings.Contains(fmt.Sprint(res[0].Data), "timeout") || !strings.Contains(fmt.Sprint(res[0].Data), "deny") {
		t.Fatalf("approval.resolved = %+v", res)
	}
	if got := h.eventsOfType(t, r.ID, runs.EventMessageCompleted); len(got) != 1 || !strings.Contains(fmt.Sprint(got[0].Data), "deny") {
		t.Fatalf("the CLI was not told deny: %+v", got)
	}
}

func TestSessionNotInteractiveEndsAfterItsTurn(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "ask once", Approvals: runs.ApprovalsAsk})
	rec := h.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	if _, err := h.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputMessage, Text: "more"}); conflictCode(err) != runs.ConflictNotInteractive {
		t.Fatalf("message to a run that is not interactive: %v", err)
	}
	if _, err := h.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputClose}); conflictCode(err) != runs.ConflictNotInteractive {
		t.Fatalf("close of a run that is not interactive: %v", err)
	}
	h.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: rec.PendingApprovals[0].ID, Decision: runs.DenyAndStop})
	done := h.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Cancelled || done.NumTurns != 1 {
		t.Fatalf("run = %+v", done)
	}
}

func TestSessionCancelWhileApprovalPending(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "ask", Interactive: true, Approvals: runs.ApprovalsAsk})
	h.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	if _, err := h.sup.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	done := h.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Cancelled || len(done.PendingApprovals) != 0 || done.Activity != "" {
		t.Fatalf("run = %+v", done)
	}
	res := h.eventsOfType(t, r.ID, runs.EventApprovalResolved)
	if len(res) != 1 || !strings.Contains(fmt.Sprint(res[0].Data), runs.ResolvedRunEnded) {
		t.Fatalf("approval.resolved = %+v", res)
	}
	assertNoProcesses(t, r.ID)
}

// TestSessionCloseWhileApprovalPending: a close does not wait for an
// approval nobody will answer: the approval is resolved run_ended, the
// CLI is told deny_and_stop, and the run ends with that turn's status.
func TestSessionCloseWhileApprovalPending(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "ask", Interactive: true, Approvals: runs.ApprovalsAsk})
	h.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	h.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	// Well within the approval's 300 s deadline.
	done := h.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Cancelled || len(done.PendingApprovals) != 0 || len(done.Turns) != 1 || done.Turns[0].Status != runs.Cancelled {
		t.Fatalf("run = %+v", done)
	}
	res := h.eventsOfType(t, r.ID, runs.EventApprovalResolved)
	if len(res) != 1 || !strings.Contains(fmt.Sprint(res[0].Data), runs.ResolvedRunEnded) {
		t.Fatalf("approval.resolved = %+v", res)
	}
	assertNoProcesses(t, r.ID)
}

// TestSessionRecordCountsFinishedTurns: while an interactive run goes on,
// its stored record's usage is that of the turns ended so far, not zero
// until the run ends.
func TestSessionRecordCountsFinishedTurns(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "first", Interactive: true, Approvals: runs.ApprovalsAsk})
	rec := h.waitRecord(t, r.ID, "idle after turn 1", idle)
	if rec.Usage.InputTokens != 10 {
		t.Fatalf("usage after turn 1 = %+v, want the turn's 10 input tokens", rec.Usage)
	}
	h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "ask now"})
	rec = h.waitRecord(t, r.ID, "awaiting an approval in turn 2", awaiting)
	if len(rec.Turns) != 2 || rec.Usage.InputTokens != 10 {
		t.Fatalf("record in turn 2: usage %+v, turns %+v; want turn 1's 10 input tokens", rec.Usage, rec.Turns)
	}
	h.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: rec.PendingApprovals[0].ID, Decision: runs.Allow})
	rec = h.waitRecord(t, r.ID, "idle after turn 2", func(r runs.Run) bool { return idle(r) && len(r.Turns) == 2 })
	if rec.Usage.InputTokens != 20 {
		t.Fatalf("usage after turn 2 = %+v, want 20 input tokens", rec.Usage)
	}
	h.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	if done := h.wait(t, r.ID, 20*time.Second); done.Usage.InputTokens != 20 {
		t.Fatalf("finished run = %+v", done)
	}
}

func TestSessionInterruptWithdrawsAndKeepsTheSession(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "ask", Interactive: true, Approvals: runs.ApprovalsAsk})
	h.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	// Steering while the turn waits reaches the CLI.
	h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "also this", Mode: runs.MessageSteer})
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "steered also this")
	h.input(t, r.ID, runs.Input{Kind: runs.InputInterrupt})
	rec := h.waitRecord(t, r.ID, "idle after the interrupt", idle)
	if rec.Turns[0].Status != runs.Cancelled || len(rec.PendingApprovals) != 0 {
		t.Fatalf("record after interrupt = %+v", rec)
	}
	if _, err := h.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputInterrupt}); conflictCode(err) != runs.ConflictNoTurn {
		t.Fatalf("interrupt with no turn: %v", err)
	}
	res := h.eventsOfType(t, r.ID, runs.EventApprovalResolved)
	if len(res) != 1 || !strings.Contains(fmt.Sprint(res[0].Data), runs.ResolvedWithdrawn) {
		t.Fatalf("approval.resolved = %+v", res)
	}
	h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "next"})
	h.waitRecord(t, r.ID, "idle after turn 2", func(r runs.Run) bool { return idle(r) && len(r.Turns) == 2 })
	h.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	if done := h.wait(t, r.ID, 20*time.Second); done.Status != runs.Succeeded {
		t.Fatalf("run = %+v", done)
	}
}

func TestSessionQueuedMessageRunsAfterTheTurn(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "ask", Interactive: true, Approvals: runs.ApprovalsAsk})
	rec := h.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "queued one"})
	h.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: rec.PendingApprovals[0].ID, Decision: runs.Allow})
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "answer to queued one")
	h.waitRecord(t, r.ID, "idle after turn 2", func(r runs.Run) bool { return idle(r) && len(r.Turns) == 2 })
	h.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	h.wait(t, r.ID, 20*time.Second)
}

// A queued message the session refuses ends its turn at once, failed
// with the reason, and the next message has its turn.
func TestSessionRefusedMessageFailsItsTurnAndTheNextRuns(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "ask", Interactive: true, Approvals: runs.ApprovalsAsk})
	rec := h.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "refuse this one"})
	h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "queued two"})
	h.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: rec.PendingApprovals[0].ID, Decision: runs.Allow})
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "answer to queued two")
	rec = h.waitRecord(t, r.ID, "idle after turn 3", func(r runs.Run) bool { return idle(r) && len(r.Turns) == 3 })
	two := rec.Turns[1]
	if two.Status != runs.Failed || two.Error == nil || two.Error.Class != runs.FlagRejected || !strings.Contains(two.Error.Message, "drops what the message carries") {
		t.Errorf("turn 2 = %+v, error %+v; want failed, flag_rejected, with the reason", two, two.Error)
	}
	if rec.Turns[2].Status != runs.Succeeded {
		t.Errorf("turn 3 = %+v", rec.Turns[2])
	}
	h.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	h.wait(t, r.ID, 20*time.Second)
}

func TestSessionIdleTimeoutCloses(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	r := h.submitSpec(t, runs.Spec{Prompt: "hello", Interactive: true, IdleTimeoutSeconds: 1})
	done := h.wait(t, r.ID, 30*time.Second)
	if done.Status != runs.Succeeded || done.NumTurns != 1 {
		t.Fatalf("run = %+v", done)
	}
	h.waitFor(t, r.ID, runs.EventWarning, "idle_timeout")
}

func TestSessionInputReachesTheOwner(t *testing.T) {
	store := newMemStore()
	owner := newSessionHarness(t, store, "owner")
	other := newSessionHarness(t, store, "other")
	r := owner.submitSpec(t, runs.Spec{Prompt: "ask", Interactive: true, Approvals: runs.ApprovalsAsk})
	rec := owner.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	res := other.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: rec.PendingApprovals[0].ID, Decision: runs.Allow})
	if res.Approval == nil || res.Approval.ID != rec.PendingApprovals[0].ID {
		t.Fatalf("answer through the other replica = %+v", res)
	}
	_, err := other.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: res.Approval.ID, Decision: runs.Allow})
	if conflictCode(err) != runs.ConflictApprovalResolved {
		t.Fatalf("a conflict must cross replicas as a conflict: %v", err)
	}
	owner.waitRecord(t, r.ID, "idle", idle)
	if res := other.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "from afar"}); res.MessageID == "" {
		t.Fatal("no message id")
	}
	owner.waitFor(t, r.ID, runs.EventMessageCompleted, "answer to from afar")

	// A run whose owner is gone cannot be reached.
	gone := r
	gone.ID, gone.Owner, gone.Status = "0196f0c2-7e1a-7000-8000-00000000abcd", "vanished", runs.Running
	if err := store.CreateRun(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	if _, err := other.sup.Input(context.Background(), gone.ID, runs.Input{Kind: runs.InputInterrupt}); !errors.Is(err, runs.ErrOwnerUnavailable) {
		t.Fatalf("input for a vanished owner: %v", err)
	}
	other.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	owner.wait(t, r.ID, 20*time.Second)
}

func TestSessionFieldsRefusedByAgentsWithoutThem(t *testing.T) {
	h := newHarness(t, Config{})
	_, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "hi", Interactive: true})
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != runs.FieldInteractive || !errors.Is(err, runs.ErrUnsupported) {
		t.Fatalf("interactive on an agent without it: %v", err)
	}
	_, err = h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "hi", Approvals: runs.ApprovalsAsk})
	if !errors.As(err, &fe) || fe.Field != runs.FieldApprovals {
		t.Fatalf("approvals on an agent without them: %v", err)
	}
	r := h.submit(t, "mode:hello")
	h.wait(t, r.ID, 10*time.Second)
	if _, err := h.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputInterrupt}); conflictCode(err) != runs.ConflictRunEnded {
		t.Fatalf("input for a finished run: %v", err)
	}
}

func TestLostEventsFailTheRun(t *testing.T) {
	h := newHarness(t, Config{})
	h.store.failAppend = func(id string, evs []runs.StoredEvent) bool {
		for _, e := range evs {
			if e.Type == runs.EventMessageCompleted {
				return true
			}
		}
		return false
	}
	r := h.submit(t, "mode:hello")
	done := h.wait(t, r.ID, 30*time.Second)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.StoreFailed || !done.Error.Retryable {
		t.Fatalf("a run that lost events = %+v (error %+v)", done, done.Error)
	}
}

// An interactive run that a restart interrupts while an approval waits
// ends interrupted, and its approval is resolved run_ended before
// run.completed.
func TestRecoverResolvesPendingApprovals(t *testing.T) {
	store := newMemStore()
	now := time.Now()
	id := "0196f0c2-7e1a-7000-8000-0000000000aa"
	store.CreateRun(context.Background(), runs.Run{ID: id, Agent: "sess", Status: runs.Running, Owner: "me", StartedAt: &now,
		Interactive: true, Activity: runs.AwaitingApproval, PendingApprovals: []runs.Approval{{ID: "a1", Tool: "shell", Options: runs.Decisions}}})
	store.AppendEvents(context.Background(), id, []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued}, {Seq: 2, Type: runs.EventApprovalRequested}})
	sup := New(Config{Replica: "me", WorkspaceRoot: t.TempDir()}, store, nil, nopObserver{}, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { sup.Shutdown(context.Background()); cancel(); sup.loops.Wait() }()
	r, _ := store.GetRun(ctx, id)
	if r.Status != runs.Failed || r.Error.Class != runs.Interrupted || len(r.PendingApprovals) != 0 || r.Activity != "" {
		t.Fatalf("run after restart: %+v", r)
	}
	evs := store.eventsOf(id)
	if len(evs) != 4 || evs[2].Type != runs.EventApprovalResolved || !strings.Contains(string(evs[2].JSON), `"reason":"run_ended"`) ||
		evs[3].Type != runs.EventRunCompleted {
		t.Fatalf("events after restart: %v", evs)
	}
}

// A graceful shutdown does not wait out its grace for a session that waits
// for a person: the run ends interrupted at once.
func TestShutdownStopsIdleSessionsAtOnce(t *testing.T) {
	h := newSessionHarness(t, nil, "r1")
	idleRun := h.submitSpec(t, runs.Spec{Prompt: "hello", Interactive: true})
	asking := h.submitSpec(t, runs.Spec{Prompt: "ask", Interactive: true, Approvals: runs.ApprovalsAsk})
	h.waitRecord(t, idleRun.ID, "idle", idle)
	h.waitRecord(t, asking.ID, "awaiting an approval", awaiting)

	// A shutdown that waited for its grace to end would fail with the
	// context; the sessions must end well before.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.sup.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, id := range []string{idleRun.ID, asking.ID} {
		r, _ := h.store.GetRun(context.Background(), id)
		if r.Status != runs.Failed || r.Error == nil || r.Error.Class != runs.Interrupted {
			t.Fatalf("run %s after shutdown: %s %+v", id, r.Status, r.Error)
		}
	}
	if res := h.eventsOfType(t, asking.ID, runs.EventApprovalResolved); len(res) != 1 ||
		!strings.Contains(fmt.Sprint(res[0].Data), runs.ResolvedRunEnded) {
		t.Fatalf("approval.resolved = %+v", res)
	}
}
