package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// process describes one agent process for runProcess.
type process struct {
	RunID string
	Path  string
	Args  []string
	Env   []string
	Dir   string
	Stdin []byte
	// Conversation, when set, keeps stdin open for the CLI's protocol
	// (see Conversation); Stdin is then unused.
	Conversation runs.Conversation
	// OnStart, when set with Conversation, is given stdin and the pid of
	// the process once it runs, and drives the conversation itself: it
	// writes Open, and the line handler writes what Pending returns.
	// runProcess then only writes the Interrupt of a stop. cg is the
	// run's cgroup, nil without one; it is removed when the run ends.
	OnStart func(w *stdinWriter, pid int, cg *proctree.Cgroup)
	// Interrupt is sent to the CLI's process group, as a terminal's
	// Ctrl-C is, before the group gets SIGTERM; 0 skips the step. The
	// group, not the CLI alone: under the sandbox the started process is
	// bwrap's, which forwards no signal.
	Interrupt syscall.Signal
	// Grace is how long each step of a stop waits before the next, harder
	// one.
	Grace time.Duration
	// MaxLine bounds one stdout line; the rest of a longer line is
	// dropped and reported.
	MaxLine int
	// StderrTail is how many trailing bytes of stderr are kept.
	StderrTail int
	// Reaped says that Path is a reaper (proctree.Reap) running the
	// agent: it is then told of the gateway's death by
	// proctree.DeathSignal, and kills the run's processes itself.
	Reaped bool
	// Cgroups, when set, puts the run's processes in a cgroup of their
	// own from the first one's first instruction, and the run ends by
	// killing that cgroup whole.
	Cgroups *proctree.Cgroups
	// Log is the run's logger (default: none).
	Log *zap.Logger
}

// line is one stdout line handed to the run. Dropped counts the bytes cut
// from a line longer than MaxLine.
type line struct {
	Bytes   []byte
	Dropped int
}

// drainTimeout bounds how long output is read after every process of the
// run was killed: a pipe still open then is held by something outside the
// run, and must not hang it.
const drainTimeout = 2 * time.Second

// stopCause returns why ctx ended, or nil.
func stopCause(ctx context.Context) error { return context.Cause(ctx) }

// minLingerAfterEOF is the least time a conversation's CLI is given to
// exit by itself once its stdin was closed, before it is stopped.
const minLingerAfterEOF = 10 * time.Second

// killTimeout bounds each wait for a run's processes to die of SIGKILL.
const killTimeout = 10 * time.Second

// runProcess starts p and calls onLine for each stdout line, in order, from
// one goroutine. When ctx ends it stops the process: p.Interrupt to the
// CLI, then SIGTERM to its process group, and finally SIGKILL to the run's
// every process, a grace period apart. However the CLI ends, every process
// of the run is then killed: the run's cgroup whole when it has one, and
// every process carrying the run's cookie; without a cgroup the reaper
// kills what escaped the cookie. So nothing of the run outlives it. It
// returns once that is done and output is drained. Only a failure to start
// is an error; how the process ended is data, in Exit.
func runProcess(ctx context.Context, tree *proctree.Tree, p process, onLine func(line)) (runs.Exit, []byte, error) {
	log := p.Log
	if log == nil {
		log = zap.NewNop()
	}
	// Pdeathsig is sent when the thread that started the process ends,
	// not the gateway: this thread is kept until the process is gone, so
	// that it means the gateway's death.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := &child{p: p, tree: tree, log: log, cg: newRunCgroup(p, log)}
	defer c.removeCgroup()
	if err := c.start(); err != nil {
		return runs.Exit{Code: -1}, nil, err
	}
	if c.talk != nil {
		defer c.talk.close()
		c.open()
	}
	c.read(onLine)
	reason := c.supervise(ctx)
	c.reap()
	exit := exitOf(c.state)
	exit.Reason = reason
	return exit, c.tail.Bytes(), nil
}

// stop ends the CLI gracefully first and forcibly after: the protocol's
// interrupt message or the interrupt signal to its group, SIGTERM to
// its group, then SIGKILL to every process of the run, each step given
// p.Grace to work.
func stop(pid int, p process, tree *proctree.Tree, cg *proctree.Cgroup, talk *stdinWriter, waited <-chan struct{}) {
	steps := []func(){
		func() { _ = syscall.Kill(-pid, syscall.SIGTERM) },
		func() { killAll(pid, p, tree, cg, waited) },
	}
	if p.Interrupt != 0 {
		steps = append([]func(){func() { _ = syscall.Kill(-pid, p.Interrupt) }}, steps...)
	}
	if talk != nil {
		if msg := p.Conversation.Interrupt(); msg != nil {
			steps = append([]func(){func() {
				talk.write(msg)
				if p.OnStart != nil {
					// A session waits for more input after its turn;
					// the end of stdin tells it there is none.
					talk.finish()
				}
			}}, steps...)
		}
	}
	for _, step := range steps {
		step()
		select {
		case <-waited:
			return
		case <-time.After(p.Grace):
		}
	}
	<-waited
}

