package copilot

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/acp/acptest"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

var recordACP = flag.Bool("record-acp", false, "the session tests write their steps to testdata/session/<case>.jsonl (then run TestSessionGolden -update)")

// sessionWithin bounds one wait for an event of a real-CLI session: the
// CLI answers initialize in about 2 s alone, much slower on a loaded
// machine.
const sessionWithin = 90 * time.Second

// session is one real copilot --acp run driven through the adapter's
// Session.
type session struct {
	*acptest.Driver
	srv  *openai.Server
	dir  string
	home string
}

// startSession runs copilot --acp for spec against a mock playing sc.
// env overrides the gateway's environment (an empty value removes the
// variable).
func startSession(t *testing.T, spec runs.Spec, sc openai.Scenario, env map[string]string) *session {
	t.Helper()
	return startSessionIn(t, t.TempDir(), spec, sc, env)
}

// startSessionIn is startSession with the run's directory.
func startSessionIn(t *testing.T, dir string, spec runs.Spec, sc openai.Scenario, env map[string]string) *session {
	t.Helper()
	return startSessionAt(t, dir, t.TempDir(), spec, sc, env)
}

// startSessionAt is startSession with the run's directory and home.
func startSessionAt(t *testing.T, dir, home string, spec runs.Spec, sc openai.Scenario, env map[string]string) *session {
	t.Helper()
	bin := copilotBin(t)
	srv, err := openai.Start("127.0.0.1:0", sc, openai.RequireKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{}, Timeout: time.Minute, CLIVersion: VerifiedVersion}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	if cmd.Stdin != nil || cmd.Args[0] != "--acp" {
		t.Fatalf("a session's command: %+v", cmd)
	}
	gateway := providerEnv(srv.URL)
	for k, v := range env {
		if v == "" {
			delete(gateway, k)
		} else {
			gateway[k] = v
		}
	}
	full := append(agenttest.MinimalEnv(home), "TERM=dumb", "COPILOT_CACHE_HOME="+testCache)
	full = append(full, cmd.Env...)
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			full = append(full, name+"="+v)
		}
	}
	if tmp := env["TMPDIR"]; tmp != "" {
		full = append(full, "TMPDIR="+tmp)
	}
	sess, ok := a.NewDecoder(inv).(runs.Session)
	if !ok {
		t.Fatal("a session run's decoder is no runs.Session")
	}
	rec := &recorder{Session: sess}
	s := &session{Driver: acptest.Start(t, bin, cmd.Args, full, dir, rec), srv: srv, dir: dir, home: home}
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("stdin:\n%s\nstdout:\n%s\nstderr:\n%s", bytes.Join(s.Written(), nil), bytes.Join(s.Stdout(), []byte("\n")), tail(string(s.Stderr()), 2000))
		}
		if *recordACP && !t.Failed() {
			writeSession(t, sessionName(t), rec, sessionMeta{RunID: inv.RunID, Home: home, Dir: dir, Spec: spec,
				Exit: s.Exit(), Stderr: string(s.Stderr())})
		}
	})
	return s
}

// answer waits for the next approval.requested from index from, answers
// it, and returns the request and the index after it.
func (s *session) answer(t *testing.T, from int, d runs.Decision) (runs.ApprovalRequestedData, int) {
	t.Helper()
	ev, i := s.WaitType(from, sessionWithin, runs.EventApprovalRequested)
	req := ev.Data.(runs.ApprovalRequestedData)
	if err := s.Do(func(x runs.Session) error { return x.Answer(req.ID, d, "not this one") }); err != nil {
		t.Fatalf("Answer %s: %v", d, err)
	}
	return req, i + 1
}

// close ends the session and waits for the CLI to exit.
func (s *session) close(t *testing.T) runs.Outcome {
	t.Helper()
	_ = s.Do(func(x runs.Session) error { x.Close(); return nil })
	o := s.Wait(sessionWithin)
	if e := s.Exit(); e.Code != 0 || e.Signal != "" {
		t.Errorf("exit %+v after Close; stderr …%s", e, tail(string(s.Stderr()), 500))
	}
	for _, ev := range s.Events() {
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("unparsed: %+v", ev.Data)
		}
	}
	return o
}

