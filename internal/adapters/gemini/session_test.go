package gemini

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/acp/acptest"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/googleai"
	"github.com/agentgate/agentgate/internal/runs"
)

var recordACP = flag.Bool("record-acp", false, "the session tests write their stdout to ../../acp/testdata/gemini_<case>.jsonl, FuzzDecode's seeds")

// sessionWithin bounds one wait for an event of a real-CLI session: the
// CLI starts in about 3 s alone, much slower on a loaded machine.
const sessionWithin = 90 * time.Second

// session is one real gemini --acp run driven through the adapter's
// Session.
type session struct {
	*acptest.Driver
	srv  *googleai.Server
	dir  string
	home string
}

// startSession runs gemini --acp for spec against a mock playing sc.
func startSession(t *testing.T, spec runs.Spec, sc googleai.Scenario, env map[string]string) *session {
	t.Helper()
	return startSessionIn(t, t.TempDir(), spec, sc, env)
}

// startSessionIn is startSession with the run's directory.
func startSessionIn(t *testing.T, dir string, spec runs.Spec, sc googleai.Scenario, env map[string]string) *session {
	t.Helper()
	bin := agenttest.Bin(t, "gemini")
	srv, err := googleai.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	home := preparedHome(t)
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{}, Timeout: time.Minute, CLIVersion: VerifiedVersion}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	if cmd.Stdin != nil || cmd.Args[0] != "--acp" {
		t.Fatalf("a session's command: %+v", cmd)
	}
	gateway := map[string]string{"GOOGLE_GEMINI_BASE_URL": srv.URL, "GEMINI_API_KEY": testKey}
	for k, v := range env {
		if v == "" {
			delete(gateway, k)
		} else {
			gateway[k] = v
		}
	}
	full := append(agenttest.MinimalEnv(home), cmd.Env...)
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			full = append(full, name+"="+v)
		}
	}
	sess, ok := a.NewDecoder(inv).(runs.Session)
	if !ok {
		t.Fatal("a session run's decoder is no runs.Session")
	}
	s := &session{Driver: acptest.Start(t, bin, cmd.Args, full, dir, sess), srv: srv, dir: dir, home: home}
	t.Cleanup(func() {
		if *recordACP && !t.Failed() {
			name := "gemini_" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(t.Name(), "TestSession")), "/", "_")
			path := filepath.Join("..", "..", "acp", "testdata", name+".jsonl")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Error(err)
			}
			if err := os.WriteFile(path, append(bytes.Join(s.Stdout(), []byte("\n")), '\n'), 0o644); err != nil {
				t.Error(err)
			}
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

func TestSessionTwoToolsAllowThenDeny(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Run two commands.", Approvals: runs.ApprovalsAsk},
		googleai.TwoTools("touch one.txt", "touch two.txt", "Both handled."), nil)
	first, i := s.answer(t, 0, runs.Allow)
	if first.Tool != "run_shell_command" || !bytes.Contains(first.Input, []byte("touch one.txt")) ||
		len(first.Options) != 4 || first.Options[1] != runs.AllowSession {
		t.Errorf("first approval %+v (input %s)", first, first.Input)
	}
	second, _ := s.answer(t, i, runs.Deny)
	if !bytes.Contains(second.Input, []byte("touch two.txt")) || second.ID == first.ID {
		t.Errorf("second approval %+v", second)
	}
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded || turn.Result != "Both handled." {
		t.Errorf("turn %+v", turn)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "one.txt")); err != nil {
		t.Errorf("the allowed call did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "two.txt")); err == nil {
		t.Error("the denied call ran")
	}
	// Thoughts and cached tokens were billed; the prompt result leaves
	// them out, the chat recording has them.
	billed := s.srv.Ledger().Billed()
	if billed.ThoughtsTokenCount == 0 || billed.CachedContentTokenCount == 0 || turn.Usage != normalized(billed) {
		t.Errorf("turn usage %+v, billed %+v", turn.Usage, normalized(billed))
	}
	o := s.close(t)
	evs := s.Events()
	started, done := acptest.Of(evs, runs.EventToolCallStarted), acptest.Of(evs, runs.EventToolCallCompleted)
	if len(started) != 2 || len(done) != 2 || done[0].Data.(runs.ToolCallCompletedData).IsError || !done[1].Data.(runs.ToolCallCompletedData).IsError {
		t.Errorf("tool calls %v", acptest.Types(evs))
	}
	if o.Status != runs.Succeeded || o.NumTurns != 1 || o.Usage != turn.Usage {
		t.Errorf("outcome %+v", o)
	}
}

