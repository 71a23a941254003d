package opencode

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/acp/acptest"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

var recordACP = flag.Bool("record-acp", false, "the session tests write their stdout to testdata/acp/<case>.jsonl, FuzzSessionDecode's seeds")

// sessionWithin bounds one wait for an event of a real-CLI session, against
// a hang only: OpenCode answers initialize in about 3 s alone, but it costs
// 7 to 11 s of CPU to start, and on a 2-core machine at load 25 its first
// turn came after more than 3 minutes.
const sessionWithin = 8 * time.Minute

// session is one real `opencode acp` run driven through the adapter's
// Session.
type session struct {
	*acptest.Driver
	srv  *chat.Server
	dir  string
	home string
	cmd  runs.Command
}

// startSession runs opencode acp for spec against a mock playing sc,
// configured in the home's opencode.json as the conformance kit does.
func startSession(t *testing.T, spec runs.Spec, sc chat.Scenario) *session {
	t.Helper()
	return startSessionIn(t, t.TempDir(), spec, sc)
}

// startSessionIn is startSession with the run's directory.
func startSessionIn(t *testing.T, dir string, spec runs.Spec, sc chat.Scenario) *session {
	t.Helper()
	return startSessionWith(t, sessionSetup{dir: dir, spec: spec, sc: sc})
}

// sessionSetup is what a real-CLI session test gives the run.
type sessionSetup struct {
	dir  string
	spec runs.Spec
	sc   chat.Scenario
	// images are the prompt's, as the supervisor writes them.
	images []runs.Image
	// config is the home's opencode.json for the mock's URL; nil is
	// mockConfig.
	config func(url, keyEnv string) string
	// restore, when set, is given the prepared home before the CLI
	// starts, to put kept session files in.
	restore func(home string)
}

// startSessionWith runs opencode acp as set up.
func startSessionWith(t *testing.T, su sessionSetup) *session {
	t.Helper()
	dir, spec, sc := su.dir, su.spec, su.sc
	if dir == "" {
		dir = t.TempDir()
	}
	config := su.config
	if config == nil {
		config = mockConfig
	}
	bin := opencodeBin(t)
	srv, err := chat.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	home := t.TempDir()
	if err := os.MkdirAll(configDir(home), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(configDir(home), "opencode.json"), []byte(config(srv.URL, homeKeyEnv)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := New().PrepareHome(home); err != nil {
		t.Fatal(err)
	}
	if su.restore != nil {
		su.restore(home)
	}
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{},
		Timeout: time.Minute, CLIVersion: VerifiedVersion, Images: su.images}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	if cmd.Stdin != nil || cmd.Args[0] != "acp" {
		t.Fatalf("a session's command: %+v", cmd)
	}
	gateway := map[string]string{homeKeyEnv: testKey}
	env := append(agenttest.MinimalEnv(home), "TERM=dumb")
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			env = append(env, name+"="+v)
		}
	}
	env = append(env, cmd.Env...)
	sess, ok := a.NewDecoder(inv).(runs.Session)
	if !ok {
		t.Fatal("a session run's decoder is no runs.Session")
	}
	s := &session{Driver: acptest.Start(t, bin, cmd.Args, env, dir, sess), srv: srv, dir: dir, home: home, cmd: cmd}
	t.Cleanup(func() {
		if *recordACP && !t.Failed() {
			name := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(t.Name(), "TestSession")), "/", "_")
			path := filepath.Join("testdata", "acp", name+".jsonl")
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

// normalizedBill is what the mock billed for the entries, in the
// gateway's convention.
func normalizedBill(l chat.Ledger) runs.Usage { return normalized(l.Billed()) }

// TestSessionAllowThenDeny: a read runs unasked, then two bash calls are
// asked for, the first allowed and run, the second denied, which ends the
// turn with no further model request. The turn's usage and cost are all
// three requests' (read from OpenCode's store: the prompt result has the
// last one's only).
func TestSessionAllowThenDeny(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Read, then run two commands.", Approvals: runs.ApprovalsAsk},
		chat.ToolChain([]chat.Call{chat.FunctionCall("read", map[string]string{"filePath": "notes.txt"}),
			chat.Bash("touch one.txt"), chat.Bash("touch two.txt")}, "All handled."))
	first, i := s.answer(t, 0, runs.Allow)
	if first.Tool != "bash" || !bytes.Contains(first.Input, []byte("touch one.txt")) || len(first.Options) != 4 || first.Options[1] != runs.AllowSession {
		t.Errorf("first approval %+v (input %s), want the first bash call: the read runs unasked", first, first.Input)
	}
	second, _ := s.answer(t, i, runs.Deny)
	if second.ID == first.ID || !bytes.Contains(second.Input, []byte("touch two.txt")) {
		t.Errorf("second approval %+v", second)
	}
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded {
		t.Errorf("turn %+v", turn)
	}
	o := s.close(t)
	if n := len(ofType(s.Events(), runs.EventApprovalRequested)); n != 2 {
		t.Errorf("%d approvals, want 2: the read is not asked", n)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "one.txt")); err != nil {
		t.Error("the allowed call did not run")
	}
	if _, err := os.Stat(filepath.Join(s.dir, "two.txt")); err == nil {
		t.Error("the denied call ran")
	}
	l := s.srv.Ledger().Completions()
	if len(l) != 3 || len(s.srv.Ledger().Titles()) != 0 {
		t.Fatalf("%d requests, %d title requests: want the three steps and no title request", len(l), len(s.srv.Ledger().Titles()))
	}
	if bill := normalizedBill(l); turn.Usage != bill || o.Usage != bill {
		t.Errorf("turn usage %+v, run %+v; the mock billed %+v", turn.Usage, o.Usage, bill)
	}
	wantCost(t, "turn", turn.CostUSD, l)
	wantCost(t, "run", o.CostUSD, l)
	s.noWarnings(t)
}

