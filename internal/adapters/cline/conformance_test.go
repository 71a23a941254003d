package cline

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/conformance"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestConformance runs the suite every adapter passes.
func TestConformance(t *testing.T) { conformance.Run(t, kit{}) }

// testKey is the key the kit gives Cline for the mock.
const testKey = "sk-cline-conformance"

// kit plays the suite's scenarios with the mock Chat Completions API,
// configured as the openai-compatible provider in the home's
// providers.json, without its key, which CLINE_API_KEY gives.
type kit struct{}

func (kit) Adapter() runs.Adapter { return New() }

// FailureBound implements conformance.SlowFailures: Cline 3.0.65 retries
// a failed model request 5 times, 2 to 32 s apart (about 65 s for a
// persistent 500), shortened only by the server's Retry-After, and has
// no setting for it (the AI SDK's maxRetries is fixed at 5 in its code).
func (kit) FailureBound(status int) time.Duration {
	if status >= 500 {
		return 100 * time.Second
	}
	return 30 * time.Second
}

func (kit) Bin(t testing.TB) string { return agenttest.Bin(t, "cline") }

func (kit) Serve(t testing.TB, sc conformance.Scenario, home string) conformance.Backend {
	var s chat.Scenario
	switch sc.Kind {
	case conformance.Text:
		s = chat.TextAnswer(sc.Text)
	case conformance.Tool:
		s = chat.ToolTurn(chat.ClineCommands(sc.Command), sc.Text)
	case conformance.LongTool:
		s = chat.ToolThenText([]chat.Call{chat.ClineCommands(longCommand(sc.Marker))}, sc.Text)
	case conformance.TwoTools:
		s = chat.TwoTools(chat.ClineCommands(sc.Command), chat.ClineCommands(sc.Command2), sc.Text)
	case conformance.Turns:
		s = chat.Turns(sc.Text)
	case conformance.Failure:
		s = chat.Failure(sc.Status)
	case conformance.Hang:
		s = chat.Hang()
	case conformance.MCPTool:
		// Cline offers an MCP tool as <server>__<tool>.
		s = chat.ToolTurn(chat.FunctionCall(sc.MCPServer+"__"+sc.MCPTool, json.RawMessage(sc.Input)), sc.Text)
	case conformance.ToolLoop:
		s = chat.AlwaysTool(chat.ClineCommands(sc.Command))
	default:
		t.Fatalf("scenario %q", sc.Kind)
	}
	srv, err := chat.Start("127.0.0.1:0", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	if err := os.MkdirAll(settingsDir(home), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(providersPath(home), ProvidersJSON(srv.URL, "mock-model", ""), 0o600); err != nil {
		t.Fatal(err)
	}
	return conformance.Backend{
		Env:           map[string]string{KeyEnv: testKey},
		NoCredentials: map[string]string{},
		Model:         "mock-model",
		Billed:        func() runs.Usage { return normalized(srv.Ledger().Billed()) },
		Requests:      func() int { return len(srv.Ledger().Completions()) },
		Seen:          func(text string) bool { return srv.Ledger().Seen(text) },
	}
}

// normalized is the mock's bill as Cline can report it: Cline 3.0.65
// counts reasoning tokens in its output tokens, as the API's
// completion_tokens do, but never apart, in no output or record of its
// own (doc.go), so the bill's reasoning_tokens are left out.
func normalized(u chat.Usage) runs.Usage {
	return runs.Usage{InputTokens: u.PromptTokens, CacheReadTokens: u.CachedTokens, OutputTokens: u.CompletionTokens}
}

// longCommand runs for a minute: a perl that sleeps, whose command line
// carries marker, under a shell whose command line does not (it builds
// the marker from two halves).
func longCommand(marker string) string {
	head, tail := marker[:len(marker)/2], marker[len(marker)/2:]
	return fmt.Sprintf(`M=%s; perl -e 'sleep 60' "${M}%s"; echo stopped`, head, tail)
}

// TrapCommand adds a hook to the home's Cline hooks directory
// (~/.cline/hooks), which Cline runs at every later agent start.
func (kit) TrapCommand(marker string) string {
	return `mkdir -p "$HOME/.cline/hooks" && printf '#!/bin/sh\necho $HOME >> ` + marker +
		`\n' > "$HOME/.cline/hooks/TaskStart" && chmod +x "$HOME/.cline/hooks/TaskStart"`
}
