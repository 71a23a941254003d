package claude

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// The session cases run the real CLI through the session decoder, as the
// supervisor drives it; each records testdata/session_<name>.jsonl with
// -record, which TestSessionGolden replays.

func askSpec(prompt string) runs.Spec {
	return runs.Spec{Prompt: prompt, Approvals: runs.ApprovalsAsk, Interactive: true}
}

// billed is what the mock billed so far, in the gateway's convention.
func billed(l anthropic.Ledger) runs.Usage { return fromAnthropic(l.Billed()) }

func TestSessionAllowThenDeny(t *testing.T) {
	t.Parallel()
	d := startSession(t, anthropic.TwoTools("touch one.txt", "touch two.txt", "One ran, two was refused."), askSpec("Run both."))
	a1 := d.approval()
	if a1.Tool != "Bash" || !strings.Contains(string(a1.Input), "touch one.txt") || a1.ToolCallID == "" || len(a1.Options) != 4 {
		t.Errorf("first approval = %+v", a1)
	}
	if err := d.answer(a1.ID, runs.Allow, ""); err != nil {
		t.Fatal(err)
	}
	if err := d.answer(a1.ID, runs.Allow, ""); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("answering %s twice: %v, want ErrNotFound", a1.ID, err)
	}
	a2 := d.approval()
	if a2.ID == a1.ID || !strings.Contains(string(a2.Input), "touch two.txt") {
		t.Errorf("second approval = %+v (first %s)", a2, a1.ID)
	}
	if err := d.answer(a2.ID, runs.Deny, "not this one"); err != nil {
		t.Fatal(err)
	}
	turn := d.turn()
	if turn.Status != runs.Succeeded || turn.Result != "One ran, two was refused." {
		t.Errorf("turn = %+v", turn)
	}
	if want := billed(d.srv.Ledger()); turn.Usage != want {
		t.Errorf("turn usage = %+v, billed %+v", turn.Usage, want)
	}
	o := d.close()
	if o.Status != runs.Succeeded || o.NumTurns != 1 || d.exit.Code != 0 {
		t.Errorf("outcome %+v, exit %+v", o, d.exit)
	}
	if _, err := os.Stat(filepath.Join(d.inv.Dir, "one.txt")); err != nil {
		t.Errorf("the allowed call did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.inv.Dir, "two.txt")); err == nil {
		t.Error("the denied call ran")
	}
	reqs := d.srv.Ledger().Messages()
	if len(reqs) != 3 {
		t.Fatalf("requests = %d, want 3", len(reqs))
	}
	tr := reqs[2].Request.ToolResults()
	if len(tr) != 1 || !tr[0].IsError || !strings.Contains(tr[0].Text, "not this one") {
		t.Errorf("the model got %+v for the denied call, want an error with the message", tr)
	}
	d.record("session_allow_deny")
}

func TestSessionAllowSession(t *testing.T) {
	t.Parallel()
	d := startSession(t, anthropic.TwoTools("touch made.txt", "touch made.txt", "Ran it twice."), askSpec("Run it twice."))
	a := d.approval()
	if err := d.answer(a.ID, runs.AllowSession, ""); err != nil {
		t.Fatal(err)
	}
	turn := d.turn()
	if turn.Status != runs.Succeeded {
		t.Errorf("turn = %+v", turn)
	}
	if n := d.count(runs.EventApprovalRequested); n != 1 {
		t.Errorf("%d approvals asked, want 1: the identical second call is allowed for the session", n)
	}
	for _, ev := range d.events {
		if ev.Type == runs.EventToolCallCompleted && ev.Data.(runs.ToolCallCompletedData).IsError {
			t.Errorf("tool call failed: %+v", ev.Data)
		}
	}
	if n := d.count(runs.EventToolCallCompleted); n != 2 {
		t.Errorf("%d tool calls completed, want 2", n)
	}
	d.close()
	if _, err := os.Stat(filepath.Join(d.inv.Dir, ".claude")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("allow_session wrote into the run's directory: %v", err)
	}
	d.record("session_allow_session")
}