func (s *session) exists(name string) bool {
	_, err := os.Stat(filepath.Join(s.dir, name))
	return err == nil
}

// The scenarios' bills (internal/mock/openai): a tool turn's first
// request and every later one.
var (
	firstBill = runs.Usage{InputTokens: 5000, CacheReadTokens: 4000, OutputTokens: 50, ReasoningTokens: 12}
	laterBill = runs.Usage{InputTokens: 5200, CacheReadTokens: 4900, OutputTokens: 30, ReasoningTokens: 7}
)

func TestSessionTwoToolsAllowThenDeny(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Run two commands.", Approvals: runs.ApprovalsAsk},
		openai.BashTwoTools("touch one.txt", "touch two.txt", "Both handled."), nil)
	first, i := s.answer(t, 0, runs.Allow)
	if first.Tool != "bash" || !bytes.Contains(first.Input, []byte(`"command":"touch one.txt"`)) ||
		!slices.Equal(first.Options, []runs.Decision{runs.Allow, runs.AllowSession, runs.Deny, runs.DenyAndStop}) {
		t.Errorf("first approval %+v (input %s)", first, first.Input)
	}
	second, _ := s.answer(t, i, runs.Deny)
	if !bytes.Contains(second.Input, []byte("touch two.txt")) || second.ID == first.ID {
		t.Errorf("second approval %+v", second)
	}
	turn, _ := s.WaitTurn(1, sessionWithin)
	// A deny ends Copilot's turn: no request after it, and the turn
	// succeeded with no text of the model's (the CLI's "Info: Operation
	// cancelled by user" is a warning).
	if turn.Status != runs.Succeeded || turn.StopReason != "end_turn" || turn.Result != "" {
		t.Errorf("turn %+v", turn)
	}
	if n := len(s.srv.Ledger().Responses()); n != 2 {
		t.Errorf("%d model requests, want 2: the turn goes on no further after a deny", n)
	}
	if !s.exists("one.txt") || s.exists("two.txt") {
		t.Errorf("one.txt made %v, two.txt made %v: want only the allowed one", s.exists("one.txt"), s.exists("two.txt"))
	}
	if billed := normalized(s.srv.Ledger().Billed()); turn.Usage != billed || billed != firstBill.Add(laterBill) {
		t.Errorf("turn usage %+v, billed %+v", turn.Usage, billed)
	}
	o := s.close(t)
	evs := s.Events()
	done := acptest.Of(evs, runs.EventToolCallCompleted)
	if len(acptest.Of(evs, runs.EventToolCallStarted)) != 2 || len(done) != 2 ||
		done[0].Data.(runs.ToolCallCompletedData).IsError || !done[1].Data.(runs.ToolCallCompletedData).IsError {
		t.Errorf("tool calls %v", acptest.Types(evs))
	}
	if o.Status != runs.Succeeded || o.NumTurns != 1 || o.Usage != turn.Usage || o.SessionUsage == nil || *o.SessionUsage != o.Usage {
		t.Errorf("outcome %+v", o)
	}
}

func TestSessionAllowSession(t *testing.T) {
	t.Parallel()
	const cmd = "echo again >> log.txt"
	s := startSession(t, runs.Spec{Prompt: "Run it twice.", Approvals: runs.ApprovalsAsk},
		openai.BashTwoTools(cmd, cmd, "Ran twice."), nil)
	s.answer(t, 0, runs.AllowSession)
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded || turn.Result != "Ran twice." {
		t.Errorf("turn %+v", turn)
	}
	if n := len(acptest.Of(s.Events(), runs.EventApprovalRequested)); n != 1 {
		t.Errorf("%d approvals: the identical call was asked again", n)
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, "log.txt")); err != nil || strings.Count(string(b), "again") != 2 {
		t.Errorf("log.txt = %q, %v", b, err)
	}
	s.close(t)
	// allow_always lasts for the session: nothing in the run's cwd but
	// what the tool wrote.
	ents, _ := os.ReadDir(s.dir)
	for _, e := range ents {
		if e.Name() != "log.txt" {
			t.Errorf("the run's directory holds %s", e.Name())
		}
	}
}

