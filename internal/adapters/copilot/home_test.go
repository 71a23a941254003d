package copilot

import (
	"fmt"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestRealCLIHomeCarry starts a session with the installed copilot in
// one home and resumes it in another, built from the base home plus the
// files SessionFiles lists; configuration and instructions planted in
// the first home do not follow (agenttest.CheckHomeCarry).
func TestRealCLIHomeCarry(t *testing.T) {
	bin := copilotBin(t)
	version := installedVersion(t, bin, testCache)
	agenttest.CheckHomeCarry(t, agenttest.HomeCarry{
		Keeper:  New(),
		Base:    t.TempDir(),
		Planted: []string{".copilot/config.json", ".copilot/settings.json", ".copilot/mcp-config.json", ".copilot/copilot-instructions.md"},
		First: func(t *testing.T, home, dir string) agenttest.Turn {
			c := cliCase{name: "carry_first", home: home, dir: dir, spec: runs.Spec{Prompt: "remember the word apricot"},
				scenario: func(string) openai.Scenario { return openai.TextAnswer("First.") }}
			return copilotTurn(c, runCLI(t, bin, version, testCache, c))
		},
		Resume: func(t *testing.T, home, dir, session string) agenttest.Turn {
			c := cliCase{name: "carry_resume", home: home, dir: dir, spec: runs.Spec{Prompt: "which word?", ResumeSessionID: session},
				scenario: func(string) openai.Scenario { return openai.TextAnswer("Resumed.") }}
			return copilotTurn(c, runCLI(t, bin, version, testCache, c))
		},
	})
}

func copilotTurn(c cliCase, r *cliRun) agenttest.Turn {
	turn := agenttest.Turn{Prompt: c.spec.Prompt, SessionID: r.outcome.SessionID,
		Succeeded: r.outcome.Status == runs.Succeeded,
		Detail:    fmt.Sprintf("error %+v, exit %+v, stderr %q", r.outcome.Error, r.res.Exit, tail(r.res.Stderr, 300))}
	if reqs := r.ledger.Responses(); len(reqs) > 0 {
		turn.Request = inputText(reqs[len(reqs)-1].Request)
	}
	return turn
}

// TestSessionFiles lists the session's directory, and nothing for an id
// that is not one plain name.
func TestSessionFiles(t *testing.T) {
	for id, want := range map[string][]string{
		"0196f0c2-7e1a-7000-8000-000000000001": {".copilot/session-state/0196f0c2-7e1a-7000-8000-000000000001"},
		"":                                     nil,
		"..":                                   nil,
		"../config.json":                       nil,
	} {
		got, err := New().SessionFiles(runs.NoFiles{}, "/home/a", "/work/repo", id)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SessionFiles(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
}
