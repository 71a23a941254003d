package claude

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// sessionDeadline bounds one session test's wait for a line, against a
// hang only: at load 25 a CLI's start alone took minutes.
const sessionDeadline = 3 * time.Minute

// driver plays the supervisor's part for a Session over the real CLI: it
// starts the process like agenttest.Start does but keeps stdin open,
// decodes each stdout line, and writes Open and, after every call,
// Pending to stdin, closing it once Pending says done. Every call runs on
// the test's goroutine, so they are serialized as the supervisor's are.
type driver struct {
	t    *testing.T
	sess runs.Session
	srv  *anthropic.Server
	inv  runs.Invocation
	cmd  *exec.Cmd

	stdin  *os.File
	closed bool
	lines  chan []byte
	stderr lockedBuf

	// stdout is every line, and actions what the test did after which
	// line, for the recording.
	stdout  [][]byte
	actions []action
	events  []runs.Event
	// seen is how many of events until has looked at.
	seen int
	eof  bool
	exit runs.Exit
}

// action is a call the test made on the Session, after line After (the
// number of lines decoded before it), so that a recording replays it.
type action struct {
	After    int           `json:"after"`
	Call     string        `json:"call"` // answer, send, steer, interrupt_turn, close, interrupt
	ID       string        `json:"id,omitempty"`
	Decision runs.Decision `json:"decision,omitempty"`
	Text     string        `json:"text,omitempty"`
}

type lockedBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startSession starts the real CLI for spec against a mock playing sc.
func startSession(t *testing.T, sc anthropic.Scenario, spec runs.Spec) *driver {
	t.Helper()
	return startSessionIn(t, t.TempDir(), sc, spec)
}

// startSessionIn is startSession with the run's directory.
func startSessionIn(t *testing.T, dir string, sc anthropic.Scenario, spec runs.Spec) *driver {
	t.Helper()
	bin := agenttest.ClaudeBin(t)
	srv, err := anthropic.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	home := t.TempDir()
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{},
		Timeout: 2 * time.Minute, CLIVersion: VerifiedVersion}
	a := New()
	c, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	if c.Stdin != nil {
		t.Fatalf("a session's Command has stdin %q; the prompt goes through Open", c.Stdin)
	}
	dec := a.NewDecoder(inv)
	sess, ok := dec.(runs.Session)
	if !ok {
		t.Fatalf("NewDecoder for %+v is a %T, not a runs.Session", spec, dec)
	}
	env := append(agenttest.MinimalEnv(home), c.Env...)
	gateway := map[string]string{"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": testKey}
	for _, name := range c.PassEnv {
		if v, ok := gateway[name]; ok {
			env = append(env, name+"="+v)
		}
	}
	cmd := exec.Command(bin, c.Args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, sess: sess, srv: srv, inv: inv, cmd: cmd, stdin: inW, lines: make(chan []byte, 4096)}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	inR.Close()
	outW.Close()
	go func() {
		defer close(d.lines)
		defer outR.Close()
		br := bufio.NewReader(outR)
		for {
			l, err := br.ReadBytes('\n')
			if l = bytes.TrimRight(l, "\r\n"); len(l) > 0 {
				d.lines <- l
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		d.closeStdin()
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Wait()
		}
		for range d.lines {
		}
	})
	d.write(sess.Open())
	return d
}

func (d *driver) write(b []byte) {
	if len(b) == 0 || d.closed {
		return
	}
	if _, err := d.stdin.Write(b); err != nil {
		d.t.Logf("write stdin: %v", err)
	}
}

func (d *driver) closeStdin() {
	if !d.closed {
		d.closed = true
		d.stdin.Close()
	}
}

// flush writes what the session has pending.
func (d *driver) flush() {
	out, done := d.sess.Pending()
	d.write(out)
	if done {
		d.closeStdin()
	}
}

// do records an action, runs it and flushes.
func (d *driver) do(a action, f func() error) error {
	a.After = len(d.stdout)
	d.actions = append(d.actions, a)
	err := f()
	d.flush()
	return err
}

// next decodes one line; false at EOF.
func (d *driver) next(deadline <-chan time.Time) bool {
	d.t.Helper()
	select {
	case l, ok := <-d.lines:
		if !ok {
			d.eof = true
			return false
		}
		d.stdout = append(d.stdout, l)
		d.events = append(d.events, d.sess.Decode(l)...)
		d.flush()
		return true
	case <-deadline:
		d.t.Fatalf("no line for %s; events so far: %v; stderr %q", sessionDeadline, collapse(d.events), tail(d.stderr.String(), 300))
		return false
	}
}