func TestSessionAllowSession(t *testing.T) {
	t.Parallel()
	const cmd = "echo again >> log.txt"
	s := startSession(t, runs.Spec{Prompt: "Run it twice.", Approvals: runs.ApprovalsAsk},
		googleai.TwoTools(cmd, cmd, "Ran twice."), nil)
	s.answer(t, 0, runs.AllowSession)
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded {
		t.Errorf("turn %+v", turn)
	}
	if n := len(acptest.Of(s.Events(), runs.EventApprovalRequested)); n != 1 {
		t.Errorf("%d approvals: the identical call was asked again", n)
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, "log.txt")); err != nil || strings.Count(string(b), "again") != 2 {
		t.Errorf("log.txt = %q, %v", b, err)
	}
	s.close(t)
	// allow_session lasts for the session: nothing in the run's cwd
	// but what the tool wrote.
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
		googleai.TwoTools("touch one.txt", "touch two.txt", "Both handled."), nil)
	s.answer(t, 0, runs.DenyAndStop)
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Cancelled || turn.StopReason != "cancelled" {
		t.Errorf("turn %+v", turn)
	}
	o := s.close(t)
	if n := len(acptest.Of(s.Events(), runs.EventApprovalRequested)); n != 1 {
		t.Errorf("%d approvals after deny_and_stop", n)
	}
	if n := len(s.srv.Ledger().Calls()); n != 1 {
		t.Errorf("%d model requests: the turn went on after deny_and_stop", n)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "one.txt")); err == nil {
		t.Error("the denied call ran")
	}
	if o.Status != runs.Cancelled || o.NumTurns != 1 {
		t.Errorf("outcome %+v", o)
	}
}

// TestSessionTurnsBilledApart: each of three turns is billed its own
// requests; between turns the session is idle, where an interrupt is
// refused, and Close ends it with the last turn's result.
func TestSessionTurnsBilledApart(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "First.", Interactive: true}, googleai.Turns("Turn answered."), nil)
	var sum runs.Usage
	before := googleai.Usage{}
	for n := 1; n <= 3; n++ {
		if n > 1 {
			if err := s.Do(func(x runs.Session) error { return x.Send("Turn "+string(rune('0'+n))+".", nil, false) }); err != nil {
				t.Fatal(err)
			}
		}
		turn, _ := s.WaitTurn(n, sessionWithin)
		billed := s.srv.Ledger().Billed()
		own := googleai.Usage{PromptTokenCount: billed.PromptTokenCount - before.PromptTokenCount,
			CandidatesTokenCount:    billed.CandidatesTokenCount - before.CandidatesTokenCount,
			CachedContentTokenCount: billed.CachedContentTokenCount - before.CachedContentTokenCount,
			ThoughtsTokenCount:      billed.ThoughtsTokenCount - before.ThoughtsTokenCount}
		before = billed
		if own.CachedContentTokenCount == 0 || own.ThoughtsTokenCount == 0 {
			t.Errorf("turn %d billed no cached or thought tokens: %+v", n, own)
		}
		if turn.Status != runs.Succeeded || turn.Result != "Turn answered." || turn.Usage != normalized(own) || turn.Usage.IsZero() {
			t.Errorf("turn %d: %+v, billed for it %+v", n, turn, normalized(own))
		}
		sum = sum.Add(turn.Usage)
		if n == 1 {
			if err := s.Do(func(x runs.Session) error { return x.InterruptTurn() }); err == nil {
				t.Error("InterruptTurn while idle succeeded")
			}
		}
	}
	if !s.srv.Ledger().Seen("Turn 3.") {
		t.Error("the third message never reached the model")
	}
	o := s.close(t)
	if o.NumTurns != 3 || o.Usage != sum || o.Usage != normalized(s.srv.Ledger().Billed()) || o.Status != runs.Succeeded ||
		o.Result != "Turn answered." {
		t.Errorf("outcome %+v, sum %+v", o, sum)
	}
}

