package opencode

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/conformance"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestConformance runs the suite every adapter passes.
func TestConformance(t *testing.T) { conformance.Run(t, kit{}) }

// kit plays the suite's scenarios with the mock Chat Completions API,
// configured as a provider in the agent home's opencode.json, whose key
// variable the adapter finds there and passes through.
type kit struct{}

func (kit) Adapter() runs.Adapter { return New() }

// FailureBound implements conformance.SlowFailures: OpenCode 1.18.33
// retries a 5xx five times, 2 to 32 s apart (about 65 s), shortened only
// by the server's Retry-After, and has no setting for it.
func (kit) FailureBound(status int) time.Duration {
	if status >= 500 {
		return 90 * time.Second
	}
	return 30 * time.Second
}

// Bin is the npm package's command, which the probe resolves.
func (kit) Bin(t testing.TB) string { return opencodeBinPath(t) }

func (kit) Serve(t testing.TB, sc conformance.Scenario, home string) conformance.Backend {
	var s chat.Scenario
	switch sc.Kind {
	case conformance.Text:
		s = chat.TextAnswer(sc.Text)
	case conformance.Tool:
		s = chat.ToolTurn(chat.Bash(sc.Command), sc.Text)
	case conformance.LongTool:
		// `opencode run` prints a tool call only once it has finished,
		// so the long command comes with a quick one in the same step:
		// its line (tool_call.started and .completed) shows the run is
		// in its tools while the long one runs.
		s = chat.ToolSteps([][]chat.Call{{chat.Bash("echo started"), chat.Bash(chat.LongCommand + " " + sc.Marker)}}, sc.Text)
	case conformance.Failure:
		s = chat.Failure(sc.Status)
	case conformance.Hang:
		s = chat.Hang()
	default:
		t.Fatalf("scenario %q", sc.Kind)
	}
	srv, err := chat.Start("127.0.0.1:0", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cfgDir := configDir(home)
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "opencode.json"), []byte(mockConfig(srv.URL, homeKeyEnv)), 0o600); err != nil {
		t.Fatal(err)
	}
	return conformance.Backend{
		Env:           map[string]string{homeKeyEnv: testKey},
		NoCredentials: map[string]string{},
		Model:         "mock/mock-model",
		Billed:        func() runs.Usage { return normalized(srv.Ledger().Billed()) },
		Requests:      func() int { return len(srv.Ledger().Completions()) },
	}
}
