package supervisor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/proctree"
)

// child is one agent process as runProcess drives it, in the order of its
// phases: start, open (a conversation's first message), read, supervise
// (until it exits or is stopped), reap (every process of the run killed,
// output drained). It belongs to the goroutine running runProcess; p,
// tree and log are fixed, the rest is set by the phase that names it.
type child struct {
	p    process
	tree *proctree.Tree
	log  *zap.Logger
	// cg is the run's cgroup, nil without one or once removed.
	cg *proctree.Cgroup

	// Set by start.
	cmd  *exec.Cmd
	talk *stdinWriter // a conversation's stdin; nil without one
	outR *os.File
	errR *os.File

	// Set by read.
	out     *drainReader
	tail    *tailBuffer
	readers sync.WaitGroup
	waited  chan struct{} // closed once the process was waited for
	state   *os.ProcessState
}

// newRunCgroup makes the run's cgroup when p asks for one; nil when it
// does not, or the machine would not make it.
func newRunCgroup(p process, log *zap.Logger) *proctree.Cgroup {
	if p.Cgroups == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	cg, cerr := p.Cgroups.New(cctx, p.RunID)
	cancel()
	if cerr != nil {
		// The probe at startup passed, so this is the machine's limit
		// (cgroup.max.descendants, no file descriptors): the run goes
		// on with what the reaper and the cookie guarantee.
		log.Warn("run without a cgroup of its own", zap.Error(cerr))
	}
	return cg
}

// removeCgroup kills what is left in the run's cgroup and removes it,
// and reports whether it did: the run had a cgroup, and every process
// in it is gone.
func (c *child) removeCgroup() bool {
	if c.cg == nil {
		return false
	}
	rctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	err := c.cg.Remove(rctx)
	if err != nil {
		c.log.Error("kill the run's cgroup", zap.Error(err))
	}
	c.cg = nil
	return err == nil
}

// start makes the process's pipes and starts it; on an error nothing of
// it is left open.
func (c *child) start() error {
	p := c.p
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Dir = p.Dir
	cmd.Env = append(p.Env, proctree.Cookie(p.RunID))
	cmd.Stdout, cmd.Stderr = outW, errW
	var talk *stdinWriter
	var inR *os.File
	switch {
	case p.Conversation != nil:
		var inW *os.File
		inR, inW, err = os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return err
		}
		cmd.Stdin = inR
		talk = newStdinWriter(inW)
	case p.Stdin != nil:
		cmd.Stdin = bytes.NewReader(p.Stdin)
	}
	cmd.SysProcAttr = c.procAttr()
	// The stdin copier is exec's goroutine; WaitDelay keeps a child that
	// never reads stdin from holding Wait.
	cmd.WaitDelay = p.Grace
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if inR != nil {
		// The child has its end; ours must not keep the pipe open.
		inR.Close()
	}
	if err != nil {
		outR.Close()
		errR.Close()
		if talk != nil {
			talk.close()
		}
		return err
	}
	c.cmd, c.talk, c.outR, c.errR = cmd, talk, outR, errR
	return nil
}

// procAttr is how the process is started: in its own group, tied to the
// gateway's life, in the run's cgroup when it has one.
func (c *child) procAttr() *syscall.SysProcAttr {
	// Setpgid lets one signal reach the CLI and the children that stay in
	// its group; Pdeathsig takes the CLI down with a gateway that dies, or
	// tells its reaper to take the run down.
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if c.p.Reaped {
		attr.Pdeathsig = proctree.DeathSignal
	}
	if c.cg != nil {
		// clone3 puts the child in the cgroup as it is created: nothing
		// it starts runs outside, even for an instant.
		attr.UseCgroupFD, attr.CgroupFD = true, c.cg.FD()
	}
	return attr
}

// open begins a conversation: OnStart drives it, or its Open is written.
func (c *child) open() {
	if c.p.OnStart != nil {
		c.p.OnStart(c.talk, c.cmd.Process.Pid, c.cg)
	} else {
		c.talk.write(c.p.Conversation.Open())
	}
}

