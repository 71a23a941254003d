package claude

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"

	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.HomeKeeper = (*Adapter)(nil)

// BaseFiles are the operator's: ~/.claude.json (the account and the
// onboarding state that `claude` login leaves), the login of
// ~/.claude/.credentials.json, and the operator's ~/.claude/settings.json.
// Nothing else of ~/.claude: a run could write hooks, plugins, agents or
// commands there that the next run would execute.
func (*Adapter) BaseFiles() []string {
	return []string{".claude.json", ".claude/.credentials.json", ".claude/settings.json"}
}

// SessionFiles are the transcript ~/.claude/projects/<slug>/<id>.jsonl,
// which --resume reads, and the directory <slug>/<id> beside it, where
// the CLI keeps what the transcript points at (tool results too large to
// inline, subagents' transcripts). The slug is the project directory's
// name for dir; it is found by listing, not derived, since the CLI's
// rule for it is its own.
func (*Adapter) SessionFiles(files runs.CLIFiles, home, dir, sessionID string) ([]string, error) {
	projects := filepath.Join(home, ".claude", "projects")
	slugs, err := files.ReadDir(projects)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list claude projects: %w", err)
	}
	var out []string
	for _, slug := range slugs {
		names, err := files.ReadDir(filepath.Join(projects, slug))
		if err != nil {
			continue // not a directory
		}
		if slices.Contains(names, sessionID+".jsonl") {
			base := path.Join(".claude", "projects", slug, sessionID)
			out = append(out, base+".jsonl", base)
		}
	}
	return out, nil
}