func TestSessionDenyAndStop(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Run two commands.", Approvals: runs.ApprovalsAsk},
		openai.BashTwoTools("touch one.txt", "touch two.txt", "Both handled."), nil)
	s.answer(t, 0, runs.DenyAndStop)
	turn, _ := s.WaitTurn(1, sessionWithin)
	// The reject ends the turn before the session/cancel arrives: the
	// prompt answers end_turn or cancelled, whichever the CLI saw first.
	if turn.Status != runs.Succeeded && turn.Status != runs.Cancelled {
		t.Errorf("turn %+v", turn)
	}
	o := s.close(t)
	if n := len(acptest.Of(s.Events(), runs.EventApprovalRequested)); n != 1 {
		t.Errorf("%d approvals after deny_and_stop", n)
	}
	if n := len(s.srv.Ledger().Responses()); n != 1 {
		t.Errorf("%d model requests: the turn went on after deny_and_stop", n)
	}
	if s.exists("one.txt") {
		t.Error("the denied call ran")
	}
	if o.NumTurns != 1 || o.Status != turn.Status {
		t.Errorf("outcome %+v", o)
	}
}

// TestSessionTurnsBilledApart: the prompt result's usage is the
// session's so far; each turn reports its own.
func TestSessionTurnsBilledApart(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "First.", Interactive: true}, openai.Turns("Turn answered."), nil)
	var sum runs.Usage
	for n := 1; n <= 3; n++ {
		if n > 1 {
			if err := s.Do(func(x runs.Session) error { return x.Send(fmt.Sprintf("Turn %d.", n), nil, false) }); err != nil {
				t.Fatal(err)
			}
		}
		turn, _ := s.WaitTurn(n, sessionWithin)
		if own := normalized(openai.TurnUsage(n)); turn.Status != runs.Succeeded || turn.Result != "Turn answered." || turn.Usage != own {
			t.Errorf("turn %d: %+v, billed for it %+v", n, turn, own)
		}
		sum = sum.Add(turn.Usage)
	}
	if !s.srv.Ledger().Seen("Turn 3.") {
		t.Error("the third message never reached the model")
	}
	o := s.close(t)
	if o.NumTurns != 3 || o.Usage != sum || o.Usage != normalized(s.srv.Ledger().Billed()) || o.Status != runs.Succeeded {
		t.Errorf("outcome %+v, sum %+v", o, sum)
	}
}

func TestSessionInterruptMidTool(t *testing.T) {
	t.Parallel()
	marker := "agentgate-test-" + uuid.NewString()
	s := startSession(t, runs.Spec{Prompt: "Run the long command.", Interactive: true},
		openai.BashLongThenText("sleep 60; echo "+marker, "After the interrupt."), nil)
	t.Cleanup(func() { killMatching(marker) })
	s.WaitType(0, sessionWithin, runs.EventToolCallStarted)
	if !waitFor(marker, sessionWithin) {
		t.Fatal("the tool's process never ran")
	}
	// No steer: a second prompt would cancel the running turn.
	err := s.Do(func(x runs.Session) error { return x.Send("also this", nil, true) })
	if !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("steer: %v, want unsupported", err)
	}
	if err := s.Do(func(x runs.Session) error { return x.InterruptTurn() }); err != nil {
		t.Fatal(err)
	}
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Cancelled || turn.Error == nil || turn.Error.Class != runs.Interrupted {
		t.Errorf("turn 1 %+v", turn)
	}
	if left := agenttest.WaitGone(marker, 10*time.Second); len(left) > 0 {
		t.Errorf("tool processes left after the interrupt: %v", left)
	}
	if err := s.Do(func(x runs.Session) error { return x.Send("Go on.", nil, false) }); err != nil {
		t.Fatal(err)
	}
	turn, _ = s.WaitTurn(2, sessionWithin)
	if turn.Status != runs.Succeeded || turn.Result != "After the interrupt." {
		t.Errorf("turn 2 %+v", turn)
	}
	if o := s.close(t); o.NumTurns != 2 || o.Status != runs.Succeeded {
		t.Errorf("outcome %+v", o)
	}
}

