package supervisor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// Submit validates spec, records a queued run and puts it in the queue all
// replicas share, where the first replica with a free slot takes it.
// Errors: ErrShuttingDown, ErrUnknownAgent, ErrAgentUnavailable, a
// *FieldError (ErrInvalid, ErrUnsupported), ErrCapacity,
// ErrIdempotencyMismatch, ctx's error when the client left before the run
// was recorded (nothing is created then), or the store's.
//
// A spec with an IdempotencyKey makes one run however often it is
// submitted: a later submission with the same key and the same spec
// returns that run, as it is now.
func (s *Supervisor) Submit(ctx context.Context, spec runs.Spec) (runs.Run, error) {
	sub, err := s.newSubmission(ctx, spec)
	if err != nil {
		return runs.Run{}, err
	}
	if err := s.checkSubmittedSpec(ctx, sub); err != nil {
		return runs.Run{}, err
	}
	if err := s.checkSubmissionRunnable(ctx, sub); err != nil {
		return runs.Run{}, err
	}
	if r, replayed, err := s.claimSubmissionKey(ctx, sub); err != nil || replayed {
		return r, err
	}
	if err := s.readySubmissionToRecord(ctx, sub); err != nil {
		return runs.Run{}, err
	}
	// Once the record is being written, the run no longer depends on the
	// client: a write cut off half way could record a run that nobody
	// queues.
	storeCtx, cancelStore := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelStore()
	r, replayed, err := s.recordSubmission(storeCtx, sub)
	if err != nil || replayed {
		s.unlockSubmitted(sub)
		return r, err
	}
	if r, err = s.queueSubmission(storeCtx, sub, r); err != nil {
		s.unlockSubmitted(sub)
	}
	return r, err
}

// tenantWait is how long a worker that found a queued run's tenant at its
// running limit waits before it takes the next run.
const tenantWait = 500 * time.Millisecond

// replayRequeueAfter is how old a queued run nobody owns and not in the
// queue must be before a retry with its idempotency key queues it again:
// younger, the request that recorded it may still be queueing it, and must
// store its run.queued first.
const replayRequeueAfter = 10 * time.Second

// replay returns the run an idempotency key made, as it is now. A queued
// run nobody owns is queued again, in case the request that recorded it
// stopped before queueing it; the queue keeps one copy of a run it has.
func (s *Supervisor) replay(ctx context.Context, id string) (runs.Run, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return runs.Run{}, err
	}
	if r.Status == runs.Queued && r.Owner == "" && r.QueuePosition == 0 && s.cfg.Now().Sub(r.CreatedAt) > replayRequeueAfter {
		if err := s.store.Enqueue(ctx, id, r.Spec); err != nil && !errors.Is(err, runs.ErrCapacity) {
			return runs.Run{}, fmt.Errorf("queue run: %w", err)
		}
	}
	return r, nil
}