func TestSessionDenyAndStop(t *testing.T) {
	t.Parallel()
	d := startSession(t, anthropic.TwoTools("touch one.txt", "touch two.txt", "unreachable"), askSpec("Run both."))
	a := d.approval()
	if err := d.answer(a.ID, runs.DenyAndStop, "stop here"); err != nil {
		t.Fatal(err)
	}
	turn := d.turn()
	if turn.Status != runs.Cancelled {
		t.Errorf("turn = %+v, want cancelled", turn)
	}
	if n := len(d.srv.Ledger().Messages()); n != 1 {
		t.Errorf("requests = %d, want 1: the turn ends without asking the model again", n)
	}
	if want := billed(d.srv.Ledger()); turn.Usage != want {
		t.Errorf("turn usage = %+v, billed %+v", turn.Usage, want)
	}
	d.close()
	if _, err := os.Stat(filepath.Join(d.inv.Dir, "one.txt")); err == nil {
		t.Error("the denied call ran")
	}
	d.record("session_deny_stop")
}

func TestSessionTurns(t *testing.T) {
	t.Parallel()
	d := startSession(t, anthropic.Turns("Answered."), runs.Spec{Prompt: "First.", Interactive: true})
	var turns []runs.TurnCompletedData
	for i, text := range []string{"", "Second.", "Third."} {
		if i > 0 {
			d.send(text, false)
		}
		turn := d.turn()
		turns = append(turns, turn)
		want := fromAnthropic(anthropic.TurnUsage(i + 1))
		if turn.Status != runs.Succeeded || turn.Usage != want || turn.Result != "Answered." {
			t.Errorf("turn %d = %+v, want usage %+v", i+1, turn, want)
		}
		if turn.CostUSD == nil || *turn.CostUSD <= 0 {
			t.Errorf("turn %d cost %v", i+1, turn.CostUSD)
		}
	}
	o := d.close()
	if want := billed(d.srv.Ledger()); o.Usage != want {
		t.Errorf("run usage = %+v, billed %+v", o.Usage, want)
	}
	if o.NumTurns != 3 || o.Status != runs.Succeeded {
		t.Errorf("outcome = %+v", o)
	}
	var sum float64
	for _, tc := range turns {
		sum += *tc.CostUSD
	}
	if o.SessionCostUSD == nil || !near(*o.SessionCostUSD, sum) {
		t.Errorf("session cost %v, turns add up to %v", o.SessionCostUSD, sum)
	}
	if o.CostUSD != nil {
		t.Errorf("run cost %v: the supervisor makes it from the session's", *o.CostUSD)
	}
	if !d.srv.Ledger().Seen("Third.") {
		t.Error("the third message did not reach the model")
	}
	d.record("session_turns")
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestSessionInterruptTurn(t *testing.T) {
	t.Parallel()
	marker := "agentgate-test-" + uuid.NewString()
	d := startSession(t, anthropic.ToolThenText(anthropic.LongCommand+" "+marker, "Next turn done."),
		runs.Spec{Prompt: "Run the long command.", Interactive: true})
	d.untilType(runs.EventToolCallStarted)
	waitProcess(t, marker)
	d.interruptTurn()
	turn := d.turn()
	if turn.Status != runs.Cancelled {
		t.Errorf("interrupted turn = %+v", turn)
	}
	if left := agenttest.WaitGone(marker, sessionDeadline); len(left) > 0 {
		t.Errorf("tool processes left after the interrupt: %v", left)
	}
	if err := d.sess.InterruptTurn(); err == nil {
		t.Error("InterruptTurn with no turn running succeeded")
	}
	d.send("Go on.", false)
	turn = d.turn()
	if turn.Status != runs.Succeeded || turn.Result != "Next turn done." {
		t.Errorf("turn after the interrupt = %+v", turn)
	}
	o := d.close()
	if want := billed(d.srv.Ledger()); o.Usage != want || o.NumTurns != 2 || o.Status != runs.Succeeded {
		t.Errorf("outcome = %+v, billed %+v", o, want)
	}
	d.record("session_interrupt")
}

func TestSessionSteer(t *testing.T) {
	t.Parallel()
	marker := "agentgate-test-" + uuid.NewString()
	steer := "STEER-" + uuid.NewString()
	d := startSession(t, anthropic.ToolThenText("perl -e 'sleep 3' "+marker, "Steered."),
		runs.Spec{Prompt: "Run the command.", Interactive: true})
	d.untilType(runs.EventToolCallStarted)
	waitProcess(t, marker)
	d.send(steer, true)
	turn := d.turn()
	if turn.Status != runs.Succeeded || turn.Result != "Steered." {
		t.Errorf("turn = %+v", turn)
	}
	o := d.close()
	if n := d.count(runs.EventTurnCompleted); n != 1 || o.NumTurns != 1 {
		t.Errorf("%d turns (outcome %d), want the steered text in the running one", n, o.NumTurns)
	}
	if !d.srv.Ledger().Seen(steer) {
		t.Error("the steered text did not reach the model")
	}
	if want := billed(d.srv.Ledger()); o.Usage != want || turn.Usage != want {
		t.Errorf("usage turn %+v, run %+v, billed %+v", turn.Usage, o.Usage, want)
	}
	d.record("session_steer")
}

func TestSessionWithdrawn(t *testing.T) {
	t.Parallel()
	d := startSession(t, anthropic.TwoTools("touch one.txt", "touch two.txt", "unreachable"), askSpec("Run both."))
	a := d.approval()
	d.interruptTurn()
	ev := d.untilType(runs.EventApprovalResolved).Data.(runs.ApprovalResolvedData)
	if ev.ID != a.ID || ev.Reason != runs.ResolvedWithdrawn {
		t.Errorf("approval.resolved = %+v, want %s withdrawn", ev, a.ID)
	}
	if turn := d.turn(); turn.Status != runs.Cancelled {
		t.Errorf("turn = %+v", turn)
	}
	if err := d.answer(a.ID, runs.Allow, ""); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("answering a withdrawn approval: %v, want ErrNotFound", err)
	}
	d.close()
	if _, err := os.Stat(filepath.Join(d.inv.Dir, "one.txt")); err == nil {
		t.Error("the withdrawn call ran")
	}
	d.record("session_withdrawn")
}