// killAll sends SIGKILL to every process of the run. With a cgroup the
// kernel kills them all at once. Without one, the processes below pid die
// first, and pid last. When pid is the reaper it is not killed but waited
// for: it kills and reaps whatever the gateway's scan of /proc missed (a
// process re-parented to it while /proc was read, or forked meanwhile),
// and exits only once it has no child left; killed first, it would hand
// those to init, out of reach. Only a reaper that has not exited by
// killTimeout is killed.
func killAll(pid int, p process, tree *proctree.Tree, cg *proctree.Cgroup, waited <-chan struct{}) {
	log := p.Log
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	if cg != nil {
		err := cg.Kill(ctx)
		if err == nil {
			return
		}
		log.Error("kill the run's cgroup", zap.Error(err))
	}
	if err := tree.KillDescendants(ctx, pid, false); err != nil {
		log.Error("kill the run's processes", zap.Error(err))
	}
	if p.Reaped {
		select {
		case <-waited:
			return
		case <-time.After(killTimeout):
			log.Error("the run's reaper did not exit once its agent was killed; killing it", zap.Duration("after", killTimeout))
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

func exitOf(state *os.ProcessState) runs.Exit {
	if state == nil {
		return runs.Exit{Code: -1}
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return runs.Exit{Code: -1, Signal: signalName(ws.Signal())}
	}
	return runs.Exit{Code: state.ExitCode()}
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return fmt.Sprintf("signal %d", int(s))
}

// drainReader reads a run's stdout. Once drain is called, each read may
// wait at most drainTimeout for data: what the run's processes wrote
// before they died is still read, however long the line handler takes
// over it, while a pipe held open by a process outside the run, writing
// nothing, ends the stream. A single deadline set at drain time would
// also cut off lines already in the pipe behind a line that is slow to
// decode.
//
// Once the run's processes are gone, what they left is at most a pipe's
// buffer; more than drainMaxBytes after drain began was written by
// something outside the run, which must not keep the run open, so the
// stream ends there.
type drainReader struct {
	f        *os.File
	draining atomic.Bool
	drained  int // bytes read since drain; only the reader's goroutine reads
}

// drainMaxBytes bounds what is read after drain: the largest pipe buffer
// Linux gives without privileges (1 MiB) and then some.
const drainMaxBytes = 2 << 20

func (d *drainReader) Read(p []byte) (int, error) {
	if !d.draining.Load() {
		return d.f.Read(p)
	}
	if d.drained >= drainMaxBytes {
		return 0, io.EOF
	}
	_ = d.f.SetReadDeadline(time.Now().Add(drainTimeout))
	n, err := d.f.Read(p)
	d.drained += n
	return n, err
}

// drain bounds every read from now on, including one already waiting.
func (d *drainReader) drain() {
	d.draining.Store(true)
	_ = d.f.SetReadDeadline(time.Now().Add(drainTimeout))
}

// readLines reads r line by line with bounded memory and calls onLine for
// each; onLine must not keep the slice. A line longer than limit keeps its
// first limit bytes and reports the rest as dropped; the stream goes on
// after it. A bufio.Scanner would stop at its first over-long line and lose
// everything after it.
func readLines(r io.Reader, limit int, onLine func(line)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	dropped := 0
	for {
		frag, err := br.ReadSlice('\n')
		if err == nil {
			frag = frag[:len(frag)-1]
		}
		room := max(limit-len(buf), 0)
		if len(frag) > room {
			buf = append(buf, frag[:room]...)
			dropped += len(frag) - room
		} else {
			buf = append(buf, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n := len(buf); n > 0 && buf[n-1] == '\r' {
			buf = buf[:n-1]
		}
		if len(buf) > 0 || dropped > 0 {
			onLine(line{Bytes: buf, Dropped: dropped})
		}
		buf, dropped = buf[:0], 0
		if err != nil {
			return
		}
	}
}

// tailBuffer keeps the last n bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}

// stdinWriter writes a conversation's messages to the CLI's stdin from one
// goroutine, in order, so that neither the output reader nor a stop ever
// blocks on a CLI that does not read. Messages are small and few, except
// the first, which carries the prompt.
type stdinWriter struct {
	mu      sync.Mutex
	wake    *sync.Cond
	queue   [][]byte
	closing bool // finish: close stdin once the queue is written
	stopped bool // close: drop the queue and close now
	done    chan struct{}
	w       *os.File
}

func newStdinWriter(w *os.File) *stdinWriter {
	t := &stdinWriter{w: w, done: make(chan struct{})}
	t.wake = sync.NewCond(&t.mu)
	go t.loop()
	return t
}

// write queues b; empty writes and writes after finish are dropped.
func (t *stdinWriter) write(b []byte) {
	if len(b) == 0 {
		return
	}
	t.mu.Lock()
	if !t.closing && !t.stopped {
		t.queue = append(t.queue, b)
		t.wake.Signal()
	}
	t.mu.Unlock()
}

// finish closes stdin once what is queued is written: the CLI reads its
// end of input and exits.
func (t *stdinWriter) finish() {
	t.mu.Lock()
	t.closing = true
	t.wake.Signal()
	t.mu.Unlock()
}

// close drops what is queued, closes stdin and waits for the writer.
func (t *stdinWriter) close() {
	t.mu.Lock()
	t.stopped = true
	t.wake.Signal()
	t.mu.Unlock()
	// A write blocked on a full pipe ends when the file is closed.
	_ = t.w.SetWriteDeadline(time.Now())
	<-t.done
}

func (t *stdinWriter) loop() {
	defer close(t.done)
	defer t.w.Close()
	for {
		t.mu.Lock()
		for len(t.queue) == 0 && !t.closing && !t.stopped {
			t.wake.Wait()
		}
		if t.stopped || len(t.queue) == 0 {
			t.mu.Unlock()
			return
		}
		b := t.queue[0]
		t.queue = t.queue[1:]
		t.mu.Unlock()
		if _, err := t.w.Write(b); err != nil {
			// The CLI closed stdin or died; nothing more can be said.
			t.mu.Lock()
			t.stopped = true
			t.mu.Unlock()
			return
		}
	}
}
