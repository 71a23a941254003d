package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/gitrepo"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/workspace"
)

// Default bounds of what a run keeps in the cluster.
const (
	DefaultMaxWorkspaceBytes = 1 << 30
	DefaultMaxSessionBytes   = 256 << 20
	// sessionLockMargin is how long past its run's timeout a session's
	// lock lasts when nothing frees it: the replica that held it died and
	// no recovery finished its run.
	sessionLockMargin = 10 * time.Minute
)

// checkWorkspace refuses, before a run is queued, a workspace or a push
// this gateway cannot honour. A run of another run must be of the same
// tenant, finished, and have its directory kept.
func (s *Supervisor) checkWorkspace(ctx context.Context, spec runs.Spec) error {
	if spec.Push != nil {
		if err := gitrepo.CheckBranch(spec.Push.Branch); err != nil {
			return err
		}
	}
	src := spec.Workspace
	if src == nil {
		return nil
	}
	if s.cfg.Sources == nil {
		return runs.Invalid(runs.FieldWorkspace, "this gateway is not set up to prepare workspaces")
	}
	if src.FromRun == "" {
		return s.cfg.Sources.Check(ctx, spec.Tenant, *src)
	}
	return s.checkFromRun(ctx, spec.Tenant, src.FromRun)
}

func (s *Supervisor) checkFromRun(ctx context.Context, tenant, id string) error {
	const field = runs.FieldWorkspace + ".from_run"
	prev, err := s.store.GetRun(ctx, id)
	if errors.Is(err, runs.ErrNotFound) || err == nil && prev.Tenant != tenant {
		return runs.Invalid(field, "names no run of this tenant")
	}
	if err != nil {
		return fmt.Errorf("read run %s: %w", id, err)
	}
	if !prev.Status.Terminal() {
		return runs.Conflict(runs.ConflictRunNotFinished, fmt.Sprintf("run %s is %s: a run starts from another's directory once it has ended", id, prev.Status))
	}
	if s.cfg.Snapshots == nil {
		return runs.Invalid(field, "this gateway keeps no runs' directories")
	}
	body, _, err := s.cfg.Snapshots.OpenSnapshot(ctx, workspaceKey(prev))
	if errors.Is(err, runs.ErrNotFound) {
		return runs.Invalid(field, "names a run whose directory is no longer kept")
	}
	if err != nil {
		return fmt.Errorf("read the workspace of run %s: %w", id, err)
	}
	return body.Close()
}

// workspaceKey names r's directory in the cluster. It takes the run, not
// a task: a task's record changes under its lock while it runs, and only
// its fixed fields may be read without it (see keyOf).
func workspaceKey(r runs.Run) runs.SnapshotKey {
	return runs.SnapshotKey{Tenant: r.Tenant, Kind: runs.SnapshotWorkspace, ID: r.ID}
}

// prepareWork makes t's CLI home and, for a run with a workspace source
// or a resumed session, its directory: before its command is built, and
// stopped by a cancel, since a clone can take a while.
func (s *Supervisor) prepareWork(t *task) *runs.RunError {
	ctx, cancel := s.preparingContext(t)
	defer cancel(nil)
	start := time.Now()
	if runErr := s.makeHome(ctx, t); runErr != nil {
		return runErr
	}
	spec := t.run.Spec
	var runErr *runs.RunError
	switch {
	case spec.Workspace != nil && !t.woken:
		runErr = s.makeWorkspace(ctx, t)
	case spec.ResumeSessionID != "":
		runErr = s.restoreSessionDir(ctx, t)
	}
	if runErr == nil && ctx.Err() != nil {
		runErr = stopError(context.Cause(ctx), t.run.Agent)
	}
	if t.prepared != nil {
		t.prepared.Info.PrepareMS = time.Since(start).Milliseconds()
	}
	return runErr
}

// preparingContext ends when t is stopped while its work is prepared,
// or when its timeout passes.
func (s *Supervisor) preparingContext(t *task) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(s.runCtx)
	timeout, err := s.runTimeout(t.run.Spec)
	if err != nil {
		timeout = s.cfg.MaxTimeout
	}
	ctx, stop := context.WithTimeoutCause(ctx, timeout, errTimeout)
	t.mu.Lock()
	stopped := t.stopErr
	t.cancel = cancel
	t.mu.Unlock()
	if stopped != nil {
		cancel(stopped)
	}
	return ctx, func(cause error) {
		stop()
		cancel(cause)
	}
}