// TestSessionStop is the supervisor stopping an idle session: Interrupt
// is answered, stdin closes, the CLI exits by itself.
func TestSessionStop(t *testing.T) {
	t.Parallel()
	d := startSession(t, anthropic.TextAnswer("Hi."), runs.Spec{Prompt: "Hi.", Interactive: true})
	d.turn()
	d.interrupt()
	o := d.wait()
	if d.exit.Code != 0 || d.exit.Signal != "" || o.Status != runs.Succeeded {
		t.Errorf("exit %+v, outcome %+v", d.exit, o)
	}
	d.record("session_stop")
}

// TestSessionPermissions checks, with the real CLI, which tool calls a
// run with approvals: ask asks for at each permission level: those that
// can change something, unless the level forbids them, which are refused
// without asking. One session per level has the model make every call of
// the level's table, one after the other, and allows each that is asked.
// full with ask runs the very command of workspace_write with ask, which
// TestCommandSession holds, so it needs no session of its own. doc.go and
// permissionDocs state the same.
func TestSessionPermissions(t *testing.T) {
	bash := func(cmd string) func(string) anthropic.Block {
		return func(string) anthropic.Block { return anthropic.Bash(cmd) }
	}
	write := func(dir string) anthropic.Block {
		return anthropic.ToolUse("Write", map[string]string{"file_path": filepath.Join(dir, "w.txt"), "content": "w\n"})
	}
	read := func(dir string) anthropic.Block {
		return anthropic.ToolUse("Read", map[string]string{"file_path": filepath.Join(dir, "r.txt")})
	}
	levels := map[runs.Permission][]permCall{
		runs.WorkspaceWrite: {
			{name: "read", tool: read},
			{name: "ls", tool: bash("ls")},
			{name: "bash", tool: bash("touch b.txt"), asked: true, effect: "b.txt"},
			{name: "write", tool: write, asked: true, effect: "w.txt"},
		},
		runs.ReadOnly: {
			{name: "read", tool: read},
			{name: "ls", tool: bash("ls")},
			{name: "bash", tool: bash("touch b.txt"), refused: true},
			{name: "write", tool: write, refused: true},
		},
	}
	for perm, calls := range levels {
		t.Run(string(perm), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "r.txt"), []byte("readable\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			blocks := make([]anthropic.Block, len(calls))
			for i, c := range calls {
				blocks[i] = c.tool(dir)
			}
			spec := askSpec("Use the tools.")
			spec.Permission = perm
			d := startSessionIn(t, dir, editScenario(blocks...), spec)
			asked := d.allowAllUntilTurn()
			d.close()
			wantPermCalls(t, d.events, calls, asked, dir)
		})
	}
}

