package cline

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// demoServers is a run's MCP servers: one Cline starts, one it reaches.
func demoServers() map[string]runs.MCPServer {
	return map[string]runs.MCPServer{
		"demo":   {Command: "/usr/bin/demo", Args: []string{"--stdio"}, Env: map[string]string{"TOKEN": "s3cret"}},
		"remote": {URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer h3ader"}},
	}
}

// Both commands point Cline at the run's own MCP settings file and list
// the servers' secrets.
func TestCommandMCPServers(t *testing.T) {
	home := t.TempDir()
	want := mcpSettingsEnv + "=" + mcpSettingsPath(home, "run1")
	for _, spec := range []runs.Spec{
		{Prompt: "hi there", MCPServers: demoServers()},
		{Prompt: "hi there", MCPServers: demoServers(), Interactive: true},
	} {
		cmd, err := New().Command(runs.Invocation{RunID: "run1", Home: home, Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(cmd.Env, want) {
			t.Errorf("interactive %v: env %v lacks %s", spec.Interactive, cmd.Env, want)
		}
		if !slices.Contains(cmd.Secrets, "s3cret") || !slices.Contains(cmd.Secrets, "Bearer h3ader") {
			t.Errorf("interactive %v: secrets %v", spec.Interactive, cmd.Secrets)
		}
	}
	cmd, err := New().Command(runs.Invocation{RunID: "run1", Home: home, Spec: runs.Spec{Prompt: "hi there"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(cmd.Env, " "), mcpSettingsEnv) {
		t.Errorf("a run without MCP servers gets %v", cmd.Env)
	}
}

func TestCommandRefusesBadMCPServer(t *testing.T) {
	_, err := New().Command(runs.Invocation{Home: t.TempDir(), Spec: runs.Spec{Prompt: "hi there",
		MCPServers: map[string]runs.MCPServer{"both": {Command: "x", URL: "http://127.0.0.1:9/mcp"}}}})
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != runs.FieldMCPServers {
		t.Errorf("err = %v", err)
	}
}

// Preflight writes the settings file in Cline's format, for the owner
// alone; Finish removes it.
func TestMCPSettingsFileLifetime(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(settingsDir(home), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(providersPath(home), ProvidersJSON("http://127.0.0.1:9/v1", "m", "k"), 0o600); err != nil {
		t.Fatal(err)
	}
	inv := runs.Invocation{RunID: "run1", Home: home, Spec: runs.Spec{Prompt: "hi", MCPServers: demoServers()}, Files: runs.HostFiles{}}
	if e := New().Preflight(t.Context(), inv, nil); e != nil {
		t.Fatal(e)
	}
	path := mcpSettingsPath(home, "run1")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	b, _ := os.ReadFile(path)
	var got struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	demo, remote := got.MCPServers["demo"], got.MCPServers["remote"]
	if demo.Type != "stdio" || demo.Command != "/usr/bin/demo" || demo.Env["TOKEN"] != "s3cret" || len(demo.Args) != 1 {
		t.Errorf("demo = %+v", demo)
	}
	if remote.Type != "streamableHttp" || remote.URL != "http://127.0.0.1:9/mcp" || remote.Headers["Authorization"] != "Bearer h3ader" {
		t.Errorf("remote = %+v", remote)
	}
	out := newDecoder(inv).Finish(runs.Exit{}, nil)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Finish: %v", err)
	}
	for _, ev := range out.Events {
		if ev.Type == runs.EventWarning {
			t.Errorf("warning %+v", ev.Data)
		}
	}
	if others, _ := filepath.Glob(filepath.Join(settingsDir(home), "agentgate-mcp-*")); len(others) != 0 {
		t.Errorf("left behind: %v", others)
	}
}

// A tool named <server>__<tool> of one of the run's servers is an MCP
// call; a built-in tool is not.
func TestDecodeMCPToolCall(t *testing.T) {
	d := newDecoder(runs.Invocation{Spec: runs.Spec{MCPServers: demoServers()}})
	for name, want := range map[string][2]string{
		"demo__reverse_text": {"demo", "reverse_text"},
		"run_commands":       {"", ""},
		"other__tool":        {"", ""},
	} {
		evs := d.Decode([]byte(`{"ts":"2026-01-01T00:00:00Z","type":"agent_event","event":{"type":"content_start","contentType":"tool","toolName":"` +
			name + `","toolCallId":"call_` + name + `","input":{}}}`))
		if len(evs) != 1 {
			t.Fatalf("%s: %+v", name, evs)
		}
		got, ok := evs[0].Data.(runs.ToolCallStartedData)
		if !ok || got.Name != name || got.MCPServer != want[0] || got.MCPTool != want[1] {
			t.Errorf("%s: %+v", name, evs[0].Data)
		}
	}
}

// A one-shot run names its images in the prompt, where Cline reads them.
func TestCommandImageMentions(t *testing.T) {
	inv := runs.Invocation{Spec: runs.Spec{Prompt: "What is in it?"}, Images: []runs.Image{{Path: "/tmp/run/a.png", MediaType: "image/png"}}}
	cmd, err := New().Command(inv)
	if err != nil {
		t.Fatal(err)
	}
	if got := cmd.Args[len(cmd.Args)-1]; got != "What is in it?\n\n@\"/tmp/run/a.png\"" {
		t.Errorf("prompt = %q", got)
	}
	inv.Images[0].Path = "/tmp/a\"b.png"
	if _, err := New().Command(inv); err == nil {
		t.Error("a path with a quote was mentioned")
	}
}

// Over ACP Cline keeps only a prompt's text: a first prompt's images
// are refused, a later message's too, before anything reaches Cline, and
// the agent says its messages take none.
func TestSessionRefusesImages(t *testing.T) {
	img := []runs.Image{{Path: "/tmp/run/a.png", MediaType: "image/png", Data: []byte("png")}}
	_, err := New().Command(runs.Invocation{Spec: runs.Spec{Prompt: "hi there", Interactive: true}, Images: img})
	var fe *runs.FieldError
	if !errors.Is(err, runs.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != runs.FieldAttachments {
		t.Errorf("command: %v", err)
	}
	if New().Describe().Interaction.MessageAttachments {
		t.Error("the description says messages take images")
	}
	s := newSessionDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "hi", Interactive: true, Approvals: runs.ApprovalsAsk}})
	msgs := handshake(t, s)
	if len(msgs) != 1 || msgs[0].Method != "session/prompt" {
		t.Fatalf("after session/new: %+v", msgs)
	}
	s.Decode([]byte(`{"jsonrpc":"2.0","id":` + string(msgs[0].ID) + `,"result":{"stopReason":"end_turn"}}`))
	s.Pending()
	err = s.Send("look", img, false)
	if !errors.Is(err, runs.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != runs.FieldAttachments {
		t.Errorf("Send with images: %v, want unsupported naming attachments", err)
	}
	if out, _ := s.Pending(); len(out) != 0 {
		t.Errorf("the prompt with images went to cline: %s", out)
	}
}