// read starts the goroutines that read stdout (handing each line to
// onLine, and a conversation's pending answer to stdin), keep stderr's
// tail, and wait for the process.
func (c *child) read(onLine func(line)) {
	p, talk := c.p, c.talk
	lineHandler := onLine
	if talk != nil && p.OnStart == nil {
		lineHandler = func(l line) {
			onLine(l)
			out, done := p.Conversation.Pending()
			talk.write(out)
			if done {
				talk.finish()
			}
		}
	}

	c.out = &drainReader{f: c.outR}
	c.tail = newTailBuffer(p.StderrTail)
	c.readers.Add(2)
	go func() {
		defer c.readers.Done()
		_, _ = io.Copy(c.tail, c.errR)
	}()
	go func() {
		defer c.readers.Done()
		readLines(c.out, p.MaxLine, lineHandler)
	}()

	c.waited = make(chan struct{})
	go func() {
		_ = c.cmd.Wait() // how it ended is read from ProcessState
		c.state = c.cmd.ProcessState
		close(c.waited)
	}()
}

// supervise waits for the process to exit, stopping it when ctx ends or
// a conversation's CLI lingers after its stdin was closed. It returns why
// the process was stopped, "" when it exited by itself.
func (c *child) supervise(ctx context.Context) string {
	p, tree, talk, pid := c.p, c.tree, c.talk, c.cmd.Process.Pid
	reason := ""
	// eof is closed once a conversation's stdin is: the CLI was told
	// there is no more input and should exit by itself. One that does
	// not (Gemini CLI over ACP with an MCP server) is stopped, as a
	// cancel would stop it, after twice the grace or minLingerAfterEOF,
	// whichever is longer: long enough for any CLI that does exit, even
	// on a loaded machine.
	var eof <-chan struct{}
	if talk != nil {
		eof = talk.done
	}
	var linger <-chan time.Time
	for ended := false; !ended; {
		select {
		case <-c.waited:
			ended = true
		case <-ctx.Done():
			cause := stopCause(ctx)
			reason = stopReason(cause)
			if errors.Is(cause, errDiskFull) {
				// No grace for a run stopped for a low disk: while any
				// of its processes lives it can take the space the store
				// needs to record the run, and a graceful exit would
				// only write more.
				killAll(pid, p, tree, c.cg, c.waited)
				<-c.waited
			} else {
				stop(pid, p, tree, c.cg, talk, c.waited)
			}
			ended = true
		case <-eof:
			eof, linger = nil, time.After(max(2*p.Grace, minLingerAfterEOF))
		case <-linger:
			stop(pid, p, tree, c.cg, talk, c.waited)
			ended = true
		}
	}
	return reason
}

// reap kills every process of the run that outlived the CLI and drains
// its output.
func (c *child) reap() {
	// The CLI is gone. Take everything it started with it, in any session:
	// the cgroup whole, and whatever carries the cookie (a privileged
	// process can leave a cgroup, but keeps its environment unless it
	// clears it).
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	// The cgroup is the truth about a run's processes: once it is removed,
	// with the reaper having taken what left it (a privileged process can
	// move itself out; the reaper still has it as a descendant), nothing
	// of the run is left, and reading all of /proc for the run's cookie
	// would only cost time that grows with the host. Without a cgroup, or
	// one that could not be removed, or without a reaper, the cookie scan
	// is the fallback.
	if contained := c.removeCgroup(); !contained || !c.p.Reaped {
		killCtx, cancel := context.WithTimeout(context.Background(), killTimeout)
		if err := c.tree.Kill(killCtx, c.p.RunID); err != nil {
			c.log.Error("kill the run's processes", zap.Error(err))
		}
		cancel()
	}
	// A process outside the run may still hold the pipes (it inherited
	// them and cleared its cookie); read what is there, then stop.
	c.out.drain()
	_ = c.errR.SetReadDeadline(time.Now().Add(drainTimeout))
	c.readers.Wait()
	c.outR.Close()
	c.errR.Close()
}
