package claude

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// tinyPNG is a valid 2×2 red PNG, small enough for any wire.
var tinyPNG = []byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x02,
	0x00, 0x00, 0x00, 0x02, 0x08, 0x02, 0x00, 0x00, 0x00, 0xfd, 0xd4, 0x9a, 0x73, 0x00, 0x00, 0x00, 0x10, 0x49, 0x44, 0x41,
	0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x44, 0x0c, 0x10, 0x0a, 0x00, 0x1f, 0xee, 0x03, 0xfd, 0x8b, 0x5f, 0x14,
	0xd4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
}

// demoServers is a run's mcp_servers: a stdio server with a secret in its
// env, and a remote one with a secret header.
func demoServers() map[string]runs.MCPServer {
	return map[string]runs.MCPServer{
		"demo":   {Command: "/usr/bin/demo-mcp", Args: []string{"--flag", "-x"}, Env: map[string]string{"DEMO_TOKEN": "env-secret"}},
		"remote": {URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer header-secret"}},
	}
}

// mcpConfig reads the --mcp-config of args back.
func mcpConfig(t *testing.T, args []string) map[string]map[string]any {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--mcp-config="); ok {
			var cfg struct {
				MCPServers map[string]map[string]any `json:"mcpServers"`
			}
			if err := json.Unmarshal([]byte(v), &cfg); err != nil {
				t.Fatalf("--mcp-config is not JSON: %v", err)
			}
			return cfg.MCPServers
		}
	}
	t.Fatalf("no --mcp-config in %q", args)
	return nil
}

func TestCommandMCPServers(t *testing.T) {
	cmd := command(t, runs.Spec{Prompt: "x", MCPServers: demoServers()})
	if !slices.Contains(cmd.Args, "--strict-mcp-config") {
		t.Errorf("no --strict-mcp-config: the operator's own servers would reach the run: %q", cmd.Args)
	}
	cfg := mcpConfig(t, cmd.Args)
	demo, remote := cfg["demo"], cfg["remote"]
	if demo["type"] != "stdio" || demo["command"] != "/usr/bin/demo-mcp" || demo["url"] != nil {
		t.Errorf("stdio entry = %v", demo)
	}
	if args, _ := json.Marshal(demo["args"]); string(args) != `["--flag","-x"]` {
		t.Errorf("stdio args = %s", args)
	}
	env, _ := demo["env"].(map[string]any)
	if env["DEMO_TOKEN"] != "env-secret" {
		t.Errorf("stdio env = %v", env)
	}
	// The server inherits the CLI's environment: the gateway's model
	// credentials are emptied for it.
	for _, name := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"} {
		if v, ok := env[name]; !ok || v != "" {
			t.Errorf("stdio env %s = %v (set %v), want it emptied", name, v, ok)
		}
	}
	headers, _ := remote["headers"].(map[string]any)
	if remote["type"] != "http" || remote["url"] != "https://mcp.example.com/mcp" || headers["Authorization"] != "Bearer header-secret" ||
		remote["command"] != nil || remote["env"] != nil {
		t.Errorf("remote entry = %v", remote)
	}
	slices.Sort(cmd.Secrets)
	if want := []string{"Bearer header-secret", "env-secret"}; !slices.Equal(cmd.Secrets, want) {
		t.Errorf("secrets = %q, want %q", cmd.Secrets, want)
	}
	// One --allowedTools holds Bash and both servers.
	var allowed []string
	for _, a := range cmd.Args {
		if v, ok := strings.CutPrefix(a, "--allowedTools="); ok {
			allowed = append(allowed, v)
		}
	}
	if !slices.Equal(allowed, []string{"Bash,mcp__demo,mcp__remote"}) {
		t.Errorf("--allowedTools = %q", allowed)
	}
	if d := New().Describe(); !slices.Contains(d.Fields, runs.FieldMCPServers) || !slices.Contains(d.Fields, runs.FieldAttachments) {
		t.Errorf("fields %v lack mcp_servers or attachments", d.Fields)
	}
}

