package supervisor

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// keepTimeout bounds what a run's end spends keeping its work in the
// cluster: a store that does not answer must not hold the run open.
const keepTimeout = 5 * time.Minute

// keepWork is what a run leaves when it ends, before it is recorded
// finished: its git workspace's change (committed, pushed when asked, its
// patch kept), its directory and its session's files, stored in the
// cluster so that any replica serves and continues them. What cannot be
// kept is a warning; the run's own outcome stands.
func (s *Supervisor) keepWork(ctx context.Context, t *task, session string) {
	if t.inv.Dir == "" {
		return // never prepared
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keepTimeout)
	defer cancel()
	t.keepMu.Lock()
	defer t.keepMu.Unlock()
	t.kept = true
	if t.prepared != nil && t.prepared.Git != nil {
		s.concludeGit(ctx, t)
	}
	s.keepDir(ctx, t)
	s.keepResult(ctx, t)
	s.keepSession(ctx, t, session)
}

// keepResult stores t's whole diff and list of changes in the cluster
// when its record holds them only cut, so that every replica serves them
// whole.
func (s *Supervisor) keepResult(ctx context.Context, t *task) {
	if s.ws == nil || !t.run.DiffTruncated && !t.run.FilesTruncated || !s.artifacts.HasResult(t.run.ID) {
		return
	}
	store, files := s.artifacts.ResultPath(t.run.ID)
	info, err := s.ws.SavePaths(ctx, keyOf(t, runs.SnapshotResult), store, files, s.cfg.MaxWorkspaceBytes, nil)
	if err != nil {
		s.warnKeep(t, "result_not_kept", "the run's whole diff could not be kept in the cluster, so other replicas serve it cut: "+err.Error())
		return
	}
	s.obs.SnapshotKept(runs.SnapshotResult, info.Size)
}

// keyOf names a snapshot of kind of t's run from the record's fixed
// fields alone: a turn's keep runs beside the session, which writes the
// rest of the record under t.mu.
func keyOf(t *task, kind runs.SnapshotKind) runs.SnapshotKey {
	return runs.SnapshotKey{Tenant: t.run.Tenant, Kind: kind, ID: t.run.ID}
}

func resultKey(r runs.Run) runs.SnapshotKey {
	return runs.SnapshotKey{Tenant: r.Tenant, Kind: runs.SnapshotResult, ID: r.ID}
}

// concludeGit commits, pushes and keeps the patch of t's git workspace.
func (s *Supervisor) concludeGit(ctx context.Context, t *task) {
	dir := s.workDirOf(t)
	c := s.cfg.Sources.Conclude(ctx, t.run.Tenant, *t.prepared.Git, t.run.Spec.Push, dir, t.run.ID)
	res := c.Result
	if res.Error != nil {
		res.Error = s.redactor(t).RunError(res.Error)
	}
	t.mu.Lock()
	t.run.Git = &res
	t.mu.Unlock()
	if c.Patch == nil || s.cfg.Snapshots == nil {
		return
	}
	key := runs.SnapshotKey{Tenant: t.run.Tenant, Kind: runs.SnapshotPatch, ID: t.run.ID}
	if _, err := s.cfg.Snapshots.PutSnapshot(ctx, key, bytes.NewReader(c.Patch), int64(len(c.Patch)), nil); err != nil {
		s.warnKeep(t, "patch_not_kept", "the run's patch could not be kept: "+err.Error())
		return
	}
	s.obs.SnapshotKept(runs.SnapshotPatch, int64(len(c.Patch)))
}

// keepDir stores t's directory in the cluster.
func (s *Supervisor) keepDir(ctx context.Context, t *task) {
	if s.ws == nil || !madeForRun(t.run.Spec.WorkDir) {
		return
	}
	dir := s.workDirOf(t)
	// Here the directory is as this run left it, kept in the cluster or
	// not: a resume on this replica must not replace it.
	s.setLocalRun(dir, t.run.ID)
	info, err := s.ws.SaveDir(ctx, keyOf(t, runs.SnapshotWorkspace), dir, s.cfg.MaxWorkspaceBytes, nil)
	if err != nil {
		s.warnKeep(t, "workspace_not_kept", "the run's directory could not be kept in the cluster, so only this replica serves it: "+err.Error())
		return
	}
	s.obs.SnapshotKept(runs.SnapshotWorkspace, info.Size)
}

// madeForRun reports whether workDir, relative to a tenant's root, is in
// a directory the gateway made for a run (named by its id): a directory a
// client named, which many runs may share, is not the run's to keep.
func madeForRun(workDir string) bool {
	top, _, _ := strings.Cut(workDir, "/")
	id, err := uuid.Parse(top)
	return err == nil && id.String() == top
}

// workDirOf is the absolute directory t's run works in: the one made or
// restored for it, which its cwd lies in.
func (s *Supervisor) workDirOf(t *task) string {
	if t.run.Spec.WorkDir == "" {
		return t.inv.Dir
	}
	root, err := s.tenantRoot(t.run.Tenant)
	if err != nil {
		return t.inv.Dir
	}
	return filepath.Join(realPath(root), t.run.Spec.WorkDir)
}

// warnKeep tells the run's log what it could not keep.
func (s *Supervisor) warnKeep(t *task, code, msg string) {
	s.log.Warn(msg, zap.String("run_id", t.run.ID), zap.String("code", code))
	s.emit(t, runs.NewEvent(runs.EventWarning, runs.WarningData{Code: code, Message: msg}))
}

// relDir is dir relative to the tenant's root, with slashes.
func relDir(root, dir string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(dir, realPath(root)), "/")
	if rel == "" {
		return "."
	}
	return rel
}

// keepTurn keeps, at the end of a turn of an interactive run, its
// directory and its session's files in the cluster, and records the
// session as this run's: a replica that takes the run over if this one
// dies continues from here.
func (s *Supervisor) keepTurn(t *task) {
	if s.ws == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	t.keepMu.Lock()
	defer t.keepMu.Unlock()
	t.mu.Lock()
	session, done := t.run.SessionID, t.done
	t.mu.Unlock()
	if done || t.kept {
		return // the run's end keeps it, or has kept it
	}
	s.keepDir(ctx, t)
	if session == "" {
		return
	}
	s.keepSession(ctx, t, session)
	prev, _, err := s.store.Session(ctx, t.run.Agent, session)
	if err != nil {
		s.log.Warn("read session", zap.String("run_id", t.run.ID), zap.Error(err))
	}
	prev.Tenant, prev.RunID, prev.WorkDir, prev.Cwd = t.run.Tenant, t.run.ID, t.run.Spec.WorkDir, t.run.Spec.Cwd
	if err := s.store.SetSession(ctx, t.run.Agent, session, prev); err != nil {
		s.log.Warn("record session", zap.String("run_id", t.run.ID), zap.Error(err))
	}
}
