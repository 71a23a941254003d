package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestRealCLIHomeCarry starts a kept thread with the installed codex in
// one home and resumes it in another, built from the base home plus the
// files SessionFiles lists; a changed config.toml and rules planted in
// the first home do not follow (agenttest.CheckHomeCarry).
func TestRealCLIHomeCarry(t *testing.T) {
	bin := codexBin(t)
	version := installedVersion(t, bin)
	base := t.TempDir()
	// runCLI writes each run's config.toml for its own mock; the base's
	// is the operator's, which a planted change must not replace.
	if err := os.WriteFile(filepath.Join(base, "config.toml"), []byte(mockConfig("http://127.0.0.1:9", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	agenttest.CheckHomeCarry(t, agenttest.HomeCarry{
		Keeper:  New(),
		Base:    base,
		Planted: []string{"config.toml", "rules/default.rules", "AGENTS.md"},
		First: func(t *testing.T, home, dir string) agenttest.Turn {
			c := cliCase{scenario: fixed(openai.TextAnswer("First.")), spec: runs.Spec{Prompt: "Remember the first prompt.", KeepSession: true}}
			return codexTurn(c, runCLI(t, bin, version, c, home, dir))
		},
		Resume: func(t *testing.T, home, dir, session string) agenttest.Turn {
			c := cliCase{scenario: fixed(openai.TextAnswer("Resumed.")), spec: runs.Spec{Prompt: "Go on.", ResumeSessionID: session}}
			return codexTurn(c, runCLI(t, bin, version, c, home, dir))
		},
	})
}

func codexTurn(c cliCase, r *cliRun) agenttest.Turn {
	turn := agenttest.Turn{Prompt: c.spec.Prompt, SessionID: r.outcome.SessionID,
		Succeeded: r.outcome.Status == runs.Succeeded,
		Detail:    fmt.Sprintf("error %+v, exit %+v, stderr %q", r.outcome.Error, r.res.Exit, tail(r.res.Stderr, 300))}
	if reqs := r.ledger.Responses(); len(reqs) > 0 {
		req := reqs[len(reqs)-1].Request
		turn.Request = req.Developer() + inputText(req)
	}
	return turn
}

// TestSessionFiles finds a thread's rollout in whichever dated directory
// holds it, and nothing for another thread.
func TestSessionFiles(t *testing.T) {
	home := t.TempDir()
	day := filepath.Join(home, "sessions", "2026", "01", "02")
	if err := os.MkdirAll(day, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rollout-2026-01-02T03-04-05-t1.jsonl", "rollout-2026-01-02T03-04-06-t2.jsonl"} {
		if err := os.WriteFile(filepath.Join(day, name), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string][]string{
		"t1": {"sessions/2026/01/02/rollout-2026-01-02T03-04-05-t1.jsonl"},
		"t3": nil,
		"":   nil,
	} {
		got, err := New().SessionFiles(runs.HostFiles{}, home, "/work/repo", id)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SessionFiles(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
	if got, err := New().SessionFiles(runs.HostFiles{}, t.TempDir(), "/work/repo", "t1"); err != nil || got != nil {
		t.Errorf("SessionFiles in a home without sessions = %q, %v; want none", got, err)
	}
}
