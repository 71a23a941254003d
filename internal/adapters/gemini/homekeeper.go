package gemini

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.HomeKeeper = (*Adapter)(nil)

// BaseFiles are the settings and the workspace_write policy that
// PrepareHome wrote (with whatever the operator set in the settings),
// and the CLI's Google login: oauth_creds.json and google_accounts.json.
// Not the rest of ~/.gemini: a run's GEMINI.md, commands, extensions or
// a .env there would steer the next run.
func (*Adapter) BaseFiles() []string {
	return []string{
		settingsPath(""),
		policyPath(""),
		".gemini/oauth_creds.json",
		".gemini/google_accounts.json",
	}
}

// SessionFiles are the registry ~/.gemini/projects.json, which names the
// directory that holds dir's sessions, and the session's chat recording
// there, tmp/<project>/chats/session-<time>-<id[:8]>.jsonl, which --resume
// replays (found as the decoder finds it, chatlog.go). The registry is
// carried whole: a run's home holds that run's directory alone.
func (*Adapter) SessionFiles(files runs.CLIFiles, home, dir, sessionID string) ([]string, error) {
	tmp := filepath.Join(home, ".gemini", "tmp")
	if _, err := files.ReadDir(tmp); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("list gemini projects: %w", err)
	}
	chat, err := newChatLog(files, home, dir).find(sessionID)
	if err != nil {
		return nil, nil // no recording of this session: nothing to resume
	}
	rel, err := filepath.Rel(home, chat)
	if err != nil {
		return nil, fmt.Errorf("gemini session %s: %w", sessionID, err)
	}
	return []string{".gemini/projects.json", rel}, nil
}
