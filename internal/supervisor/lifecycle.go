package supervisor

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/artifacts"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
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

// execution is one run being executed, from its process's start to its
// recorded outcome. execute reads as its phases, in order: prepare,
// preflight, openDecoder, command, supervise, conclude.
//
// It belongs to the goroutine running execute, and to the reader's
// goroutine while it hands over lines (then the first is waiting in
// runProcess). Each field is set once by the phase that names it and
// fixed after, but for log, redacting from prepare on, and first, the
// reader's alone. What other goroutines read or change while the run
// runs (the cancel, the appender, the session, lost events, the budget,
// the record) is in the task, under its mutex.
type execution struct {
	s   *Supervisor
	t   *task
	log *zap.Logger
	// ctx ends when the run is cancelled, times out or the supervisor
	// stops; its cause says which. Set by execute.
	ctx context.Context

	// Set by prepare: output is appended behind the reader while the
	// agent runs; drain closes it before the outcome is recorded, so
	// run.completed stays last.
	app *appender
	// Set by openDecoder; sess is nil unless the run is driven as a
	// Session.
	dec  runs.Decoder
	sess *session
	// Set by command: confined says the process runs in the sandbox;
	// began is when FirstEvent is measured from.
	confined bool
	began    time.Time
	first    bool
	// Set by supervise: where the lines' events go, and what finds the
	// run's changes to its directory.
	emitLine func(...runs.Event)
	changes  *artifacts.Watch
	// egress is the process's way out of its network namespace, nil
	// under network open (network.go).
	egress *egressRun
}

// execute runs t's process to the end and records the outcome.
func (s *Supervisor) execute(t *task) {
	x := &execution{s: s, t: t, log: s.log.With(zap.String("run_id", t.run.ID), zap.String("agent", t.run.Agent))}
	// prepare made the run's temporary directory; it goes with the run,
	// whichever way the run ends. Input that waited for the run to fall
	// asleep goes on once it has, or has ended.
	defer t.wakeSleepWaiters()
	defer x.removeTmp()
	ctx, cancel := context.WithCancelCause(s.runCtx)
	defer cancel(nil)
	ctx, cancelTimeout := s.withRunDeadline(ctx, t)
	defer cancelTimeout()
	x.ctx = ctx
	x.prepare(cancel)
	if !x.preflight() || !x.openDecoder() {
		return
	}
	p, ok := x.command()
	if !ok {
		return
	}
	exit, stderrTail, err := x.supervise(p)
	x.stopEgress()
	x.conclude(exit, stderrTail, err)
}

// removeTmp removes the run's temporary directory, if it has one.
func (x *execution) removeTmp() {
	t := x.t
	if t.tmp == "" {
		return
	}
	if err := os.RemoveAll(t.tmp); err != nil {
		x.log.Warn("remove the run's temporary directory", zap.String("dir", t.tmp), zap.Error(err))
	}
}

// prepare makes the run cancellable and its secrets known, records it
// Running, emits run.started and opens the run's appender.
func (x *execution) prepare(cancel context.CancelCauseFunc) {
	s, t := x.s, x.t
	t.mu.Lock()
	t.cancel = cancel
	stopped := t.stopErr
	t.scrub = s.newScrubber(t.cmd)
	t.mu.Unlock()
	x.log = redact.Log(x.log, t.scrub.Redactor()) // it knows the run's credentials
	if stopped != nil {
		cancel(stopped)
	}

	if t.woken {
		// A run taken over started long ago; run.resumed said so.
		x.log.Info("run taken over: its agent starts again, resuming its session")
		x.openAppender()
		return
	}
	now := s.cfg.Now().UTC()
	t.run.Status, t.run.StartedAt = runs.Running, &now
	if err := s.storeRun(t.run); err != nil {
		x.log.Error("store run", zap.Error(err))
	}
	s.obs.RunStarted(t.run.Agent, now.Sub(t.run.CreatedAt).Seconds())
	x.log.Info("run started", zap.Duration("queue_wait", now.Sub(t.run.CreatedAt)))
	info := t.agent.info
	s.emit(t, runs.NewEvent(runs.EventRunStarted, runs.RunStartedData{
		Prompt: t.inv.Spec.Prompt, SystemPrompt: t.inv.Spec.SystemPrompt, Model: t.inv.Spec.Model,
		Effort: t.inv.Spec.Effort, Permission: t.inv.Spec.Permission, Cwd: t.inv.Dir,
		ResumeSessionID: t.inv.Spec.ResumeSessionID, Attachments: t.run.Spec.Attachments,
		CLIVersion: info.Version, VersionStatus: info.Compatibility, Workspace: x.workspaceInfo(),
	}))

	x.openAppender()
}

// openAppender opens the run's appender, through which its output's
// events are stored.
func (x *execution) openAppender() {
	s, t := x.s, x.t
	x.app = newAppender(s.store, t.run.ID, s.cfg.AppendQueue, s.cfg.StoreRetry, x.log)
	t.mu.Lock()
	t.app = x.app
	t.mu.Unlock()
}

