package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/netns"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/testproc"
)

// fakeAgentEnv makes the test binary act as an agent CLI, in the mode
// given, instead of running tests: os/exec's own trick.
const fakeAgentEnv = "AGENTGATE_FAKE_AGENT"

// fakeGateEnv names the file the "gated" fake agent waits for.
const fakeGateEnv = "AGENTGATE_FAKE_GATE"

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == "-fake-version" {
		fmt.Println("1.2.3")
		testproc.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == proctree.ReaperArg {
		testproc.Exit(proctree.Reap(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == netns.ShimArg {
		testproc.Exit(netns.RunShim(os.Args[2:])) // a sandboxed run's network shim
	}
	if mode := os.Getenv(fakeAgentEnv); mode != "" {
		testproc.Exit(fakeAgent(mode))
	}
	goleak.VerifyTestMain(m)
}

// fakeAgent is the agent side of the supervisor's tests. Each mode plays
// one thing a real CLI does that is hard to make a real CLI do on demand.
func fakeAgent(mode string) int {
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	switch mode {
	case "version":
		say("1.2.3")
	case "hello":
		say(`{"text":"hello"}`)
		say(`{"text":"world"}`)
	case "stdin":
		b, _ := bufio.NewReader(os.Stdin).ReadString(0)
		say(`{"text":"read %d bytes"}`, len(b))
	case "hugeline":
		// One 8 MiB line, 32 times the text bound and 8 times the line
		// bound of TestLineOverLimitIsReportedAndSkipped, then a normal
		// one: the stream must survive it. (It was 32 MiB, which the race
		// detector made a minute's work on a loaded machine.)
		fmt.Fprintf(out, `{"text":"%s"}`+"\n", strings.Repeat("x", 8<<20))
		say(`{"text":"after"}`)
	case "gated":
		// One line, then the next only once the file named by
		// fakeGateEnv exists: the test decides when the second line
		// enters the pipe.
		say(`{"text":"first"}`)
		for {
			if _, err := os.Stat(os.Getenv(fakeGateEnv)); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		say(`{"text":"second"}`)
	case "grandchild":
		// A grandchild inherits stdout and keeps it open long after the
		// agent exits.
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fakeAgentEnv+"=sleeper")
		cmd.Stdout = os.Stdout
		if err := cmd.Start(); err != nil {
			return 2
		}
		say(`{"text":"left a grandchild"}`)
	case "escapee":
		// A grandchild that clears its environment and leaves the
		// session, so no scan finds it, and keeps stdout open.
		cmd := exec.Command(os.Args[0])
		cmd.Env = []string{fakeAgentEnv + "=sleeper"}
		cmd.Stdout = os.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return 2
		}
		say(`{"text":"escapee %d"}`, cmd.Process.Pid)
	case "sleeper":
		time.Sleep(time.Minute)
	case "tool":
		// Like Claude's Bash tool: a shell in a session of its own, which
		// a process-group signal does not reach.
		cmd := exec.Command("/bin/sh", "-c", "sleep 60; :")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return 2
		}
		say(`{"text":"tool started","pid":%d}`, cmd.Process.Pid)
		time.Sleep(time.Minute)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		say(`{"text":"ignoring signals"}`)
		time.Sleep(time.Minute)
	case "exit3":
		for i := range 2000 {
			fmt.Fprintf(os.Stderr, "error line %d\n", i)
		}
		fmt.Fprintln(os.Stderr, "fatal: last words")
		return 3
	case "controls":
		// Text that JSON escapes six-fold: \u0001 per byte.
		say(`{"text":"%s"}`, strings.Repeat(`\u0001`, 300<<10))
	case "env":
		say(`{"text":%q}`, strings.Join(os.Environ(), "\n"))
	case "talk":
		return talkingAgent(say)
	case "usage":
		// Usage so far, then the end only once a file named "go"
		// exists in the working directory: the test looks at the
		// running run's record in between.
		say(`{"usage":7,"cost":0.25}`)
		for {
			if _, err := os.Stat("go"); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	default:
		return 99
	}
	return 0
}

// fakeAdapter drives the test binary. Its decoder turns {"text":…} lines
// into message.completed and anything else into agent.unparsed.
type fakeAdapter struct{ mode string }

func (a fakeAdapter) Name() string { return "fake" }
func (a fakeAdapter) Describe() runs.Description {
	return runs.Description{Name: "fake", DefaultBin: os.Args[0], VerifiedVersion: "1.2.3", VersionArgs: []string{"-fake-version"},
		CredentialEnv: []string{"FAKE_KEY"}, Fields: []string{runs.FieldModel}}
}
func (a fakeAdapter) ParseVersion(b []byte) (string, error) { return strings.TrimSpace(string(b)), nil }
func (a fakeAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	if inv.Spec.MaxTurns > 0 {
		return runs.Command{}, runs.Unsupported("fake", runs.FieldMaxTurns, "the fake agent has no turns")
	}
	mode := a.mode
	if m, ok := strings.CutPrefix(inv.Spec.Prompt, "mode:"); ok {
		mode = m
	}
	if strings.HasPrefix(mode, "stdin") {
		mode = "stdin"
	}
	c := runs.Command{Env: []string{fakeAgentEnv + "=" + mode}, PassEnv: []string{"FAKE_KEY"}, InterruptSignal: int(syscall.SIGINT)}
	if mode == "stdin" {
		c.Stdin = []byte(inv.Spec.Prompt)
	}
	return c, nil
}
func (a fakeAdapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	return &fakeDecoder{sessionCost: inv.Spec.Metadata["session_cost"], sessionInput: inv.Spec.Metadata["session_input"]}
}

type fakeDecoder struct {
	lines int
	// sessionCost, when set, is reported as the session's cumulative
	// cost, the way Claude Code reports it, for session "sess-1".
	sessionCost string
	// sessionInput, when set, is reported as the session's cumulative
	// input tokens, the way Copilot's usage file reports them.
	sessionInput string
}

func (d *fakeDecoder) Decode(line []byte) []runs.Event {
	d.lines++
	var v struct {
		Text  *string  `json:"text"`
		Usage int64    `json:"usage"`
		Cost  *float64 `json:"cost"`
	}
	err := json.Unmarshal(line, &v)
	if err == nil && v.Usage > 0 {
		return []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: runs.Usage{InputTokens: v.Usage}, CostUSD: v.Cost})}
	}
	if err != nil || v.Text == nil {
		return []runs.Event{runs.NewEvent(runs.EventAgentUnparsed, runs.UnparsedData{Line: string(line), Bytes: len(line), Reason: "not fake json"})}
	}
	return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: *v.Text})}
}

