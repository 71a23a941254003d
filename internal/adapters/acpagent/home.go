package acpagent

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentgate/agentgate/internal/runs"
)

// PrepareHome implements runs.HomePreparer: it writes the entry's
// home_files into the agent's home, replacing what was there, so that
// every run's home starts with them (BaseFiles). The agents file checked
// that each path is inside the home.
func (a *Adapter) PrepareHome(home string) error {
	if home == "" {
		return errors.New("no home directory")
	}
	for _, rel := range a.BaseFiles() {
		path := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("home file %s: %w", rel, err)
		}
		if err := os.WriteFile(path, []byte(a.entry.HomeFiles[rel]), 0o600); err != nil {
			return fmt.Errorf("home file %s: %w", rel, err)
		}
	}
	return nil
}

// BaseFiles implements runs.HomeKeeper: a run's home takes the entry's
// home_files from the agent's home, and nothing else, so that nothing a
// run leaves there reaches the next.
func (a *Adapter) BaseFiles() []string {
	return slices.Sorted(maps.Keys(a.entry.HomeFiles))
}

// SessionFiles implements runs.HomeKeeper: none, since no run resumes a
// session.
func (*Adapter) SessionFiles(runs.CLIFiles, string, string, string) ([]string, error) {
	return nil, nil
}