// permCall is one tool call of TestSessionPermissions and what its level
// does with it.
type permCall struct {
	name string
	tool func(dir string) anthropic.Block
	// asked: an approval is requested (and allowed); otherwise the call
	// runs or is refused without one.
	asked, refused bool
	// effect is a file the call creates in the run's directory.
	effect string
}

// allowAllUntilTurn allows every approval asked until the turn ends and
// returns the tool call ids they were asked for.
func (d *driver) allowAllUntilTurn() map[string]bool {
	d.t.Helper()
	asked := map[string]bool{}
	for {
		ev := d.until("approval.requested or turn.completed", func(ev runs.Event) bool {
			return ev.Type == runs.EventApprovalRequested || ev.Type == runs.EventTurnCompleted
		})
		if ev.Type == runs.EventTurnCompleted {
			return asked
		}
		a := ev.Data.(runs.ApprovalRequestedData)
		asked[a.ToolCallID] = true
		if err := d.answer(a.ID, runs.Allow, ""); err != nil {
			d.t.Fatal(err)
		}
	}
}

// wantPermCalls checks each call of a TestSessionPermissions session, in
// the order the model made them: whether it was asked, whether its result
// is a refusal, and its effect.
func wantPermCalls(t *testing.T, evs []runs.Event, calls []permCall, asked map[string]bool, dir string) {
	t.Helper()
	var started []string
	results := map[string]runs.ToolCallCompletedData{}
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case runs.ToolCallStartedData:
			started = append(started, d.ID)
		case runs.ToolCallCompletedData:
			results[d.ID] = d
		}
	}
	if len(started) != len(calls) {
		t.Fatalf("%d tool calls started, want %d: %v", len(started), len(calls), collapse(evs))
	}
	for i, c := range calls {
		id := started[i]
		if asked[id] != c.asked {
			t.Errorf("%s: asked = %v, want %v", c.name, asked[id], c.asked)
		}
		res, ok := results[id]
		switch {
		case !ok:
			t.Errorf("%s: no tool_call.completed for %s", c.name, id)
		case res.IsError != c.refused:
			t.Errorf("%s: tool result %+v, want refused=%v", c.name, res, c.refused)
		}
		if c.effect != "" {
			if _, err := os.Stat(filepath.Join(dir, c.effect)); err != nil {
				t.Errorf("%s: the allowed call had no effect: %v", c.name, err)
			}
		}
	}
	if len(asked) != askingCalls(calls) {
		t.Errorf("%d approvals asked, want %d", len(asked), askingCalls(calls))
	}
}

// askingCalls counts the calls that are asked for.
func askingCalls(calls []permCall) int {
	n := 0
	for _, c := range calls {
		if c.asked {
			n++
		}
	}
	return n
}