func (d *fakeDecoder) Finish(exit runs.Exit, tail []byte) runs.Outcome {
	if exit.Code != 0 || exit.Signal != "" {
		return runs.Outcome{Status: runs.Failed, Error: runs.NewRunError(runs.AgentCrashed, fmt.Sprintf("exit %d: %s", exit.Code, lastLine(tail)), "")}
	}
	out := runs.Outcome{Status: runs.Succeeded, Result: fmt.Sprintf("%d lines", d.lines), Usage: runs.Usage{InputTokens: 10, OutputTokens: 2}}
	if d.sessionInput != "" {
		n, _ := strconv.ParseInt(d.sessionInput, 10, 64)
		out.SessionUsage, out.SessionID = &runs.Usage{InputTokens: n, OutputTokens: n / 10}, "sess-1"
	}
	if d.sessionCost != "" {
		usd, _ := strconv.ParseFloat(d.sessionCost, 64)
		out.SessionCostUSD, out.SessionID = &usd, "sess-1"
	}
	return out
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	return s[strings.LastIndexByte(s, '\n')+1:]
}

type harness struct {
	sup   *Supervisor
	store *memStore
	root  string
	// deadline, when the harness was built with it, is the runs'
	// Config.RunDeadline: closing it times them out.
	deadline chan time.Time
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	store := newMemStore()
	root := t.TempDir()
	cfg.WorkspaceRoot = root
	cfg.Path = os.Getenv("PATH")
	// Agents run under the reaper, as in the gateway, unless a test asks
	// for the cookie scan alone with "-".
	switch cfg.Reaper {
	case "":
		cfg.Reaper = os.Args[0]
	case "-":
		cfg.Reaper = ""
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 300 * time.Millisecond
	}
	if cfg.StoreRetry == 0 {
		cfg.StoreRetry = 500 * time.Millisecond // a store that fails in a test fails for good
	}
	agent := &Agent{Adapter: fakeAdapter{mode: "hello"}, Bin: os.Args[0], Home: t.TempDir()}
	sup := New(cfg, store, []*Agent{agent}, nopObserver{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	startSupervisor(t, sup)
	return &harness{sup: sup, store: store, root: root}
}

// startSupervisor starts sup and, when the test ends, shuts it down and
// waits for its loops.
func startSupervisor(t *testing.T, sup *Supervisor) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = sup.Shutdown(sctx)
		cancel()
		sup.loops.Wait()
	})
}

