package claude

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestRealCLIHomeCarry starts a session with the installed claude in one
// home and resumes it in another, built from the base home plus the
// files SessionFiles lists; a hook planted in the first home's settings
// does not follow (agenttest.CheckHomeCarry).
func TestRealCLIHomeCarry(t *testing.T) {
	bin := agenttest.ClaudeBin(t)
	version := installedVersion(t, bin)
	base := t.TempDir()
	settings := filepath.Join(base, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(`{"cleanupPeriodDays": 30}`), 0o600); err != nil {
		t.Fatal(err)
	}
	agenttest.CheckHomeCarry(t, agenttest.HomeCarry{
		Keeper:  New(),
		Base:    base,
		Planted: []string{".claude/settings.json", ".claude/settings.local.json", ".claude/CLAUDE.md", ".claude.json"},
		First: func(t *testing.T, home, dir string) agenttest.Turn {
			c := cliCase{scenario: fixed(anthropic.TextAnswer("First answer.")),
				spec: runs.Spec{Prompt: "First prompt, to be remembered."}, runID: uuid.Must(uuid.NewV7()).String()}
			return claudeTurn(c, runCLI(t, bin, version, c, home, dir))
		},
		Resume: func(t *testing.T, home, dir, session string) agenttest.Turn {
			c := cliCase{scenario: fixed(anthropic.TextAnswer("Second answer.")),
				spec: runs.Spec{Prompt: "Second prompt.", ResumeSessionID: session}}
			return claudeTurn(c, runCLI(t, bin, version, c, home, dir))
		},
	})
}

func claudeTurn(c cliCase, r *cliRun) agenttest.Turn {
	turn := agenttest.Turn{Prompt: c.spec.Prompt, SessionID: r.outcome.SessionID,
		Succeeded: r.outcome.Status == runs.Succeeded,
		Detail:    fmt.Sprintf("error %+v, exit %+v, stderr %q", r.outcome.Error, r.res.Exit, tail(r.res.Stderr, 300))}
	if reqs := r.ledger.Messages(); len(reqs) > 0 {
		turn.Request = reqs[len(reqs)-1].Request.UserText()
	}
	return turn
}

// TestSessionFiles lists a session's transcript and its directory from
// whichever project directory holds it, and nothing for another id or
// for an id that tries to leave the projects.
func TestSessionFiles(t *testing.T) {
	home := t.TempDir()
	project := filepath.Join(home, ".claude", "projects", "-work-repo")
	if err := os.MkdirAll(project, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "s1.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]string{
		"s1":           {".claude/projects/-work-repo/s1.jsonl", ".claude/projects/-work-repo/s1"},
		"s2":           nil,
		"../../../etc": nil,
	} {
		got, err := New().SessionFiles(runs.HostFiles{}, home, "/work/repo", id)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SessionFiles(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
	if got, err := New().SessionFiles(runs.HostFiles{}, t.TempDir(), "/work/repo", "s1"); err != nil || got != nil {
		t.Errorf("SessionFiles in a home without projects = %q, %v; want none", got, err)
	}
}