// makeWorkspace fills a fresh directory of t's run from its source.
func (s *Supervisor) makeWorkspace(ctx context.Context, t *task) *runs.RunError {
	root, err := s.tenantRoot(t.run.Tenant)
	if err != nil {
		return runs.NewRunError(runs.Internal, "the tenant's workspace is not available: "+err.Error(), "")
	}
	dir := filepath.Join(root, t.run.ID)
	// A run taken again after its replica stopped starts afresh.
	if err := os.RemoveAll(dir); err != nil {
		return runs.NewRunError(runs.Internal, "the run's directory could not be made: "+err.Error(), "")
	}
	if s.cfg.Sources == nil {
		return runs.NewRunError(runs.WorkspaceFailed, "this gateway replica is not set up to prepare workspaces", "give every replica the same settings")
	}
	p, runErr := s.cfg.Sources.Prepare(ctx, t.run.Tenant, *t.run.Spec.Workspace, dir)
	if runErr != nil {
		os.RemoveAll(dir)
		return runErr
	}
	t.prepared = &p
	t.run.Spec.WorkDir = t.run.ID
	if p.Git != nil {
		// In the record while the run runs: a replica that takes the
		// run over pushes from this base.
		t.run.Git = &runs.GitResult{URL: p.Git.URL, Base: p.Git.Base}
	}
	return nil
}

// restoreSessionDir gives a run that resumes a session the directory the
// session's last run left, from the cluster, unless this replica holds
// that run's directory already.
func (s *Supervisor) restoreSessionDir(ctx context.Context, t *task) *runs.RunError {
	rec, ok, err := s.store.Session(ctx, t.run.Agent, t.run.Spec.ResumeSessionID)
	if err != nil || !ok || rec.WorkDir == "" || rec.RunID == "" || s.ws == nil {
		return nil // a session from before sessions were kept: as it was
	}
	if !madeForRun(rec.WorkDir) {
		// A directory the client named (or the tenant's root) is the
		// client's, never kept in the cluster: the run goes on in it
		// as it is, and it must not be replaced.
		return nil
	}
	root, err := s.tenantRoot(t.run.Tenant)
	if err != nil {
		return runs.NewRunError(runs.Internal, "the tenant's workspace is not available: "+err.Error(), "")
	}
	t.run.Spec.WorkDir = rec.WorkDir
	dir := filepath.Join(realPath(root), rec.WorkDir)
	// Here the directory is as the run left it, unless another replica
	// ran the run since: a run woken from another replica's hands, which
	// it may have left on this one earlier, is restored.
	if s.localRunOf(dir) == rec.RunID && (!t.woken || t.wokeFrom == s.cfg.Replica) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return runs.NewRunError(runs.Internal, "the session's directory could not be replaced: "+err.Error(), "")
	}
	_, err = s.ws.Restore(ctx, runs.SnapshotKey{Tenant: t.run.Tenant, Kind: runs.SnapshotWorkspace, ID: rec.RunID}, dir)
	if errors.Is(err, runs.ErrNotFound) {
		s.log.Warn("the directory of a resumed session is no longer kept; the run starts in an empty one", zap.String("run_id", t.run.ID))
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return runs.NewRunError(runs.WorkspaceFailed, "the session's directory could not be restored: "+err.Error(), "submit the run again")
	}
	if t.prepared == nil {
		t.prepared = &workspace.Prepared{}
	}
	t.prepared.Info = runs.WorkspaceInfo{Source: runs.SourceFromRun, Restored: true}
	return nil
}

// restoresDirs reports whether spec's run gets its session's directory
// from the cluster on whichever replica runs it.
func (s *Supervisor) restoresDirs(spec runs.Spec) bool {
	return spec.ResumeSessionID != "" && s.ws != nil
}

// localRunOf is the run whose end left dir as it is on this replica.
func (s *Supervisor) localRunOf(dir string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.localDirs[dir]
}

// forgetLocalRun forgets the directories the run runID left here: another
// replica has run it since.
func (s *Supervisor) forgetLocalRun(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for dir, id := range s.localDirs {
		if id == runID {
			delete(s.localDirs, dir)
		}
	}
}

func (s *Supervisor) setLocalRun(dir, runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.localDirs == nil {
		s.localDirs = map[string]string{}
	}
	s.localDirs[dir] = runID
}