// TestSessionReadToolsUnasked: with approvals "ask" the read-only tools
// (view, glob, grep) run without asking.
func TestSessionReadToolsUnasked(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Look.", Approvals: runs.ApprovalsAsk}, callsThen("Looked.",
		func() openai.Item { return openai.FunctionCall("view", map[string]string{"path": "notes.txt"}) },
		func() openai.Item { return openai.FunctionCall("glob", map[string]string{"pattern": "*.txt"}) },
		func() openai.Item { return openai.FunctionCall("grep", map[string]string{"pattern": "NOTES"}) },
	), nil)
	if err := os.WriteFile(filepath.Join(s.dir, "notes.txt"), []byte("NOTES-CONTENT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded || turn.Result != "Looked." {
		t.Errorf("turn %+v", turn)
	}
	evs := s.Events()
	done := acptest.Of(evs, runs.EventToolCallCompleted)
	if len(acptest.Of(evs, runs.EventApprovalRequested)) != 0 || len(done) != 3 {
		t.Errorf("events %v", acptest.Types(evs))
	}
	for _, ev := range done {
		if c := ev.Data.(runs.ToolCallCompletedData); c.IsError {
			t.Errorf("tool call failed: %+v", c)
		}
	}
	if !s.srv.Ledger().Seen("NOTES-CONTENT") {
		t.Error("view's content never reached the model")
	}
	s.close(t)
}

// TestSessionOutside: with approvals, a shell command that names a path
// outside the working directory and the temp directory is asked like
// any other, at workspace_write as at full, and runs once allowed: the
// CLI's path check, which denies it in a one-shot workspace_write run,
// only guards the calls it approves by itself (doc.go).
func TestSessionOutside(t *testing.T) {
	t.Parallel()
	for _, perm := range []runs.Permission{runs.WorkspaceWrite, runs.Full} {
		t.Run(string(perm), func(t *testing.T) {
			t.Parallel()
			marker := "agentgate-test-" + uuid.NewString()
			out := outsidePath(marker)
			tmp := filepath.Join(t.TempDir(), "tmp")
			if err := errors.Join(os.MkdirAll(tmp, 0o700), os.MkdirAll(filepath.Dir(out), 0o700)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(filepath.Dir(out)) })
			s := startSession(t, runs.Spec{Prompt: "Touch outside.", Approvals: runs.ApprovalsAsk, Permission: perm},
				openai.BashTurn("touch "+out, "Touched."), map[string]string{"TMPDIR": tmp})
			req, _ := s.answer(t, 0, runs.Allow)
			if !bytes.Contains(req.Input, []byte(out)) {
				t.Errorf("approval %+v (input %s)", req, req.Input)
			}
			turn, _ := s.WaitTurn(1, sessionWithin)
			if _, err := os.Stat(out); err != nil || turn.Status != runs.Succeeded {
				t.Errorf("turn %+v; %s after the allow: %v", turn, out, err)
			}
			s.close(t)
		})
	}
}

// TestSessionRefusedWithoutApprovals: read_only without approvals asks
// nobody; the CLI asks for every shell command, which is refused with a
// warning, and the refusal ends the turn.
func TestSessionRefusedWithoutApprovals(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Write a file.", Interactive: true, Permission: runs.ReadOnly},
		openai.BashTurn("touch made.txt", "Could not."), nil)
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded {
		t.Errorf("turn %+v", turn)
	}
	evs := s.Events()
	if len(acptest.Of(evs, runs.EventApprovalRequested)) != 0 || len(acptest.Of(evs, runs.EventWarning)) == 0 {
		t.Errorf("events %v", acptest.Types(evs))
	}
	if s.exists("made.txt") {
		t.Error("read_only ran the shell")
	}
	s.close(t)
}

