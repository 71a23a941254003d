package opencode

import (
	"fmt"
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
		// in its tools while the long one runs. Every later request, a
		// steered message's or the next turn's, gets Scenario.Text.
		s = chat.ToolThenText([]chat.Call{chat.Bash("echo started"), chat.Bash(longCommand(sc.Marker))}, sc.Text)
	case conformance.TwoTools:
		s = chat.TwoTools(chat.Bash(sc.Command), chat.Bash(sc.Command2), sc.Text)
	case conformance.Turns:
		s = chat.Turns(sc.Text)
	case conformance.Failure:
		s = chat.Failure(sc.Status)
	case conformance.Hang:
		s = chat.Hang()
	case conformance.MCPTool:
		// OpenCode offers an MCP tool as <server>_<tool>.
		s = chat.ToolTurn(chat.OpenCodeMCPCall(sc.MCPServer, sc.MCPTool, sc.Input), sc.Text)
	case conformance.ToolLoop:
		// A bash call on every request, each billed: only the gateway's
		// budget ends the run.
		s = chat.AlwaysTool(chat.Bash(sc.Command))
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
		Seen:          func(text string) bool { return srv.Ledger().Seen(text) },
	}
}

// longCommand runs for a minute: a perl that sleeps, whose command line
// carries marker, under a bash whose command line does not (it builds
// the marker from two halves). The steer case ends the tool by killing
// the marker's processes: OpenCode 1.18.33 never completes a bash call
// whose process died of a signal (no tool_call_update, no further model
// request, seen for 15 s, for a SIGKILL from outside and from the
// process itself), so the bash must outlive the perl and exit by itself,
// as a short command would have ended.
func longCommand(marker string) string {
	head, tail := marker[:len(marker)/2], marker[len(marker)/2:]
	return fmt.Sprintf(`M=%s; perl -e 'sleep 60' "${M}%s"; echo stopped`, head, tail)
}

// TrapCommand writes the home's global opencode.jsonc, which OpenCode
// merges over its opencode.json, with a local MCP server that OpenCode
// starts with every later run of the home, appending its HOME to marker.
func (kit) TrapCommand(marker string) string {
	return `mkdir -p "$HOME/.config/opencode" && printf '%s\n' '{"mcp": {"planted": {"type": "local", "command": ["sh", "-c", "echo $HOME >> ` + marker +
		`"]}}}' > "$HOME/.config/opencode/opencode.jsonc"`
}
