package codex

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.HomeKeeper = (*Adapter)(nil)

// BaseFiles are the operator's config.toml (the provider, its key
// variable, the operator's MCP servers) and the login of auth.json. Not
// the rest of CODEX_HOME: a run's rules, prompts, skills, logs or state
// databases must not reach another run.
func (*Adapter) BaseFiles() []string { return []string{"config.toml", "auth.json"} }

// SessionFiles is the thread's rollout,
// $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl, the whole
// record thread/resume reads. It is found by listing the dated
// directories, since its date and time are the thread's start.
func (*Adapter) SessionFiles(files runs.CLIFiles, home, dir, sessionID string) ([]string, error) {
	if sessionID == "" {
		return nil, nil
	}
	var out []string
	err := walkSessions(files, home, "sessions", 3, func(rel, name string) {
		if strings.HasPrefix(name, "rollout-") && strings.HasSuffix(name, "-"+sessionID+".jsonl") {
			out = append(out, path.Join(rel, name))
		}
	})
	return out, err
}

// walkSessions calls found with each entry depth directories below rel
// in home, the dated tree of the rollouts.
func walkSessions(files runs.CLIFiles, home, rel string, depth int, found func(rel, name string)) error {
	names, err := files.ReadDir(filepath.Join(home, filepath.FromSlash(rel)))
	switch {
	case errors.Is(err, fs.ErrNotExist) && depth > 0:
		return nil
	case err != nil && depth == 3:
		return fmt.Errorf("list codex sessions: %w", err)
	case err != nil:
		return nil // a file where a dated directory was expected
	}
	for _, name := range names {
		if depth == 0 {
			found(rel, name)
		} else if err := walkSessions(files, home, path.Join(rel, name), depth-1, found); err != nil {
			return err
		}
	}
	return nil
}
