package qwen

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/conformance"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestConformance runs the suite every adapter passes. The supervisor
// prepares the home (PrepareHome) once, at its start.
func TestConformance(t *testing.T) { conformance.Run(t, kit{}) }

// kit plays the suite's scenarios with the mock Chat Completions API,
// which the CLI's "openai" auth type reaches through OPENAI_BASE_URL.
type kit struct{}

func (kit) Adapter() runs.Adapter   { return New() }
func (kit) Bin(t testing.TB) string { return agenttest.Bin(t, "qwen") }

// FailureBound implements conformance.SlowFailures: 0.24.4 retries a 5xx
// six times whatever its settings, 1.5 s growing to 30 s apart with
// jitter (about 70 s, seen 70 s headless), and has no setting for it
// (doc.go).
func (kit) FailureBound(status int) time.Duration {
	if status >= 500 {
		return 150 * time.Second
	}
	return 30 * time.Second
}

// testKey is the key the mock is given; it takes any.
const testKey = "test-key-agentgate"

// shell is a call of the CLI's shell tool.
func shell(command string) chat.Call {
	return chat.FunctionCall("run_shell_command", map[string]string{"command": command})
}

func (kit) Serve(t testing.TB, sc conformance.Scenario, home string) conformance.Backend {
	var s chat.Scenario
	switch sc.Kind {
	case conformance.Text:
		s = chat.TextAnswer(sc.Text)
	case conformance.Tool:
		s = chat.ToolTurn(shell(sc.Command), sc.Text)
	case conformance.LongTool:
		// The tool, then Scenario.Text for every later request: the one
		// that carries a steered message, or the turn after an
		// interrupt. 0.24.4 refuses a command that starts with sleep
		// and goes on ("Blocked: sleep 60 followed by: …"); a perl
		// that sleeps, with the marker among its arguments, it runs.
		s = chat.ToolThenText([]chat.Call{shell("perl -e 'sleep 60' " + sc.Marker + "; echo stopped")}, sc.Text)
	case conformance.TwoTools:
		s = chat.TwoTools(shell(sc.Command), shell(sc.Command2), sc.Text)
	case conformance.Turns:
		s = chat.Turns(sc.Text)
	case conformance.Failure:
		s = chat.Failure(sc.Status)
	case conformance.Hang:
		s = chat.Hang()
	case conformance.MCPTool:
		var args map[string]any
		if err := json.Unmarshal([]byte(sc.Input), &args); err != nil {
			t.Fatalf("MCPTool input %q: %v", sc.Input, err)
		}
		// Offered to the model as mcp__<server>__<tool>.
		// 0.24.4 defers MCP tools behind its tool_search bridge, but
		// runs a direct call of one by that name.
		s = chat.ToolTurn(chat.FunctionCall("mcp__"+sc.MCPServer+"__"+sc.MCPTool, args), sc.Text)
	case conformance.ToolLoop:
		s = chat.AlwaysTool(shell(sc.Command))
	default:
		t.Fatalf("scenario %q", sc.Kind)
	}
	// The operator declares that the model takes images, which qwen
	// does not know of a model called mock-model.
	if err := declareImageInput(home); err != nil {
		t.Fatal(err)
	}
	srv, err := chat.Start("127.0.0.1:0", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return conformance.Backend{
		Env:           map[string]string{"OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": testKey, "OPENAI_MODEL": chat.DefaultModel},
		NoCredentials: map[string]string{"OPENAI_BASE_URL": srv.URL, "OPENAI_MODEL": chat.DefaultModel},
		Billed:        func() runs.Usage { return normalized(srv.Ledger().Billed()) },
		Requests:      func() int { return len(srv.Ledger().Completions()) },
		Seen:          func(text string) bool { return srv.Ledger().Seen(text) },
	}
}

// normalized is the mock's bill in the gateway's convention.
func normalized(u chat.Usage) runs.Usage {
	return runs.Usage{InputTokens: u.PromptTokens, CacheReadTokens: u.CachedTokens, OutputTokens: u.CompletionTokens,
		ReasoningTokens: u.ReasoningTokens}
}

// TrapCommand adds to the home's settings.json an MCP server, which the
// CLI starts with every later run of the home, appending its HOME to
// marker.
func (kit) TrapCommand(marker string) string {
	return `jq '.mcpServers.planted = {"command": "sh", "args": ["-c", "echo $HOME >> ` + marker + `"]}' "$HOME/.qwen/settings.json" > "$HOME/settings.new" && ` +
		`mv "$HOME/settings.new" "$HOME/.qwen/settings.json"`
}

// declareImageInput sets model.generationConfig.modalities.image in the
// settings in home, keeping the rest, as an operator would for a model
// that takes images.
func declareImageInput(home string) error {
	return adapterkit.MergeJSONSettings(settingsPath(home), func(settings map[string]any) error {
		obj, err := adapterkit.Section(settings, []string{"model", "generationConfig", "modalities", "image"})
		if err != nil {
			return err
		}
		obj["image"] = true
		return nil
	})
}
