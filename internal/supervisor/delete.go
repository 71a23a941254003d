package supervisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// Delete removes a finished run: its record, its events, the directory
// the gateway made for it (a directory the client named is the client's,
// and stays) and what the cluster keeps of it (its directory and patch). A run that has not ended is a conflict: cancel it first.
// Errors wrap ErrNotFound, ErrConflict or the store's.
func (s *Supervisor) Delete(ctx context.Context, id string) error {
	r, err := s.store.GetRun(ctx, id)
	if err != nil {
		return err
	}
	if !r.Status.Terminal() {
		return runs.Conflict(runs.ConflictRunNotFinished, fmt.Sprintf("the run is %s: cancel it, then delete it once it has ended", r.Status))
	}
	by := runs.ActorFrom(ctx)
	if err := s.store.DeleteRun(ctx, id); err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	s.artifacts.Remove(id)
	s.deleteSnapshots(ctx, r)
	if root, err := s.tenantRoot(r.Tenant); err == nil {
		// A fresh directory, or one made from a workspace source, is
		// named after the run, directly under the tenant's root; its
		// cwd or its work dir was recorded as that name.
		if r.Spec.Cwd == id || r.Spec.WorkDir == id {
			if err := os.RemoveAll(filepath.Join(root, id)); err != nil {
				s.log.Warn("remove a deleted run's directory", zap.String("run_id", id), zap.Error(err))
			}
		}
	}
	s.audit("run.delete", by, id)
	return nil
}

// deleteSnapshots removes the deleted run r's directory and patch from the
// cluster; one that cannot be removed expires with retention.
func (s *Supervisor) deleteSnapshots(ctx context.Context, r runs.Run) {
	if s.cfg.Snapshots == nil {
		return
	}
	for _, kind := range []runs.SnapshotKind{runs.SnapshotWorkspace, runs.SnapshotPatch, runs.SnapshotResult} {
		key := runs.SnapshotKey{Tenant: r.Tenant, Kind: kind, ID: r.ID}
		if err := s.cfg.Snapshots.DeleteSnapshot(ctx, key); err != nil {
			s.log.Warn("remove a deleted run's snapshot", zap.String("run_id", r.ID), zap.String("kind", string(kind)), zap.Error(err))
		}
	}
}
