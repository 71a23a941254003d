package main

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/sandbox"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// Sandbox modes, the values of AGENTGATE_SANDBOX.
const (
	sandboxAuto       = "auto"
	sandboxBubblewrap = "bubblewrap"
	sandboxCLIOnly    = "cli-only"
)

// newSandbox returns the sandbox that confines every agent process, by
// mode: auto and bubblewrap both use bubblewrap, and fail, saying why and
// how to opt out, when it is missing or its probe fails on this machine;
// cli-only returns a nil sandbox, so that only each CLI's own permission
// flags enforce a run's permission, and logs a warning that says so. hide
// lists the paths no agent may see: the gateway's data directory, the
// workspace root, the API keys file and the operator's extras. A gateway
// that cannot sandbox thus refuses to start unless the operator accepts
// the CLI-only enforcement explicitly.
func newSandbox(ctx context.Context, mode string, hide []string, log *zap.Logger) (supervisor.Sandbox, error) {
	switch mode {
	case sandboxCLIOnly:
		log.Warn("no sandbox: only each agent CLI's own flags enforce a run's permission, and an agent can read what the gateway's user can",
			zap.String("sandbox", mode))
		return nil, nil
	case sandboxAuto, sandboxBubblewrap, "":
	default:
		return nil, fmt.Errorf("AGENTGATE_SANDBOX=%q: want %s, %s or %s", mode, sandboxAuto, sandboxBubblewrap, sandboxCLIOnly)
	}
	optOut := fmt.Sprintf("; install bubblewrap (apt-get install bubblewrap) on a machine that allows its namespaces, "+
		"or set AGENTGATE_SANDBOX=%s to accept that only the agent CLIs enforce permission", sandboxCLIOnly)
	sb, err := sandbox.New(sandbox.Options{Hide: hide})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w%s", err, optOut)
	}
	if err := sb.Probe(ctx); err != nil {
		return nil, fmt.Errorf("sandbox: %w%s", err, optOut)
	}
	log.Info("agents run in a sandbox", zap.String("sandbox", sb.Enforcement()), zap.Strings("hidden", hide))
	return sb, nil
}
