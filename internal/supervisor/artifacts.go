package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/artifacts"
	"github.com/agentgate/agentgate/internal/runs"
)

// newKeeper makes the keeper of the runs' artifacts: their snapshots
// under Config.ArtifactsDir, their directories under their tenant's root.
func (s *Supervisor) newKeeper() *artifacts.Keeper {
	return artifacts.NewKeeper(artifacts.KeeperConfig{
		Dir: s.cfg.ArtifactsDir, Replica: s.cfg.Replica, TenantRoot: s.tenantRoot,
	}, s.log)
}

// watchChanges snapshots t's directory just before its agent starts; a
// snapshot that fails is a warning event, and the run goes on.
func (s *Supervisor) watchChanges(t *task, log *zap.Logger) *artifacts.Watch {
	return s.artifacts.Watch(t.run.ID, t.inv.Dir, log, func(msg string) {
		s.emit(t, runs.NewEvent(runs.EventWarning, runs.WarningData{Code: "snapshot_failed", Message: msg}))
	})
}

// recordChanges puts what t's run changed in its record and in out: the
// gateway's diff, found without the run's secrets, replaces the
// adapter's.
func (s *Supervisor) recordChanges(t *task, w *artifacts.Watch, out *runs.Outcome) {
	var redact func(string) string
	if red := s.redactor(t); red != nil {
		redact = red.String
	}
	rec := w.Record(out.Diff, redact)
	out.Diff = rec.Diff
	t.mu.Lock()
	rec.ApplyTo(&t.run)
	t.mu.Unlock()
}

// sweepArtifacts removes the snapshots of runs older than
// Config.WorkspaceRetention, as their directories are, but of none still
// executing here.
func (s *Supervisor) sweepArtifacts() {
	s.artifacts.Sweep(s.cfg.Now().Add(-s.cfg.WorkspaceRetention), func(id string) bool { return s.task(id) != nil })
}

// RunDiff returns the whole unified diff of a finished run r, and whether
// it was bounded (see artifacts.Keeper.Diff).
func (s *Supervisor) RunDiff(ctx context.Context, r runs.Run) (io.ReadCloser, bool, error) {
	s.restoreResult(ctx, r)
	return s.artifacts.Diff(r)
}

// RunChanges returns the files a finished run r changed, and whether the
// list was bounded (see artifacts.Keeper.Changes).
func (s *Supervisor) RunChanges(ctx context.Context, r runs.Run) ([]runs.ChangedFile, bool, error) {
	s.restoreResult(ctx, r)
	return s.artifacts.Changes(r)
}

// OpenRunFile opens one regular file of r's directory, as it is now (see
// artifacts.Keeper.OpenFile); of a finished run, as it ended, whichever
// replica is asked (see keptCopy).
func (s *Supervisor) OpenRunFile(ctx context.Context, r runs.Run, path string) (*os.File, fs.FileInfo, error) {
	if dir, ok := s.keptCopy(ctx, r); ok {
		return s.artifacts.OpenFileIn(dir, r, path)
	}
	f, fi, err := s.artifacts.OpenFile(r, path)
	if dir, ok := s.restoredDir(ctx, r, err); ok {
		return s.artifacts.OpenFileIn(dir, r, path)
	}
	return f, fi, err
}

// ArchiveRun writes r's directory, as OpenRunFile serves its files, to w
// as a gzipped tar (see artifacts.Keeper.WriteArchive).
func (s *Supervisor) ArchiveRun(ctx context.Context, r runs.Run, w io.Writer) error {
	if dir, ok := s.keptCopy(ctx, r); ok {
		return s.artifacts.WriteArchiveIn(dir, r, w)
	}
	err := s.artifacts.WriteArchive(r, w)
	if dir, ok := s.restoredDir(ctx, r, err); ok {
		return s.artifacts.WriteArchiveIn(dir, r, w)
	}
	return err
}

// keptCopy is a copy of finished run r's directory as r left it, restored
// from the cluster, when the directory here may hold another run's work
// since: a session's turns share their first run's directory, and each
// replica's copy of it is as the last turn that replica ran left it. Only
// a directory this replica knows r's end left serves r itself.
func (s *Supervisor) keptCopy(ctx context.Context, r runs.Run) (string, bool) {
	if s.ws == nil || !r.Status.Terminal() || r.StartedAt == nil {
		return "", false
	}
	root, err := s.tenantRoot(r.Tenant)
	if err != nil {
		return "", false
	}
	dir := filepath.Join(realPath(root), cmp.Or(r.Spec.WorkDir, r.Spec.Cwd, r.ID))
	if _, err := os.Stat(dir); err != nil || s.localRunOf(dir) == r.ID {
		return "", false
	}
	return s.restoreCopy(ctx, r)
}