func TestSessionInterruptMidTool(t *testing.T) {
	t.Parallel()
	marker := "agentgate-test-" + uuid.NewString()
	s := startSession(t, runs.Spec{Prompt: "Run the long command.", Interactive: true},
		googleai.ToolThenText("sleep 60; echo "+marker, "After the interrupt."), nil)
	t.Cleanup(func() { killMatching(marker) })
	s.WaitType(0, sessionWithin, runs.EventToolCallStarted)
	waitFor(func() bool { return len(agenttest.ProcessesMatching(marker)) > 0 }, sessionWithin)
	if len(agenttest.ProcessesMatching(marker)) == 0 {
		t.Fatal("the tool's process never ran")
	}
	if err := s.Do(func(x runs.Session) error { return x.InterruptTurn() }); err != nil {
		t.Fatal(err)
	}
	turn, _ := s.WaitTurn(1, sessionWithin)
	// The prompt result of a cancelled turn has no usage; the recording
	// has the request that asked for the tool.
	billed1 := s.srv.Ledger().Billed()
	if turn.Status != runs.Cancelled || turn.Usage != normalized(billed1) || billed1.ThoughtsTokenCount == 0 {
		t.Errorf("turn 1 %+v, billed %+v", turn, normalized(billed1))
	}
	if left := agenttest.WaitGone(marker, 10*time.Second); len(left) > 0 {
		t.Errorf("tool processes left after the interrupt: %v", left)
	}
	if err := s.Do(func(x runs.Session) error { return x.Send("Go on.", nil, false) }); err != nil {
		t.Fatal(err)
	}
	turn, _ = s.WaitTurn(2, sessionWithin)
	billed := s.srv.Ledger().Billed()
	if turn.Status != runs.Succeeded || turn.Result != "After the interrupt." || turn.Usage != normalized(billed).Sub(normalized(billed1)) {
		t.Errorf("turn 2 %+v, billed in all %+v", turn, normalized(billed))
	}
	if o := s.close(t); o.NumTurns != 2 || o.Status != runs.Succeeded || o.Usage != normalized(billed) {
		t.Errorf("outcome %+v", o)
	}
}

// TestSessionRefusedWithoutApprovals: read_only without approvals asks
// nobody; the shell call is refused, as headless -p leaves it out.
func TestSessionRefusedWithoutApprovals(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Write a file.", Interactive: true, Permission: runs.ReadOnly},
		googleai.ToolTurn("touch made.txt", "Could not."), nil)
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded {
		t.Errorf("turn %+v", turn)
	}
	evs := s.Events()
	if len(acptest.Of(evs, runs.EventApprovalRequested)) != 0 || len(acptest.Of(evs, runs.EventWarning)) == 0 {
		t.Errorf("events %v", acptest.Types(evs))
	}
	if _, err := os.Stat(filepath.Join(s.dir, "made.txt")); err == nil {
		t.Error("read_only ran the shell")
	}
	s.close(t)
}

func TestSessionErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		sc    googleai.Scenario
		env   map[string]string
		class runs.Class
	}{
		{"401", googleai.Failure(401), nil, runs.NotAuthenticated},
		{"429", googleai.Failure(429), nil, runs.RateLimited},
		{"500", googleai.Failure(500), nil, runs.TransientAPIError},
		{"invalid_key", googleai.InvalidKey(), nil, runs.NotAuthenticated},
		{"no_credentials", googleai.TextAnswer("unreachable"), map[string]string{"GEMINI_API_KEY": ""}, runs.NotAuthenticated},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startSession(t, runs.Spec{Prompt: "Hi.", Interactive: true}, c.sc, c.env)
			turn, _ := s.WaitTurn(1, sessionWithin)
			if turn.Status != runs.Failed || turn.Error == nil || turn.Error.Class != c.class || turn.Error.Message == "" {
				t.Errorf("turn %+v (error %+v)", turn, turn.Error)
			}
			o := s.close(t)
			if o.Status != runs.Failed || o.Error == nil || o.Error.Class != c.class {
				t.Errorf("outcome %+v", o)
			}
		})
	}
}

