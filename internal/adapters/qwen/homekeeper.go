package qwen

import (
	"path/filepath"
	"strings"
	"unicode/utf16"

	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.HomeKeeper = (*Adapter)(nil)

// BaseFiles is the settings file PrepareHome wrote (with whatever the
// operator set in it). Not the rest of ~/.qwen: a run's QWEN.md, skills,
// agents, extensions or commands there would steer the next run.
func (*Adapter) BaseFiles() []string { return []string{settingsPath("")} }

// SessionFiles is the session's chat recording,
// .qwen/projects/<projectFolder(dir)>/chats/<id>.jsonl, from which a run
// resumes it (ACP session/load).
func (*Adapter) SessionFiles(_ runs.CLIFiles, _, dir, sessionID string) ([]string, error) {
	if sessionID == "" || strings.ContainsAny(sessionID, "/\\") || sessionID == "." || sessionID == ".." {
		return nil, nil
	}
	return []string{filepath.Join(".qwen", "projects", projectFolder(dir), "chats", sessionID+".jsonl")}, nil
}

// projectFolder is the name Qwen Code gives the folder of a directory's
// sessions: the path with every character but an ASCII letter or digit
// replaced by "-", one for each UTF-16 unit, as 0.24.4's sanitizeCwd
// does with /[^a-zA-Z0-9]/g.
func projectFolder(dir string) string {
	var b strings.Builder
	for _, r := range dir {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
			b.WriteRune(r)
		default:
			// Two for a character beyond the BMP: a surrogate pair.
			b.WriteString(strings.Repeat("-", utf16.RuneLen(r)))
		}
	}
	return b.String()
}