func (h *harness) submit(t *testing.T, prompt string) runs.Run {
	t.Helper()
	r, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wait waits for the run to reach a terminal state.
func (h *harness) wait(t *testing.T, id string, within time.Duration) runs.Run {
	t.Helper()
	// within catches a hang and is no target: a loaded machine stretches
	// the fake agent's start (a race-built test binary) to seconds.
	deadline := time.Now().Add(max(within, time.Minute))
	for time.Now().Before(deadline) {
		r, err := h.store.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Terminal() {
			// The record is stored before run.completed (finish):
			// wait for the event as well, so that what a test reads
			// of the log next is the whole of it. A run whose
			// run.completed never comes is returned at the deadline
			// for the test's own assertions to catch.
			for time.Now().Before(deadline) && !h.completed(id) {
				time.Sleep(10 * time.Millisecond)
			}
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s not finished within %s", id, within)
	return runs.Run{}
}

// completed reports whether the run's log holds run.completed.
func (h *harness) completed(id string) bool {
	for _, e := range h.store.eventsOf(id) {
		if e.Type == runs.EventRunCompleted {
			return true
		}
	}
	return false
}

func (h *harness) types(id string) []runs.EventType {
	var out []runs.EventType
	for _, e := range h.store.eventsOf(id) {
		out = append(out, e.Type)
	}
	return out
}

func (h *harness) waitFor(t *testing.T, id string, typ runs.EventType, text string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a bound against a hang, not a target
	for time.Now().Before(deadline) {
		for _, e := range h.store.eventsOf(id) {
			if e.Type == typ && strings.Contains(string(e.JSON), text) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s event with %q in run %s within a minute: %v", typ, text, id, h.types(id))
}

func assertNoProcesses(t *testing.T, id string) {
	t.Helper()
	pids, err := proctree.New().Find(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 0 {
		t.Fatalf("%d processes of run %s left: %v", len(pids), id, pids)
	}
}

func TestRunSucceeds(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.submit(t, "mode:hello")
	if r.Status != runs.Queued {
		t.Fatalf("submitted run status %s, want queued", r.Status)
	}
	done := h.wait(t, r.ID, 10*time.Second)
	if done.Status != runs.Succeeded || done.Result != "2 lines" || done.Exit == nil || done.Exit.Code != 0 {
		t.Fatalf("run = %+v", done)
	}
	want := []runs.EventType{runs.EventRunQueued, runs.EventRunStarted, runs.EventMessageCompleted, runs.EventMessageCompleted, runs.EventRunCompleted}
	if got := h.types(r.ID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i, e := range h.store.eventsOf(r.ID) {
		var env runs.Event
		if err := json.Unmarshal(e.JSON, &env); err != nil {
			t.Fatal(err)
		}
		if env.Seq != uint64(i+1) || env.RunID != r.ID || env.V != runs.EnvelopeVersion || env.Agent != "fake" {
			t.Fatalf("event %d envelope = %+v", i, env)
		}
	}
	assertNoProcesses(t, r.ID)
	if _, err := os.Stat(filepath.Join(h.root, r.ID)); err != nil {
		t.Fatalf("fresh run directory: %v", err)
	}
}

// TestRunningRecordHasUsageSoFar: a one-shot run's stored record shows
// the usage and cost its usage.updated reported while it still runs,
// not zero until it ends.
func TestRunningRecordHasUsageSoFar(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.submit(t, "mode:usage")
	rec := h.waitRecord(t, r.ID, "showing its usage so far", func(r runs.Run) bool { return r.Usage.InputTokens > 0 || r.Status.Terminal() })
	if rec.Status != runs.Running || rec.Usage.InputTokens != 7 || rec.CostUSD == nil || *rec.CostUSD != 0.25 {
		t.Fatalf("running record: status %s, usage %+v, cost %v; want running with 7 input tokens and $0.25", rec.Status, rec.Usage, rec.CostUSD)
	}
	if err := os.WriteFile(filepath.Join(h.root, r.ID, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if done := h.wait(t, r.ID, 20*time.Second); done.Status != runs.Succeeded || done.Usage.InputTokens != 10 {
		t.Fatalf("finished run = %+v, want the outcome's usage", done)
	}
}

func TestChildEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("AGENTGATE_SECRET", "gateway-only")
	h := newHarness(t, Config{Getenv: func(k string) string {
		return map[string]string{"FAKE_KEY": "k1", "AGENTGATE_SECRET": "gateway-only"}[k]
	}})
	r := h.submit(t, "mode:env")
	h.wait(t, r.ID, 10*time.Second)
	var env string
	for _, e := range h.store.eventsOf(r.ID) {
		if e.Type == runs.EventMessageCompleted {
			env = string(e.JSON)
		}
	}
	if !strings.Contains(env, "FAKE_KEY=k1") {
		t.Errorf("the adapter's credential variable was not passed: %s", env)
	}
	if strings.Contains(env, "AGENTGATE_SECRET") {
		t.Errorf("the gateway's environment leaked into the child: %s", env)
	}
	if !strings.Contains(env, proctree.Cookie(r.ID)) {
		t.Errorf("the child does not carry the run cookie: %s", env)
	}
}

func TestPromptOnStdin(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.submit(t, "mode:stdin")
	h.wait(t, r.ID, 10*time.Second)
	h.waitFor(t, r.ID, runs.EventMessageCompleted, fmt.Sprintf("read %d bytes", len("mode:stdin")))
}

// A prompt larger than a pipe's buffer reaches the agent whole on stdin.
func TestLargePromptOnStdin(t *testing.T) {
	h := newHarness(t, Config{})
	prompt := "mode:stdin " + strings.Repeat("x", 400<<10)
	r := h.submit(t, prompt)
	h.wait(t, r.ID, 20*time.Second)
	h.waitFor(t, r.ID, runs.EventMessageCompleted, fmt.Sprintf("read %d bytes", len(prompt)))
}

// A grandchild that escaped the run's scan (no cookie, its own session)
// and holds stdout open cannot hang the run: output is drained with a
// deadline once the run's own processes are gone.
func TestEscapedGrandchildDoesNotHang(t *testing.T) {
	h := newHarness(t, Config{Reaper: "-"})
	start := time.Now()
	r := h.submit(t, "mode:escapee")
	done := h.wait(t, r.ID, 20*time.Second)
	for _, e := range h.store.eventsOf(r.ID) {
		var env struct{ Data runs.MessageData }
		json.Unmarshal(e.JSON, &env)
		if pid, ok := strings.CutPrefix(env.Data.Text, "escapee "); ok {
			n, _ := strconv.Atoi(pid)
			t.Cleanup(func() { syscall.Kill(n, syscall.SIGKILL) })
		}
	}
	if done.Status != runs.Succeeded {
		t.Fatalf("status %s %+v", done.Status, done.Error)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("run took %s with an escaped grandchild holding stdout", took)
	}
	// Without the reaper the scan cannot find it: the reason the gateway
	// runs agents under one (TestReaperKillsEscapedGrandchild).
	if !escapeeAlive(h, r.ID) {
		t.Fatal("the escapee died without the reaper; this test no longer shows the scan's limit")
	}
}

// Output the run's own processes wrote before they exited is read in
// full, however long the run takes over a line: the drain deadline bounds
// waiting for a pipe that something outside the run holds open, not the
// time spent decoding what is already in it. The first line's handler lets
// the agent write its second line and exit, then outlasts drainTimeout,
// as decoding a huge line does on a busy machine.
func TestSlowLineHandlerLosesNoOutput(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	id := uuid.NewString()
	tree := proctree.New()
	var got []string
	exit, _, err := runProcess(context.Background(), tree, process{
		RunID: id, Path: os.Args[0], Dir: t.TempDir(), Grace: time.Second, MaxLine: 1 << 20, StderrTail: 1 << 10,
		Env: []string{fakeAgentEnv + "=gated", fakeGateEnv + "=" + gate},
	}, func(l line) {
		got = append(got, string(l.Bytes))
		if len(got) > 1 {
			return
		}
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Error(err)
			return
		}
		// The agent has written its last line once it is gone.
		deadline := time.Now().Add(20 * time.Second)
		for {
			pids, err := tree.Find(id)
			if err != nil {
				t.Error(err)
				return
			}
			if len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the agent still runs: %v", pids)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The slow handler under test: it outlasts the drain deadline.
		time.Sleep(drainTimeout + time.Second)
	})
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 0 || len(got) != 2 || got[1] != `{"text":"second"}` {
		t.Fatalf("exit %+v, lines %q; want both lines", exit, got)
	}
}

func escapeeAlive(h *harness, id string) bool {
	for _, e := range h.store.eventsOf(id) {
		var env struct{ Data runs.MessageData }
		json.Unmarshal(e.JSON, &env)
		if s, ok := strings.CutPrefix(env.Data.Text, "escapee "); ok {
			pid, _ := strconv.Atoi(s)
			return pid > 0 && syscall.Kill(pid, 0) == nil
		}
	}
	return false
}

func TestHugeLineDoesNotLoseTheStream(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.submit(t, "mode:hugeline")
	done := h.wait(t, r.ID, 3*time.Minute)
	if done.Status != runs.Succeeded {
		t.Fatalf("status %s: %+v", done.Status, done.Error)
	}
	evs := h.store.eventsOf(r.ID)
	var texts []runs.MessageData
	for _, e := range evs {
		if e.Type == runs.EventMessageCompleted {
			var env struct{ Data runs.MessageData }
			if err := json.Unmarshal(e.JSON, &env); err != nil {
				t.Fatal(err)
			}
			texts = append(texts, env.Data)
		}
	}
	if len(texts) != 2 || texts[1].Text != "after" {
		t.Fatalf("got %d messages, want the huge one and \"after\"", len(texts))
	}
	// The 8 MiB text is bounded where events leave the decoder, with a
	// visible mark.
	if len(texts[0].Text) > DefaultLimits.MaxText+64 || !strings.Contains(texts[0].Text, "[truncated") {
		t.Fatalf("huge text not bounded: %d bytes", len(texts[0].Text))
	}
}

func TestLineOverLimitIsReportedAndSkipped(t *testing.T) {
	h := newHarness(t, Config{MaxLine: 1 << 20})
	r := h.submit(t, "mode:hugeline")
	done := h.wait(t, r.ID, 60*time.Second)
	if done.Status != runs.Succeeded {
		t.Fatalf("status %s", done.Status)
	}
	// The record can say the run ended before its run.completed is in the
	// log: the events are stored on their own goroutine.
	h.waitFor(t, r.ID, runs.EventRunCompleted, "")
	got := h.types(r.ID)
	want := []runs.EventType{runs.EventRunQueued, runs.EventRunStarted, runs.EventAgentUnparsed, runs.EventMessageCompleted, runs.EventRunCompleted}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	h.waitFor(t, r.ID, runs.EventAgentUnparsed, `"truncated":true`)
}

func TestGrandchildHoldingStdoutDoesNotHang(t *testing.T) {
	h := newHarness(t, Config{})
	start := time.Now()
	r := h.submit(t, "mode:grandchild")
	done := h.wait(t, r.ID, 15*time.Second)
	if done.Status != runs.Succeeded {
		t.Fatalf("status %s: %+v", done.Status, done.Error)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("run took %s: the grandchild held it", el)
	}
	assertNoProcesses(t, r.ID)
}

func TestCancelKillsToolInOwnSession(t *testing.T) {
	for _, reaper := range []string{"", "-"} {
		t.Run("reaper="+reaper, func(t *testing.T) { testCancelKillsTool(t, reaper) })
	}
}

func testCancelKillsTool(t *testing.T, reaper string) {
	h := newHarness(t, Config{Reaper: reaper})
	r := h.submit(t, "mode:tool")
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "tool started")
	pids, _ := proctree.New().Find(r.ID)
	if len(pids) < 2 {
		t.Fatalf("expected the agent and its tool running, found %v", pids)
	}
	if _, err := h.sup.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	// Idempotent: a second cancel is no error.
	if _, err := h.sup.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	done := h.wait(t, r.ID, 10*time.Second)
	if done.Status != runs.Cancelled || done.Error == nil || done.Error.Class != runs.ClassCancelled || done.Error.Retryable {
		t.Fatalf("run = %+v %+v", done, done.Error)
	}
	if done.Exit == nil || done.Exit.Reason != "cancelled" {
		t.Fatalf("exit = %+v", done.Exit)
	}
	assertNoProcesses(t, r.ID)
	again, err := h.sup.Cancel(context.Background(), r.ID)
	if err != nil || again.Status != runs.Cancelled {
		t.Fatalf("cancel after the end = %v, %v", again.Status, err)
	}
}

// The deadline strikes once the agent ignores SIGINT and SIGTERM, as it
// says: struck earlier, the signals would end it and the escalation to
// SIGKILL would go untested.
func TestTimeoutEscalatesToKill(t *testing.T) {
	deadline := make(chan time.Time)
	h := newHarness(t, Config{RunDeadline: func(string, time.Duration) <-chan time.Time { return deadline }})
	r, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:stubborn", TimeoutSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "ignoring signals")
	close(deadline)
	done := h.wait(t, r.ID, time.Minute)
	if done.Status != runs.TimedOut || done.Error.Class != runs.Timeout || !done.Error.Retryable {
		t.Fatalf("run = %+v %+v", done, done.Error)
	}
	if done.Exit == nil || done.Exit.Signal != "SIGKILL" {
		t.Fatalf("a process ignoring SIGINT and SIGTERM must end by SIGKILL, exit = %+v", done.Exit)
	}
	assertNoProcesses(t, r.ID)
}

func TestExitCodeAndStderrTail(t *testing.T) {
	h := newHarness(t, Config{StderrTail: 1024})
	r := h.submit(t, "mode:exit3")
	done := h.wait(t, r.ID, 10*time.Second)
	if done.Status != runs.Failed || done.Exit.Code != 3 || done.Error.Class != runs.AgentCrashed {
		t.Fatalf("run = %+v", done)
	}
	if !strings.Contains(done.Error.Message, "fatal: last words") {
		t.Fatalf("stderr tail not handed to the decoder: %q", done.Error.Message)
	}
}

func TestQueueFullAndCancelQueued(t *testing.T) {
	h := newHarness(t, Config{MaxConcurrent: 1})
	h.store.setQueueSize(1)
	running := h.submit(t, "mode:tool")
	h.waitFor(t, running.ID, runs.EventMessageCompleted, "tool started")
	queued := h.submit(t, "mode:hello")
	if _, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hello"}); !errors.Is(err, runs.ErrCapacity) {
		t.Fatalf("third submit = %v, want ErrCapacity", err)
	}
	r, err := h.sup.Cancel(context.Background(), queued.ID)
	if err != nil || r.Status != runs.Cancelled {
		t.Fatalf("cancel of a queued run = %v, %v; want cancelled at once", r.Status, err)
	}
	// The place is free again, at once: a cancelled queued run must not
	// keep holding it until a worker comes by.
	start := time.Now()
	again := h.submit(t, "mode:hello")
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("submit into the freed place blocked for %s", took)
	}
	h.sup.Cancel(context.Background(), running.ID)
	if d := h.wait(t, again.ID, 10*time.Second); d.Status != runs.Succeeded {
		t.Fatalf("run after the cancelled one: %s", d.Status)
	}
	if got := h.types(queued.ID); fmt.Sprint(got) != fmt.Sprint([]runs.EventType{runs.EventRunQueued, runs.EventRunCompleted}) {
		t.Fatalf("cancelled queued run events %v", got)
	}
}

func TestSubmitErrors(t *testing.T) {
	h := newHarness(t, Config{MaxTimeout: time.Hour})
	for _, tc := range []struct {
		spec  runs.Spec
		want  error
		field string
	}{
		{runs.Spec{Agent: "nope", Prompt: "x"}, runs.ErrUnknownAgent, ""},
		{runs.Spec{Agent: "fake", Prompt: " "}, runs.ErrInvalid, "prompt"},
		// max_turns is the gateway's to enforce for any agent; MCP
		// servers are the agent's to take, and the fake takes none.
		{runs.Spec{Agent: "fake", Prompt: "x", MCPServers: map[string]runs.MCPServer{"s": {Command: "x"}}}, runs.ErrUnsupported, runs.FieldMCPServers},
		{runs.Spec{Agent: "fake", Prompt: "x", OutputSchema: json.RawMessage(`{"type": 5}`)}, runs.ErrInvalid, runs.FieldOutputSchema},
		{runs.Spec{Agent: "fake", Prompt: "x", TimeoutSeconds: 7200}, runs.ErrInvalid, runs.FieldTimeoutSeconds},
		{runs.Spec{Agent: "fake", Prompt: "x", Cwd: "../etc"}, runs.ErrInvalid, runs.FieldCwd},
		{runs.Spec{Agent: "fake", Prompt: "x", Cwd: "/etc"}, runs.ErrInvalid, runs.FieldCwd},
		{runs.Spec{Agent: "fake", Prompt: "x", Cwd: "missing"}, runs.ErrInvalid, runs.FieldCwd},
		{runs.Spec{Agent: "fake", Prompt: "x", Effort: "max"}, runs.ErrInvalid, runs.FieldEffort},
		{runs.Spec{Agent: "fake", Prompt: "x", Permission: "root"}, runs.ErrInvalid, runs.FieldPermission},
		{runs.Spec{Agent: "fake", Prompt: "x", OutputSchema: json.RawMessage(`[1]`)}, runs.ErrInvalid, runs.FieldOutputSchema},
	} {
		_, err := h.sup.Submit(context.Background(), tc.spec)
		if !errors.Is(err, tc.want) {
			t.Errorf("%+v: err = %v, want %v", tc.spec, err, tc.want)
			continue
		}
		var fe *runs.FieldError
		if tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
			t.Errorf("%+v: err = %v, want it to name field %q", tc.spec, err, tc.field)
		}
	}
	// A symlink out of the workspace is refused too.
	if err := os.Symlink("/tmp", filepath.Join(h.root, "escape")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "x", Cwd: "escape"}); !errors.Is(err, runs.ErrInvalid) {
		t.Fatalf("symlink escape: %v", err)
	}
}

func TestShutdownInterruptsRunsAfterGrace(t *testing.T) {
	h := newHarness(t, Config{MaxConcurrent: 1})
	running := h.submit(t, "mode:tool")
	h.waitFor(t, running.ID, runs.EventMessageCompleted, "tool started")
	queued := h.submit(t, "mode:hello")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := h.sup.Shutdown(ctx); err == nil {
		t.Fatal("shutdown with a run still going after the grace period returned no error")
	}
	r, _ := h.store.GetRun(context.Background(), running.ID)
	if r.Status != runs.Failed || r.Error == nil || r.Error.Class != runs.Interrupted {
		t.Fatalf("running run after shutdown: %s %+v", r.Status, r.Error)
	}
	assertNoProcesses(t, running.ID)
	// The queued run stays in the shared queue, for another replica or
	// this one restarted.
	r, _ = h.store.GetRun(context.Background(), queued.ID)
	if pos, _ := h.store.QueuePosition(context.Background(), queued.ID); r.Status != runs.Queued || r.Owner != "" || pos != 1 {
		t.Fatalf("queued run after shutdown: %s owner %q position %d", r.Status, r.Owner, pos)
	}
	if _, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "x"}); !errors.Is(err, runs.ErrShuttingDown) {
		t.Fatalf("submit after shutdown = %v", err)
	}
}

func TestRecoverMarksInterrupted(t *testing.T) {
	store := newMemStore()
	now := time.Now()
	for _, r := range []runs.Run{
		{ID: "0001", Agent: "fake", Status: runs.Running, Owner: "me", StartedAt: &now},
		{ID: "0002", Agent: "fake", Status: runs.Running, Owner: "other-replica"},
		{ID: "0003", Agent: "fake", Status: runs.Succeeded, Owner: "me"},
	} {
		store.CreateRun(context.Background(), r)
	}
	store.AppendEvents(context.Background(), "0001", []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued}, {Seq: 2, Type: runs.EventRunStarted}})
	sup := New(Config{Replica: "me", WorkspaceRoot: t.TempDir()}, store, nil, nopObserver{}, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { sup.Shutdown(context.Background()); cancel(); sup.loops.Wait() }()
	r, _ := store.GetRun(ctx, "0001")
	if r.Status != runs.Failed || r.Error.Class != runs.Interrupted || !r.Error.Retryable {
		t.Fatalf("own running run after restart: %s %+v", r.Status, r.Error)
	}
	evs := store.eventsOf("0001")
	if last := evs[len(evs)-1]; last.Type != runs.EventRunCompleted || last.Seq != 3 {
		t.Fatalf("last event %+v, want run.completed at seq 3", last)
	}
	if r, _ := store.GetRun(ctx, "0002"); r.Status != runs.Running {
		t.Fatalf("another replica's run was touched: %s", r.Status)
	}
}

