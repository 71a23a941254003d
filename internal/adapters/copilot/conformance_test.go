package copilot

import (
	"encoding/json"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/conformance"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestConformance runs the suite every adapter passes.
func TestConformance(t *testing.T) { conformance.Run(t, kit{}) }

// kit plays the suite's scenarios with the mock Responses API as the
// CLI's custom provider, offline.
type kit struct{}

func (kit) Adapter() runs.Adapter { return New() }

// Bin is the npm launcher, which the probe resolves to the native binary.
func (kit) Bin(t testing.TB) string { return agenttest.Bin(t, "copilot") }

func (kit) Serve(t testing.TB, sc conformance.Scenario, _ string) conformance.Backend {
	var s openai.Scenario
	switch sc.Kind {
	case conformance.Text:
		s = openai.TextAnswer(sc.Text)
	case conformance.Tool:
		s = openai.BashTurn(sc.Command, sc.Text)
	case conformance.LongTool:
		// The bash tool runs `bash -c <command>`, whose command line
		// carries the marker. Every later request, a prompt sent during
		// the turn or the turn after an interrupt, gets Scenario.Text.
		s = openai.BashLongThenText("sleep 60; echo "+sc.Marker, sc.Text)
	case conformance.TwoTools:
		s = openai.BashTwoTools(sc.Command, sc.Command2, sc.Text)
	case conformance.Turns:
		s = openai.Turns(sc.Text)
	case conformance.Failure:
		s = openai.Failure(sc.Status)
	case conformance.Hang:
		s = openai.Hang()
	case conformance.MCPTool:
		s = openai.CopilotMCPCall(sc.MCPServer, sc.MCPTool, json.RawMessage(sc.Input), sc.Text)
	case conformance.ToolLoop:
		s = openai.BashLoop(sc.Command)
	default:
		t.Fatalf("scenario %q", sc.Kind)
	}
	// The images a request carries are kept apart: the ledger's
	// summary of a request has none.
	srv, images, err := openai.StartWithImages("127.0.0.1:0", s, openai.RequireKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	env := providerEnv(srv.URL)
	// Without its key the CLI still reaches the mock, which refuses it
	// as the API does: 401, not_authenticated.
	noKey := providerEnv(srv.URL)
	delete(noKey, "COPILOT_PROVIDER_API_KEY")
	return conformance.Backend{
		Env:           env,
		NoCredentials: noKey,
		Model:         openai.DefaultModel,
		Billed:        func() runs.Usage { return normalized(srv.Ledger().Billed()) },
		Requests:      func() int { return len(srv.Ledger().Responses()) },
		Seen:          func(text string) bool { return srv.Ledger().Seen(text) || images.Seen(text) },
	}
}

// TrapCommand writes the home's ~/.copilot/mcp-config.json with an MCP
// server, which the CLI starts with every later run of the home,
// appending its HOME to marker.
func (kit) TrapCommand(marker string) string {
	return `mkdir -p "$HOME/.copilot" && printf '%s\n' '{"mcpServers": {"planted": {"type": "local", "command": "sh", "args": ["-c", "echo $HOME >> ` + marker +
		`"], "tools": ["*"]}}}' > "$HOME/.copilot/mcp-config.json"`
}
