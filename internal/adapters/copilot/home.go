package copilot

import (
	"path/filepath"

	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.HomeKeeper = (*Adapter)(nil)

// BaseFiles are the operator's ~/.copilot/config.json, where the CLI keeps
// its login when there is no keychain, and ~/.copilot/settings.json, the
// operator's settings (1.0.102 reads its user settings there). Not the
// rest of ~/.copilot: a run could write MCP servers, hooks, agents or
// instructions there that the next run would load, and logs and the
// session-store.db index are not needed to resume.
func (*Adapter) BaseFiles() []string {
	return []string{filepath.Join(".copilot", "config.json"), filepath.Join(".copilot", "settings.json")}
}

// SessionFiles is the session's directory,
// ~/.copilot/session-state/<id>, whose events.jsonl --resume replays. An
// id that is not one plain name lists nothing.
func (*Adapter) SessionFiles(files runs.CLIFiles, home, dir, sessionID string) ([]string, error) {
	if sessionID == "" || sessionID != filepath.Base(sessionID) || sessionID == ".." {
		return nil, nil
	}
	return []string{filepath.Join(".copilot", "session-state", sessionID)}, nil
}