// workspaceInfo is how the run's directory was prepared, for run.started,
// counted in the metrics: nil for a fresh or given directory.
func (x *execution) workspaceInfo() *runs.WorkspaceInfo {
	p := x.t.prepared
	if p == nil {
		return nil
	}
	info := p.Info
	x.s.obs.WorkspacePrepared(info.Source, float64(info.PrepareMS)/1000, info.CacheHit)
	if info.Restored {
		x.s.obs.SnapshotRestored(runs.SnapshotWorkspace)
	}
	return &info
}

// drain closes the run's appender: what it holds is stored, or counted
// lost, and events are appended at once from here.
func (x *execution) drain() {
	t := x.t
	t.mu.Lock()
	t.app = nil
	t.mu.Unlock()
	lost := x.app.close()
	t.mu.Lock()
	t.lost += lost
	t.mu.Unlock()
}

// finish records the run's outcome; store writes outlive the run's
// context.
func (x *execution) finish(out runs.Outcome, override *runs.RunError, exit *runs.Exit) {
	x.s.finish(context.Background(), x.t, out, override, exit)
}

// preflight runs the adapter's Preflight, if it has one, and reports
// whether the run goes on; if not, the run is finished.
func (x *execution) preflight() bool {
	t := x.t
	pf, ok := t.agent.Adapter.(runs.Preflighter)
	if !ok {
		return true
	}
	runErr := pf.Preflight(x.ctx, t.inv, x.s.childEnv(t.inv.Home, t.cmd))
	if runErr == nil {
		return true
	}
	x.drain()
	// Its message may quote the CLI's output: the run's record
	// has it, redacted.
	x.log.Info("preflight failed", zap.String("class", string(runErr.Class)))
	var override *runs.RunError
	if x.ctx.Err() != nil {
		override = stopError(context.Cause(x.ctx), t.run.Agent)
	}
	x.finish(runs.Outcome{Status: runs.Failed, Error: runErr}, override, nil)
	return false
}

// openDecoder makes the run's decoder, and its session when the run is
// driven as one, and reports whether the run goes on; if not, the run is
// finished.
func (x *execution) openDecoder() bool {
	s, t := x.s, x.t
	x.dec = t.agent.Adapter.NewDecoder(t.inv)
	if !drivesSession(t.agent.Adapter, t.inv.Spec) {
		return true
	}
	sd, ok := x.dec.(runs.Session)
	if !ok {
		x.drain()
		x.finish(runs.Outcome{}, runs.NewRunError(runs.Internal,
			"the agent's adapter has no interactive session for this run", ""), nil)
		return false
	}
	x.sess = newSession(s, t, sd, x.log)
	t.mu.Lock()
	t.sess = x.sess
	t.mu.Unlock()
	x.sess.begin()
	return true
}

