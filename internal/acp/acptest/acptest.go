// Package acptest drives a runs.Session over a real CLI's stdio in tests,
// as the supervisor does: it starts the process, writes Open, feeds every
// stdout line to Decode and writes what Pending returns after each call,
// closes stdin once Pending says done, and serializes the test's Answer,
// Send, InterruptTurn and Close with Decode. Events are kept in order;
// the Wait* helpers block until one arrives or a deadline passes.
package acptest

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentgate/agentgate/internal/runs"
)

// Driver is one CLI process driven through its Session.
type Driver struct {
	t    testing.TB
	cmd  *exec.Cmd
	sess runs.Session

	mu          sync.Mutex
	stdin       io.WriteCloser
	stdinClosed bool
	events      []runs.Event
	stdout      [][]byte
	written     [][]byte
	changed     chan struct{} // closed and replaced whenever events grow
	stderr      bytes.Buffer

	read   chan struct{} // stdout reached EOF
	exited chan struct{}
	exit   runs.Exit
	once   sync.Once
	out    *runs.Outcome
}

// Start runs bin with args in dir with exactly env, and drives sess over
// its stdio. The process leads its own process group, which the test's
// cleanup kills.
func Start(t testing.TB, bin string, args, env []string, dir string, sess runs.Session) *Driver {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{t: t, cmd: cmd, sess: sess, stdin: stdin, changed: make(chan struct{}), read: make(chan struct{}), exited: make(chan struct{})}
	// An *os.File as stdout: a tool process that keeps it open cannot
	// hang Wait.
	cmd.Stdout, cmd.Stderr = pw, &lockedWriter{mu: &d.mu, w: &d.stderr}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		t.Fatalf("start %s: %v", bin, err)
	}
	d.mu.Lock()
	d.writeLocked(sess.Open())
	d.mu.Unlock()
	go d.readLines(pr)
	go func() {
		err := cmd.Wait()
		d.mu.Lock()
		d.exit = exitOf(cmd.ProcessState, err)
		d.mu.Unlock()
		close(d.exited)
	}()
	t.Cleanup(func() {
		d.Kill()
		<-d.exited
		select {
		case <-d.read:
		case <-time.After(5 * time.Second):
			pr.Close()
		}
	})
	return d
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (d *Driver) readLines(r io.ReadCloser) {
	defer close(d.read)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if l := bytes.TrimRight(line, "\r\n"); len(l) > 0 {
			d.mu.Lock()
			d.stdout = append(d.stdout, bytes.Clone(l))
			d.addLocked(d.sess.Decode(l))
			d.flushLocked()
			d.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// addLocked appends events and wakes the waiters.
func (d *Driver) addLocked(evs []runs.Event) {
	if len(evs) == 0 {
		return
	}
	d.events = append(d.events, evs...)
	close(d.changed)
	d.changed = make(chan struct{})
}

// flushLocked writes what Pending returns, and closes stdin once done.
func (d *Driver) flushLocked() {
	out, done := d.sess.Pending()
	d.writeLocked(out)
	if done && !d.stdinClosed {
		d.stdinClosed = true
		_ = d.stdin.Close()
	}
}

func (d *Driver) writeLocked(b []byte) {
	if len(b) == 0 || d.stdinClosed {
		return
	}
	for _, l := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		d.written = append(d.written, bytes.Clone(l))
	}
	// A write to a CLI that exited fails; the test sees it in the exit.
	_, _ = d.stdin.Write(b)
}

// Do calls f with the session, serialized with Decode, then writes what
// Pending returns: the way to call Answer, Send, InterruptTurn or Close.
func (d *Driver) Do(f func(s runs.Session) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := f(d.sess)
	d.flushLocked()
	return err
}

// Interrupt writes the session's Interrupt, as the supervisor does when
// the run must stop, from outside the serialized calls.
func (d *Driver) Interrupt() {
	msg := d.sess.Interrupt()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writeLocked(msg)
}

// Kill sends SIGKILL to the process group.
func (d *Driver) Kill() { _ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) }