// A finished run whose run.completed is not stored yet reports that event's
// seq as its last, so that a stream opened in that moment waits for it
// instead of answering 204.
func TestLastEventSeqCoversRunCompletedOnItsWay(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	now := time.Now()
	h.store.CreateRun(ctx, runs.Run{ID: "r1", Agent: "fake", Status: runs.Succeeded, FinishedAt: &now})
	h.store.AppendEvents(ctx, "r1", []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued}, {Seq: 2, Type: runs.EventRunStarted}})
	if got, err := h.sup.LastEventSeq(ctx, "r1"); err != nil || got != 3 {
		t.Fatalf("LastEventSeq = %d, %v; want 3, the run.completed to come", got, err)
	}
	h.store.AppendEvents(ctx, "r1", []runs.StoredEvent{{Seq: 3, Type: runs.EventRunCompleted}})
	if got, err := h.sup.LastEventSeq(ctx, "r1"); err != nil || got != 3 {
		t.Fatalf("LastEventSeq = %d, %v; want 3", got, err)
	}
	h.store.CreateRun(ctx, runs.Run{ID: "r2", Agent: "fake", Status: runs.Running})
	h.store.AppendEvents(ctx, "r2", []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued}})
	if got, err := h.sup.LastEventSeq(ctx, "r2"); err != nil || got != 1 {
		t.Fatalf("LastEventSeq of a running run = %d, %v; want 1", got, err)
	}
}

