package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
)

// Submit validates spec, records a queued run and puts it in the queue.
// Errors: ErrShuttingDown, ErrUnknownAgent, ErrAgentUnavailable, a
// *FieldError (ErrInvalid, ErrUnsupported), ErrCapacity, or the store's.
func (s *Supervisor) Submit(ctx context.Context, spec Spec) (Run, error) {
	if name, ok := s.aliases[spec.Agent]; ok {
		spec.Agent = name
	}
	a, ok := s.agents[spec.Agent]
	if !ok {
		return Run{}, fmt.Errorf("%w %q", ErrUnknownAgent, spec.Agent)
	}
	if !a.info.Installed {
		return Run{}, fmt.Errorf("%w: %s; %s", ErrAgentUnavailable, spec.Agent, a.info.Advisory)
	}
	if err := spec.Validate(); err != nil {
		return Run{}, err
	}
	if err := checkSessionFields(a.Adapter.Describe(), spec); err != nil {
		return Run{}, err
	}
	if spec.Permission == "" {
		spec.Permission = WorkspaceWrite
	}
	timeout := s.cfg.DefaultTimeout
	if spec.TimeoutSeconds > 0 {
		timeout = time.Duration(spec.TimeoutSeconds) * time.Second
		if timeout > s.cfg.MaxTimeout {
			return Run{}, Invalid(FieldTimeoutSeconds, fmt.Sprintf("must be at most %d", int(s.cfg.MaxTimeout/time.Second)))
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Run{}, fmt.Errorf("new run id: %w", err)
	}
	inv := Invocation{
		RunID: id.String(), Spec: spec, Bin: a.info.Path, Home: a.Home,
		Timeout: timeout, CLIVersion: a.info.Version,
	}
	cwd := spec.Cwd
	if cwd == "" && spec.ResumeSessionID != "" {
		// A resumed conversation continues where it began by default:
		// some CLIs find a session by its directory as well as its id,
		// and its files are there.
		if rec, ok, err := s.store.Session(ctx, spec.Agent, spec.ResumeSessionID); err == nil && ok && rec.Cwd != "" {
			cwd = rec.Cwd
		} else if prev, err := s.store.GetRun(ctx, spec.ResumeSessionID); err == nil && prev.Spec.Cwd != "" {
			cwd = prev.Spec.Cwd // a session the gateway began before it kept sessions' directories
		}
	}
	// Check the agent's own constraints before touching the disk.
	inv.Dir = s.cfg.WorkspaceRoot
	if _, err := a.Adapter.Command(inv); err != nil {
		return Run{}, err
	}

	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return Run{}, ErrShuttingDown
	case s.queued >= s.cfg.QueueSize:
		s.mu.Unlock()
		return Run{}, ErrCapacity
	}
	s.queued++ // reserve a place in the queue
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		s.queued--
		s.signalIdleLocked()
		s.mu.Unlock()
	}

	dir, created, err := ResolveCwd(s.cfg.WorkspaceRoot, cwd, id.String())
	if err != nil {
		release()
		return Run{}, err
	}
	inv.Dir = dir
	cmd, err := a.Adapter.Command(inv)
	if err != nil {
		release()
		if created {
			os.Remove(dir)
		}
		return Run{}, err
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(dir, realPath(s.cfg.WorkspaceRoot)), "/")
	if rel == "" {
		rel = "." // the root itself; empty would mean "a fresh directory"
	}
	spec.Cwd = rel
	inv.Spec = spec
	r := Run{
		ID: id.String(), Agent: spec.Agent, Model: spec.Model, Status: Queued,
		CreatedAt: s.cfg.Now().UTC(), AgentVersion: a.info.Version, Metadata: spec.Metadata,
		Spec: spec, Owner: s.cfg.Replica, Interactive: spec.Interactive, Approvals: spec.Approvals,
	}
	// The record must not depend on the client staying: a write cut off
	// half way could store a run that no task executes.
	storeCtx, cancelStore := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelStore()
	if err := s.store.CreateRun(storeCtx, s.cfg.Limits.record(r)); err != nil {
		release()
		if created {
			os.Remove(dir)
		}
		return Run{}, fmt.Errorf("create run: %w", err)
	}
	t := &task{run: r, agent: a, inv: inv, cmd: cmd}
	s.emit(t, NewEvent(EventRunQueued, RunQueuedData{Agent: r.Agent, Metadata: r.Metadata}))
	s.obs.RunQueued(r.Agent)
	s.log.Info("run queued", zap.String("run_id", r.ID), zap.String("agent", r.Agent))
	// The task becomes visible to Cancel and Shutdown and to the workers
	// at once, so that exactly one of them finishes it.
	s.mu.Lock()
	if s.closing {
		// Shutdown began while the run was being recorded, and has
		// already finished the queued runs it saw: finish this one too.
		s.queued--
		t.mu.Lock()
		t.done, t.stopErr = true, errShutdown
		t.mu.Unlock()
		s.signalIdleLocked()
		s.mu.Unlock()
		s.finish(context.Background(), t, Outcome{}, stopError(errShutdown, r.Agent), nil)
		return t.run, nil
	}
	s.tasks[r.ID] = t
	s.pending = append(s.pending, t) // the place reserved above
	s.obs.QueueDepth(s.queued, s.active)
	s.wake.Signal()
	s.mu.Unlock()
	return r, nil
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// Cancel stops the run wherever it executes. It is idempotent: cancelling
// a finished run returns it unchanged. A queued run is cancelled at once;
// a running one is stopped, so the run returned may still say running for
// the moment its process takes to end.
func (s *Supervisor) Cancel(ctx context.Context, id string) (Run, error) {
	s.mu.Lock()
	t := s.tasks[id]
	s.mu.Unlock()
	if t != nil {
		s.stopTask(t, errCancelled)
		return s.store.GetRun(ctx, id)
	}
	r, err := s.store.GetRun(ctx, id)
	if err != nil {
		return Run{}, err
	}
	if !r.Status.Terminal() {
		if err := s.store.RequestCancel(ctx, id); err != nil {
			return Run{}, fmt.Errorf("request cancel of run %s: %w", id, err)
		}
	}
	return r, nil
}