// TestSessionQueuedSteerIsOneTurn replays what the real CLI printed for a
// line steered while the model streamed with no tool running: it queued
// the line, printed the turn's result, and ran the line as a turn of its
// own, echoing it only then. The client sees one turn, with both
// results' usage and cost.
func TestSessionQueuedSteerIsOneTurn(t *testing.T) {
	sess := New().NewDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "first", Interactive: true}}).(runs.Session)
	sess.Open()
	result := func(in, out int, cost float64) string {
		return fmt.Sprintf(`{"type":"result","subtype":"success","is_error":false,"result":"r","stop_reason":"end_turn",`+
			`"usage":{"input_tokens":%d,"output_tokens":%d},"total_cost_usd":%g,`+
			`"model_usage_since_last_result":{"m":{"inputTokens":%d,"outputTokens":%d,"costUSD":%g}}}`, in, out, cost, in, out, cost)
	}
	lines := []string{
		`{"type":"system","subtype":"init","session_id":"s","model":"m","tools":[]}`,
		`{"type":"user","message":{"role":"user","content":"first"},"isReplay":true}`,
		"steer",
		result(10, 1, 0.5),
		`{"type":"system","subtype":"init","session_id":"s","model":"m","tools":[]}`,
		`{"type":"user","message":{"role":"user","content":"steered"},"isReplay":true}`,
		result(20, 2, 0.25),
	}
	var turns []runs.TurnCompletedData
	for _, l := range lines {
		if l == "steer" {
			if err := sess.Send("steered", nil, true); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, ev := range sess.Decode([]byte(l)) {
			if tc, ok := ev.Data.(runs.TurnCompletedData); ok {
				turns = append(turns, tc)
			}
		}
	}
	if len(turns) != 1 {
		t.Fatalf("turns = %+v, want one", turns)
	}
	if want := (runs.Usage{InputTokens: 30, OutputTokens: 3}); turns[0].Usage != want || turns[0].CostUSD == nil || *turns[0].CostUSD != 0.75 {
		t.Errorf("turn = %+v, want usage %+v and cost 0.75", turns[0], want)
	}
	sess.Close()
	if _, done := sess.Pending(); !done {
		t.Error("Close after the turn did not end the conversation")
	}
	if o := sess.Finish(runs.Exit{}, nil); o.NumTurns != 1 || o.Usage.InputTokens != 30 || o.Status != runs.Succeeded {
		t.Errorf("outcome = %+v", o)
	}
}

// TestSessionLargePrompt sends a 2 MB prompt, which starts with a dash,
// as the first user line: the model gets all of it.
func TestSessionLargePrompt(t *testing.T) {
	t.Parallel()
	prompt := "-" + strings.Repeat("0123456789abcdef", 2<<20/16) + " END"
	d := startSession(t, anthropic.TextAnswer("Read it."), runs.Spec{Prompt: prompt, Interactive: true})
	if turn := d.turn(); turn.Status != runs.Succeeded {
		t.Errorf("turn = %+v", turn)
	}
	d.close()
	reqs := d.srv.Ledger().Messages()
	if len(reqs) == 0 || !strings.Contains(reqs[0].Request.UserText(), prompt) {
		t.Errorf("the model did not get the whole prompt (%d requests)", len(reqs))
	}
}

// TestSessionStopMidTool is the supervisor stopping a session while a
// tool runs: the control interrupt ends the turn and kills the tool, then
// stdin closes and the CLI exits without a signal.
func TestSessionStopMidTool(t *testing.T) {
	t.Parallel()
	marker := "agentgate-test-" + uuid.NewString()
	d := startSession(t, anthropic.ToolThenText(anthropic.LongCommand+" "+marker, "unreachable"),
		runs.Spec{Prompt: "Run the long command.", Interactive: true})
	d.untilType(runs.EventToolCallStarted)
	waitProcess(t, marker)
	d.interrupt()
	if turn := d.turn(); turn.Status != runs.Cancelled {
		t.Errorf("turn = %+v", turn)
	}
	o := d.wait()
	if d.exit.Signal != "" || o.Status != runs.Failed || o.Error == nil || o.Error.Class != runs.Interrupted {
		t.Errorf("exit %+v, outcome %+v", d.exit, o)
	}
	if left := agenttest.WaitGone(marker, sessionDeadline); len(left) > 0 {
		t.Errorf("tool processes left: %v", left)
	}
	if want := billed(d.srv.Ledger()); o.Usage != want {
		t.Errorf("usage %+v, billed %+v", o.Usage, want)
	}
}
