package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/workspace"
)

// makeHome gives t's run a CLI home of its own, when the gateway makes
// them (Config.HomesDir) and its adapter says what a home holds: the
// base's login and configuration, and the files of the session it
// resumes, as the session's last run left them, from the cluster. A
// session is its tenant's: the key names the tenant.
func (s *Supervisor) makeHome(ctx context.Context, t *task) *runs.RunError {
	a := s.agents[t.run.Agent]
	hk, ok := a.Adapter.(runs.HomeKeeper)
	if !ok || s.cfg.HomesDir == "" {
		return nil
	}
	home := filepath.Join(s.cfg.HomesDir, t.run.ID)
	if err := os.RemoveAll(home); err != nil {
		return runs.NewRunError(runs.Internal, "the run's home could not be made: "+err.Error(), "")
	}
	if err := workspace.BuildHome(a.Home, home, hk.BaseFiles(), 0); err != nil {
		os.RemoveAll(home) // what was copied before the failure
		return runs.NewRunError(runs.Internal, "the run's home could not be made from the agent's: "+err.Error(),
			"check the agent's home (AGENTGATE_"+t.run.Agent+"_HOME)")
	}
	t.home = home
	id := t.run.Spec.ResumeSessionID
	if id == "" || s.ws == nil {
		return nil
	}
	_, err := s.ws.RestoreInto(ctx, sessionKey(t.run.Tenant, t.run.Agent, id), home)
	switch {
	case errors.Is(err, runs.ErrNotFound):
		// Not kept (begun before sessions were, or expired): the CLI
		// says it does not know the session.
	case err != nil:
		return runs.NewRunError(runs.WorkspaceFailed, "the session's files could not be restored: "+err.Error(), "submit the run again")
	default:
		s.obs.SnapshotRestored(runs.SnapshotSession)
	}
	return nil
}

func sessionKey(tenant, agent, sessionID string) runs.SnapshotKey {
	return runs.SnapshotKey{Tenant: tenant, Kind: runs.SnapshotSession, ID: agent + "/" + sessionID}
}

// keepSession stores the files of t's session from its home, for the run
// that resumes it on any replica.
func (s *Supervisor) keepSession(ctx context.Context, t *task, session string) {
	if session == "" || t.home == "" || s.ws == nil {
		return
	}
	hk, ok := t.agent.Adapter.(runs.HomeKeeper)
	if !ok {
		return
	}
	paths, err := hk.SessionFiles(runs.HostFiles{}, t.home, t.inv.Dir, session)
	if err != nil {
		s.warnKeep(t, "session_not_kept", "the run's session files could not be listed, so only this run had them: "+err.Error())
		return
	}
	if len(paths) == 0 {
		return // the CLI kept nothing of it (a session not asked to be kept)
	}
	info, err := s.ws.SavePaths(ctx, sessionKey(t.run.Tenant, t.run.Agent, session), t.home, paths, s.cfg.MaxSessionBytes, nil)
	if err != nil {
		s.warnKeep(t, "session_not_kept", "the run's session could not be kept in the cluster: "+err.Error())
		return
	}
	s.obs.SnapshotKept(runs.SnapshotSession, info.Size)
}

// removeHome removes t's own home once its run has ended.
func (s *Supervisor) removeHome(t *task) {
	if t.home == "" {
		return
	}
	if err := os.RemoveAll(t.home); err != nil {
		s.log.Warn("remove the run's home", zap.String("run_id", t.run.ID), zap.Error(err))
	}
}

// lockSession gives the session that spec resumes to the run runID, for
// as long as the run may last: a second run of it is a 409
// session_busy until the first ends.
func (s *Supervisor) lockSession(ctx context.Context, spec runs.Spec, runID string, timeout time.Duration) error {
	if spec.ResumeSessionID == "" || s.cfg.SessionLocks == nil {
		return nil
	}
	err := s.cfg.SessionLocks.LockSession(ctx, spec.Tenant, spec.Agent, spec.ResumeSessionID, runID, timeout+sessionLockMargin)
	if errors.Is(err, runs.ErrSessionBusy) {
		return runs.Conflict(runs.ConflictSessionBusy, "another run is using session "+spec.ResumeSessionID+": resume it once that run has ended")
	}
	return err
}

// unlockSession frees the session t's run resumed, if it holds it.
func (s *Supervisor) unlockSession(ctx context.Context, t *task) {
	id := t.run.Spec.ResumeSessionID
	if id == "" || s.cfg.SessionLocks == nil {
		return
	}
	if err := s.cfg.SessionLocks.UnlockSession(ctx, t.run.Tenant, t.run.Agent, id, t.run.ID); err != nil {
		s.log.Warn("free a session", zap.String("run_id", t.run.ID), zap.Error(err))
	}
}