// hashSpec identifies a request for its idempotency key: the spec as the
// client sent it, encoded.
func hashSpec(spec runs.Spec) string {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (s *Supervisor) runTimeout(spec runs.Spec) (time.Duration, error) {
	timeout := s.cfg.DefaultTimeout
	if spec.TimeoutSeconds > 0 {
		timeout = time.Duration(spec.TimeoutSeconds) * time.Second
		if timeout > s.cfg.MaxTimeout {
			return 0, runs.Invalid(runs.FieldTimeoutSeconds, fmt.Sprintf("must be at most %d", int(s.cfg.MaxTimeout/time.Second)))
		}
	}
	return timeout, nil
}

func (s *Supervisor) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// observeQueue has the shared queue's length and this replica's running
// runs reported, soon, by queueObserver. Every run's end asks for it: a
// burst of runs ending at once then costs a few reads of the queue, not
// one each, and no worker waits for one.
func (s *Supervisor) observeQueue() {
	select {
	case s.queueKick <- struct{}{}:
	default: // a read is asked for already, and comes after this call
	}
}

// queueObserver reads and reports the queue's length whenever
// observeQueue asked since its last read, until ctx ends.
func (s *Supervisor) queueObserver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.queueKick:
		}
		n, err := s.store.QueueLength(ctx)
		if err != nil {
			continue
		}
		s.mu.Lock()
		active := s.active
		s.mu.Unlock()
		s.obs.QueueDepth(n, active)
	}
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// prepare makes what executing t's run needs on this replica: the agent,
// the run's directory (a fresh one is made here) and the CLI's command.
func (s *Supervisor) prepare(t *task) *runs.RunError {
	spec := t.run.Spec
	a, ok := s.agents[t.run.Agent]
	if !ok || !a.info.Installed {
		return runs.NewRunError(runs.NotInstalled, fmt.Sprintf("the agent %q is not available on the gateway replica %s", t.run.Agent, s.cfg.Replica),
			"install the agent on every replica, or submit the run again")
	}
	timeout, err := s.runTimeout(spec)
	if err != nil {
		timeout = s.cfg.MaxTimeout
	}
	root, err := s.tenantRoot(t.run.Tenant)
	if err != nil {
		return runs.NewRunError(runs.Internal, "the tenant's workspace is not available: "+err.Error(), "")
	}
	cwd := spec.Cwd
	if spec.Workspace != nil && !t.woken {
		cwd = path.Join(spec.WorkDir, spec.Cwd) // the workspace made for the run
	}
	dir, _, err := runs.ResolveCwd(root, cwd, t.run.ID)
	if err != nil {
		return runs.NewRunError(runs.Internal, "the run's directory is not available on the replica that took it: "+err.Error(),
			"give every replica the same workspace, or submit the run again")
	}
	rel := relDir(root, dir) // "." for the root itself; empty would mean "a fresh directory"
	created := cwd == ""
	spec.Cwd = rel
	if spec.WorkDir == "" {
		spec.WorkDir = rel
	}
	// The adapter gets the spec without what the gateway enforces, and
	// the MCP servers' values opened; the run keeps its spec as stored.
	aspec := runs.AdapterSpec(a.Adapter.Describe(), spec)
	aspec.KeepSession = aspec.KeepSession || s.mayHibernate(spec, a)
	if aspec.MCPServers, err = openMCPServers(s.cfg.SealKey, t.run.ID, spec.MCPServers); err != nil {
		if created {
			os.Remove(dir)
		}
		return runs.NewRunError(runs.Internal, err.Error(), "give every replica the same AGENTGATE_SEAL_KEY, then submit the run again")
	}
	// The run's temporary directory is made here, before its command,
	// so that its attachments are written into it for the adapter.
	tmp, err := s.runTempDir(t)
	if err != nil {
		if created {
			os.Remove(dir)
		}
		return runs.NewRunError(runs.Internal, err.Error(), "")
	}
	images, runErr := s.materialiseForRun(t, tmp)
	if runErr != nil {
		os.RemoveAll(tmp)
		if created {
			os.Remove(dir)
		}
		return runErr
	}
	inv := runs.Invocation{
		RunID: t.run.ID, Spec: aspec, Bin: a.info.Path, Home: cmp.Or(t.home, a.Home), Dir: dir,
		Timeout: timeout, CLIVersion: a.info.Version, Images: images, Files: runs.HostFiles{},
	}
	cmd, err := a.Adapter.Command(inv)
	if err != nil {
		os.RemoveAll(tmp)
		if created {
			os.Remove(dir)
		}
		return runs.NewRunError(runs.Internal, "the agent's command could not be built: "+err.Error(), "")
	}
	t.tmp = tmp
	// The run's scrubber redacts these from its events, record and log.
	cmd.Secrets = append(cmd.Secrets, mcpSecrets(aspec.MCPServers)...)
	t.mu.Lock()
	t.budget = newBudget(spec)
	t.mu.Unlock()
	t.agent, t.inv, t.cmd = a, inv, cmd
	t.run.Spec, t.run.AgentVersion = spec, a.info.Version
	return nil
}

