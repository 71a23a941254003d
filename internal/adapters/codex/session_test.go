package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// sessionWait bounds one step of a session test: a turn against the
// instant mock takes a second or two, the long command's yield 10 s.
const sessionWait = 40 * time.Second

// driver holds a session with the real codex app-server the way the
// supervisor does: Open at start, Pending after every line and every
// call, stdin closed once Pending says done.
type driver struct {
	t      *testing.T
	name   string
	srv    *openai.Server
	images *openai.Images // the images the mock's requests carried
	dec    session
	inv    runs.Invocation
	marker string

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex // guards stdin and closed
	closed bool
	lines  chan []byte // stdout, closed at EOF
	stderr agenttest.Buffer
	eof    bool

	actions []action     // the calls made, for the recording
	events  []runs.Event // every event so far
	stdout  [][]byte
	seen    int // events already returned by next
}

// startSession starts codex app-server for spec against a mock playing
// sc(marker) and writes Open.
// name names its recording, testdata/session_<name>.jsonl, written with
// -record.
func startSession(t *testing.T, name string, spec runs.Spec, sc func(marker string) openai.Scenario) *driver {
	t.Helper()
	return startSessionWith(t, name, spec, nil, sc)
}

// startSessionWith is startSession with the prompt's images.
func startSessionWith(t *testing.T, name string, spec runs.Spec, images []runs.Image, sc func(marker string) openai.Scenario) *driver {
	t.Helper()
	bin := codexBin(t)
	marker := "agentgate-test-" + uuid.NewString()
	srv, seen, err := openai.StartWithImages("127.0.0.1:0", sc(marker))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	home, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(mockConfig(srv.URL, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if spec.Model == "" {
		spec.Model = openai.DefaultModel
	}
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{},
		Timeout: time.Minute, CLIVersion: VerifiedVersion, Images: images}
	a := New()
	c, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	dec, ok := a.NewDecoder(inv).(session)
	if !ok {
		t.Fatalf("NewDecoder for %+v is not a Session", spec)
	}
	env := append(agenttest.MinimalEnv(home), c.Env...)
	env = append(env, testKeyEnv+"="+testKey)
	d := &driver{t: t, name: name, srv: srv, images: seen, dec: dec, inv: inv, marker: marker, lines: make(chan []byte, 4096)}
	d.cmd = exec.Command(bin, c.Args...)
	d.cmd.Dir, d.cmd.Env = dir, env
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d.stdin, err = d.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = &d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(d.lines)
		br := bufio.NewReaderSize(out, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if l := bytes.TrimSpace(line); len(l) > 0 {
				d.lines <- l
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		for range d.lines {
		}
		_ = d.cmd.Wait()
		// The tool processes Codex leaves behind live in sessions of
		// their own; the marker finds them.
		for _, pid := range agenttest.ProcessesMatching(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	d.write(dec.Open())
	return d
}

func (d *driver) write(b []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(b) > 0 && !d.closed {
		_, _ = d.stdin.Write(b)
	}
}

// flush writes what the decoder has to say, and closes stdin when it is
// done.
func (d *driver) flush() {
	out, done := d.dec.Pending()
	d.write(out)
	if done {
		d.mu.Lock()
		if !d.closed {
			d.closed = true
			d.stdin.Close()
		}
		d.mu.Unlock()
	}
}

// action is a call of the Session's methods, as a recording keeps it:
// After is the number of stdout lines decoded before it.
type action struct {
	After    int           `json:"after"`
	Kind     string        `json:"kind"` // answer, send, interrupt_turn, close, stop
	ID       string        `json:"id,omitempty"`
	Decision runs.Decision `json:"decision,omitempty"`
	Text     string        `json:"text,omitempty"`
	Steer    bool          `json:"steer,omitempty"`
}

// apply makes the call a describes on s and returns what to write: what
// Pending has, or Interrupt's message.
func apply(s session, a action) ([]byte, error) {
	var err error
	switch a.Kind {
	case "answer":
		err = s.Answer(a.ID, a.Decision, a.Text)
	case "send":
		err = s.Send(a.Text, nil, a.Steer)
	case "interrupt_turn":
		err = s.InterruptTurn()
	case "close":
		s.Close()
	case "stop":
		return s.Interrupt(), nil
	}
	return nil, err
}

// act makes the call a describes, records it, and flushes.
func (d *driver) act(a action) error {
	a.After = len(d.stdout)
	d.actions = append(d.actions, a)
	out, err := apply(d.dec, a)
	d.write(out)
	d.flush()
	return err
}

// step decodes the next line; false at EOF or after within.
func (d *driver) step(within time.Duration) bool {
	if d.eof {
		return false
	}
	select {
	case l, ok := <-d.lines:
		if !ok {
			d.eof = true
			return false
		}
		d.stdout = append(d.stdout, l)
		d.events = append(d.events, d.dec.Decode(l)...)
		d.flush()
		return true
	case <-time.After(within):
		return false
	}
}

// next returns the next event of type typ not returned before, decoding
// lines until it comes; it fails the test at EOF or after sessionWait.
func (d *driver) next(typ runs.EventType) runs.Event {
	d.t.Helper()
	deadline := time.Now().Add(sessionWait)
	for {
		for ; d.seen < len(d.events); d.seen++ {
			if ev := d.events[d.seen]; ev.Type == typ {
				d.seen++
				return ev
			}
		}
		if left := time.Until(deadline); left <= 0 || !d.step(left) {
			d.t.Fatalf("no %s (eof %v); events %v; stderr %q", typ, d.eof, story(d.events), tail(d.stderr.String(), 500))
		}
	}
}

// turn waits for the next turn.completed.
func (d *driver) turn() runs.TurnCompletedData {
	d.t.Helper()
	return d.next(runs.EventTurnCompleted).Data.(runs.TurnCompletedData)
}

// end reads stdout to its end, reaps the process and finishes the
// decoder, as the supervisor does.
func (d *driver) end() runs.Outcome {
	d.t.Helper()
	deadline := time.Now().Add(sessionWait)
	for d.step(time.Until(deadline)) {
	}
	if !d.eof {
		d.t.Fatalf("stdout did not end; events %v", story(d.events))
	}
	err := d.cmd.Wait()
	exit := exitOf(d.cmd.ProcessState, err)
	if *record && !d.t.Failed() {
		agenttest.WriteRecording(d.t, "session_"+d.name, d.stdout, sessionRecorded{
			Exit: exit, Stderr: d.stderr.String(), CLIVersion: d.inv.CLIVersion, Dir: d.inv.Dir, Spec: d.inv.Spec, Actions: d.actions,
		})
	}
	o := d.dec.Finish(exit, d.stderr.Bytes())
	d.events = append(d.events, o.Events...)
	for _, ev := range d.events {
		if ev.Type == runs.EventAgentUnparsed {
			d.t.Errorf("unparsed: %+v", ev.Data)
		}
	}
	if d.cmd.ProcessState.ExitCode() != 0 {
		d.t.Errorf("exit %v, want 0 once stdin closed; stderr %q", d.cmd.ProcessState, tail(d.stderr.String(), 300))
	}
	return o
}

// count returns how many events of type typ came.
func (d *driver) count(typ runs.EventType) int {
	n := 0
	for _, ev := range d.events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// billed is what the mock billed so far, in the gateway's convention.
// The mock books a response once its last byte is written, which may be
// just after Codex read it: billed waits until every answered request of
// the ledger is booked.
func (d *driver) billed() runs.Usage { return booked(d.srv) }

// booked is what srv billed, once every answered request is booked.
func booked(srv *openai.Server) runs.Usage {
	deadline := time.Now().Add(30 * time.Second) // against a hang: booking follows the write at once
	for {
		l := srv.Ledger().Responses()
		booked := true
		for _, e := range l {
			if e.Status == 200 && !e.Stalled && e.Billed == (openai.Usage{}) {
				booked = false
			}
		}
		if booked || time.Now().After(deadline) {
			return normalized(l.Billed())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *driver) wantFile(name string, exists bool) {
	d.t.Helper()
	_, err := os.Stat(filepath.Join(d.inv.Dir, name))
	if exists != (err == nil) {
		d.t.Errorf("%s exists: %v, want %v", name, err == nil, exists)
	}
}

// waitProcess waits until the command carrying the marker runs.
func (d *driver) waitProcess() {
	d.t.Helper()
	if !waitFor(d.marker, 20*time.Second) {
		d.t.Fatalf("the command carrying %s never ran; events %v", d.marker, story(d.events))
	}
}

var ask = runs.Spec{Prompt: "Run the commands.", Approvals: runs.ApprovalsAsk, Permission: runs.WorkspaceWrite}

func twoTools(first, second string) func(string) openai.Scenario {
	return fixed(openai.TwoTools(first, second, "Both are done."))
}

// TestSessionAllowThenDeny: the first command is allowed and runs, the
// second is declined and does not, and the turn goes on to its answer.
func TestSessionAllowThenDeny(t *testing.T) {
	t.Parallel()
	d := startSession(t, "allow_then_deny", ask, twoTools("touch one.txt", "touch two.txt"))
	first := d.next(runs.EventApprovalRequested).Data.(runs.ApprovalRequestedData)
	if first.Tool != "shell" || !strings.Contains(string(first.Input), "touch one.txt") || first.ToolCallID == "" ||
		len(first.Options) != len(runs.Decisions) || !first.ExpiresAt.IsZero() {
		t.Errorf("first approval = %+v", first)
	}
	if err := d.act(action{Kind: "answer", ID: first.ID, Decision: runs.Allow}); err != nil {
		t.Fatal(err)
	}
	second := d.next(runs.EventApprovalRequested).Data.(runs.ApprovalRequestedData)
	if second.ID == first.ID || !strings.Contains(string(second.Input), "touch two.txt") {
		t.Errorf("second approval = %+v", second)
	}
	if err := d.act(action{Kind: "answer", ID: second.ID, Decision: runs.Deny, Text: "not that one"}); err != nil {
		t.Fatal(err)
	}
	if err := d.dec.Answer(second.ID, runs.Allow, ""); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("answering twice: %v, want not found", err)
	}
	tc := d.turn()
	if tc.Status != runs.Succeeded || tc.Result != "Both are done." || tc.Usage != d.billed() {
		t.Errorf("turn = %+v, billed %+v", tc, d.billed())
	}
	d.wantFile("one.txt", true)
	d.wantFile("two.txt", false)
	if _, done := d.dec.Pending(); done {
		t.Fatal("the conversation ended with the turn; a session waits for Close")
	}
	d.act(action{Kind: "close"})
	o := d.end()
	if o.Status != runs.Succeeded || o.NumTurns != 1 || o.Usage != d.billed() {
		t.Errorf("outcome = %+v, billed %+v", o, d.billed())
	}
	if n := d.count(runs.EventApprovalResolved); n != 0 {
		t.Errorf("%d approval.resolved from the decoder; client answers are the supervisor's to report", n)
	}
}

// TestSessionReadOnlyUnasked: under the untrusted policy codex runs
// read-only commands without asking.
func TestSessionReadOnlyUnasked(t *testing.T) {
	t.Parallel()
	d := startSession(t, "read_only_unasked", ask, twoTools("ls", "cat notes.txt"))
	if err := os.WriteFile(filepath.Join(d.inv.Dir, "notes.txt"), []byte("notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tc := d.turn()
	if tc.Status != runs.Succeeded {
		t.Errorf("turn = %+v", tc)
	}
	if n := d.count(runs.EventApprovalRequested); n != 0 {
		t.Errorf("%d approvals asked for ls and cat", n)
	}
	d.act(action{Kind: "close"})
	d.end()
}

// TestSessionAllowForSession: allow_session covers the identical second
// call, which is not asked.
func TestSessionAllowForSession(t *testing.T) {
	t.Parallel()
	d := startSession(t, "allow_session", ask, twoTools("touch same.txt", "touch same.txt"))
	a := d.next(runs.EventApprovalRequested).Data.(runs.ApprovalRequestedData)
	if err := d.act(action{Kind: "answer", ID: a.ID, Decision: runs.AllowSession}); err != nil {
		t.Fatal(err)
	}
	tc := d.turn()
	if tc.Status != runs.Succeeded || tc.Result != "Both are done." {
		t.Errorf("turn = %+v", tc)
	}
	if n := d.count(runs.EventApprovalRequested); n != 1 {
		t.Errorf("%d approvals, want the first only", n)
	}
	if n := len(d.srv.Ledger().Responses()); n != 3 {
		t.Errorf("%d requests, want 3: both calls ran", n)
	}
	d.wantFile("same.txt", true)
	d.act(action{Kind: "close"})
	d.end()
}

// TestSessionDenyAndStop: deny_and_stop ends the turn at once, as
// interrupted, without running the command; the session goes on.
func TestSessionDenyAndStop(t *testing.T) {
	t.Parallel()
	d := startSession(t, "deny_and_stop", runs.Spec{Prompt: "Run the commands.", Approvals: runs.ApprovalsAsk, Interactive: true},
		twoTools("touch one.txt", "touch two.txt"))
	a := d.next(runs.EventApprovalRequested).Data.(runs.ApprovalRequestedData)
	if err := d.act(action{Kind: "answer", ID: a.ID, Decision: runs.DenyAndStop}); err != nil {
		t.Fatal(err)
	}
	tc := d.turn()
	if tc.Status != runs.Cancelled || tc.StopReason != "interrupted" {
		t.Errorf("turn = %+v, want cancelled", tc)
	}
	if n := len(d.srv.Ledger().Responses()); n != 1 {
		t.Errorf("%d requests, want 1: the turn ended at the refusal", n)
	}
	d.wantFile("one.txt", false)
	d.act(action{Kind: "close"})
	if o := d.end(); o.Status != runs.Cancelled || o.NumTurns != 1 {
		t.Errorf("outcome = %+v", o)
	}
}

// TestSessionTurns: a follow-up turn on the same thread, each turn's
// usage what the mock billed for it, the outcome their sum. Close while
// idle ends the conversation, and a message after it is refused.
func TestSessionTurns(t *testing.T) {
	t.Parallel()
	d := startSession(t, "turns", runs.Spec{Prompt: "First turn.", Interactive: true}, fixed(openai.Turns("An answer.")))
	t1 := d.turn()
	b1 := d.billed()
	if t1.Status != runs.Succeeded || t1.Result != "An answer." || t1.Usage != b1 || b1 != normalized(openai.TurnUsage(1)) {
		t.Errorf("turn 1 = %+v, billed %+v", t1, b1)
	}
	if err := d.act(action{Kind: "send", Text: "Second turn."}); err != nil {
		t.Fatal(err)
	}
	t2 := d.turn()
	b2 := d.billed()
	if want := normalized(openai.TurnUsage(2)); t2.Status != runs.Succeeded || t2.Usage != want || b2 != b1.Add(want) {
		t.Errorf("turn 2 = %+v, want usage %+v; billed %+v", t2, want, b2)
	}
	reqs := d.srv.Ledger().Responses()
	if len(reqs) != 2 || reqs[1].Request.LastUserText() != "Second turn." || !reqs[1].Request.Contains("First turn.") {
		t.Errorf("requests: %d, the second's prompt %q", len(reqs), reqs[len(reqs)-1].Request.LastUserText())
	}
	if reqs[0].Request.SessionID() != reqs[1].Request.SessionID() {
		t.Error("the second turn ran on another thread")
	}
	d.act(action{Kind: "close"})
	o := d.end()
	if o.Status != runs.Succeeded || o.NumTurns != 2 || o.Usage != b2 || o.Result != "An answer." {
		t.Errorf("outcome = %+v, billed %+v", o, b2)
	}
	if err := d.dec.Send("late", nil, false); err == nil {
		t.Error("Send after Close was taken")
	}
}

// TestSessionInterruptThenTurn: turn/interrupt ends the turn while its
// command runs; codex leaves the command running (hence
// KillToolsOnInterrupt), which the test kills as the supervisor does;
// the next turn works.
func TestSessionInterruptThenTurn(t *testing.T) {
	t.Parallel()
	d := startSession(t, "interrupt_then_turn", runs.Spec{Prompt: "Run the long command.", Interactive: true},
		func(marker string) openai.Scenario {
			return openai.LongThenText("sleep 60; echo "+marker, "After the interrupt.")
		})
	d.next(runs.EventToolCallStarted)
	d.waitProcess()
	if err := d.act(action{Kind: "interrupt_turn"}); err != nil {
		t.Fatal(err)
	}
	tc := d.turn()
	if tc.Status != runs.Cancelled {
		t.Errorf("turn 1 = %+v, want cancelled", tc)
	}
	// Codex 0.171.0 leaves the command alive after turn/interrupt.
	left := agenttest.WaitGone(d.marker, time.Second)
	if len(left) == 0 {
		t.Log("the command ended with the interrupt: KillToolsOnInterrupt may no longer be needed")
	}
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if left := agenttest.WaitGone(d.marker, 5*time.Second); len(left) > 0 {
		t.Errorf("command processes survived SIGKILL: %v", left)
	}
	if err := d.dec.InterruptTurn(); !errors.Is(err, runs.ErrConflict) {
		t.Errorf("InterruptTurn while idle: %v, want a conflict", err)
	}
	if err := d.act(action{Kind: "send", Text: "Go on."}); err != nil {
		t.Fatal(err)
	}
	t2 := d.turn()
	if t2.Status != runs.Succeeded || t2.Result != "After the interrupt." {
		t.Errorf("turn 2 = %+v", t2)
	}
	d.act(action{Kind: "close"})
	o := d.end()
	if o.Status != runs.Succeeded || o.NumTurns != 2 || o.Usage != d.billed() {
		t.Errorf("outcome = %+v, billed %+v", o, d.billed())
	}
}

// TestSessionSteer: text steered while the command runs reaches the
// model in the same turn, which completes once.
func TestSessionSteer(t *testing.T) {
	t.Parallel()
	steer := "STEER-" + uuid.NewString()
	d := startSession(t, "steer", runs.Spec{Prompt: "Run the command.", Interactive: true},
		func(marker string) openai.Scenario { return openai.LongThenText("sleep 3; echo "+marker, "Steered.") })
	d.next(runs.EventToolCallStarted)
	d.waitProcess()
	if err := d.act(action{Kind: "send", Text: steer, Steer: true}); err != nil {
		t.Fatal(err)
	}
	tc := d.turn()
	if tc.Status != runs.Succeeded || tc.Result != "Steered." {
		t.Errorf("turn = %+v", tc)
	}
	if !d.srv.Ledger().Seen(steer) {
		t.Error("the steered text reached no request")
	}
	if tc.Usage != d.billed() {
		t.Errorf("turn usage %+v, billed %+v", tc.Usage, d.billed())
	}
	d.act(action{Kind: "close"})
	o := d.end()
	if n := d.count(runs.EventTurnCompleted); n != 1 || o.NumTurns != 1 {
		t.Errorf("%d turn.completed, %d turns; want the steer in the same turn", n, o.NumTurns)
	}
}

// TestSessionPendingWithdrawn: an interrupt while an approval waits
// withdraws it before the turn completes; answering it then is not
// found.
func TestSessionPendingWithdrawn(t *testing.T) {
	t.Parallel()
	d := startSession(t, "pending_withdrawn", runs.Spec{Prompt: "Run the commands.", Approvals: runs.ApprovalsAsk, Interactive: true},
		twoTools("touch one.txt", "touch two.txt"))
	a := d.next(runs.EventApprovalRequested).Data.(runs.ApprovalRequestedData)
	if err := d.act(action{Kind: "interrupt_turn"}); err != nil {
		t.Fatal(err)
	}
	w := d.next(runs.EventApprovalResolved).Data.(runs.ApprovalResolvedData)
	if w.ID != a.ID || w.Reason != runs.ResolvedWithdrawn {
		t.Errorf("approval.resolved = %+v", w)
	}
	if tc := d.turn(); tc.Status != runs.Cancelled {
		t.Errorf("turn = %+v", tc)
	}
	if err := d.dec.Answer(a.ID, runs.Allow, ""); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Answer after withdrawal: %v, want not found", err)
	}
	d.act(action{Kind: "close"})
	d.end()
	d.wantFile("one.txt", false)
	if n := d.count(runs.EventApprovalResolved); n != 1 {
		t.Errorf("%d approval.resolved, want 1", n)
	}
}

// TestSessionStopIdle: Interrupt while idle ends the conversation
// without a signal (TestSessionTurns closes an idle session).
func TestSessionStopIdle(t *testing.T) {
	t.Parallel()
	d := startSession(t, "stop_idle", runs.Spec{Prompt: "Hi.", Interactive: true}, fixed(openai.Turns("Hello.")))
	d.turn()
	d.act(action{Kind: "stop"})
	if o := d.end(); o.Status != runs.Succeeded || o.NumTurns != 1 {
		t.Errorf("outcome = %+v", o)
	}
}

// sessionRecorded is a session recording's meta data: what the replay
// needs besides stdout.
type sessionRecorded struct {
	Exit       runs.Exit `json:"exit"`
	Stderr     string    `json:"stderr"`
	CLIVersion string    `json:"cli_version"`
	Dir        string    `json:"dir"`
	Spec       runs.Spec `json:"spec"`
	Actions    []action  `json:"actions"`
}

// TestSessionGolden replays every session recording (testdata/session_*,
// written by the TestSession* cases with -record) through a fresh
// Session, making the recorded calls after the lines they followed, and
// compares the events and outcome with its golden file. What the decoder
// writes is checked to be JSON lines.
func TestSessionGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "session_*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no session recordings: go test ./internal/adapters/codex -run TestSession -record")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) {
			var meta sessionRecorded
			lines := agenttest.LoadRecording(t, name, &meta, "go test ./internal/adapters/codex -run TestSession -record")
			s := New().NewDecoder(runs.Invocation{CLIVersion: meta.CLIVersion, Dir: meta.Dir, Spec: meta.Spec}).(session)
			check := func(b []byte) {
				for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
					if len(l) > 0 && !json.Valid(l) {
						t.Fatalf("decoder wrote %q", l)
					}
				}
			}
			check(s.Open())
			var evs []runs.Event
			acts := meta.Actions
			play := func(n int) {
				for len(acts) > 0 && acts[0].After == n {
					out, _ := apply(s, acts[0])
					check(out)
					acts = acts[1:]
					out, _ = s.Pending()
					check(out)
				}
			}
			for i, l := range lines {
				play(i)
				evs = append(evs, s.Decode(l)...)
				out, _ := s.Pending()
				check(out)
			}
			play(len(lines))
			o := s.Finish(meta.Exit, []byte(meta.Stderr))
			for _, ev := range append(evs, o.Events...) {
				if ev.Type == runs.EventAgentUnparsed {
					t.Errorf("unparsed: %+v", ev.Data)
				}
			}
			if n := countTurns(append(evs, o.Events...)); n != o.NumTurns || n == 0 {
				t.Errorf("%d turn.completed, outcome says %d turns", n, o.NumTurns)
			}
			g := golden{Events: agenttest.GoldenEvents(evs), Outcome: goldenOutcome{
				Events: agenttest.GoldenEvents(o.Events), Status: o.Status, StopReason: o.StopReason, Result: o.Result,
				Usage: o.Usage, SessionID: o.SessionID, Model: o.Model, Diff: o.Diff, Error: o.Error,
			}}
			agenttest.CompareGolden(t, name, g, *update)
		})
	}
}

func countTurns(evs []runs.Event) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == runs.EventTurnCompleted {
			n++
		}
	}
	return n
}
