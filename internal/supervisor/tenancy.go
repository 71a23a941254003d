package supervisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// actorPtr is a for a record's field: nil for the anonymous caller, so
// that records of a gateway without keys stay as they were.
func actorPtr(a runs.Actor) *runs.Actor {
	if a.IsZero() {
		return nil
	}
	return &a
}

// tenantRoot is the workspace root of a tenant's runs: the workspace root
// itself on a gateway without keys, else a directory of the tenant's own
// under it, so that no tenant's cwd can name another's directory.
func (s *Supervisor) tenantRoot(tenant string) (string, error) {
	if tenant == "" {
		return s.cfg.WorkspaceRoot, nil
	}
	if !auth.ValidName(tenant) {
		return "", runs.Invalid("tenant", "is not a valid tenant name")
	}
	root := filepath.Join(s.cfg.WorkspaceRoot, "tenants", tenant)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("tenant workspace: %w", err)
	}
	return root, nil
}

// resumable checks that spec may resume its session: on a gateway with
// tenants, only a session one of the tenant's runs began. It returns the
// directory the session last ran in, relative to the tenant's root.
func (s *Supervisor) resumable(ctx context.Context, spec runs.Spec) (string, error) {
	rec, ok, err := s.store.Session(ctx, spec.Agent, spec.ResumeSessionID)
	if err != nil {
		return "", fmt.Errorf("read session: %w", err)
	}
	if ok && rec.Tenant == spec.Tenant {
		return rec.Cwd, nil
	}
	// A session the gateway began before it kept sessions' tenants and
	// directories is known by the run that began it.
	if prev, err := s.store.GetRun(ctx, spec.ResumeSessionID); err == nil && prev.Tenant == spec.Tenant {
		return prev.Spec.Cwd, nil
	}
	if spec.Tenant == "" && !ok {
		// Without tenants, a session the gateway never saw (begun by
		// the CLI elsewhere, in its home) may be resumed, as before.
		return "", nil
	}
	return "", runs.Invalid(runs.FieldResumeSessionID, "names no session of this tenant's runs")
}

// audit writes one line of the audit trail: what was done, by which key of
// which tenant, to which run.
func (s *Supervisor) audit(action string, by runs.Actor, runID string, fields ...zap.Field) {
	s.log.Info("audit", append([]zap.Field{
		zap.String("action", action), zap.String("key_id", by.KeyID),
		zap.String("tenant", by.Tenant), zap.String("run_id", runID),
	}, fields...)...)
}
