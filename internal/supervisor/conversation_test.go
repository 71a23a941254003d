package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// talkingAgent is a CLI driven over stdin, like codex app-server: it
// answers each line it reads with {"text":"got <line>"}, works on "work"
// until it reads "stop", and says "eof" when stdin ends.
//
// With FAKE_SESSION set it keeps, like a CLI's session file, every line
// it read in $HOME/sessions/$FAKE_SESSION, and in transcript.txt in its
// working directory, each appended to what an earlier process of the
// session left.
func talkingAgent(say func(string, ...any)) int {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		keepLine(in.Text())
		say(`{"text":"got %s"}`, in.Text())
	}
	say(`{"text":"eof"}`)
	return 0
}

// keepLine appends line to the session file and the transcript, when the
// agent keeps a session.
func keepLine(line string) {
	session := os.Getenv("FAKE_SESSION")
	if session == "" {
		return
	}
	dir := filepath.Join(os.Getenv("HOME"), "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	for _, name := range []string{filepath.Join(dir, session), "transcript.txt"} {
		if f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}

// talkAdapter drives talkingAgent through a Conversation, and checks
// credentials before the run like Codex's adapter.
type talkAdapter struct{ fakeAdapter }

func (talkAdapter) Name() string { return "talk" }
func (talkAdapter) Describe() runs.Description {
	d := fakeAdapter{}.Describe()
	d.Name, d.Aliases = "talk", []string{"chat"}
	return d
}
func (talkAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	return runs.Command{Env: []string{fakeAgentEnv + "=talk"}, PassEnv: []string{"FAKE_KEY"}}, nil
}
func (talkAdapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	return &talkDecoder{script: strings.Split(inv.Spec.Prompt, ",")}
}
func (talkAdapter) ResolveBinary(path string) (string, error) {
	if strings.HasSuffix(path, ".launcher") {
		return strings.TrimSuffix(path, ".launcher"), nil
	}
	return path, nil
}
func (talkAdapter) Preflight(ctx context.Context, inv runs.Invocation, env []string) *runs.RunError {
	for _, kv := range env {
		if kv == "FAKE_KEY=missing" {
			return runs.NewRunError(runs.NotAuthenticated, "FAKE_KEY says missing", "set FAKE_KEY")
		}
	}
	return nil
}

// talkDecoder sends the prompt's comma-separated script, one line per
// answer, and closes stdin after the last answer, unless the script
// says "work": then it waits for Interrupt.
type talkDecoder struct {
	fakeDecoder
	script []string
	next   int
	out    []byte
	done   bool

	mu      sync.Mutex
	working bool
}

func (d *talkDecoder) Open() []byte {
	d.next = 1
	return []byte(d.script[0] + "\n")
}

func (d *talkDecoder) Decode(line []byte) []runs.Event {
	evs := d.fakeDecoder.Decode(line)
	var v struct{ Text string }
	_ = json.Unmarshal(line, &v)
	switch {
	case v.Text == "got work":
		d.mu.Lock()
		d.working = true
		d.mu.Unlock()
	case v.Text == "got stop":
		d.done = true
	case strings.HasPrefix(v.Text, "got "):
		if d.next < len(d.script) {
			d.out = append(d.out, d.script[d.next]+"\n"...)
			d.next++
		} else {
			d.done = true
		}
	}
	return evs
}

func (d *talkDecoder) Pending() ([]byte, bool) {
	out := d.out
	d.out = nil
	return out, d.done
}

func (d *talkDecoder) Interrupt() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.working {
		return nil
	}
	return []byte("stop\n")
}

func newTalkHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := newHarness(t, cfg)
	// A second supervisor over the same store, with the talking agent.
	dir := t.TempDir()
	launcher := dir + "/agent.launcher"
	if err := os.Symlink(os.Args[0], dir+"/agent"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(launcher, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.WorkspaceRoot, cfg.Path, cfg.Reaper, cfg.KillGrace = h.root, os.Getenv("PATH"), os.Args[0], 2*time.Second
	cfg.Getenv = func(k string) string {
		if k == "FAKE_KEY" {
			return os.Getenv("TALK_FAKE_KEY")
		}
		return ""
	}
	sup := New(cfg, h.store, []*Agent{{Adapter: talkAdapter{}, Bin: launcher, Home: t.TempDir()}}, nopObserver{}, h.sup.log)
	startSupervisor(t, sup)
	return &harness{sup: sup, store: h.store, root: h.root}
}

func TestConversationOverStdin(t *testing.T) {
	h := newTalkHarness(t, Config{})
	info := h.sup.Agents()[0]
	if p := info.Path; p != os.Args[0] && !strings.HasSuffix(p, "/agent") {
		t.Errorf("probe reported %q, not the resolved binary", p)
	}
	if !slices.Equal(info.Aliases, []string{"chat"}) {
		t.Errorf("aliases = %v", info.Aliases)
	}
	r, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "chat", Prompt: "hello,again"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Agent != "talk" {
		t.Errorf("alias recorded as agent %q, want talk", r.Agent)
	}
	done := h.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v", done.Status, done.Error)
	}
	var texts []string
	for _, e := range h.store.eventsOf(r.ID) {
		if e.Type == runs.EventMessageCompleted {
			var ev struct{ Data runs.MessageData }
			_ = json.Unmarshal(e.JSON, &ev)
			texts = append(texts, ev.Data.Text)
		}
	}
	if got, want := strings.Join(texts, "|"), "got hello|got again|eof"; got != want {
		t.Errorf("conversation %q, want %q: stdin must carry Open, each reply, then close", got, want)
	}
}