// restoredDir is a copy of finished run r's directory on this replica,
// restored from the cluster, when err says the directory itself is not
// here (another replica ran it, or it is gone).
func (s *Supervisor) restoredDir(ctx context.Context, r runs.Run, err error) (string, bool) {
	var ae *artifacts.Error
	if s.ws == nil || !r.Status.Terminal() || !errors.As(err, &ae) ||
		ae.Code != artifacts.CodeWorkspaceElsewhere && ae.Code != artifacts.CodeWorkspaceExpired {
		return "", false
	}
	return s.restoreCopy(ctx, r)
}

// restoreCopy restores finished run r's directory from the cluster into
// a copy on this replica, once. Copies are kept under the artifacts
// directory, and swept with the runs' snapshots. It is false when the
// cluster keeps no directory of r.
func (s *Supervisor) restoreCopy(ctx context.Context, r runs.Run) (string, bool) {
	dir := s.artifacts.RestoredPath(r.ID)
	if dir == "" {
		return "", false
	}
	s.restoring.Lock()
	defer s.restoring.Unlock()
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, true
	}
	staging := dir + ".part"
	os.RemoveAll(staging)
	if _, err := s.ws.Restore(ctx, workspaceKey(r), staging); err != nil {
		os.RemoveAll(staging)
		if !errors.Is(err, runs.ErrNotFound) {
			s.log.Warn("restore a run's directory", zap.String("run_id", r.ID), zap.Error(err))
		}
		return "", false
	}
	if err := os.Rename(staging, dir); err != nil {
		os.RemoveAll(staging)
		return "", false
	}
	s.obs.SnapshotRestored(runs.SnapshotWorkspace)
	return dir, true
}

// RunPatch returns a finished git run's change as format-patch mail, kept
// in the cluster when the run ended, so that any replica serves it.
func (s *Supervisor) RunPatch(ctx context.Context, r runs.Run) (io.ReadCloser, error) {
	if r.Git == nil {
		return nil, &artifacts.Error{Code: artifacts.CodeNoGitWorkspace, Message: "the run has no git workspace, so no patch"}
	}
	if !r.Status.Terminal() {
		return nil, runs.Conflict(runs.ConflictRunNotFinished, fmt.Sprintf("the run is %s: its patch is made when it ends", r.Status))
	}
	if s.cfg.Snapshots == nil {
		return nil, &artifacts.Error{Code: artifacts.CodeWorkspaceExpired, Message: "this gateway keeps no patches"}
	}
	if r.Git.Commit == "" {
		return io.NopCloser(strings.NewReader("")), nil // the run changed nothing
	}
	body, _, err := s.cfg.Snapshots.OpenSnapshot(ctx, runs.SnapshotKey{Tenant: r.Tenant, Kind: runs.SnapshotPatch, ID: r.ID})
	if errors.Is(err, runs.ErrNotFound) {
		return nil, &artifacts.Error{Code: artifacts.CodeWorkspaceExpired, Message: "the run's patch is no longer kept"}
	}
	return body, err
}

// restoreResult gives this replica finished run r's whole diff and list
// of changes from the cluster, when its record holds them only cut and
// another replica ran it: the keeper then serves them whole.
func (s *Supervisor) restoreResult(ctx context.Context, r runs.Run) {
	if s.ws == nil || !r.Status.Terminal() || !r.DiffTruncated && !r.FilesTruncated || s.artifacts.HasResult(r.ID) {
		return
	}
	store, _ := s.artifacts.ResultPath(r.ID)
	if store == "" {
		return
	}
	s.restoring.Lock()
	defer s.restoring.Unlock()
	staging := store + ".part"
	os.RemoveAll(staging)
	if _, err := s.ws.Restore(ctx, resultKey(r), staging); err != nil {
		os.RemoveAll(staging)
		return // the record's cut copy is served
	}
	if err := os.RemoveAll(store); err == nil {
		err = os.Rename(staging, store)
	}
	os.RemoveAll(staging)
	s.obs.SnapshotRestored(runs.SnapshotResult)
}