// Cancel stops the run wherever it executes. It is idempotent: cancelling
// a finished run returns it unchanged. A queued run is cancelled at once,
// by whichever replica is asked; a running one is stopped by its replica,
// so the run returned may still say running for the moment its process
// takes to end.
func (s *Supervisor) Cancel(ctx context.Context, id string) (runs.Run, error) {
	by := runs.ActorFrom(ctx)
	s.audit("run.cancel", by, id)
	if t := s.task(id); t != nil {
		started := t.isStarted()
		if started {
			s.cancelTask(t, by)
		}
		// A run falling asleep (or taken over, being put to sleep) is
		// ended asleep, below.
		if err := t.waitAsleep(ctx); err != nil {
			return runs.Run{}, err
		}
		if r, err := s.store.GetRun(ctx, id); err != nil || started && r.Activity != runs.Hibernated {
			return r, err
		}
	}
	r, err := s.store.GetRun(ctx, id)
	if err != nil {
		return runs.Run{}, err
	}
	if r.Status.Terminal() {
		return r, nil
	}
	if r.Activity == runs.Hibernated {
		claimed, err := s.store.ClaimHibernated(ctx, id, "", s.cfg.Replica, runs.Stopping)
		if err == nil {
			s.forgetSleeper(id)
			return s.cancelAsleep(ctx, claimed, by), nil
		}
		if !errors.Is(err, runs.ErrClaimed) {
			return runs.Run{}, err
		}
		// Woken meanwhile: its new owner stops it on request.
		r = claimed
	}
	if r.Status == runs.Queued && r.Owner == "" {
		// Claim it, as a replica taking it would: then no replica
		// starts it, and this one finishes it.
		claimed, err := s.store.ClaimRun(ctx, id, s.cfg.Replica)
		switch {
		case err == nil:
			if err := s.store.Unqueue(ctx, id); err != nil {
				s.log.Warn("remove a cancelled run from the queue", zap.String("run_id", id), zap.Error(err))
			}
			last, err := s.store.LastEvent(ctx, id)
			if err != nil {
				return runs.Run{}, err
			}
			t := &task{run: claimed, seq: last.Seq, cancelledBy: actorPtr(by)}
			s.finish(context.WithoutCancel(ctx), t, runs.Outcome{}, stopError(errCancelled, r.Agent), nil)
			return t.run, nil
		case !errors.Is(err, runs.ErrClaimed):
			return runs.Run{}, err
		}
		// A replica took it meanwhile: it stops it on request.
		if r = claimed; r.Status.Terminal() {
			return r, nil
		}
	}
	if err := s.store.RequestCancel(ctx, id, by); err != nil {
		return runs.Run{}, fmt.Errorf("request cancel of run %s: %w", id, err)
	}
	return r, nil
}

// cancelTask stops t for a cancel that by asked for.
func (s *Supervisor) cancelTask(t *task, by runs.Actor) {
	t.mu.Lock()
	if t.cancelledBy == nil && !t.done && t.stopErr == nil {
		t.cancelledBy = actorPtr(by)
	}
	t.mu.Unlock()
	s.stopTask(t, errCancelled)
}

// stopTask ends t for cause: a running task has its context cancelled; one
// being taken from the queue is finished as it starts.
func (s *Supervisor) stopTask(t *task, cause error) {
	t.mu.Lock()
	if t.done || t.stopErr != nil {
		t.mu.Unlock()
		return
	}
	t.stopErr = cause
	// execute cancels with stopErr itself if it has not yet set cancel.
	cancel := t.cancel
	t.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

func (t *task) isStarted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.started
}