func TestConversationInterruptBeforeSignals(t *testing.T) {
	h := newTalkHarness(t, Config{})
	r, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "talk", Prompt: "work"})
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "got work")
	if _, err := h.sup.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	done := h.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Cancelled {
		t.Fatalf("status %s, want cancelled", done.Status)
	}
	// The agent read "stop", closed on its own and exited 0: no signal was
	// needed, which the 2 s grace would have shown as SIGTERM.
	if done.Exit == nil || done.Exit.Code != 0 || done.Exit.Signal != "" {
		t.Errorf("exit %+v: the interrupt message did not end the agent before the signals", done.Exit)
	}
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "eof")
	assertNoProcesses(t, r.ID)
}

func TestPreflightFailsRunWithoutProcess(t *testing.T) {
	t.Setenv("TALK_FAKE_KEY", "missing")
	h := newTalkHarness(t, Config{})
	r, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "talk", Prompt: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	done := h.wait(t, r.ID, 10*time.Second)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.NotAuthenticated || done.Error.Hint != "set FAKE_KEY" {
		t.Fatalf("run %s, error %+v; want failed not_authenticated from the preflight", done.Status, done.Error)
	}
	if done.Exit != nil {
		t.Errorf("exit %+v: no process should have started", done.Exit)
	}
	// The record says it ended before run.completed is stored.
	h.waitFor(t, r.ID, runs.EventRunCompleted, "")
	types := fmt.Sprint(h.types(r.ID))
	if strings.Contains(types, string(runs.EventMessageCompleted)) || !strings.HasSuffix(types, string(runs.EventRunCompleted)+"]") {
		t.Errorf("events %s", types)
	}
}

// A resumed session continues in the directory where it began, whatever
// its id: the session, not the run, is looked up.
func TestResumeContinuesInTheSessionsDirectory(t *testing.T) {
	h := newHarness(t, Config{})
	first, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hello",
		Metadata: map[string]string{"session_cost": "1"}}) // the fake reports session "sess-1"
	if err != nil {
		t.Fatal(err)
	}
	first = h.wait(t, first.ID, 10*time.Second)
	if first.SessionID != "sess-1" {
		t.Fatalf("session %q", first.SessionID)
	}
	stored, err := h.store.GetRun(context.Background(), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hello", ResumeSessionID: "sess-1"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.store.GetRun(context.Background(), second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Cwd != stored.Spec.Cwd || got.Spec.Cwd == "" {
		t.Errorf("resumed run's cwd %q, want the session's %q", got.Spec.Cwd, stored.Spec.Cwd)
	}
	h.wait(t, second.ID, 10*time.Second)
}

// A helper's events keep their own session and do not change the run's.
func TestHelperSessionDoesNotBecomeTheRuns(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.submit(t, "mode:hello")
	h.wait(t, r.ID, 10*time.Second)
	task := &task{run: runs.Run{ID: "01a2295b-0000-7000-8000-000000000001", Agent: "fake", SessionID: "root"}}
	root := runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: "root"})
	helper := runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: "helper"})
	helper.SessionID, helper.ParentToolCallID = "helper", "call_1"
	usage := runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{})
	h.sup.emit(task, root, helper, usage)
	evs := h.store.eventsOf(task.run.ID)
	var sessions []string
	for _, e := range evs {
		var env struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(e.JSON, &env)
		sessions = append(sessions, env.SessionID)
	}
	if want := []string{"root", "helper", "root"}; !slices.Equal(sessions, want) || task.run.SessionID != "root" {
		t.Errorf("sessions %v, run's %q; want %v and root", sessions, task.run.SessionID, want)
	}
}

// preparingAdapter owns a file in its home.
type preparingAdapter struct{ fakeAdapter }

func (preparingAdapter) Name() string { return "prep" }
func (preparingAdapter) Describe() runs.Description {
	d := fakeAdapter{}.Describe()
	d.Name = "prep"
	return d
}
func (preparingAdapter) PrepareHome(home string) error {
	if strings.HasSuffix(home, "broken") {
		return fmt.Errorf("read-only")
	}
	return os.WriteFile(home+"/settings.json", []byte("{}"), 0o600)
}

func TestPrepareHomeAtStart(t *testing.T) {
	h := newHarness(t, Config{})
	home, broken := t.TempDir(), t.TempDir()+"/broken"
	sup := New(Config{WorkspaceRoot: h.root, Path: os.Getenv("PATH")}, h.store, []*Agent{
		{Adapter: preparingAdapter{}, Bin: os.Args[0], Home: home},
		{Adapter: talkAdapter{}, Bin: os.Args[0], Home: broken},
	}, nopObserver{}, h.sup.log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = sup.Shutdown(sctx)
		cancel()
		sup.loops.Wait()
	}()
	if _, err := os.Stat(home + "/settings.json"); err != nil {
		t.Errorf("home not prepared: %v", err)
	}
	for _, info := range sup.Agents() {
		if info.Name == "prep" && !info.Installed {
			t.Errorf("prep: %+v", info)
		}
	}
	sup2 := New(Config{WorkspaceRoot: h.root, Path: os.Getenv("PATH")}, h.store, []*Agent{
		{Adapter: preparingAdapter{}, Bin: os.Args[0], Home: broken},
	}, nopObserver{}, h.sup.log)
	if err := sup2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = sup2.Shutdown(sctx)
	}()
	if info := sup2.Agents()[0]; info.Installed || !strings.Contains(info.Advisory, "read-only") {
		t.Errorf("a home that cannot be prepared: %+v, want unavailable with the reason", info)
	}
	if _, err := sup2.Submit(context.Background(), runs.Spec{Agent: "prep", Prompt: "x"}); !errors.Is(err, runs.ErrAgentUnavailable) {
		t.Errorf("Submit = %v, want ErrAgentUnavailable", err)
	}
}
