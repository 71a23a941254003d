package opencode

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestRealCLIHomeCarry starts a session with the installed opencode in
// one home and resumes it in another, built from the base home plus the
// files SessionFiles lists; a changed configuration and a plugin planted
// in the first home do not follow (agenttest.CheckHomeCarry).
func TestRealCLIHomeCarry(t *testing.T) {
	bin := opencodeBin(t)
	version := installedVersion(t, bin)
	base := t.TempDir()
	if err := New().PrepareHome(base); err != nil {
		t.Fatal(err)
	}
	// runCLI writes each run's opencode.json for its own mock; the
	// base's is the operator's, which a planted change must not replace.
	cfg := filepath.Join(configDir(base), "opencode.json")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(mockConfig("http://127.0.0.1:9", homeKeyEnv)), 0o600); err != nil {
		t.Fatal(err)
	}
	agenttest.CheckHomeCarry(t, agenttest.HomeCarry{
		Keeper:  New(),
		Base:    base,
		Planted: []string{".config/opencode/opencode.json", ".config/opencode/plugin/x.js", ".config/opencode/AGENTS.md"},
		First: func(t *testing.T, home, dir string) agenttest.Turn {
			c := cliCase{scenario: fixed(chat.TextAnswer("First.")), spec: prompt("remember the word kiwi"), homeConfig: true}
			return opencodeTurn(c, runCLI(t, bin, version, c, home, dir))
		},
		Resume: func(t *testing.T, home, dir, session string) agenttest.Turn {
			c := cliCase{scenario: fixed(chat.TextAnswer("Resumed.")), spec: withResume(prompt("which word?"), session), homeConfig: true}
			return opencodeTurn(c, runCLI(t, bin, version, c, home, dir))
		},
	})
}

func opencodeTurn(c cliCase, r *cliRun) agenttest.Turn {
	turn := agenttest.Turn{Prompt: c.spec(r.env).Prompt, SessionID: r.outcome.SessionID,
		Succeeded: r.outcome.Status == runs.Succeeded,
		Detail:    fmt.Sprintf("error %+v, exit %+v, stderr %q", r.outcome.Error, r.res.Exit, tail(r.res.Stderr, 300))}
	if len(r.ledger) > 0 {
		turn.Request = strings.Join(r.ledger[len(r.ledger)-1].Request.UserTexts(), " | ")
	}
	return turn
}
