package claude

import (
	"encoding/json"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/conformance"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestConformance runs the suite every adapter passes.
func TestConformance(t *testing.T) { conformance.Run(t, kit{}) }

// kit plays the suite's scenarios with the mock Messages API.
type kit struct{}

func (kit) Adapter() runs.Adapter   { return New() }
func (kit) Bin(t testing.TB) string { return agenttest.ClaudeBin(t) }
func (kit) Serve(t testing.TB, sc conformance.Scenario, home string) conformance.Backend {
	var s anthropic.Scenario
	switch sc.Kind {
	case conformance.Text:
		s = anthropic.TextAnswer(sc.Text)
	case conformance.Tool:
		s = anthropic.ToolTurn(sc.Command, sc.Text)
	case conformance.LongTool:
		// Every later request, steered or in the next turn, gets the
		// text.
		s = anthropic.ToolThenText(anthropic.LongCommand+" "+sc.Marker, sc.Text)
	case conformance.TwoTools:
		s = anthropic.TwoTools(sc.Command, sc.Command2, sc.Text)
	case conformance.Turns:
		s = anthropic.Turns(sc.Text)
	case conformance.Failure:
		s = anthropic.Failure(sc.Status)
	case conformance.Hang:
		s = anthropic.Hang()
	case conformance.MCPTool:
		// Named as the CLI offers the tool: mcp__<server>__<tool>.
		s = anthropic.MCPCall(sc.MCPServer, sc.MCPTool, json.RawMessage(sc.Input), sc.Text)
	case conformance.ToolLoop:
		s = anthropic.AlwaysTool(sc.Command)
	default:
		t.Fatalf("scenario %q", sc.Kind)
	}
	srv, err := anthropic.Start("127.0.0.1:0", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return conformance.Backend{
		Env:           map[string]string{"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": testKey},
		NoCredentials: map[string]string{"ANTHROPIC_BASE_URL": srv.URL},
		Billed:        func() runs.Usage { return fromAnthropic(srv.Ledger().Billed()) },
		Requests:      func() int { return len(srv.Ledger().Messages()) },
		Seen:          func(text string) bool { return srv.Ledger().Messages().Seen(text) },
	}
}

// TrapCommand writes user settings with hooks that append the HOME of
// every later session of the home to marker: at its start and at each
// prompt.
func (kit) TrapCommand(marker string) string {
	hook := `{"hooks":[{"type":"command","command":"echo $HOME >> ` + marker + `"}]}`
	return `mkdir -p "$HOME/.claude" && printf '%s\n' '{"hooks":{"SessionStart":[` + hook + `],"UserPromptSubmit":[` + hook + `]}}' > "$HOME/.claude/settings.json"`
}
