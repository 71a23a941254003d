package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/runs"
)

// writeAgentsFile writes an agents file in a directory of its own.
func writeAgentsFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// An agent of the agents file is offered beside the built-in ones, says
// it is configured and what it does not report, and refuses the budget it
// cannot be held to by name.
func TestAgentsFileAddsAnAgent(t *testing.T) {
	file := writeAgentsFile(t, `
agents:
  - name: acme
    display_name: Acme over ACP
    command: `+agenttest.Bin(t, "qwen")+`
    args: ["--acp"]
    verified_version: "0.24.4"
    credentials:
      - {name: OPENAI_API_KEY, from_env: ACME_KEY}
    home_files:
      .qwen/settings.json: '{"telemetry": {"enabled": false}}'
  - name: acme-two
    command: acme-two-not-on-path
    args: ["--acp"]
`)
	settings := gatewayEnv(t, t.TempDir())
	settings["AGENTGATE_AGENTS_FILE"] = file
	settings["AGENTGATE_AGENTS"] = "codex,acme,acme-two"
	// A '-' of an agent's name is '_' in its settings' names.
	settings["AGENTGATE_ACME_TWO_BIN"] = agenttest.Bin(t, "qwen")
	g := startGateway(t, settings, nil)

	listed := agentsOf(t, g)
	acme, ok := listed["acme"]
	if !ok {
		t.Fatalf("acme is not listed: %v", listed)
	}
	want := runs.Reports{Usage: runs.UsageUnknown, Cost: runs.CostUnknown, ErrorClasses: runs.ErrorClassesGeneric}
	if acme.Source != runs.SourceConfigured || acme.Reports != want {
		t.Errorf("acme: source %q, reports %+v; want configured, %+v", acme.Source, acme.Reports, want)
	}
	if !acme.Installed || acme.Compatibility != runs.CompatVerified || acme.Version != "0.24.4" {
		t.Errorf("acme: %+v; want its CLI found and verified", acme)
	}
	// Without verified_version the CLI is usable, its version known and
	// compared with nothing.
	if two := listed["acme-two"]; !two.Installed || two.Path != settings["AGENTGATE_ACME_TWO_BIN"] ||
		two.Compatibility != runs.CompatUnverified || two.Version != "0.24.4" {
		t.Errorf("acme-two: %+v; want its CLI found through AGENTGATE_ACME_TWO_BIN, unverified", two)
	}
	if slices.Contains(acme.Capabilities, runs.FieldMaxTotalTokens) || !slices.Contains(acme.Capabilities, runs.FieldInteractive) {
		t.Errorf("acme capabilities %v", acme.Capabilities)
	}
	if codex := listed["codex"]; codex.Source != runs.SourceBuiltin || codex.Reports.Usage == runs.UsageUnknown {
		t.Errorf("codex: source %q, reports %+v", codex.Source, codex.Reports)
	}
	home := filepath.Join(settings["AGENTGATE_DATA_DIR"], "agents", "acme", ".qwen", "settings.json")
	if b, err := os.ReadFile(home); err != nil || !strings.Contains(string(b), "telemetry") {
		t.Errorf("the home file: %q, %v", b, err)
	}

	resp, err := http.Post(g.URL+"/v1/runs", "application/json",
		strings.NewReader(`{"agent":"acme","prompt":"hi","max_total_tokens":1000}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode/100 != 4 || e.Error.Code != "unsupported_option" || !strings.Contains(e.Error.Message, runs.FieldMaxTotalTokens) {
		t.Errorf("max_total_tokens on acme: %d %+v, want unsupported_option naming it", resp.StatusCode, e.Error)
	}
}

// A bad agents file fails the start, naming the file, the agent and the
// field.
func TestAgentsFileBadFailsStart(t *testing.T) {
	for name, c := range map[string]struct{ content, agent, field string }{
		"built-in name": {"agents: [{name: claude, command: x}]", "claude", "name"},
		"unknown key":   {"agents: [{name: acme, command: x, comand: y}]", "acme", "comand"},
		"home escape":   {"agents: [{name: acme, command: x, home_files: {../../etc/x: y}}]", "acme", "home_files"},
	} {
		t.Run(name, func(t *testing.T) {
			file := writeAgentsFile(t, c.content)
			t.Setenv("AGENTGATE_DATA_DIR", t.TempDir())
			getenv := func(k string) string {
				if k == agentsFileSetting {
					return file
				}
				return ""
			}
			err := run(context.Background(), nil, getenv, io.Discard)
			if err == nil {
				t.Fatal("the gateway started with a bad agents file")
			}
			for _, part := range []string{"AGENTGATE_AGENTS_FILE", file, "agent " + c.agent, c.field} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("%q does not name %q", err, part)
				}
			}
		})
	}
}