// Whoever reads run.completed and then the run finds it finished.
func TestRunIsFinishedWhenRunCompletedIsStored(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.submit(t, "mode:hello")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		evs := h.store.eventsOf(r.ID)
		if n := len(evs); n > 0 && evs[n-1].Type == runs.EventRunCompleted {
			got, _ := h.store.GetRun(context.Background(), r.ID)
			if !got.Status.Terminal() {
				t.Fatalf("run.completed stored while the run is %s", got.Status)
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("run did not complete")
}

// A run recorded finished long ago without its run.completed (its gateway
// died in between) gets the event appended from its record, so that its
// streams end.
func TestLostRunCompletedIsRepaired(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	long := time.Now().Add(-time.Hour)
	cost := 0.5
	h.store.CreateRun(ctx, runs.Run{ID: "r1", Agent: "fake", Status: runs.Failed, StartedAt: &long, FinishedAt: &long,
		CostUSD: &cost, Error: runs.NewRunError(runs.RateLimited, "429", "")})
	h.store.AppendEvents(ctx, "r1", []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued}, {Seq: 2, Type: runs.EventRunStarted}})
	if got, err := h.sup.LastEventSeq(ctx, "r1"); err != nil || got != 3 {
		t.Fatalf("LastEventSeq = %d, %v; want 3", got, err)
	}
	evs := h.store.eventsOf("r1")
	if len(evs) != 3 || evs[2].Type != runs.EventRunCompleted || evs[2].Seq != 3 {
		t.Fatalf("events after repair: %+v", evs)
	}
	var env struct {
		Data runs.RunCompletedData
	}
	if err := json.Unmarshal(evs[2].JSON, &env); err != nil {
		t.Fatal(err)
	}
	if env.Data.Status != runs.Failed || env.Data.Error == nil || env.Data.Error.Class != runs.RateLimited || *env.Data.CostUSD != cost {
		t.Fatalf("repaired run.completed = %+v", env.Data)
	}
	// Once repaired, nothing more is appended.
	if got, _ := h.sup.LastEventSeq(ctx, "r1"); got != 3 || len(h.store.eventsOf("r1")) != 3 {
		t.Fatalf("second call: last %d, %d events", got, len(h.store.eventsOf("r1")))
	}
}