func TestCommandMCPPermissions(t *testing.T) {
	servers := map[string]runs.MCPServer{"demo": {Command: "/bin/demo"}}
	for _, c := range []struct {
		spec runs.Spec
		want []string // the --allowedTools flags
	}{
		{runs.Spec{Permission: runs.WorkspaceWrite}, []string{"Bash,mcp__demo"}},
		{runs.Spec{Permission: runs.ReadOnly}, []string{"mcp__demo"}},
		{runs.Spec{Permission: runs.Full}, nil},
		// Asked: nothing is allowed in advance.
		{runs.Spec{Permission: runs.WorkspaceWrite, Approvals: runs.ApprovalsAsk}, nil},
		{runs.Spec{Permission: runs.Full, Approvals: runs.ApprovalsAsk, Interactive: true}, nil},
	} {
		c.spec.Prompt, c.spec.MCPServers = "x", servers
		cmd := command(t, c.spec)
		var got []string
		for _, a := range cmd.Args {
			if v, ok := strings.CutPrefix(a, "--allowedTools="); ok {
				got = append(got, v)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s/%s: --allowedTools %q, want %q", c.spec.Permission, c.spec.Approvals, got, c.want)
		}
		if !slices.Contains(cmd.Args, "--strict-mcp-config") {
			t.Errorf("%s/%s: no --strict-mcp-config", c.spec.Permission, c.spec.Approvals)
		}
	}
	// The permission tables are not changed by a run that adds rules.
	if got := permissionArgs[runs.WorkspaceWrite]; !slices.Equal(got, []string{"--permission-mode=acceptEdits", "--allowedTools=Bash"}) {
		t.Errorf("permissionArgs changed: %q", got)
	}
	if cmd := command(t, runs.Spec{Prompt: "x"}); slices.ContainsFunc(cmd.Args, func(a string) bool { return strings.Contains(a, "mcp") }) {
		t.Errorf("a run without servers has MCP flags: %q", cmd.Args)
	}
}

func TestCommandMCPRefuses(t *testing.T) {
	for name, servers := range map[string]map[string]runs.MCPServer{
		"double underscore": {"a__b": {Command: "/bin/x"}},
		"dot":               {"a.b": {Command: "/bin/x"}},
		"empty name":        {"": {Command: "/bin/x"}},
		"trailing _":        {"a_": {Command: "/bin/x"}},
		"neither":           {"demo": {}},
		"both":              {"demo": {Command: "/bin/x", URL: "https://x"}},
		"expanded env":      {"demo": {Command: "/bin/x", Env: map[string]string{"K": "${ANTHROPIC_API_KEY}"}}},
		"expanded header":   {"demo": {URL: "https://x", Headers: map[string]string{"K": "a${HOME}"}}},
		"expanded arg":      {"demo": {Command: "/bin/x", Args: []string{"${HOME}"}}},
		"expanded command":  {"demo": {Command: "${HOME}/x"}},
		"expanded url":      {"demo": {URL: "https://${HOST}/"}},
		"too long":          {"demo": {Command: "/bin/x", Args: []string{strings.Repeat("a", maxArg)}}},
	} {
		_, err := New().Command(runs.Invocation{RunID: runID, Spec: runs.Spec{Prompt: "x", MCPServers: servers}})
		var fe *runs.FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, runs.FieldMCPServers) {
			t.Errorf("%s: %v, want a field error on mcp_servers", name, err)
		}
	}
	// A plain "$" is the CLI's to keep (only ${...} is expanded).
	if _, err := New().Command(runs.Invocation{RunID: runID, Spec: runs.Spec{Prompt: "x",
		MCPServers: map[string]runs.MCPServer{"my_demo-1": {Command: "/bin/x", Env: map[string]string{"K": "$HOME"}}}}}); err != nil {
		t.Errorf("valid server: %v", err)
	}
}

func TestMCPTool(t *testing.T) {
	servers := map[string]runs.MCPServer{"demo": {}, "my_srv": {}}
	for name, want := range map[string][2]string{
		"mcp__demo__reverse_text":  {"demo", "reverse_text"},
		"mcp__my_srv__a__b":        {"my_srv", "a__b"},
		"mcp__other__reverse_text": {},
		"mcp__demo__":              {},
		"mcp__demo":                {},
		"Bash":                     {},
		"mcp_demo_reverse_text":    {},
		"mcp____reverse_text":      {},
	} {
		server, tool, ok := mcpTool(name, servers)
		if [2]string{server, tool} != want || ok != (want[0] != "") {
			t.Errorf("%s: %q %q %v, want %q", name, server, tool, ok, want)
		}
	}
}