// Signal sends sig to the CLI's process.
func (d *Driver) Signal(sig syscall.Signal) { _ = d.cmd.Process.Signal(sig) }

// Pid is the CLI's process id.
func (d *Driver) Pid() int { return d.cmd.Process.Pid }

// Events returns the events so far.
func (d *Driver) Events() []runs.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]runs.Event(nil), d.events...)
}

// Stdout returns the lines the CLI printed so far; Written the lines
// written to its stdin.
func (d *Driver) Stdout() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]byte(nil), d.stdout...)
}

// Written returns the lines written to the CLI's stdin so far.
func (d *Driver) Written() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]byte(nil), d.written...)
}

// Stderr returns what the CLI wrote to stderr so far.
func (d *Driver) Stderr() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return bytes.Clone(d.stderr.Bytes())
}

// WaitEvent returns the first event at index from or later for which
// match is true, and its index. It fails the test when within passes, or
// the CLI exits, first.
func (d *Driver) WaitEvent(from int, within time.Duration, match func(runs.Event) bool) (runs.Event, int) {
	d.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		for i := from; i < len(d.events); i++ {
			if match(d.events[i]) {
				ev := d.events[i]
				d.mu.Unlock()
				return ev, i
			}
		}
		from = max(from, len(d.events))
		changed := d.changed
		d.mu.Unlock()
		select {
		case <-changed:
		case <-d.read:
			// stdout ended: one last look, then give up.
			d.mu.Lock()
			n := len(d.events)
			d.mu.Unlock()
			if n == from {
				d.t.Fatalf("the CLI's stdout ended before the event came; stderr …%s", tail(d.Stderr(), 2000))
			}
		case <-deadline.C:
			d.t.Fatalf("no such event within %s; events %v; stderr …%s", within, Types(d.Events()), tail(d.Stderr(), 2000))
		}
	}
}

// WaitType is WaitEvent for the first event of type typ.
func (d *Driver) WaitType(from int, within time.Duration, typ runs.EventType) (runs.Event, int) {
	d.t.Helper()
	return d.WaitEvent(from, within, func(ev runs.Event) bool { return ev.Type == typ })
}

// WaitTurn waits for the n-th turn.completed (1-based) and returns its
// payload and index.
func (d *Driver) WaitTurn(n int, within time.Duration) (runs.TurnCompletedData, int) {
	d.t.Helper()
	seen := 0
	ev, i := d.WaitEvent(0, within, func(ev runs.Event) bool {
		if ev.Type == runs.EventTurnCompleted {
			seen++
			return seen == n
		}
		return false
	})
	return ev.Data.(runs.TurnCompletedData), i
}

// Wait waits for the process to exit (killing it after within), and its
// stdout to end, then calls Finish and returns the outcome; its events
// are appended to Events. It may be called more than once.
func (d *Driver) Wait(within time.Duration) runs.Outcome {
	d.t.Helper()
	d.once.Do(func() {
		kill := time.AfterFunc(within, d.Kill)
		defer kill.Stop()
		<-d.exited
		select {
		case <-d.read:
		case <-time.After(5 * time.Second):
			d.t.Errorf("stdout still open 5 s after the CLI exited: a tool process holds it")
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		o := d.sess.Finish(d.exit, d.stderr.Bytes())
		d.addLocked(o.Events)
		d.out = &o
	})
	return *d.out
}

// Exit is how the process ended; valid after Wait.
func (d *Driver) Exit() runs.Exit {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exit
}

// Exited is closed when the process has exited.
func (d *Driver) Exited() <-chan struct{} { return d.exited }

// Types lists the types of evs, for messages.
func Types(evs []runs.Event) []runs.EventType {
	out := make([]runs.EventType, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// Of returns the events of type typ.
func Of(evs []runs.Event, typ runs.EventType) []runs.Event {
	var out []runs.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func exitOf(ps *os.ProcessState, err error) runs.Exit {
	if ps == nil {
		return runs.Exit{Code: -1, Reason: "wait: " + err.Error()}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return runs.Exit{Code: -1, Signal: unix.SignalName(ws.Signal())}
	}
	return runs.Exit{Code: ps.ExitCode()}
}
