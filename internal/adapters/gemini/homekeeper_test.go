package gemini

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/googleai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestRealCLIHomeCarry starts a session with the installed gemini in one
// home and resumes it in another, built from the base home PrepareHome
// prepared plus the files SessionFiles lists; settings, context and
// commands planted in the first home do not follow
// (agenttest.CheckHomeCarry).
func TestRealCLIHomeCarry(t *testing.T) {
	bin := agenttest.Bin(t, "gemini")
	version := installedVersion(t, bin)
	agenttest.CheckHomeCarry(t, agenttest.HomeCarry{
		Keeper:  New(),
		Base:    preparedHome(t),
		Planted: []string{settingsPath(""), ".gemini/GEMINI.md", ".gemini/.env", ".gemini/commands/x.toml"},
		First: func(t *testing.T, home, dir string) agenttest.Turn {
			c := cliCase{scenario: fixed(googleai.TextAnswer("First answer.")), spec: runs.Spec{Prompt: "Remember the first prompt.", Model: testModel}}
			return geminiTurn(c, runCLI(t, bin, version, c, home, dir))
		},
		Resume: func(t *testing.T, home, dir, session string) agenttest.Turn {
			c := cliCase{scenario: fixed(googleai.TextAnswer("Second answer.")), spec: runs.Spec{Prompt: "Second prompt.", Model: testModel, ResumeSessionID: session}}
			return geminiTurn(c, runCLI(t, bin, version, c, home, dir))
		},
	})
}

func geminiTurn(c cliCase, r *cliRun) agenttest.Turn {
	turn := agenttest.Turn{Prompt: c.spec.Prompt, SessionID: r.outcome.SessionID,
		Succeeded: r.outcome.Status == runs.Succeeded,
		Detail:    fmt.Sprintf("error %+v, exit %+v, stderr %q", r.outcome.Error, r.res.Exit, tail(r.res.Stderr, 300))}
	if calls := r.ledger.Calls(); len(calls) > 0 {
		turn.Request = calls[len(calls)-1].Request.UserText()
	}
	return turn
}

// TestSessionFiles lists the registry and the recording whose first line
// names the session, and nothing for a session without one or a home
// without sessions.
func TestSessionFiles(t *testing.T) {
	home, dir := t.TempDir(), "/work/repo"
	write(t, filepath.Join(home, ".gemini", "projects.json"), `{"projects":{"/work/repo":"repo"}}`)
	chats := filepath.Join(home, ".gemini", "tmp", "repo", "chats")
	write(t, filepath.Join(chats, "session-2026-01-02T03-04-0196f0c2.jsonl"), `{"sessionId":"0196f0c2-0000-7000-8000-000000000001"}`+"\n")
	write(t, filepath.Join(chats, "session-2026-01-02T03-05-0196f0c2.jsonl"), `{"sessionId":"0196f0c2-0000-7000-8000-000000000002"}`+"\n")
	for id, want := range map[string][]string{
		"0196f0c2-0000-7000-8000-000000000002": {".gemini/projects.json", ".gemini/tmp/repo/chats/session-2026-01-02T03-05-0196f0c2.jsonl"},
		"0196f0c2-0000-7000-8000-000000000003": nil,
		"../../x":                              nil,
	} {
		got, err := New().SessionFiles(runs.HostFiles{}, home, dir, id)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SessionFiles(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
	if got, err := New().SessionFiles(runs.HostFiles{}, t.TempDir(), dir, "0196f0c2-0000-7000-8000-000000000002"); err != nil || got != nil {
		t.Errorf("SessionFiles in a home without sessions = %q, %v; want none", got, err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
