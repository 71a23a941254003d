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

// SessionFiles is the session's folder, ~/.cline/data/sessions/<id>
// (its record <id>.json and its messages), from which an interactive run
// resumes it over ACP session/load. An id that is not one plain name
// lists nothing.
func (*Adapter) SessionFiles(_ runs.CLIFiles, _, _, sessionID string) ([]string, error) {
	if sessionID == "" || sessionID != filepath.Base(sessionID) || sessionID == "." || sessionID == ".." {
		return nil, nil
	}
	return []string{filepath.Dir(sessionPath("", sessionID)), filepath.Join(".cline", "data", "db")}, nil
}