// Text that JSON escapes heavily is bounded until its event fits in one
// store message.
func TestEventFitsTheStoreWhenEscaped(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.submit(t, "mode:controls")
	if done := h.wait(t, r.ID, 30*time.Second); done.Status != runs.Succeeded {
		t.Fatalf("status %s", done.Status)
	}
	var found bool
	for _, e := range h.store.eventsOf(r.ID) {
		if len(e.JSON) > DefaultLimits.MaxEncoded {
			t.Fatalf("%s event of %d bytes, over the %d limit", e.Type, len(e.JSON), DefaultLimits.MaxEncoded)
		}
		if e.Type == runs.EventMessageCompleted {
			found = strings.Contains(string(e.JSON), "[truncated")
		}
	}
	if !found {
		t.Fatal("the escaped text was not truncated with a mark")
	}
}

func TestRecordFitsTheStore(t *testing.T) {
	huge := strings.Repeat("\x01", 1<<20)
	r := runs.Run{ID: "r", Result: huge, Error: runs.NewRunError(runs.APIError, huge, ""),
		StructuredOutput: json.RawMessage(`{"a":"` + strings.Repeat("b", 1<<20) + `"}`),
		Spec:             runs.Spec{Prompt: huge, SystemPrompt: huge}}
	got := DefaultLimits.record(r)
	b, _ := json.Marshal(struct {
		Run  runs.Run
		Spec runs.Spec
	}{got, got.Spec})
	if len(b) > DefaultLimits.MaxEncoded {
		t.Fatalf("record encodes to %d bytes, over %d", len(b), DefaultLimits.MaxEncoded)
	}
	if !strings.Contains(got.Result, "[truncated") || !strings.Contains(string(got.StructuredOutput), "_truncated") {
		t.Fatalf("bounded without a mark: result %q…, output %s", got.Result[:20], got.StructuredOutput)
	}
}

