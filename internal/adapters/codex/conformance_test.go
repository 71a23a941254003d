package codex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/conformance"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestConformance runs the suite every adapter passes.
func TestConformance(t *testing.T) { conformance.Run(t, kit{}) }

// kit plays the suite's scenarios with the mock Responses API, named as
// the model provider in the Codex home's config.toml.
type kit struct{}

func (kit) Adapter() runs.Adapter { return New() }

// Bin is the npm launcher, which the probe resolves to the native binary.
func (kit) Bin(t testing.TB) string { return agenttest.Bin(t, "codex") }

func (kit) Serve(t testing.TB, sc conformance.Scenario, home string) conformance.Backend {
	var s openai.Scenario
	switch sc.Kind {
	case conformance.Text:
		s = openai.TextAnswer(sc.Text)
	case conformance.Tool:
		s = openai.ToolTurn(sc.Command, sc.Text)
	case conformance.LongTool:
		// Polled while it runs; every later request (steered input, the
		// next turn after an interrupt) is answered with the text.
		s = openai.LongThenText("sleep 60; echo "+sc.Marker, sc.Text)
	case conformance.TwoTools:
		s = openai.TwoTools(sc.Command, sc.Command2, sc.Text)
	case conformance.Turns:
		s = openai.Turns(sc.Text)
	case conformance.Failure:
		s = openai.Failure(sc.Status)
	case conformance.Hang:
		s = openai.Hang()
	case conformance.MCPTool:
		s = openai.MCPTurn(sc.MCPServer, sc.MCPTool, sc.Input, sc.Text)
	case conformance.ToolLoop:
		s = openai.ToolLoop(sc.Command)
	default:
		t.Fatalf("scenario %q", sc.Kind)
	}
	srv, images, err := openai.StartWithImages("127.0.0.1:0", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Cleanup(func() { logToolOutputs(t, srv.Ledger()) })
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(mockConfig(srv.URL, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	return conformance.Backend{
		Env:           map[string]string{testKeyEnv: testKey},
		NoCredentials: map[string]string{},
		Model:         openai.DefaultModel,
		Billed:        func() runs.Usage { return booked(srv) },
		Requests:      func() int { return len(srv.Ledger().Responses()) },
		// An image reaches the model as a data URL, which the ledger's
		// summary of a request does not keep.
		Seen: func(text string) bool { return srv.Ledger().Seen(text) || images.Seen(text) },
	}
}

// logToolOutputs logs, for a case that failed, what Codex sent the model as
// each tool's output: Codex tells the model, and only the model, when it
// could not start a command (its sandbox helper missing, say), and sends
// no item for it.
func logToolOutputs(t testing.TB, l openai.Ledger) {
	if !t.Failed() {
		return
	}
	seen := map[string]bool{}
	for _, e := range l.Responses() {
		for _, in := range e.Request.Input {
			if in.Type != "function_call_output" || seen[in.CallID] {
				continue
			}
			seen[in.CallID] = true
			out := in.Output
			if len(out) > 2000 {
				out = out[:2000] + "…"
			}
			t.Logf("the model got, as the output of tool call %s: %s", in.CallID, out)
		}
	}
}

// TrapCommand puts, at the top of the home's config.toml (CODEX_HOME is
// the run's HOME), a notifier and an MCP server, each of which appends
// the HOME of a later run of the home to marker.
func (kit) TrapCommand(marker string) string {
	run := `["-c", "echo $HOME >> ` + marker + `"]`
	return `{ printf '%s\n' 'notify = ["sh", ` + run[1:] + `' 'mcp_servers.planted.command = "sh"' 'mcp_servers.planted.args = ` + run + `'; ` +
		`cat "$HOME/config.toml"; } > "$HOME/config.toml.new" && mv "$HOME/config.toml.new" "$HOME/config.toml"`
}