// command describes the agent's process: its arguments, under the
// sandbox and the reaper when the gateway has them, its environment,
// and the conversation on its stdin. It reports whether the run goes on;
// if not, the run is finished.
func (x *execution) command() (process, bool) {
	s, t, log, sess := x.s, x.t, x.log, x.sess
	x.began, x.first = time.Now(), true
	argv := append([]string{t.inv.Bin}, t.cmd.Args...)
	env := s.childEnv(t.inv.Home, t.cmd)
	tmp, err := t.tmp, error(nil)
	if tmp == "" {
		err = fmt.Errorf("the run has no temporary directory")
	}
	if err == nil {
		env = append(env, "TMPDIR="+tmp, "TMP="+tmp, "TEMP="+tmp)
		var net *NetConfinement
		if net, env, err = x.startEgress(env, tmp); err == nil && s.cfg.Sandbox != nil {
			argv, x.confined, err = s.confine(t, argv, tmp, net)
		}
	}
	if err != nil {
		x.stopEgress()
		x.drain()
		log.Error("confine agent process", zap.Error(err))
		x.finish(runs.Outcome{}, runs.NewRunError(runs.Internal, "could not prepare the agent's process: "+err.Error(), ""), nil)
		return process{}, false
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
	if conv, ok := x.dec.(runs.Conversation); ok {
		p.Conversation = conv
	}
	if sess != nil {
		p.Conversation = stoppingSession{Session: sess.dec, ss: sess}
		p.OnStart = func(w *stdinWriter, pid int, cg *proctree.Cgroup) {
			sess.started(w, pid, s.cfg.Reaper != "", cg)
			if x.confined {
				go sess.confined(x.ctx, pid, log)
			}
		}
	}
	return p, true
}

// supervise runs the agent's process to its end, turning each line of
// its output into events, then drains what is still queued. It returns
// what runProcess does.
func (x *execution) supervise(p process) (runs.Exit, []byte, error) {
	s, t := x.s, x.t
	x.changes = s.watchChanges(t, x.log)
	// A one-shot run's events are emitted behind its reader, so that a
	// line is decoded while the one before is stored; a session's are
	// emitted in line with what it answers the CLI.
	x.emitLine = func(evs ...runs.Event) { s.emit(t, evs...) }
	var behind *emitter
	if x.sess == nil {
		behind = s.startEmitter(t)
		x.emitLine = behind.send
	}
	t.setProcess(true)
	exit, stderrTail, err := runProcess(x.ctx, s.tree, p, x.line)
	// The processes are gone: say so before waiting on the store, which
	// on a full disk needs the reserve that StoppingForDisk holds back.
	t.setProcess(false)
	if behind != nil {
		// Every line was read: what is queued is emitted before the
		// outcome's events.
		behind.close()
	}
	if x.sess != nil {
		x.sess.end()
	}
	x.drain()
	return exit, stderrTail, err
}

// line turns one line of the agent's output into events, on the reader's
// goroutine.
func (x *execution) line(l line) {
	s := x.s
	if x.first {
		x.first = false
		s.obs.FirstEvent(x.t.run.Agent, time.Since(x.began).Seconds())
		if !x.t.wokenAt.IsZero() {
			s.obs.WokenFirstEvent(x.t.run.Agent, time.Since(x.t.wokenAt).Seconds())
		}
	}
	if l.Dropped > 0 {
		keep := l.Bytes[:min(len(l.Bytes), s.cfg.Limits.MaxText)] // Bound would cut it anyway
		x.emitLine(runs.NewEvent(runs.EventAgentUnparsed, runs.UnparsedData{
			Line: string(keep), Truncated: true, Bytes: len(l.Bytes) + l.Dropped,
			Reason: fmt.Sprintf("line longer than the %d-byte limit", s.cfg.MaxLine),
		}))
		return
	}
	if x.sess != nil {
		x.sess.line(l.Bytes)
		return
	}
	x.emitLine(x.dec.Decode(l.Bytes)...)
}

// conclude turns how the process ended into the run's outcome, and
// records it.
func (x *execution) conclude(exit runs.Exit, stderrTail []byte, err error) {
	t, log := x.t, x.log
	if err != nil {
		log.Error("start agent process", zap.Error(err))
		x.finish(runs.Outcome{}, runs.NewRunError(runs.NotInstalled, "could not start the agent CLI: "+err.Error(),
			t.agent.info.Advisory), &runs.Exit{Code: -1})
		return
	}
	if x.confined {
		exit = sandboxExit(exit)
	}
	log.Info("process exited", zap.Int("code", exit.Code), zap.String("signal", exit.Signal), zap.String("reason", exit.Reason))
	stderrTail = t.scrub.Redactor().Bytes(stderrTail) // it becomes error messages
	// The agent's own words stay out of info lines: they can quote a
	// prompt or a tool's output.
	log.Debug("process stderr", zap.ByteString("stderr_tail", stderrTail))
	out := x.dec.Finish(exit, stderrTail)
	if x.sess != nil {
		if reason, since, ok := x.sess.asleep(exit); ok {
			x.s.emit(t, x.sess.outcomeEvents(out.Events)...)
			x.s.recordChanges(t, x.changes, &out)
			x.s.hibernate(t, reason, since)
			return
		}
		x.sessionOutcome(&out, exit)
	}
	// The supervisor's verdict wins only when it did stop the process: one
	// that finished on its own as the deadline passed keeps its outcome.
	var override *runs.RunError
	if exit.Reason != "" {
		override = stopError(context.Cause(x.ctx), t.run.Agent)
	}
	x.s.recordChanges(t, x.changes, &out)
	x.finish(out, override, &exit)
}

// sessionOutcome gives out the session's events, and its last turn's
// verdict when the process was not stopped.
func (x *execution) sessionOutcome(out *runs.Outcome, exit runs.Exit) {
	sess := x.sess
	out.Events = sess.outcomeEvents(out.Events)
	if st, turnErr, ok := sess.lastTurn(); ok && exit.Reason == "" {
		out.Status, out.Error = st, turnErr
		switch {
		case st == runs.Cancelled:
			out.Error = runs.NewRunError(runs.ClassCancelled, "the run's last turn was interrupted", "")
		case st == runs.Failed && out.Error == nil:
			out.Error = runs.NewRunError(runs.AgentCrashed, "the run's last turn failed without a reason", "")
		}
	}
}

// drivesSession reports whether a run with spec s is driven as a Session:
// it is interactive or asks for approvals, or its adapter prefers its
// session protocol for it.
func drivesSession(a runs.Adapter, s runs.Spec) bool {
	if s.Session() {
		return true
	}
	p, ok := a.(runs.SessionPreferrer)
	return ok && p.PrefersSession(s)
}

// childEnv is the whole environment of an agent process: a minimal base,
// the adapter's fixed settings, and the variables it passes through from
// the gateway's environment. The gateway's own secrets never reach it.
func (s *Supervisor) childEnv(home string, c runs.Command) []string {
	env := []string{"PATH=" + s.cfg.Path, "HOME=" + home, "LANG=C.UTF-8", "TERM=dumb"}
	for _, name := range c.PassEnv {
		if v := s.cfg.Getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return append(env, c.Env...)
}