func stopError(cause error, agent string) *runs.RunError {
	if e := budgetError(cause); e != nil {
		return e
	}
	switch {
	case errors.Is(cause, errCancelled):
		return runs.NewRunError(runs.ClassCancelled, "the run was cancelled", "")
	case errors.Is(cause, errTimeout):
		return runs.NewRunError(runs.Timeout, "the run exceeded its timeout", "raise timeout_seconds, or check that the model server answers")
	case errors.Is(cause, errShutdown):
		return runs.NewRunError(runs.Interrupted, "the gateway shut down before the run finished", "submit the run again")
	case errors.Is(cause, errDiskFull):
		return runs.NewRunError(runs.DiskFull, "the gateway's disk ran low, and the run was stopped so that it could still be recorded",
			"free space under the gateway's data and workspace directories (put workspaces on their own filesystem), then submit the run again")
	}
	return nil
}

func (s *Supervisor) untrack(t *task) {
	s.mu.Lock()
	if s.tasks[t.run.ID] == t {
		delete(s.tasks, t.run.ID)
	}
	s.signalIdleLocked()
	s.mu.Unlock()
}

// signalIdleLocked tells a waiting Shutdown that nothing runs any more.
// s.mu must be held.
func (s *Supervisor) signalIdleLocked() {
	if s.closing && s.active == 0 {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
}

// worker is one slot of this replica: it takes a run from the shared queue
// only while it has none, and executes it, until the supervisor stops
// taking runs.
func (s *Supervisor) worker() {
	defer s.workers.Done()
	for {
		s.waitHealthy(s.takeCtx)
		q, err := s.store.Dequeue(s.takeCtx)
		if err != nil {
			if s.takeCtx.Err() != nil {
				return
			}
			s.log.Warn("take a queued run", zap.Error(err))
			select {
			case <-s.takeCtx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		s.take(q)
	}
}

// take claims a run taken from the queue and executes it. The task is
// visible to Cancel and to cancel requests before the claim, so that a
// cancel that comes while the run is being claimed is not lost.
func (s *Supervisor) take(q runs.QueuedRun) {
	t := &task{run: runs.Run{ID: q.RunID}}
	if !s.trackTaken(t, q) {
		return
	}
	defer s.untrackTaken(t)
	if s.leaveTaken(t, q) {
		return
	}
	r, ok := s.claimTaken(q)
	if !ok {
		return
	}
	s.startTaken(t, q, r)
}

// trackTaken makes t, the run q, this replica's and counts it active. It
// is false, and q given back to the queue or acknowledged, when this
// replica does not take the run.
func (s *Supervisor) trackTaken(t *task, q runs.QueuedRun) bool {
	s.mu.Lock()
	if s.closing || s.degraded != nil {
		// A pull that was waiting when the replica began to close or
		// degrade: leave the run to another replica, unclaimed.
		s.mu.Unlock()
		_ = q.Nak()
		return false
	}
	if _, dup := s.tasks[q.RunID]; dup {
		// Delivered again while this replica has it.
		s.mu.Unlock()
		_ = q.Ack()
		return false
	}
	s.tasks[q.RunID] = t
	s.active++
	s.mu.Unlock()
	return true
}

// untrackTaken undoes trackTaken once the run taken has ended here.
func (s *Supervisor) untrackTaken(t *task) {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	s.untrack(t)
	s.observeQueue()
}

// leaveTaken is true when the run q must wait in the queue for another
// replica or a later take, and gives it back.
func (s *Supervisor) leaveTaken(t *task, q runs.QueuedRun) bool {
	bg := context.Background()
	// A replica without the run's agent, or that cannot enforce its
	// network policy, leaves it to one that can: the replica that took
	// the submission could.
	cur, err := s.store.GetRun(bg, q.RunID)
	if err == nil && cur.Status == runs.Queued && (!s.canRun(cur.Agent) || !s.enforces(s.agents[cur.Agent], cur.Spec.Network)) {
		_ = q.Nak()
		return true
	}
	if err == nil && cur.Status == runs.Queued && cur.Owner == "" && !s.cfg.Quotas.StartAllowed(bg, cur.Tenant, cur.ID) {
		// The tenant is at its running limit: the run waits in the
		// queue, and this worker a moment, so that it does not spin
		// on the same run. The task goes first: another worker given
		// the run again must take it, not drop it as this one's.
		s.untrack(t)
		_ = q.Nak()
		select {
		case <-s.takeCtx.Done():
		case <-time.After(tenantWait):
		}
		return true
	}
	return false
}

// claimTaken claims the run q for this replica and acknowledges it. It is
// false when another replica has the run, it ended, or the claim failed.
func (s *Supervisor) claimTaken(q runs.QueuedRun) (runs.Run, bool) {
	r, err := s.store.ClaimRun(context.Background(), q.RunID, s.cfg.Replica)
	switch {
	case errors.Is(err, runs.ErrClaimed), errors.Is(err, runs.ErrNotFound):
		// Another replica has it, or it ended (cancelled while queued).
		_ = q.Ack()
		return runs.Run{}, false
	case err != nil:
		s.log.Warn("claim a queued run", zap.String("run_id", q.RunID), zap.Error(err))
		_ = q.Nak()
		return runs.Run{}, false
	}
	if err := q.Ack(); err != nil {
		// The claim holds: if the queue gives the run again, the
		// claim of whoever gets it fails.
		s.log.Warn("acknowledge a queued run", zap.String("run_id", q.RunID), zap.Error(err))
	}
	return r, true
}

// startTaken starts the claimed run r as t: it gives it back when the
// replica is stopping, finishes it when it was stopped meanwhile, and
// otherwise prepares and executes it.
func (s *Supervisor) startTaken(t *task, q runs.QueuedRun, r runs.Run) {
	bg := context.Background()
	log := s.log.With(zap.String("run_id", q.RunID))
	last, err := s.store.LastEvent(bg, r.ID)
	if err != nil {
		log.Warn("read the last event of a queued run", zap.Error(err))
	}
	if q.Spec != nil {
		r.Spec = *q.Spec // whole; the record's prompt is bounded
	}
	t.mu.Lock()
	t.run, t.seq, t.started = r, last.Seq, true
	stopped := t.stopErr
	t.mu.Unlock()
	if errors.Is(stopped, errShutdown) || errors.Is(stopped, errDiskFull) || s.isClosing() || s.degradedErr() != nil {
		s.giveBack(t)
		return
	}
	if stopped != nil {
		s.finish(bg, t, runs.Outcome{}, stopError(stopped, r.Agent), nil)
		return
	}
	runErr := s.prepareWork(t)
	if runErr == nil {
		runErr = s.prepare(t)
	}
	if runErr != nil {
		log.Warn("run not started", zap.String("class", string(runErr.Class)))
		s.finish(bg, t, runs.Outcome{Status: runs.Failed, Error: runErr}, nil, nil)
		return
	}
	s.execute(t)
}

func (s *Supervisor) canRun(agent string) bool {
	a, ok := s.agents[agent]
	return ok && a.info.Installed
}

// giveBack returns a run this replica claimed and did not start to the
// queue, for another replica (or this one, restarted) to take.
func (s *Supervisor) giveBack(t *task) {
	bg := context.Background()
	r := t.run
	r.Owner = ""
	if err := s.store.UpdateRun(bg, s.recordOf(t, r)); err != nil {
		s.log.Error("give back a queued run", zap.String("run_id", r.ID), zap.Error(err))
		return
	}
	if err := s.store.Requeue(bg, r.ID, t.run.Spec); err != nil {
		s.log.Error("give back a queued run", zap.String("run_id", r.ID), zap.Error(err))
		return
	}
	s.log.Info("queued run given back", zap.String("run_id", r.ID))
}

// Check admits spec as Submit would, for the caller's tenant, without
// making the run: for a run request kept to be submitted later, a
// schedule's or a trigger's, whose mistakes are best told at once.
func (s *Supervisor) Check(ctx context.Context, spec runs.Spec) error {
	sub, err := s.newSubmission(ctx, spec)
	if err != nil {
		return err
	}
	return s.checkSubmittedSpec(ctx, sub)
}