func FuzzMCPTool(f *testing.F) {
	for _, s := range []string{"mcp__demo__reverse_text", "mcp__demo__", "mcp____", "Bash", "mcp__a__b__c", ""} {
		f.Add(s)
	}
	servers := map[string]runs.MCPServer{"demo": {}, "a": {}}
	f.Fuzz(func(t *testing.T, name string) {
		server, tool, ok := mcpTool(name, servers)
		if !ok {
			if server != "" || tool != "" {
				t.Fatalf("%q: not ok but %q %q", name, server, tool)
			}
			return
		}
		if _, given := servers[server]; !given || tool == "" || "mcp__"+server+"__"+tool != name {
			t.Fatalf("%q: %q %q", name, server, tool)
		}
	})
}

func TestDecodeMCPToolCall(t *testing.T) {
	inv := runs.Invocation{Spec: runs.Spec{MCPServers: map[string]runs.MCPServer{"demo": {Command: "/bin/x"}}}}
	dec := New().NewDecoder(inv)
	evs := dec.Decode([]byte(`{"type":"assistant","message":{"id":"m1","content":[` +
		`{"type":"tool_use","id":"t1","name":"mcp__demo__reverse_text","input":{"text":"hello mcp"}},` +
		`{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"ls"}}]}}`))
	if len(evs) != 2 {
		t.Fatalf("events = %+v", evs)
	}
	mcp, bash := evs[0].Data.(runs.ToolCallStartedData), evs[1].Data.(runs.ToolCallStartedData)
	if mcp.Name != "mcp__demo__reverse_text" || mcp.MCPServer != "demo" || mcp.MCPTool != "reverse_text" {
		t.Errorf("MCP tool_call.started = %+v", mcp)
	}
	if bash.MCPServer != "" || bash.MCPTool != "" {
		t.Errorf("Bash tool_call.started = %+v", bash)
	}
	evs = dec.Decode([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"reversed:pcm olleh"}]}]}}`))
	if len(evs) != 1 || evs[0].Data.(runs.ToolCallCompletedData).Output != "reversed:pcm olleh" {
		t.Errorf("tool_call.completed = %+v", evs)
	}
	// The Bash call never returned: Finish closes it.
	o := dec.Finish(runs.Exit{Code: -1, Signal: "killed"}, nil)
	if len(o.Events) == 0 || o.Events[0].Data.(runs.ToolCallCompletedData).ID != "t2" {
		t.Errorf("outcome events = %+v", o.Events)
	}
}

func TestSessionMCPApproval(t *testing.T) {
	inv := runs.Invocation{Spec: runs.Spec{Prompt: "x", Approvals: runs.ApprovalsAsk,
		MCPServers: map[string]runs.MCPServer{"demo": {Command: "/bin/x"}}}}
	s := New().NewDecoder(inv).(runs.Session)
	s.Open()
	evs := s.Decode([]byte(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"mcp__demo__reverse_text",` +
		`"input":{"text":"hi"},"tool_use_id":"t1","mcp_server":{"name":"demo","source":"dynamic"},"server_policy_ask_only":true}}`))
	if len(evs) != 1 || evs[0].Type != runs.EventApprovalRequested {
		t.Fatalf("events = %+v", evs)
	}
	a := evs[0].Data.(runs.ApprovalRequestedData)
	if a.MCPServer != "demo" || a.Tool != "mcp__demo__reverse_text" || a.ToolCallID != "t1" {
		t.Errorf("approval = %+v", a)
	}
}