// TestSessionNeverAsks: an interactive run without approvals runs the
// shell unasked, as a one-shot run of its level does.
func TestSessionNeverAsks(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Write a file.", Interactive: true}, openai.BashTurn("touch made.txt", "Made."), nil)
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded || turn.Result != "Made." || !s.exists("made.txt") {
		t.Errorf("turn %+v, made.txt %v", turn, s.exists("made.txt"))
	}
	if n := len(acptest.Of(s.Events(), runs.EventApprovalRequested)); n != 0 {
		t.Errorf("%d approvals", n)
	}
	s.close(t)
}

func TestSessionErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		sc    openai.Scenario
		env   map[string]string
		class runs.Class
	}{
		{"429", openai.Failure(429), nil, runs.RateLimited},
		{"500", openai.Failure(500), nil, runs.TransientAPIError},
		{"400", openai.Failure(400), nil, runs.APIError},
		{"context_exceeded", openai.ContextExceeded(), nil, runs.ContextExceeded},
		// The mock refuses a missing key with HTTP 401, as it refuses a
		// wrong one, and the CLI writes the same notice for both: this is
		// also the 401 case.
		{"no_key", openai.TextAnswer("unreachable"), map[string]string{"COPILOT_PROVIDER_API_KEY": ""}, runs.NotAuthenticated},
		{"no_credentials", openai.TextAnswer("unreachable"), map[string]string{"COPILOT_PROVIDER_API_KEY": "", "COPILOT_OFFLINE": "",
			"COPILOT_PROVIDER_BASE_URL": "", "COPILOT_MODEL": "", "COPILOT_PROVIDER_WIRE_API": ""}, runs.NotAuthenticated},
		{"offline_no_provider", openai.TextAnswer("unreachable"), map[string]string{"COPILOT_PROVIDER_API_KEY": "",
			"COPILOT_PROVIDER_BASE_URL": "", "COPILOT_PROVIDER_WIRE_API": ""}, runs.NotAuthenticated},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startSession(t, runs.Spec{Prompt: "Hi.", Interactive: true}, c.sc, c.env)
			// Closed at once: the session ends after turn 1. The turn
			// ends in a prompt answer or, where the CLI exits first (no
			// provider), in Finish.
			_ = s.Do(func(x runs.Session) error { x.Close(); return nil })
			o := s.Wait(sessionWithin)
			evs := s.Events() // the outcome's events included
			turns := acptest.Of(evs, runs.EventTurnCompleted)
			if len(turns) != 1 {
				t.Fatalf("events %v", acptest.Types(evs))
			}
			if turn := turns[0].Data.(runs.TurnCompletedData); turn.Status != runs.Failed || turn.Error == nil || turn.Error.Class != c.class || turn.Error.Message == "" {
				t.Errorf("turn %+v (error %+v)", turn, turn.Error)
			}
			if o.Status != runs.Failed || o.Error == nil || o.Error.Class != c.class {
				t.Errorf("outcome %+v (error %+v)", o, o.Error)
			}
			if n := len(acptest.Of(evs, runs.EventMessageCompleted)); n != 0 {
				t.Errorf("%d messages: the CLI's notices are no text of the model's", n)
			}
		})
	}
}

// callsThen asks for calls on a turn's first request and answers text
// once any tool result came back.
func callsThen(text string, calls ...func() openai.Item) openai.Scenario {
	return openai.Func(func(req *openai.Request) openai.Response {
		if req.HasFunctionOutput() {
			return openai.Response{Items: []openai.Item{openai.Text(text)}, Usage: openai.Usage{InputTokens: 700, CachedTokens: 100, OutputTokens: 9}}
		}
		items := make([]openai.Item, 0, len(calls))
		for _, c := range calls {
			items = append(items, c())
		}
		return openai.Response{Items: items, Usage: openai.Usage{InputTokens: 900, CachedTokens: 300, OutputTokens: 15, ReasoningTokens: 4}}
	})
}