// TestSessionReadToolsUnasked: with approvals "ask" (mode default) the
// read-only tools run without asking.
func TestSessionReadToolsUnasked(t *testing.T) {
	t.Parallel()
	sc := googleai.Func(func(req *googleai.Request) googleai.Response {
		if len(req.FunctionResponses()) > 0 {
			return googleai.Response{Parts: []googleai.Part{googleai.Text("Listed and read.")}}
		}
		return googleai.Response{Parts: []googleai.Part{
			googleai.Call("list_directory", map[string]any{"dir_path": "."}),
			googleai.Call("read_file", map[string]any{"file_path": "notes.txt"}),
		}}
	})
	s := startSession(t, runs.Spec{Prompt: "Look around.", Approvals: runs.ApprovalsAsk}, sc, nil)
	if err := os.WriteFile(filepath.Join(s.dir, "notes.txt"), []byte("NOTES-CONTENT"), 0o644); err != nil {
		t.Fatal(err)
	}
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded {
		t.Errorf("turn %+v", turn)
	}
	evs := s.Events()
	done := acptest.Of(evs, runs.EventToolCallCompleted)
	if len(acptest.Of(evs, runs.EventApprovalRequested)) != 0 || len(done) != 2 {
		t.Errorf("events %v", acptest.Types(evs))
	}
	for _, ev := range done {
		if c := ev.Data.(runs.ToolCallCompletedData); c.IsError {
			t.Errorf("tool call failed: %+v", c)
		}
	}
	if !s.srv.Ledger().Seen("NOTES-CONTENT") {
		t.Error("read_file's content never reached the model")
	}
	s.close(t)
}

// FuzzSessionDecode feeds arbitrary lines to the ACP decoder with
// Gemini's profile (its usage reader and error classifier), seeded with
// the session tests' transcripts.
func FuzzSessionDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "acp", "testdata", "gemini_*.jsonl"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":4,"error":{"code":429,"message":"{\"error\":{\"code\":429,\"details\":[{\"reason\":7}]}}"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":-5,"output_tokens":1e30}}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}
{"jsonrpc":"2.0","id":2,"result":{"sessionId":"` + testSession + `"}}
{"jsonrpc":"2.0","id":3,"result":{}}
{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":100,"output_tokens":10}}}}}`))
	// An edit asked for with its diff, as 0.61.0 sends write_file and
	// replace, and one whose diff lacks its new text.
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}
{"jsonrpc":"2.0","id":2,"result":{"sessionId":"` + testSession + `"}}
{"jsonrpc":"2.0","id":3,"result":{}}
{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"` + testSession + `","options":[{"optionId":"proceed_once","kind":"allow_once"},{"optionId":"cancel","kind":"reject_once"}],"toolCall":{"toolCallId":"replace__replace_1_0","status":"pending","title":"a.txt: old => new","content":[{"type":"diff","path":"/w/a.txt","oldText":"old\n","newText":"new\n"},{"type":"diff","path":"/w/b.txt","oldText":null}],"locations":[{"path":"/w/a.txt"}],"kind":"edit"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv := runs.Invocation{Home: testHome, Dir: testCwd, Spec: runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk}}
		// The chat recording, in memory, of the session a seed's
		// session/new answer may name.
		home := chatHome()
		home.add(testChat, chatLine("g1", 100, 10, 50, 5))
		inv.Files = home
		dec := New().NewDecoder(inv).(runs.Session)
		dec.Open()
		var evs []runs.Event
		for _, l := range bytes.Split(data, []byte("\n")) {
			evs = append(evs, dec.Decode(l)...)
			dec.Pending()
		}
		dec.Close()
		o := dec.Finish(runs.Exit{Code: 1}, data)
		evs = append(evs, o.Events...)
		for _, ev := range evs {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("event %s does not marshal: %v", ev.Type, err)
			}
		}
		if (o.Status == runs.Failed) != (o.Error != nil) && o.Status != runs.Cancelled {
			t.Fatalf("status %s with error %+v", o.Status, o.Error)
		}
	})
}