func TestUserLineImages(t *testing.T) {
	b, err := userLine("what is this?", []runs.Image{{Path: "/tmp/x/1.png", MediaType: "image/png", Data: tinyPNG}})
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Type    string `json:"type"`
		Message struct {
			Role    string `json:"role"`
			Content []struct {
				Type   string `json:"type"`
				Text   string `json:"text"`
				Source struct {
					Type      string `json:"type"`
					MediaType string `json:"media_type"`
					Data      string `json:"data"`
				} `json:"source"`
			} `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(b, &l); err != nil || !strings.HasSuffix(string(b), "}\n") {
		t.Fatalf("line %q: %v", b, err)
	}
	c := l.Message.Content
	if l.Type != "user" || len(c) != 2 || c[0].Type != "text" || c[0].Text != "what is this?" || c[1].Type != "image" ||
		c[1].Source.Type != "base64" || c[1].Source.MediaType != "image/png" || c[1].Source.Data != base64.StdEncoding.EncodeToString(tinyPNG) {
		t.Errorf("line = %s", b)
	}
	for name, img := range map[string]runs.Image{
		"svg":   {MediaType: "image/svg+xml", Data: []byte("<svg/>")},
		"empty": {MediaType: "image/png"},
	} {
		if _, err := userLine("x", []runs.Image{img}); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if _, err := New().Command(runs.Invocation{RunID: runID, Spec: runs.Spec{Prompt: "x"}, Images: []runs.Image{img}}); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("Command with %s: %v, want ErrInvalid", name, err)
		}
	}
	// The one-shot command carries the images on stdin, and a session's
	// Open does too.
	inv := runs.Invocation{RunID: runID, Spec: runs.Spec{Prompt: "look"}, Images: []runs.Image{{MediaType: "image/gif", Data: []byte("GIF89a")}}}
	cmd, err := New().Command(inv)
	if err != nil || !strings.Contains(string(cmd.Stdin), `"media_type":"image/gif"`) {
		t.Errorf("stdin %q: %v", cmd.Stdin, err)
	}
	inv.Spec.Interactive = true
	if open := New().NewDecoder(inv).(runs.Session).Open(); !strings.Contains(string(open), base64.StdEncoding.EncodeToString([]byte("GIF89a"))) {
		t.Errorf("Open = %q", open)
	}
}

func TestSessionSendImages(t *testing.T) {
	s := New().NewDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "x", Interactive: true}}).(runs.Session)
	s.Open()
	s.Decode([]byte(`{"type":"result","subtype":"success","result":"ok","usage":{"input_tokens":1,"output_tokens":1}}`))
	if err := s.Send("and this?", []runs.Image{{MediaType: "image/svg+xml", Data: []byte("<svg/>")}}, false); !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("Send of an SVG: %v, want ErrInvalid", err)
	}
	if out, _ := s.Pending(); len(out) != 0 {
		t.Errorf("a refused Send wrote %q", out)
	}
	if err := s.Send("and this?", []runs.Image{{MediaType: "image/webp", Data: []byte("RIFF")}}, false); err != nil {
		t.Fatal(err)
	}
	if out, _ := s.Pending(); !strings.Contains(string(out), `"media_type":"image/webp"`) || !strings.Contains(string(out), "and this?") {
		t.Errorf("Send wrote %q", out)
	}
}

func TestDecodeUsageAsStreamed(t *testing.T) {
	dec := New().NewDecoder(runs.Invocation{})
	var got []runs.Usage
	for _, l := range []string{
		`{"type":"stream_event","api_message_id":"m1","event":{"type":"message_start","message":{"usage":{"input_tokens":100,"cache_creation_input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}}`,
		`{"type":"stream_event","api_message_id":"m1","event":{"type":"message_delta","usage":{"input_tokens":100,"cache_creation_input_tokens":10,"cache_read_input_tokens":5,"output_tokens":30}}}`,
		`{"type":"stream_event","api_message_id":"m1","event":{"type":"message_stop"}}`,
		`{"type":"stream_event","api_message_id":"m2","event":{"type":"message_start","message":{"usage":{"input_tokens":7,"output_tokens":1}}}}`,
	} {
		for _, ev := range dec.Decode([]byte(l)) {
			if ev.Type == runs.EventUsageUpdated {
				got = append(got, ev.Data.(runs.UsageData).Usage)
			}
		}
	}
	want := []runs.Usage{
		{InputTokens: 115, CacheReadTokens: 5, CacheWriteTokens: 10, OutputTokens: 1},
		{InputTokens: 115, CacheReadTokens: 5, CacheWriteTokens: 10, OutputTokens: 30},
		{InputTokens: 122, CacheReadTokens: 5, CacheWriteTokens: 10, OutputTokens: 31},
	}
	if !slices.Equal(got, want) {
		t.Errorf("usage.updated =\n  %+v\nwant\n  %+v", got, want)
	}
	// Killed before its result, the run keeps what was streamed.
	if o := dec.Finish(runs.Exit{Code: -1, Signal: "killed", Reason: "budget"}, nil); o.Usage != want[2] {
		t.Errorf("outcome usage = %+v, want %+v", o.Usage, want[2])
	}
}

func TestSessionUsageAsStreamed(t *testing.T) {
	s := New().NewDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "x", Interactive: true}}).(runs.Session)
	s.Open()
	s.Decode([]byte(`{"type":"result","subtype":"success","result":"ok","usage":{"input_tokens":10,"output_tokens":2},"total_cost_usd":0.5}`))
	if err := s.Send("next", nil, false); err != nil {
		t.Fatal(err)
	}
	evs := s.Decode([]byte(`{"type":"stream_event","api_message_id":"m2","event":{"type":"message_start","message":{"usage":{"input_tokens":7,"output_tokens":1}}}}`))
	if len(evs) != 1 || evs[0].Type != runs.EventUsageUpdated {
		t.Fatalf("events = %+v", evs)
	}
	u := evs[0].Data.(runs.UsageData)
	if u.Usage != (runs.Usage{InputTokens: 17, OutputTokens: 3}) || u.CostUSD == nil || *u.CostUSD != 0.5 {
		t.Errorf("usage.updated = %+v (cost %v), want the first turn's and the stream's", u.Usage, u.CostUSD)
	}
}

func TestBudgetNamesIt(t *testing.T) {
	for sub, want := range map[string][2]string{
		"error_max_turns":      {string(runs.MaxTurns), runs.FieldMaxTurns},
		"error_max_budget_usd": {string(runs.BudgetExceeded), runs.FieldMaxBudgetUSD},
	} {
		dec := New().NewDecoder(runs.Invocation{})
		dec.Decode([]byte(`{"type":"result","subtype":"` + sub + `","is_error":true}`))
		o := dec.Finish(runs.Exit{Code: 1}, nil)
		if o.Error == nil || string(o.Error.Class) != want[0] || o.Error.Budget != want[1] || !strings.HasPrefix(o.Error.Message, want[1]+" reached: ") {
			t.Errorf("%s: error %+v, want class %s budget %s", sub, o.Error, want[0], want[1])
		}
	}
}

func TestDecodeSchemaMismatch(t *testing.T) {
	lines := []string{
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"s1","name":"StructuredOutput","input":{"city":"Paris"}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"s1","is_error":true,"content":"Output does not match required schema: root: must have required property 'visits'"}]}}`,
		`{"type":"result","subtype":"success","result":"Done.","usage":{"input_tokens":1,"output_tokens":1}}`,
	}
	dec := New().NewDecoder(runs.Invocation{Spec: runs.Spec{OutputSchema: json.RawMessage(`{}`)}})
	for _, l := range lines {
		dec.Decode([]byte(l))
	}
	o := dec.Finish(runs.Exit{}, nil)
	if o.Status != runs.Failed || o.Error == nil || o.Error.Class != runs.SchemaMismatch ||
		o.Error.Message != "the answer does not match output_schema: root: must have required property 'visits'" {
		t.Errorf("outcome %s %+v", o.Status, o.Error)
	}
	// A later call that matched clears it.
	dec = New().NewDecoder(runs.Invocation{})
	for _, l := range append(lines[:2:2],
		`{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"s2","name":"StructuredOutput","input":{"city":"Paris","visits":2}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"s2","content":"Structured output provided successfully"}]}}`,
		`{"type":"result","subtype":"success","result":"{}","structured_output":{"city":"Paris","visits":2}}`) {
		dec.Decode([]byte(l))
	}
	if o := dec.Finish(runs.Exit{}, nil); o.Status != runs.Succeeded || string(o.StructuredOutput) != `{"city":"Paris","visits":2}` {
		t.Errorf("outcome %s %+v %s", o.Status, o.Error, o.StructuredOutput)
	}
}
