package opencode

import (
	"errors"
	"os"
	"path/filepath"
)

// sessionConfig is the one setting the gateway adds to OpenCode's
// configuration for a Session run: no title agent. Without it OpenCode
// asks the model for a session title beside the first turn (a request of
// its own, billed, which no ACP message reports), and `opencode acp` has
// no --title to stop it as `run` does.
const sessionConfig = `{"agent":{"title":{"disable":true}}}` + "\n"

// sessionConfigDir is the directory, in the agent's home and apart from
// the operator's configuration, whose opencode.json a Session run adds to
// OpenCode's configuration through OPENCODE_CONFIG_DIR. OpenCode merges
// that directory after the global and project files, so the one key it
// sets is the gateway's, and every other setting stays the operator's.
func sessionConfigDir(home string) string {
	return filepath.Join(home, ".agentgate", "opencode-session")
}

// PrepareHome implements runs.HomePreparer: it writes sessionConfig into
// sessionConfigDir. It owns that directory and nothing else of the home.
func (*Adapter) PrepareHome(home string) error {
	if home == "" {
		return errors.New("no home directory")
	}
	dir := sessionConfigDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "opencode.json"), []byte(sessionConfig), 0o600)
}