// A Submit that fails after reserving a queue place must not make a
// later Shutdown wait out its grace period.
func TestShutdownAfterFailedSubmitIsPrompt(t *testing.T) {
	h := newHarness(t, Config{})
	if _, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "x", Cwd: "missing"}); !errors.Is(err, runs.ErrInvalid) {
		t.Fatalf("submit = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.sup.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with nothing running waited out its grace: %v", err)
	}
}

// A run in the workspace root itself is resumed there.
func TestResumeInTheRootKeepsTheRoot(t *testing.T) {
	h := newHarness(t, Config{})
	first, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hello", Cwd: "."})
	if err != nil {
		t.Fatal(err)
	}
	h.wait(t, first.ID, 10*time.Second)
	second, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hello", ResumeSessionID: first.ID})
	if err != nil {
		t.Fatal(err)
	}
	h.wait(t, second.ID, 10*time.Second)
	root, _ := filepath.EvalSymlinks(h.root)
	h.waitFor(t, second.ID, runs.EventRunStarted, fmt.Sprintf(`"cwd":%q`, root))
}

// Run directories the supervisor made are removed once older than the
// retention, in the workspace root and in every tenant's workspace; newer
// ones and directories a client named stay.
func TestWorkspaceSweep(t *testing.T) {
	h := newHarness(t, Config{WorkspaceRetention: time.Hour})
	old, _ := uuid.NewV7FromReader(strings.NewReader(strings.Repeat("x", 64)))
	// A UUIDv7 two hours old: its first 48 bits are the time in ms.
	ms := uint64(time.Now().Add(-2 * time.Hour).UnixMilli())
	for i := range 6 {
		old[i] = byte(ms >> (40 - 8*i))
	}
	fresh, _ := uuid.NewV7()
	roots := []string{h.root, filepath.Join(h.root, "tenants", "acme"), filepath.Join(h.root, "tenants", "globex")}
	for _, root := range roots {
		for _, name := range []string{old.String(), fresh.String(), "client-dir"} {
			if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.sup.sweepWorkspaces()
	for _, root := range roots {
		if _, err := os.Stat(filepath.Join(root, old.String())); !os.IsNotExist(err) {
			t.Errorf("old run directory still in %s: %v", root, err)
		}
		for _, name := range []string{fresh.String(), "client-dir"} {
			if _, err := os.Stat(filepath.Join(root, name)); err != nil {
				t.Errorf("%s removed from %s: %v", name, root, err)
			}
		}
	}
}

// Under the reaper, even a grandchild that escaped the cookie scan (no
// cookie, its own session) dies with the run.
func TestReaperKillsEscapedGrandchild(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.submit(t, "mode:escapee")
	done := h.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Succeeded {
		t.Fatalf("status %s %+v", done.Status, done.Error)
	}
	pid := 0
	for _, e := range h.store.eventsOf(r.ID) {
		var env struct{ Data runs.MessageData }
		json.Unmarshal(e.JSON, &env)
		if s, ok := strings.CutPrefix(env.Data.Text, "escapee "); ok {
			pid, _ = strconv.Atoi(s)
		}
	}
	if pid == 0 {
		t.Fatal("the agent did not report its grandchild")
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := syscall.Kill(pid, 0); err == nil {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if p, ok := proctreeState(stat); !ok || p != "Z" {
			t.Fatalf("the escaped grandchild %d outlived the run: %s", pid, stat)
		}
	}
}

// proctreeState returns the state letter of a /proc/PID/stat line.
func proctreeState(stat []byte) (string, bool) {
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+3 > len(stat) {
		return "", false
	}
	return string(stat[i+2 : i+3]), true
}

// A CLI that reports the session's cumulative cost or usage gets each run's own
// cost and usage: a new session's whole totals, a resumed one's growth.
func TestRunCostAndUsageFromSessionTotals(t *testing.T) {
	h := newHarness(t, Config{})
	submit := func(cost, input, resume string) runs.Run {
		r, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hello",
			ResumeSessionID: resume, Metadata: map[string]string{"session_cost": cost, "session_input": input}})
		if err != nil {
			t.Fatal(err)
		}
		return h.wait(t, r.ID, 10*time.Second)
	}
	for _, step := range []struct {
		total, input, resume string
		want                 float64
		wantInput            int64
	}{
		{"1.5", "1000", "", 1.5, 1000},         // a new session: all of it
		{"2.25", "2500", "sess-1", 0.75, 1500}, // resumed: what it added
		{"2.5", "2600", "sess-1", 0.25, 100},
	} {
		r := submit(step.total, step.input, step.resume)
		if r.CostUSD == nil || *r.CostUSD != step.want {
			t.Fatalf("session total %s: run cost %v, want %v", step.total, r.CostUSD, step.want)
		}
		if want := (runs.Usage{InputTokens: step.wantInput, OutputTokens: step.wantInput / 10}); r.Usage != want {
			t.Fatalf("session input %s: run usage %+v, want %+v", step.input, r.Usage, want)
		}
	}
}

// Running runs of a replica with no live heartbeat are interrupted by
// another, its queued ones go back to the queue;
// runs of live replicas are left alone.
func TestSweepOrphans(t *testing.T) {
	store := newMemStore()
	ctx := context.Background()
	now := time.Now()
	for _, r := range []runs.Run{
		{ID: "dead-running", Agent: "fake", Status: runs.Running, Owner: "dead", StartedAt: &now},
		{ID: "dead-queued", Agent: "fake", Status: runs.Queued, Owner: "dead"},
		{ID: "live-running", Agent: "fake", Status: runs.Running, Owner: "alive"},
		{ID: "dead-done", Agent: "fake", Status: runs.Succeeded, Owner: "dead"},
		{ID: "lost-queued", Agent: "fake", Status: runs.Queued, CreatedAt: now.Add(-2 * orphanQueuedAfter)},
	} {
		store.CreateRun(ctx, r)
		store.AppendEvents(ctx, r.ID, []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued}})
	}
	store.Heartbeat(ctx, "alive")
	sup := New(Config{Replica: "me", ReplicaTTL: time.Hour, WorkspaceRoot: t.TempDir()}, store, nil, nopObserver{}, zap.NewNop())
	sctx, cancel := context.WithCancel(ctx)
	if err := sup.Start(sctx); err != nil {
		t.Fatal(err)
	}
	defer func() { sup.Shutdown(ctx); cancel(); sup.loops.Wait() }()
	if live, _ := store.LiveReplicas(ctx); !live["me"] {
		t.Fatal("Start sent no heartbeat")
	}
	live, _ := store.LiveReplicas(ctx)
	if err := sup.sweepOrphans(ctx, live); err != nil {
		t.Fatal(err)
	}
	// A queued run a dead replica had taken goes back to the queue, as
	// does a queued run that never reached it; this supervisor, which has
	// no agents, leaves them there.
	for _, id := range []string{"dead-queued", "lost-queued"} {
		if r, _ := store.GetRun(ctx, id); r.Status != runs.Queued || r.Owner != "" {
			t.Errorf("%s: %s owner %q, want queued with no owner", id, r.Status, r.Owner)
		}
	}
	if n, _ := store.QueueLength(ctx); n != 2 {
		t.Errorf("queue holds %d runs, want the 2 given back", n)
	}
	for id, want := range map[string]runs.State{"dead-running": runs.Failed, "live-running": runs.Running, "dead-done": runs.Succeeded} {
		r, _ := store.GetRun(ctx, id)
		if r.Status != want {
			t.Errorf("%s: %s, want %s", id, r.Status, want)
		}
		if want == runs.Failed {
			if r.Error == nil || r.Error.Class != runs.Interrupted || !strings.Contains(r.Error.Message, "(dead)") {
				t.Errorf("%s: error %+v", id, r.Error)
			}
			evs := store.eventsOf(id)
			if last := evs[len(evs)-1]; last.Type != runs.EventRunCompleted || last.Seq != 2 {
				t.Errorf("%s: last event %+v", id, last)
			}
		}
	}
}