func killMatching(marker string) {
	for _, pid := range agenttest.ProcessesMatching(marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestSessionCommand: the command lines of Session runs, per permission
// level and approval mode, and the description's interaction.
func TestSessionCommand(t *testing.T) {
	for _, c := range []struct {
		spec runs.Spec
		want []string
	}{
		{runs.Spec{Prompt: "p", Interactive: true}, []string{"--allow-all-tools"}},
		{runs.Spec{Prompt: "p", Interactive: true, Permission: runs.ReadOnly}, []string{"--deny-tool=write"}},
		{runs.Spec{Prompt: "p", Interactive: true, Permission: runs.Full}, []string{"--allow-all"}},
		{runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk}, nil},
		{runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk, Permission: runs.ReadOnly}, []string{"--deny-tool=write"}},
		{runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk, Interactive: true, Permission: runs.Full}, []string{"--allow-all-paths", "--allow-all-urls"}},
	} {
		cmd, err := New().Command(testInv(c.spec))
		if err != nil {
			t.Fatal(err)
		}
		want := append([]string{"--acp", "--no-auto-update", "--disable-client-telemetry"}, c.want...)
		if !slices.Equal(cmd.Args, want) || cmd.Stdin != nil || !slices.Contains(cmd.Env, "COPILOT_AUTO_UPDATE=false") {
			t.Errorf("%+v: args %q stdin %q, want %q", c.spec, cmd.Args, cmd.Stdin, want)
		}
	}
	cmd, err := New().Command(testInv(runs.Spec{Prompt: "p", Interactive: true, Model: "m", Effort: "low"}))
	if err != nil || !slices.Contains(cmd.Args, "--model=m") || !slices.Contains(cmd.Args, "--reasoning-effort=low") {
		t.Errorf("args %q, %v", cmd.Args, err)
	}
	if _, err := New().Command(testInv(runs.Spec{Prompt: "p", Interactive: true, Effort: "extreme"})); !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("effort extreme: %v, want unsupported", err)
	}
	// The session is loaded over ACP: the argv is that of a new one.
	cmd, err = New().Command(testInv(runs.Spec{Prompt: "p", Interactive: true, ResumeSessionID: "0196f0c2-7e1a-7000-8000-000000000001"}))
	if err != nil || slices.ContainsFunc(cmd.Args, func(a string) bool { return strings.Contains(a, "resume") }) {
		t.Errorf("a resumed session's args %q, %v", cmd.Args, err)
	}
	asks := runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk, ResumeSessionID: "0196f0c2-7e1a-7000-8000-000000000001"}
	if _, err := New().Command(testInv(asks)); !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("a resumed one-shot run with approvals: %v, want unsupported", err)
	}
	d := New().Describe()
	if !slices.Contains(d.Fields, runs.FieldInteractive) || !slices.Contains(d.Fields, runs.FieldApprovals) ||
		d.Interaction != (runs.Interaction{Steer: false, DenyEndsTurn: true, MessageAttachments: true, ResumesSession: true}) {
		t.Errorf("description %+v", d)
	}
	if _, ok := New().NewDecoder(testInv(runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk})).(runs.Session); !ok {
		t.Error("a session run's decoder is no runs.Session")
	}
	if _, ok := New().NewDecoder(testInv(runs.Spec{Prompt: "p"})).(runs.Session); ok {
		t.Error("a one-shot run's decoder is a runs.Session")
	}
}

// TestClassifyNotice: the CLI's Error notices, as 1.0.102 wrote them.
func TestClassifyNotice(t *testing.T) {
	for msg, class := range map[string]runs.Class{
		"Authentication failed with provider at http://127.0.0.1:1/v1 (HTTP 401).\n  Check your COPILOT_PROVIDER_API_KEY":                                 runs.NotAuthenticated,
		"Failed to get response from the AI model; retried 5 times (total retry wait time: 5.56 seconds) Last error: 429 Rate limit reached for requests": runs.RateLimited,
		"Failed to get response from the AI model; retried 5 times (total retry wait time: 16.2 seconds) Last error: 500 The server had an error":         runs.TransientAPIError,
		"400 Invalid request: unsupported parameter": runs.APIError,
		"The provider rejected the prompt as too long, but automatic recovery could not reduce it. Reduce context before retrying.": runs.ContextExceeded,
	} {
		if e := classifyNotice(msg); e.Class != class || e.Message != msg {
			t.Errorf("%q: %+v, want %s", msg, e, class)
		}
	}
}
