package gemini

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// A run given MCP servers or images goes over ACP, one-shot too, with the
// servers in session/new and their values as the command's secrets.
func TestCommandGiven(t *testing.T) {
	a := New()
	d := a.Describe()
	if !slices.Contains(d.Fields, runs.FieldMCPServers) || !slices.Contains(d.Fields, runs.FieldAttachments) {
		t.Errorf("fields %v", d.Fields)
	}
	servers := map[string]runs.MCPServer{
		"demo":   {Command: "/bin/srv", Args: []string{"-x"}, Env: map[string]string{"TOKEN": "env-secret"}},
		"remote": {URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer hdr-secret"}},
	}
	for name, spec := range map[string]runs.Spec{
		"mcp":   {Prompt: "p", MCPServers: servers},
		"image": {Prompt: "p", Attachments: []runs.Attachment{{FileID: "f", MediaType: "image/png"}}},
	} {
		if !a.PrefersSession(spec) {
			t.Errorf("%s: no session preferred", name)
		}
		inv := runs.Invocation{RunID: runID, Spec: spec, Dir: "/w", Home: "/h"}
		cmd, err := a.Command(inv)
		if err != nil || cmd.Args[0] != "--acp" || cmd.Stdin != nil {
			t.Fatalf("%s: %+v %v", name, cmd, err)
		}
		if _, ok := a.NewDecoder(inv).(runs.Session); !ok {
			t.Errorf("%s: the decoder is no Session", name)
		}
		if name == "mcp" && !slices.Equal(cmd.Secrets, []string{"env-secret", "Bearer hdr-secret"}) {
			t.Errorf("secrets %q", cmd.Secrets)
		}
		if name == "mcp" && bytes.Contains([]byte(cmd.Args[len(cmd.Args)-1]), []byte("secret")) {
			t.Errorf("a secret on the command line: %q", cmd.Args)
		}
	}
	if a.PrefersSession(runs.Spec{Prompt: "p"}) {
		t.Error("a plain run prefers the session")
	}
	// The profile's session/new entries.
	p := sessionProfile(runs.Invocation{Spec: runs.Spec{Prompt: "p", MCPServers: servers}, Dir: "/w", Home: "/h"}, runs.HostFiles{})
	if len(p.MCPServers) != 2 || !p.AllowMCP || !p.RefuseAll {
		t.Fatalf("profile %+v", p)
	}
	var remote map[string]any
	if err := json.Unmarshal(p.MCPServers[1], &remote); err != nil || remote["type"] != "http" || remote["url"] != "https://mcp.example/mcp" {
		t.Errorf("remote entry %s", p.MCPServers[1])
	}
	if p := sessionProfile(runs.Invocation{Spec: runs.Spec{Prompt: "p", MCPServers: servers, Approvals: runs.ApprovalsAsk}}, runs.HostFiles{}); p.AllowMCP || p.RefuseAll {
		t.Errorf("a run that asks: AllowMCP %v RefuseAll %v", p.AllowMCP, p.RefuseAll)
	}
}

// An MCP call is told by its id's tool name, else by its title.
func TestSessionMCPTool(t *testing.T) {
	servers := map[string]runs.MCPServer{"demo": {}, "my_srv": {}}
	for _, c := range []struct {
		tc           acp.ToolCall
		server, tool string
	}{
		{acp.ToolCall{ToolCallID: "mcp_demo_reverse_text__mcp_demo_reverse_text_1796145492558_0", Title: "reverse_text (demo MCP Server)"}, "demo", "reverse_text"},
		{acp.ToolCall{ToolCallID: "mcp_my_srv_a_b__mcp_my_srv_a_b_1_0"}, "my_srv", "a_b"},
		{acp.ToolCall{ToolCallID: "x", Title: "reverse_text (demo MCP Server)"}, "demo", "reverse_text"},
		{acp.ToolCall{ToolCallID: "x", Title: "reverse_text (other MCP Server)"}, "", ""},
		{acp.ToolCall{ToolCallID: "run_shell_command__run_shell_command_1_0", Title: "ls"}, "", ""},
		{acp.ToolCall{ToolCallID: "mcp_other_t__mcp_other_t_1_0"}, "", ""},
	} {
		s, tool, ok := sessionMCPTool(c.tc, servers)
		if s != c.server || tool != c.tool || ok != (c.server != "") {
			t.Errorf("%+v: %q %q %v", c.tc, s, tool, ok)
		}
	}
	if _, _, ok := sessionMCPTool(acp.ToolCall{ToolCallID: "mcp_demo_x__1"}, nil); ok {
		t.Error("a run without servers has MCP calls")
	}
}

// FuzzSessionMCPTool: any tool call id and title, MCP or not, is read
// without a panic, and a call it names is of a server of the run.
func FuzzSessionMCPTool(f *testing.F) {
	f.Add("mcp_demo_reverse_text__mcp_demo_reverse_text_1796145492558_0", "reverse_text (demo MCP Server)")
	f.Add("run_shell_command__run_shell_command_1_0", "ls -la")
	f.Add("x", " (demo MCP Server)")
	f.Add("mcp_demo___", "(demo MCP Server)")
	servers := map[string]runs.MCPServer{"demo": {}, "de": {}, "my_srv": {}}
	f.Fuzz(func(t *testing.T, id, title string) {
		s, tool, ok := sessionMCPTool(acp.ToolCall{ToolCallID: id, Title: title}, servers)
		if _, known := servers[s]; ok != (known && tool != "") {
			t.Errorf("%q %q: %q %q %v", id, title, s, tool, ok)
		}
	})
}
