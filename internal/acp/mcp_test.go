package acp

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestMCPServers(t *testing.T) {
	if got := MCPServers(nil); got != nil {
		t.Errorf("MCPServers(nil) = %v", got)
	}
	servers := map[string]runs.MCPServer{
		"zeta": {URL: "https://mcp.example/x", Headers: map[string]string{"X-B": "hb", "Authorization": "Bearer ha"}},
		"demo": {Command: "/bin/srv", Env: map[string]string{"TOKEN": "s3cret", "A": "1"}},
		"argv": {Command: "/bin/srv", Args: []string{"--stdio"}},
	}
	var got []any
	for _, raw := range MCPServers(servers) {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := []any{
		map[string]any{"name": "argv", "command": "/bin/srv", "args": []any{"--stdio"}, "env": []any{}},
		map[string]any{"name": "demo", "command": "/bin/srv", "args": []any{}, "env": []any{
			map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "TOKEN", "value": "s3cret"}}},
		map[string]any{"type": "http", "name": "zeta", "url": "https://mcp.example/x", "headers": []any{
			map[string]any{"name": "Authorization", "value": "Bearer ha"}, map[string]any{"name": "X-B", "value": "hb"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MCPServers =\n%v\nwant\n%v", got, want)
	}
	if got, want := MCPSecrets(servers), []string{"1", "s3cret", "Bearer ha", "hb"}; !slices.Equal(got, want) {
		t.Errorf("MCPSecrets = %q, want %q", got, want)
	}
	if got := MCPSecrets(map[string]runs.MCPServer{"e": {Command: "x", Env: map[string]string{"EMPTY": ""}}}); got != nil {
		t.Errorf("MCPSecrets of an empty value = %q", got)
	}
}

func TestSplitMCPName(t *testing.T) {
	servers := map[string]runs.MCPServer{"demo": {}, "demo_x": {}, "a-b": {}}
	for _, c := range []struct {
		name, prefix, sep, server, tool string
	}{
		{"mcp_demo_reverse_text", "mcp_", "_", "demo", "reverse_text"},
		{"mcp_demo_x_show", "mcp_", "_", "demo_x", "show"},
		{"demo-reverse_text", "", "-", "demo", "reverse_text"},
		{"a-b-t", "", "-", "a-b", "t"},
		{"run_shell_command", "mcp_", "_", "", ""},
		{"mcp_other_tool", "mcp_", "_", "", ""},
		{"mcp_demo_", "mcp_", "_", "", ""},
	} {
		s, tool, ok := SplitMCPName(c.name, c.prefix, c.sep, servers)
		if s != c.server || tool != c.tool || ok != (c.server != "") {
			t.Errorf("SplitMCPName(%q) = %q %q %v, want %q %q", c.name, s, tool, ok, c.server, c.tool)
		}
	}
}

// mcpProfile names a call of an MCP tool by its title, "<tool> (<server>)".
func mcpProfile() Profile {
	return Profile{
		Agent: "t", RefuseAll: true, AllowMCP: true,
		MCPTool: func(tc ToolCall) (string, string, bool) {
			return SplitMCPName(tc.ToolCallID[:len(tc.ToolCallID)-2], "mcp_", "_", map[string]runs.MCPServer{"demo": {}})
		},
	}
}

func TestMCPToolCalls(t *testing.T) {
	inv := runs.Invocation{RunID: "r1", Dir: "/d", Spec: runs.Spec{Prompt: "p", MCPServers: map[string]runs.MCPServer{
		"demo": {Command: "/bin/srv", Env: map[string]string{"TOKEN": "v"}},
	}}}
	p := mcpProfile()
	p.MCPServers = MCPServers(inv.Spec.MCPServers)
	s := &script{t: t, d: NewDecoder(inv, p)}
	s.d.Open()
	s.agent(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	msgs, _ := s.client()
	want := []any{map[string]any{"name": "demo", "command": "/bin/srv", "args": []any{}, "env": []any{map[string]any{"name": "TOKEN", "value": "v"}}}}
	if got := msgs[0]["params"].(map[string]any)["mcpServers"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("session/new mcpServers = %v", got)
	}
	s.agent(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`)
	s.client()

	// A run without approvals: the MCP tool is allowed unasked, a
	// built-in tool that asks is refused.
	evs := s.agent(`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S1","toolCall":{"toolCallId":"mcp_demo_reverse_text_1","title":"reverse_text (demo MCP Server)","kind":"other"},"options":[{"optionId":"ok1","kind":"allow_once"},{"optionId":"no","kind":"reject_once"}]}}`)
	wantTypes(t, evs, runs.EventToolCallStarted)
	if d := evs[0].Data.(runs.ToolCallStartedData); d.MCPServer != "demo" || d.MCPTool != "reverse_text" {
		t.Errorf("started %+v", d)
	}
	msgs, _ = s.client()
	if len(msgs) != 1 || msgs[0]["result"].(map[string]any)["outcome"].(map[string]any)["optionId"] != "ok1" {
		t.Errorf("answer to the MCP call: %v", msgs)
	}
	evs = s.agent(`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"S1","toolCall":{"toolCallId":"mcp_other_tool_2","title":"x","kind":"other"},"options":[{"optionId":"ok1","kind":"allow_once"},{"optionId":"no","kind":"reject_once"}]}}`)
	wantTypes(t, evs, runs.EventToolCallStarted, runs.EventWarning)
	if d := evs[0].Data.(runs.ToolCallStartedData); d.MCPServer != "" || d.MCPTool != "" {
		t.Errorf("a server the run was not given: %+v", d)
	}
	msgs, _ = s.client()
	if len(msgs) != 1 || msgs[0]["result"].(map[string]any)["outcome"].(map[string]any)["optionId"] != "no" {
		t.Errorf("answer to the other call: %v", msgs)
	}

	// With approvals the MCP call is asked, naming its server.
	p.RefuseAll = false
	s2 := newScript(t, p)
	s2.d.inv.Spec.MCPServers = inv.Spec.MCPServers
	s2.d.p.MCPServers = nil
	s2.up()
	evs = s2.agent(`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S1","toolCall":{"toolCallId":"mcp_demo_reverse_text_1","title":"reverse_text (demo MCP Server)","kind":"other"},"options":[{"optionId":"ok1","kind":"allow_once"},{"optionId":"no","kind":"reject_once"}]}}`)
	wantTypes(t, evs, runs.EventToolCallStarted, runs.EventApprovalRequested)
	if a := evs[1].Data.(runs.ApprovalRequestedData); a.MCPServer != "demo" {
		t.Errorf("approval %+v", a)
	}
}

// TestUsageSoFar: a tool call's start asks for the turn's usage so far,
// and usage.updated carries the run's sum with it, once per change.
func TestUsageSoFar(t *testing.T) {
	soFar := runs.Usage{InputTokens: 10, OutputTokens: 2}
	p := Profile{Agent: "t", UsageSoFar: func(string) (runs.Usage, bool) { return soFar, true }}
	s := newScript(t, p)
	s.up()
	evs := s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","status":"in_progress","kind":"execute"}}}`)
	wantTypes(t, evs, runs.EventUsageUpdated, runs.EventToolCallStarted)
	if u := evs[0].Data.(runs.UsageData).Usage; u != soFar {
		t.Errorf("usage %+v", u)
	}
	evs = s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"tool_call","toolCallId":"c2","status":"in_progress","kind":"execute"}}}`)
	wantTypes(t, evs, runs.EventToolCallStarted) // no change, no event
}

// FuzzSplitMCPName: any name splits into a server of the run and a
// non-empty tool that rebuild it, or not at all.
func FuzzSplitMCPName(f *testing.F) {
	f.Add("mcp_demo_reverse_text", "mcp_", "_")
	f.Add("demo-reverse_text", "", "-")
	f.Add("mcp_demo_", "mcp_", "_")
	f.Add("", "", "")
	servers := map[string]runs.MCPServer{"demo": {}, "demo_x": {}, "": {}}
	f.Fuzz(func(t *testing.T, name, prefix, sep string) {
		s, tool, ok := SplitMCPName(name, prefix, sep, servers)
		if !ok {
			return
		}
		if _, known := servers[s]; !known || tool == "" || prefix+s+sep+tool != name {
			t.Errorf("%q → %q %q", name, s, tool)
		}
	})
}
