package supervisor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/google/uuid"
	"go.uber.org/zap"
)

// sweepWorkspaces removes the run directories the supervisor created
// (named by run id, directly under the workspace root or under a tenant's
// workspace, <root>/tenants/<tenant>) once their run is older than
// Config.WorkspaceRetention, as the store forgets the runs themselves.
// Directories a client named itself are never touched.
func (s *Supervisor) sweepWorkspaces() {
	roots := []string{s.cfg.WorkspaceRoot}
	tenantDirs, err := os.ReadDir(filepath.Join(s.cfg.WorkspaceRoot, "tenants"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("sweep tenants' workspaces", zap.Error(err))
	}
	for _, e := range tenantDirs {
		if e.IsDir() && auth.ValidName(e.Name()) {
			roots = append(roots, filepath.Join(s.cfg.WorkspaceRoot, "tenants", e.Name()))
		}
	}
	for _, root := range roots {
		s.sweepRunDirs(root)
	}
}

// sweepRunDirs removes the run directories under root older than the
// retention, but those of runs this replica still runs.
func (s *Supervisor) sweepRunDirs(root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		s.log.Warn("sweep workspaces", zap.String("root", root), zap.Error(err))
		return
	}
	cutoff := s.cfg.Now().Add(-s.cfg.WorkspaceRetention)
	for _, e := range entries {
		id, err := uuid.Parse(e.Name())
		if err != nil || id.Version() != 7 || id.String() != e.Name() || !e.IsDir() {
			continue
		}
		sec, nsec := id.Time().UnixTime()
		if time.Unix(sec, nsec).After(cutoff) {
			continue
		}
		s.mu.Lock()
		_, active := s.tasks[e.Name()]
		s.mu.Unlock()
		if active {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			s.log.Warn("remove run directory", zap.String("run_id", e.Name()), zap.Error(err))
			continue
		}
		s.log.Debug("run directory removed", zap.String("run_id", e.Name()))
	}
}

// clearHomes removes the runs' homes a stopped replica left, before any
// run starts here: what a run left in its home goes with it.
func (s *Supervisor) clearHomes() {
	if s.cfg.HomesDir == "" {
		return
	}
	entries, err := os.ReadDir(s.cfg.HomesDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("clear runs' homes", zap.Error(err))
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.cfg.HomesDir, e.Name())); err != nil {
			s.log.Warn("remove a run's home", zap.String("home", e.Name()), zap.Error(err))
		}
	}
}

// restoredCopyAge is how long a copy of a run's directory restored from
// the cluster to be served here is kept.
const restoredCopyAge = time.Hour

// janitor sweeps the workspace now and then until ctx ends.
func (s *Supervisor) janitor(ctx context.Context) {
	every := min(max(s.cfg.WorkspaceRetention/10, time.Minute), restoredCopyAge/4)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if s.cfg.WorkspaceRetention > 0 {
			s.sweepWorkspaces()
			s.sweepArtifacts()
		}
		s.artifacts.SweepRestored(s.cfg.Now().Add(-restoredCopyAge))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