// TestAgentNice: with AgentNice the agent and the tool it starts run at
// that niceness, and the run's reaper at the gateway's.
func TestAgentNice(t *testing.T) {
	base, _ := proctreetest.Nice(t, "self")
	h := newHarness(t, Config{AgentNice: 5})
	r := h.submit(t, "mode:tool")
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "tool started")
	pids, _ := proctree.New().Find(r.ID)
	agents := 0
	for _, pid := range pids {
		nice, ok := proctreetest.Nice(t, strconv.Itoa(pid))
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if !ok || err != nil {
			continue // gone meanwhile
		}
		if strings.HasPrefix(string(cmdline), os.Args[0]+"\x00"+proctree.ReaperArg+"\x00") {
			if nice != base {
				t.Errorf("the reaper (%d) at niceness %d, want the gateway's %d", pid, nice, base)
			}
			continue
		}
		agents++
		if want := max(base, 5); nice != want {
			t.Errorf("process %d of the run (%q) at niceness %d, want %d", pid, cmdline, nice, want)
		}
	}
	if agents < 2 {
		t.Fatalf("found %d processes of the run besides its reaper, want the agent and its tool: %v", agents, pids)
	}
	if _, err := h.sup.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	h.wait(t, r.ID, 10*time.Second)
	assertNoProcesses(t, r.ID)
}

// Recovery and the sweep of dead replicas find every tenant's runs, not
// only those of the empty tenant: on a gateway with keys a run of a
// tenant, its approval pending, would otherwise stay running for ever.
func TestRecoverAndSweepFindEveryTenant(t *testing.T) {
	store := newMemStore()
	ctx := context.Background()
	now := time.Now()
	pending := []runs.Approval{{ID: "a1", Tool: "shell", Options: runs.Decisions}}
	var ids []string
	for _, owner := range []string{"me", "dead"} {
		for _, tenant := range []string{"", "acme", "globex"} {
			r := runs.Run{ID: owner + "-" + tenant, Agent: "fake", Status: runs.Running, Owner: owner, Tenant: tenant, StartedAt: &now}
			if tenant == "globex" {
				r.Interactive, r.Activity, r.PendingApprovals = true, runs.AwaitingApproval, pending
			}
			store.CreateRun(ctx, r)
			store.AppendEvents(ctx, r.ID, []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued}, {Seq: 2, Type: runs.EventRunStarted}})
			ids = append(ids, r.ID)
		}
	}
	sup := New(Config{Replica: "me", ReplicaTTL: time.Hour, WorkspaceRoot: t.TempDir()}, store, nil, nopObserver{}, zap.NewNop())
	sctx, cancel := context.WithCancel(ctx)
	if err := sup.Start(sctx); err != nil {
		t.Fatal(err)
	}
	defer func() { sup.Shutdown(ctx); cancel(); sup.loops.Wait() }()
	live, _ := store.LiveReplicas(ctx)
	if err := sup.sweepOrphans(ctx, live); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		r, _ := store.GetRun(ctx, id)
		if r.Status != runs.Failed || r.Error == nil || r.Error.Class != runs.Interrupted || len(r.PendingApprovals) != 0 {
			t.Errorf("%s (tenant %q): %s %+v, pending %v; want failed, interrupted, none pending", id, r.Tenant, r.Status, r.Error, r.PendingApprovals)
			continue
		}
		var got []runs.EventType
		for _, ev := range store.eventsOf(id) {
			got = append(got, ev.Type)
		}
		want := []runs.EventType{runs.EventRunQueued, runs.EventRunStarted, runs.EventRunCompleted}
		if r.Tenant == "globex" {
			want = []runs.EventType{runs.EventRunQueued, runs.EventRunStarted, runs.EventApprovalResolved, runs.EventRunCompleted}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s (tenant %q): events %v, want %v", id, r.Tenant, got, want)
		}
	}
}
