package runs

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/proctree"
)

// withRunDeadline returns ctx ended with errTimeout at t's deadline: its
// timeout from now, or when Config.RunDeadline says.
func (s *Supervisor) withRunDeadline(ctx context.Context, t *task) (context.Context, context.CancelFunc) {
	if s.cfg.RunDeadline == nil {
		return context.WithTimeoutCause(ctx, t.inv.Timeout, errTimeout)
	}
	expired := s.cfg.RunDeadline(t.run.ID, t.inv.Timeout)
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-expired:
			cancel(errTimeout)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// execute runs t's process to the end and records the outcome.
func (s *Supervisor) execute(t *task) {
	log := s.log.With(zap.String("run_id", t.run.ID), zap.String("agent", t.run.Agent))
	// prepare made the run's temporary directory; it goes with the run,
	// whichever way the run ends.
	defer func() {
		if t.tmp == "" {
			return
		}
		if err := os.RemoveAll(t.tmp); err != nil {
			log.Warn("remove the run's temporary directory", zap.String("dir", t.tmp), zap.Error(err))
		}
	}()
	ctx, cancel := context.WithCancelCause(s.runCtx)
	defer cancel(nil)
	ctx, cancelTimeout := s.withRunDeadline(ctx, t)
	defer cancelTimeout()
	t.mu.Lock()
	t.cancel = cancel
	stopped := t.stopErr
	t.scrub = s.newScrubber(t.cmd)
	t.mu.Unlock()
	log = redactLog(log, t.scrub.red) // it knows the run's credentials
	if stopped != nil {
		cancel(stopped)
	}

	bg := context.Background() // store writes outlive the run's context
	now := s.cfg.Now().UTC()
	t.run.Status, t.run.StartedAt = Running, &now
	if err := s.storeRun(t.run); err != nil {
		log.Error("store run", zap.Error(err))
	}
	s.obs.RunStarted(t.run.Agent, now.Sub(t.run.CreatedAt).Seconds())
	log.Info("run started", zap.Duration("queue_wait", now.Sub(t.run.CreatedAt)))
	info := t.agent.info
	s.emit(t, NewEvent(EventRunStarted, RunStartedData{
		Prompt: t.inv.Spec.Prompt, SystemPrompt: t.inv.Spec.SystemPrompt, Model: t.inv.Spec.Model,
		Effort: t.inv.Spec.Effort, Permission: t.inv.Spec.Permission, Cwd: t.inv.Dir,
		ResumeSessionID: t.inv.Spec.ResumeSessionID, Attachments: t.run.Spec.Attachments,
		CLIVersion: info.Version, VersionStatus: info.Compatibility,
	}))

	// Output is appended behind the reader while the agent runs; close
	// drains it before the outcome is recorded, so run.completed stays
	// last.
	app := newAppender(s.store, t.run.ID, s.cfg.AppendQueue, s.cfg.StoreRetry, log)
	t.mu.Lock()
	t.app = app
	t.mu.Unlock()
	drain := func() {
		t.mu.Lock()
		t.app = nil
		t.mu.Unlock()
		lost := app.close()
		t.mu.Lock()
		t.lost += lost
		t.mu.Unlock()
	}
	if pf, ok := t.agent.Adapter.(Preflighter); ok {
		if runErr := pf.Preflight(ctx, t.inv, s.childEnv(t.agent, t.cmd)); runErr != nil {
			drain()
			// Its message may quote the CLI's output: the run's record
			// has it, redacted.
			log.Info("preflight failed", zap.String("class", string(runErr.Class)))
			var override *RunError
			if ctx.Err() != nil {
				override = stopError(context.Cause(ctx), t.run.Agent)
			}
			s.finish(bg, t, Outcome{Status: Failed, Error: runErr}, override, nil)
			return
		}
	}
	dec := t.agent.Adapter.NewDecoder(t.inv)
	var sess *session
	if drivesSession(t.agent.Adapter, t.inv.Spec) {
		sd, ok := dec.(Session)
		if !ok {
			drain()
			s.finish(bg, t, Outcome{}, NewRunError(Internal,
				"the agent's adapter has no interactive session for this run", ""), nil)
			return
		}
		sess = newSession(s, t, sd, log)
		t.mu.Lock()
		t.sess = sess
		t.mu.Unlock()
		sess.begin()
	}
	start := time.Now()
	first := true
	argv := append([]string{t.inv.Bin}, t.cmd.Args...)
	env := s.childEnv(t.agent, t.cmd)
	confined := false
	tmp, err := t.tmp, error(nil)
	if tmp == "" {
		err = fmt.Errorf("the run has no temporary directory")
	}
	if err == nil {
		env = append(env, "TMPDIR="+tmp, "TMP="+tmp, "TEMP="+tmp)
		if s.cfg.Sandbox != nil {
			argv, confined, err = s.confine(t, argv, tmp)
		}
	}
	if err != nil {
		drain()
		log.Error("confine agent process", zap.Error(err))
		s.finish(bg, t, Outcome{}, NewRunError(Internal, "could not prepare the agent's process: "+err.Error(), ""), nil)
		return
	}
	path, args := argv[0], argv[1:]
	if s.cfg.Reaper != "" {
		path, args = s.cfg.Reaper, proctree.ReaperArgsNice(s.cfg.AgentNice, argv)
	}
	p := process{
		RunID: t.run.ID, Path: path, Args: args, Dir: t.inv.Dir,
		Env: env, Stdin: t.cmd.Stdin,
		Interrupt: syscall.Signal(t.cmd.InterruptSignal), Grace: s.cfg.KillGrace,
		MaxLine: s.cfg.MaxLine, StderrTail: s.cfg.StderrTail,
		Reaped: s.cfg.Reaper != "", Cgroups: s.cfg.Cgroups, Log: log,
	}
	if conv, ok := dec.(Conversation); ok {
		p.Conversation = conv
	}
	if sess != nil {
		p.Conversation = stoppingSession{Session: sess.dec, ss: sess}
		p.OnStart = func(w *stdinWriter, pid int, cg *proctree.Cgroup) {
			sess.started(w, pid, s.cfg.Reaper != "", cg)
			if confined {
				go sess.confined(ctx, pid, log)
			}
		}
	}
	snapped := s.snapshotStart(t, log)
	// A one-shot run's events are emitted behind its reader, so that a
	// line is decoded while the one before is stored; a session's are
	// emitted in line with what it answers the CLI.
	emit := func(evs ...Event) { s.emit(t, evs...) }
	var behind *emitter
	if sess == nil {
		behind = s.startEmitter(t)
		emit = behind.send
	}
	t.setProcess(true)
	exit, stderrTail, err := runProcess(ctx, s.tree, p, func(l line) {
		if first {
			first = false
			s.obs.FirstEvent(t.run.Agent, time.Since(start).Seconds())
		}
		if l.Dropped > 0 {
			keep := l.Bytes[:min(len(l.Bytes), s.cfg.Limits.MaxText)] // Bound would cut it anyway
			emit(NewEvent(EventAgentUnparsed, UnparsedData{
				Line: string(keep), Truncated: true, Bytes: len(l.Bytes) + l.Dropped,
				Reason: fmt.Sprintf("line longer than the %d-byte limit", s.cfg.MaxLine),
			}))
			return
		}
		if sess != nil {
			sess.line(l.Bytes)
			return
		}
		emit(dec.Decode(l.Bytes)...)
	})
	// The processes are gone: say so before waiting on the store, which
	// on a full disk needs the reserve that StoppingForDisk holds back.
	t.setProcess(false)
	if behind != nil {
		// Every line was read: what is queued is emitted before the
		// outcome's events.
		behind.close()
	}
	if sess != nil {
		sess.end()
	}
	drain()
	if err != nil {
		log.Error("start agent process", zap.Error(err))
		s.finish(bg, t, Outcome{}, NewRunError(NotInstalled, "could not start the agent CLI: "+err.Error(),
			t.agent.info.Advisory), &Exit{Code: -1})
		return
	}
	if confined {
		exit = sandboxExit(exit)
	}
	log.Info("process exited", zap.Int("code", exit.Code), zap.String("signal", exit.Signal), zap.String("reason", exit.Reason))
	stderrTail = t.scrub.red.Bytes(stderrTail) // it becomes error messages
	// The agent's own words stay out of info lines: they can quote a
	// prompt or a tool's output.
	log.Debug("process stderr", zap.ByteString("stderr_tail", stderrTail))
	out := dec.Finish(exit, stderrTail)
	if sess != nil {
		out.Events = sess.outcomeEvents(out.Events)
		if st, turnErr, ok := sess.lastTurn(); ok && exit.Reason == "" {
			out.Status, out.Error = st, turnErr
			switch {
			case st == Cancelled:
				out.Error = NewRunError(ClassCancelled, "the run's last turn was interrupted", "")
			case st == Failed && out.Error == nil:
				out.Error = NewRunError(AgentCrashed, "the run's last turn failed without a reason", "")
			}
		}
	}
	// The supervisor's verdict wins only when it did stop the process: one
	// that finished on its own as the deadline passed keeps its outcome.
	var override *RunError
	if exit.Reason != "" {
		override = stopError(context.Cause(ctx), t.run.Agent)
	}
	s.snapshotEnd(t, snapped, &out, log)
	s.finish(bg, t, out, override, &exit)
}

// drivesSession reports whether a run with spec s is driven as a Session:
// it is interactive or asks for approvals, or its adapter prefers its
// session protocol for it.
func drivesSession(a Adapter, s Spec) bool {
	if s.Session() {
		return true
	}
	p, ok := a.(SessionPreferrer)
	return ok && p.PrefersSession(s)
}

// childEnv is the whole environment of an agent process: a minimal base,
// the adapter's fixed settings, and the variables it passes through from
// the gateway's environment. The gateway's own secrets never reach it.
func (s *Supervisor) childEnv(a *Agent, c Command) []string {
	env := []string{"PATH=" + s.cfg.Path, "HOME=" + a.Home, "LANG=C.UTF-8", "TERM=dumb"}
	for _, name := range c.PassEnv {
		if v := s.cfg.Getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return append(env, c.Env...)
}