// TestSessionToolTurnsBilledApart: two turns of three model requests each
// (two calls, the second unasked after allow_session, then the answer)
// report each exactly its own requests' usage and cost, and the run the
// sum.
func TestSessionToolTurnsBilledApart(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Touch it twice.", Interactive: true, Approvals: runs.ApprovalsAsk},
		chat.TwoTools(chat.Bash("touch same.txt"), chat.Bash("touch same.txt"), "Touched."))
	s.answer(t, 0, runs.AllowSession)
	one, _ := s.WaitTurn(1, sessionWithin)
	first := s.srv.Ledger().Completions()
	if err := s.Do(func(x runs.Session) error { return x.Send("Once more.", nil, false) }); err != nil {
		t.Fatal(err)
	}
	two, _ := s.WaitTurn(2, sessionWithin)
	o := s.close(t)
	all := s.srv.Ledger().Completions()
	if len(first) != 3 || len(all) != 6 {
		t.Fatalf("%d requests in turn 1, %d in all; want 3 and 6", len(first), len(all))
	}
	second := all[len(first):]
	if one.Usage != normalizedBill(first) || two.Usage != normalizedBill(second) || o.Usage != normalizedBill(all) || o.NumTurns != 2 {
		t.Errorf("turns %+v, %+v, run %+v (%d turns); billed %+v, %+v", one.Usage, two.Usage, o.Usage, o.NumTurns,
			normalizedBill(first), normalizedBill(second))
	}
	wantCost(t, "turn 1", one.CostUSD, first)
	wantCost(t, "turn 2", two.CostUSD, second)
	wantCost(t, "run", o.CostUSD, all)
	if n := len(ofType(s.Events(), runs.EventApprovalRequested)); n != 1 {
		t.Errorf("%d approvals, want 1: allow_session covers the identical calls", n)
	}
	s.noWarnings(t)
}

// wantCost checks a cost against the mock's billing of the entries at the
// configured prices.
func wantCost(t *testing.T, what string, got *float64, l chat.Ledger) {
	t.Helper()
	want := costOf(l.Billed())
	if got == nil || math.Abs(*got-want) > 1e-9 {
		t.Errorf("%s cost %v, want %v from the mock's billing at the configured prices", what, got, want)
	}
}

// noWarnings fails the test on a warning: the store was read.
func (s *session) noWarnings(t *testing.T) {
	t.Helper()
	for _, ev := range ofType(s.Events(), runs.EventWarning) {
		t.Errorf("warning %+v", ev.Data)
	}
}

// TestSessionModelRefused: a model OpenCode does not know fails turn 1
// with its answer and ends the session; no model request is made.
func TestSessionModelRefused(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "hi", Interactive: true, Model: "mock/no-such-model"}, chat.TextAnswer("hi"))
	turn, _ := s.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Failed || turn.Error == nil || !strings.Contains(turn.Error.Message, "model") {
		t.Errorf("turn %+v, error %+v", turn, turn.Error)
	}
	o := s.Wait(sessionWithin)
	if o.Status != runs.Failed || len(s.srv.Ledger().Completions()) != 0 {
		t.Errorf("outcome %+v; %d requests", o, len(s.srv.Ledger().Completions()))
	}
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

