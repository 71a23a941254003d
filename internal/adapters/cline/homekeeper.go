package cline

import (
	"path/filepath"

	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.HomeKeeper = (*Adapter)(nil)

// BaseFiles are the two settings files a run takes from the agent's home:
// the provider configuration and the global settings. Not the rest of
// ~/.cline: a run could write hooks, rules or MCP settings there that
// the next run would load.
func (*Adapter) BaseFiles() []string {
	return []string{
		filepath.Join(".cline", "data", "settings", "providers.json"),
		filepath.Join(".cline", "data", "settings", "global-settings.json"),
	}
}

// SessionFiles is nothing: no run resumes a Cline session yet
// (resume_session_id is refused).
func (*Adapter) SessionFiles(runs.CLIFiles, string, string, string) ([]string, error) {
	return nil, nil
}
