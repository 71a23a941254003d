package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/google/uuid"
	"go.uber.org/zap"
)

// submission is a run being admitted by Submit: what each of its steps
// has found out for the next.
type submission struct {
	actor       runs.Actor
	spec        runs.Spec
	requestHash string // of the spec as the client sent it
	agent       *Agent
	timeout     time.Duration
	root        string // the tenant's workspace root
	runID       string
	key         string // the idempotency key, the tenant's own
	// sharedID: runID is the one an earlier request with the key
	// claimed, whose run may hold the session this one locked.
	sharedID bool
}

// newSubmission takes spec for the caller's tenant and resolves its agent,
// which must be installed.
func (s *Supervisor) newSubmission(ctx context.Context, spec runs.Spec) (*submission, error) {
	actor := runs.ActorFrom(ctx)
	spec.Tenant = actor.Tenant
	sub := &submission{actor: actor, requestHash: hashSpec(spec)}
	if name, ok := s.aliases[spec.Agent]; ok {
		spec.Agent = name
	}
	a, ok := s.agents[spec.Agent]
	if !ok {
		return nil, fmt.Errorf("%w %q", runs.ErrUnknownAgent, spec.Agent)
	}
	if !a.info.Installed {
		return nil, fmt.Errorf("%w: %s; %s", runs.ErrAgentUnavailable, spec.Agent, a.info.Advisory)
	}
	sub.spec, sub.agent = spec, a
	return sub, nil
}

// checkSubmittedSpec validates the spec, alone and for the agent, fills
// in its defaults and finds the run's timeout and the tenant's root.
func (s *Supervisor) checkSubmittedSpec(ctx context.Context, sub *submission) error {
	spec, d := &sub.spec, sub.agent.Adapter.Describe()
	if err := spec.Validate(); err != nil {
		return err
	}
	if err := runs.CheckFields(d, *spec); err != nil {
		return err
	}
	if err := s.resolveNetwork(spec, sub.agent); err != nil {
		return err
	}
	if err := s.checkWebhook(*spec); err != nil {
		return err
	}
	if err := s.checkHibernation(*spec, sub.agent); err != nil {
		return err
	}
	if err := s.checkGiven(d, *spec); err != nil {
		return err
	}
	if err := s.checkWorkspace(ctx, *spec); err != nil {
		return err
	}
	if spec.Permission == "" {
		spec.Permission = runs.WorkspaceWrite
	}
	var err error
	if sub.timeout, err = s.runTimeout(*spec); err != nil {
		return err
	}
	if sub.root, err = s.tenantRoot(spec.Tenant); err != nil {
		return err
	}
	if spec.ResumeSessionID != "" {
		cwd, err := s.resumable(ctx, *spec)
		if err != nil {
			return err
		}
		if spec.Cwd == "" && spec.Workspace == nil {
			// A resumed conversation continues where it began by
			// default: some CLIs find a session by its directory as
			// well as its id, and its files are there. A run with a
			// workspace of its own runs in it: its cwd is relative
			// to that workspace, not to the tenant's root.
			spec.Cwd = cwd
		}
	}
	return nil
}

// checkSubmissionRunnable gives the run its id and checks, without
// storing anything, that it could run: the agent's command builds, this
// replica takes runs, and the attachments are usable.
func (s *Supervisor) checkSubmissionRunnable(ctx context.Context, sub *submission) error {
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("new run id: %w", err)
	}
	sub.runID = id.String()
	spec, a := sub.spec, sub.agent
	// Check the agent's own constraints, and a named directory, on this
	// replica; the replica that takes the run resolves them again.
	inv := runs.Invocation{RunID: sub.runID, Spec: runs.AdapterSpec(a.Adapter.Describe(), spec), Bin: a.info.Path, Home: a.Home, Timeout: sub.timeout, CLIVersion: a.info.Version, Dir: sub.root, Files: runs.HostFiles{}}
	// A cwd in a workspace is there once the workspace is made, and a
	// resumed session's directory on whichever replica runs it.
	if spec.Cwd != "" && spec.Workspace == nil && !s.restoresDirs(spec) {
		if inv.Dir, _, err = runs.ResolveCwd(sub.root, spec.Cwd, ""); err != nil {
			return err
		}
	}
	if _, err := a.Adapter.Command(inv); err != nil {
		return err
	}
	if s.isClosing() {
		return runs.ErrShuttingDown
	}
	if err := s.degradedErr(); err != nil {
		return err
	}
	// The attachments are checked before the idempotency key is taken:
	// a request refused for them may be sent again, changed.
	_, err = s.attach(ctx, a.Adapter.Describe(), spec.Tenant, runs.FieldAttachments, spec.Attachments, false)
	return err
}

// claimSubmissionKey takes the spec's idempotency key for the run. When
// an earlier request with the key made its run, replayed is true and the
// run is that one, as it is now.
func (s *Supervisor) claimSubmissionKey(ctx context.Context, sub *submission) (r runs.Run, replayed bool, err error) {
	key := sub.spec.IdempotencyKey
	if key != "" && sub.spec.Tenant != "" {
		// Keys are the tenant's own: another tenant's key of the same
		// name is another key.
		key = "tenant:" + sub.spec.Tenant + ":" + key
	}
	sub.key = key
	if key == "" {
		return runs.Run{}, false, nil
	}
	rec, fresh, err := s.store.ClaimIdempotencyKey(ctx, key, runs.IdempotencyRecord{
		RunID: sub.runID, RequestHash: sub.requestHash, CreatedAt: s.cfg.Now().UTC(),
	})
	if err != nil {
		return runs.Run{}, false, fmt.Errorf("idempotency key: %w", err)
	}
	if fresh {
		return runs.Run{}, false, nil
	}
	if rec.RequestHash != sub.requestHash {
		return runs.Run{}, false, runs.ErrIdempotencyMismatch
	}
	sub.runID, sub.sharedID = rec.RunID, true
	if r, err := s.replay(ctx, sub.runID); !errors.Is(err, runs.ErrNotFound) {
		return r, true, err
	}
	// The first request with the key is still recording its
	// run, or left before it did: make the run under the id
	// the key names; of the two, one records it.
	return runs.Run{}, false, nil
}