func ofType(evs []runs.Event, typ runs.EventType) []runs.Event {
	var out []runs.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// FuzzSessionDecode drives a Session, model and effort set, with session
// transcripts of the real CLI (testdata/acp/*.jsonl, written by
// -record-acp) and hand-made lines.
func FuzzSessionDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "acp", "*.jsonl"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}
{"jsonrpc":"2.0","id":2,"result":{"sessionId":"ses_1","configOptions":[]}}
{"jsonrpc":"2.0","id":3,"result":{}}
{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"bad"}}
{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn","usage":{"inputTokens":-5,"outputTokens":1e30,"cachedReadTokens":4}}}`))
	f.Add([]byte(`{"role":"assistant","tokens":{"input":1000,"output":38,"reasoning":12,"cache":{"write":0,"read":4000}},"cost":0.00495}
{"jsonrpc":"2.0","id":1,"result":{}}
{"jsonrpc":"2.0","id":2,"result":{"sessionId":"ses_1","configOptions":[]}}
{"jsonrpc":"2.0","id":3,"result":{}}
{"jsonrpc":"2.0","id":4,"result":{}}
{"role":"assistant","tokens":{"input":-1,"output":1e300,"cache":{"read":"x"}},"cost":-4}
{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn","usage":{"inputTokens":300,"outputTokens":23,"thoughtTokens":7,"cachedReadTokens":4900}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}
{"jsonrpc":"2.0","id":2,"result":{"sessionId":"ses_1"}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"demo_x_reverse_text","kind":"other","status":"pending"}}}
{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"ses_1","toolCall":{"toolCallId":"c1","title":"demo_x_reverse_text"},"options":[{"optionId":"once","kind":"allow_once"}]}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"tool_call","toolCallId":"c2","title":"demo_","status":"pending"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error: Rate limit reached","data":{"service":"session","errorName":"APIError"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv := runs.Invocation{Dir: "/work", Spec: runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk, Model: "mock/m", Effort: "high",
			MCPServers: map[string]runs.MCPServer{"demo": {Command: "/bin/demo"}, "demo_x": {URL: "http://127.0.0.1:1/mcp"}}}}
		// The store answers with messages made of the input's lines,
		// so that its parser is fuzzed too.
		mem := memStore{}
		for i, l := range bytes.Split(data, []byte("\n")) {
			mem["ses_1"] = append(mem["ses_1"], storedMessage{ID: fmt.Sprintf("msg_%d", i%7), Data: l})
		}
		dec := (&Adapter{records: func(string) records { return mem }}).NewDecoder(inv).(runs.Session)
		dec.Open()
		var evs []runs.Event
		for _, l := range bytes.Split(data, []byte("\n")) {
			evs = append(evs, dec.Decode(l)...)
			dec.Pending()
		}
		dec.Close()
		dec.Pending()
		o := dec.Finish(runs.Exit{Code: 1}, data)
		for _, ev := range append(evs, o.Events...) {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("event %s does not marshal: %v", ev.Type, err)
			}
		}
		if (o.Status == runs.Failed) != (o.Error != nil) && o.Status != runs.Cancelled {
			t.Fatalf("status %s with error %+v", o.Status, o.Error)
		}
	})
}

// TestSessionKilledMidTurn: a process killed while it waits for an
// approval fails the turn, which is billed what OpenCode's store holds:
// the first request, whose step had finished; the second is still in its
// tools, whose tokens OpenCode records only once they return, so the turn
// lacks it (as a cancelled one-shot run lacks its last step).
func TestSessionKilledMidTurn(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Run two commands.", Approvals: runs.ApprovalsAsk},
		chat.TwoTools(chat.Bash("touch one.txt"), chat.Bash("touch two.txt"), "Both handled."))
	_, i := s.answer(t, 0, runs.Allow)
	s.WaitType(i, sessionWithin, runs.EventApprovalRequested)
	s.Kill()
	o := s.Wait(sessionWithin)
	turn := ofType(o.Events, runs.EventTurnCompleted)
	if len(turn) != 1 || o.Status != runs.Failed {
		t.Fatalf("outcome %+v, events %v", o, o.Events)
	}
	l := s.srv.Ledger().Completions()
	got := turn[0].Data.(runs.TurnCompletedData)
	if len(l) != 2 || got.Usage != normalized(l[0].Billed) || o.Usage != got.Usage {
		t.Errorf("turn usage %+v, run %+v; %d requests, the first billed %+v", got.Usage, o.Usage, len(l), normalized(l[0].Billed))
	}
	wantCost(t, "turn", got.CostUSD, l[:1])
	s.noWarnings(t)
}
