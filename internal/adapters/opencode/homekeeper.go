package opencode

import (
	"path/filepath"

	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.HomeKeeper = (*Adapter)(nil)

// BaseFiles are the operator's global configuration files, the login of
// auth.json, and the Session runs' configuration PrepareHome wrote. Not
// the rest of ~/.config/opencode: a run could write plugins, agents or
// commands there that the next run would load.
func (*Adapter) BaseFiles() []string {
	names := make([]string, 0, len(homeConfigFiles)+2)
	for _, f := range homeConfigFiles {
		names = append(names, filepath.Join(configDir(""), f))
	}
	return append(names, authFile(""), filepath.Join(sessionConfigDir(""), "opencode.json"))
}

// SessionFiles is OpenCode's store, one SQLite database of every session
// of the home (storePath), with its -wal and -shm: sessions cannot be
// taken from it apart. A run's home holds the sessions of that run (and
// those it resumed), so carrying it whole carries no other tenant's.
func (*Adapter) SessionFiles(files runs.CLIFiles, home, dir, sessionID string) ([]string, error) {
	db := storePath("")
	return []string{db, db + "-wal", db + "-shm"}, nil
}