// readySubmissionToRecord stores what the run's record refers to and
// counts the run in its tenant's quota, while the client still waits.
func (s *Supervisor) readySubmissionToRecord(ctx context.Context, sub *submission) error {
	// A client that has gone before the run is recorded gets nothing
	// made: it saw no answer and may not retry.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("submission abandoned: %w", err)
	}
	spec := &sub.spec
	var err error
	// Inline images become files of the tenant, and files named by id
	// must be its own: the stored spec and the queue hold only ids. A
	// replay by idempotency key has returned already, storing nothing.
	if spec.Attachments, err = s.attach(ctx, sub.agent.Adapter.Describe(), spec.Tenant, runs.FieldAttachments, spec.Attachments, true); err != nil {
		return err
	}
	// The MCP servers' env and header values are stored and queued
	// sealed, under the run's final id.
	if spec.MCPServers, err = sealMCPServers(s.cfg.SealKey, sub.runID, spec.MCPServers); err != nil {
		return fmt.Errorf("seal the MCP servers' values: %w", err)
	}
	if err := s.lockSession(ctx, *spec, sub.runID, sub.timeout); err != nil {
		return err
	}
	if err := s.cfg.Quotas.Admit(ctx, spec.Tenant, sub.runID, spec.Interactive); err != nil {
		s.unlockSubmitted(sub)
		return err
	}
	return nil
}

// unlockSubmitted frees the session a submission that made no run locked.
// A run id an earlier request with the key claimed is that request's: its
// run, recorded or being recorded, holds the lock under the same id.
func (s *Supervisor) unlockSubmitted(sub *submission) {
	if sub.sharedID {
		return
	}
	t := &task{run: runs.Run{ID: sub.runID, Agent: sub.spec.Agent, Tenant: sub.spec.Tenant, Spec: sub.spec}}
	s.unlockSession(context.Background(), t)
}

// recordSubmission stores the queued run. When another request with the
// same idempotency key recorded it first, replayed is true and the run is
// that one.
func (s *Supervisor) recordSubmission(storeCtx context.Context, sub *submission) (r runs.Run, replayed bool, err error) {
	spec, a := sub.spec, sub.agent
	r = runs.Run{
		ID: sub.runID, Agent: spec.Agent, Model: spec.Model, Status: runs.Queued,
		CreatedAt: s.cfg.Now().UTC(), AgentVersion: a.info.Version, Metadata: spec.Metadata,
		Spec: spec, Interactive: spec.Interactive, Approvals: spec.Approvals, Network: spec.Network,
		Tenant: spec.Tenant, CreatedBy: actorPtr(sub.actor),
		UsageUnknown: a.info.Reports.Usage == runs.UsageUnknown,
	}
	if err := s.store.CreateRun(storeCtx, s.cfg.Limits.record(r)); err != nil {
		s.cfg.Quotas.CountOut(storeCtx, spec.Tenant, sub.runID, nil)
		if sub.key != "" {
			// The other request with this key recorded it first.
			if got, err2 := s.replay(storeCtx, sub.runID); err2 == nil {
				return got, true, nil
			}
		}
		return runs.Run{}, false, fmt.Errorf("create run: %w", err)
	}
	return r, false, nil
}

// queueSubmission logs the recorded run r as queued and puts it in the
// shared queue; a run that cannot be queued is removed again.
func (s *Supervisor) queueSubmission(storeCtx context.Context, sub *submission, r runs.Run) (runs.Run, error) {
	runID, spec := sub.runID, sub.spec
	// run.queued is stored before the run is in the queue, so that the
	// replica that takes it continues the log after it.
	position := 1
	if n, err := s.store.QueueLength(storeCtx); err == nil {
		position = n + 1
	}
	t := &task{run: r}
	s.emit(t, runs.NewEvent(runs.EventRunQueued, runs.RunQueuedData{Agent: r.Agent, Metadata: r.Metadata, Position: position}))
	if err := s.store.Enqueue(storeCtx, runID, spec); err != nil {
		// Nothing takes the run: take back what was recorded of it, so
		// that a retry finds nothing (and, with its key, makes it).
		if derr := s.store.DeleteRun(storeCtx, runID); derr != nil {
			s.log.Error("remove a run that could not be queued", zap.String("run_id", runID), zap.Error(derr))
		}
		s.cfg.Quotas.CountOut(storeCtx, spec.Tenant, runID, nil)
		if errors.Is(err, runs.ErrCapacity) {
			return runs.Run{}, runs.ErrCapacity
		}
		return runs.Run{}, fmt.Errorf("queue run: %w", err)
	}
	s.obs.RunQueued(r.Agent)
	s.mu.Lock()
	s.obs.QueueDepth(position, s.active)
	s.mu.Unlock()
	s.log.Info("run queued", zap.String("run_id", r.ID), zap.String("agent", r.Agent), zap.Int("position", position))
	s.audit("run.create", sub.actor, r.ID, zap.String("agent", r.Agent), zap.String("permission", string(spec.Permission)))
	t.run.QueuePosition = position
	return t.run, nil
}