// stopTask ends t for cause: a queued task is finished on the spot, a
// running one has its context cancelled.
func (s *Supervisor) stopTask(t *task, cause error) {
	s.mu.Lock() // s.mu before t.mu, as in worker
	t.mu.Lock()
	if t.done || t.stopErr != nil {
		t.mu.Unlock()
		s.mu.Unlock()
		return
	}
	t.stopErr = cause
	if t.started {
		// execute cancels with stopErr itself if it has not yet set
		// cancel.
		cancel := t.cancel
		t.mu.Unlock()
		s.mu.Unlock()
		if cancel != nil {
			cancel(cause)
		}
		return
	}
	t.done = true
	t.mu.Unlock()
	if i := slices.Index(s.pending, t); i >= 0 {
		s.pending = slices.Delete(s.pending, i, i+1)
		s.queued--
	}
	s.mu.Unlock()
	s.finish(context.Background(), t, Outcome{}, stopError(cause, t.run.Agent), nil)
	s.untrack(t)
}

func stopError(cause error, agent string) *RunError {
	switch {
	case errors.Is(cause, errCancelled):
		return NewRunError(ClassCancelled, "the run was cancelled", "")
	case errors.Is(cause, errTimeout):
		return NewRunError(Timeout, "the run exceeded its timeout", "raise timeout_seconds, or check that the model server answers")
	case errors.Is(cause, errShutdown):
		return NewRunError(Interrupted, "the gateway shut down before the run finished", "submit the run again")
	}
	return nil
}

func (s *Supervisor) untrack(t *task) {
	s.mu.Lock()
	delete(s.tasks, t.run.ID)
	s.obs.QueueDepth(s.queued, s.active)
	s.signalIdleLocked()
	s.mu.Unlock()
}

// signalIdleLocked tells a waiting Shutdown that nothing is queued or
// running any more. s.mu must be held.
func (s *Supervisor) signalIdleLocked() {
	if s.closing && s.queued == 0 && s.active == 0 {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
}

// worker executes queued runs, oldest first, until the supervisor stops.
func (s *Supervisor) worker() {
	defer s.workers.Done()
	for {
		s.mu.Lock()
		for len(s.pending) == 0 && !s.stopping {
			s.wake.Wait()
		}
		if s.stopping {
			s.mu.Unlock()
			return
		}
		t := s.pending[0]
		s.pending = slices.Delete(s.pending, 0, 1)
		s.queued--
		s.active++
		t.mu.Lock()
		t.started = true
		t.mu.Unlock()
		s.obs.QueueDepth(s.queued, s.active)
		s.mu.Unlock()

		s.execute(t)

		s.mu.Lock()
		s.active--
		s.mu.Unlock()
		s.untrack(t)
	}
}