// until decodes lines until an event not looked at before satisfies ok,
// and returns it.
func (d *driver) until(what string, ok func(runs.Event) bool) runs.Event {
	d.t.Helper()
	deadline := time.After(sessionDeadline)
	for {
		for ; d.seen < len(d.events); d.seen++ {
			if ok(d.events[d.seen]) {
				d.seen++
				return d.events[d.seen-1]
			}
		}
		if d.eof || !d.next(deadline) {
			d.t.Fatalf("stdout ended before %s; events: %v; stderr %q", what, collapse(d.events), tail(d.stderr.String(), 500))
		}
	}
}

func (d *driver) untilType(typ runs.EventType) runs.Event {
	d.t.Helper()
	return d.until(string(typ), func(ev runs.Event) bool { return ev.Type == typ })
}

// approval waits for the next approval.requested.
func (d *driver) approval() runs.ApprovalRequestedData {
	d.t.Helper()
	return d.untilType(runs.EventApprovalRequested).Data.(runs.ApprovalRequestedData)
}

// turn waits for the next turn.completed.
func (d *driver) turn() runs.TurnCompletedData {
	d.t.Helper()
	return d.untilType(runs.EventTurnCompleted).Data.(runs.TurnCompletedData)
}

func (d *driver) answer(id string, dec runs.Decision, msg string) error {
	return d.do(action{Call: "answer", ID: id, Decision: dec, Text: msg}, func() error { return d.sess.Answer(id, dec, msg) })
}

func (d *driver) send(text string, steer bool) {
	d.t.Helper()
	call := "send"
	if steer {
		call = "steer"
	}
	if err := d.do(action{Call: call, Text: text}, func() error { return d.sess.Send(text, nil, steer) }); err != nil {
		d.t.Fatalf("Send(%q, %v): %v", text, steer, err)
	}
}

func (d *driver) interruptTurn() {
	d.t.Helper()
	if err := d.do(action{Call: "interrupt_turn"}, d.sess.InterruptTurn); err != nil {
		d.t.Fatalf("InterruptTurn: %v", err)
	}
}

// interrupt is the supervisor's stop of the whole run.
func (d *driver) interrupt() {
	d.do(action{Call: "interrupt"}, func() error { d.write(d.sess.Interrupt()); return nil })
}

// close closes the session and waits for the CLI to exit, then returns
// the outcome.
func (d *driver) close() runs.Outcome {
	d.t.Helper()
	d.do(action{Call: "close"}, func() error { d.sess.Close(); return nil })
	return d.wait()
}

// wait decodes to EOF, reaps the CLI and finishes the decoder.
func (d *driver) wait() runs.Outcome {
	d.t.Helper()
	deadline := time.After(sessionDeadline)
	for !d.eof && d.next(deadline) {
	}
	done := make(chan struct{})
	go func() {
		_ = d.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(sessionDeadline):
		d.t.Fatalf("claude did not exit after stdin closed (closed=%v)", d.closed)
	}
	ps := d.cmd.ProcessState
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		d.exit = runs.Exit{Code: -1, Signal: ws.Signal().String()}
	} else {
		d.exit = runs.Exit{Code: ps.ExitCode()}
	}
	o := d.sess.Finish(d.exit, []byte(d.stderr.String()))
	d.events = append(d.events, o.Events...)
	for _, ev := range d.events {
		if ev.Type == runs.EventAgentUnparsed {
			d.t.Errorf("unparsed line: %+v", ev.Data)
		}
	}
	return o
}

// count returns how many events of typ there are.
func (d *driver) count(typ runs.EventType) int {
	n := 0
	for _, ev := range d.events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// waitProcess polls until a process whose command line holds marker runs.
func waitProcess(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(sessionDeadline)
	for len(agenttest.ProcessesMatching(marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no process with %q started", marker)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sessionRecording is the .meta.json of a session case's recording.
type sessionRecording struct {
	recorded
	Spec    runs.Spec `json:"spec"`
	Actions []action  `json:"actions"`
}

// record writes the case's recording when -record is given.
func (d *driver) record(name string) {
	if !*record || d.t.Failed() {
		return
	}
	meta := sessionRecording{recorded: recorded{Exit: d.exit, Stderr: d.stderr.String(), CLIVersion: d.inv.CLIVersion},
		Spec: d.inv.Spec, Actions: d.actions}
	// The prompt is in the first replayed line already; the directory
	// names differ per run.
	meta.Stderr = strings.ReplaceAll(meta.Stderr, d.inv.Dir, "<cwd>")
	agenttest.WriteRecording(d.t, name, d.stdout, meta)
}
