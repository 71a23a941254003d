package qwen

import (
	"path/filepath"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.HomeKeeper = (*Adapter)(nil)

// BaseFiles is the settings file PrepareHome wrote (with whatever the
// operator set in it). Not the rest of ~/.qwen: a run's QWEN.md, skills,
// agents, extensions or commands there would steer the next run.
func (*Adapter) BaseFiles() []string { return []string{settingsPath("")} }

// SessionFiles is the session's chat recording,
// .qwen/projects/<dir with every "/" replaced by "-">/chats/<id>.jsonl.
// An interactive run resumes it (ACP session/load) from this file alone.
func (*Adapter) SessionFiles(_ runs.CLIFiles, _, dir, sessionID string) ([]string, error) {
	if sessionID == "" || strings.ContainsAny(sessionID, "/\\") || sessionID == "." || sessionID == ".." {
		return nil, nil
	}
	return []string{filepath.Join(".qwen", "projects", strings.ReplaceAll(dir, "/", "-"), "chats", sessionID+".jsonl")}, nil
}
