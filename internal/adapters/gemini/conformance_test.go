package gemini

import (
	"encoding/json"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/conformance"
	"github.com/agentgate/agentgate/internal/mock/googleai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestConformance runs the suite every adapter passes. The supervisor
// prepares the home (PrepareHome) once, at its start.
func TestConformance(t *testing.T) { conformance.Run(t, kit{}) }

// kit plays the suite's scenarios with the mock Gemini API.
type kit struct{}

func (kit) Adapter() runs.Adapter   { return New() }
func (kit) Bin(t testing.TB) string { return agenttest.Bin(t, "gemini") }

// Serve leaves Backend.Model empty: runs take DefaultModel from the
// settings PrepareHome wrote.
func (kit) Serve(t testing.TB, sc conformance.Scenario, home string) conformance.Backend {
	var s googleai.Scenario
	switch sc.Kind {
	case conformance.Text:
		s = googleai.TextAnswer(sc.Text)
	case conformance.Tool:
		s = googleai.ToolTurn(sc.Command, sc.Text)
	case conformance.LongTool:
		// The tool, then Scenario.Text for every later request: a
		// message sent during the turn, or the turn after an interrupt.
		s = googleai.ToolThenText("sleep 60; echo "+sc.Marker, sc.Text)
	case conformance.TwoTools:
		s = googleai.TwoTools(sc.Command, sc.Command2, sc.Text)
	case conformance.Turns:
		s = googleai.Turns(sc.Text)
	case conformance.Failure:
		s = googleai.Failure(sc.Status)
	case conformance.Hang:
		s = googleai.Hang()
	case conformance.MCPTool:
		var args map[string]any
		if err := json.Unmarshal([]byte(sc.Input), &args); err != nil {
			t.Fatalf("MCPTool input %q: %v", sc.Input, err)
		}
		// Offered to the model as mcp_<server>_<tool>.
		s = googleai.MCPTool(sc.MCPServer, sc.MCPTool, args, sc.Text)
	case conformance.ToolLoop:
		s = googleai.ToolLoop(sc.Command)
	default:
		t.Fatalf("scenario %q", sc.Kind)
	}
	srv, err := googleai.Start("127.0.0.1:0", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return conformance.Backend{
		Env:           map[string]string{"GOOGLE_GEMINI_BASE_URL": srv.URL, "GEMINI_API_KEY": testKey},
		NoCredentials: map[string]string{"GOOGLE_GEMINI_BASE_URL": srv.URL},
		Billed:        func() runs.Usage { return normalized(srv.Ledger().Billed()) },
		Requests:      func() int { return len(srv.Ledger().Calls()) },
		Seen:          func(text string) bool { return srv.Ledger().Seen(text) },
	}
}

// TrapCommand adds to the home's settings.json an MCP server, which the
// CLI starts with every later run of the home, appending its HOME to
// marker.
func (kit) TrapCommand(marker string) string {
	return `jq '.mcpServers.planted = {"command": "sh", "args": ["-c", "echo $HOME >> ` + marker + `"]}' "$HOME/.gemini/settings.json" > "$HOME/settings.new" && ` +
		`mv "$HOME/settings.new" "$HOME/.gemini/settings.json"`
}
