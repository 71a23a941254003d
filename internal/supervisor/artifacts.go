package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
	return s.artifacts.Diff(r)
}

// RunChanges returns the files a finished run r changed, and whether the
// list was bounded (see artifacts.Keeper.Changes).
func (s *Supervisor) RunChanges(ctx context.Context, r runs.Run) ([]runs.ChangedFile, bool, error) {
	return s.artifacts.Changes(r)
}

// OpenRunFile opens one regular file of r's directory, as it is now (see
// artifacts.Keeper.OpenFile).
func (s *Supervisor) OpenRunFile(ctx context.Context, r runs.Run, path string) (*os.File, fs.FileInfo, error) {
	return s.artifacts.OpenFile(r, path)
}

// ArchiveRun writes r's directory, as it is now, to w as a gzipped tar
// (see artifacts.Keeper.WriteArchive).
func (s *Supervisor) ArchiveRun(ctx context.Context, r runs.Run, w io.Writer) error {
	return s.artifacts.WriteArchive(r, w)
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
