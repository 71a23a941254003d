package codex

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

var testServers = map[string]runs.MCPServer{
	"demo": {Command: "/opt/mcp/demo", Args: []string{"--stdio"}, Env: map[string]string{"DEMO_TOKEN": "env-secret"}},
	"remote": {URL: "https://mcp.example.test/mcp",
		Headers: map[string]string{"Authorization": "Bearer header-secret", "X-Region": "eu"}},
}

// TestThreadConfigCarriesMCPServers: stdio and remote servers reach
// thread/start's config as Codex's mcp_servers tables, approved in
// advance with approvals never and left to Codex's asking otherwise, in
// thread/resume too. Nothing of them is on the command line.
func TestThreadConfigCarriesMCPServers(t *testing.T) {
	for _, asks := range []bool{false, true} {
		spec := runs.Spec{Prompt: "p", MCPServers: testServers}
		if asks {
			spec.Approvals = runs.ApprovalsAsk
		}
		for _, resume := range []string{"", "th0"} {
			spec.ResumeSessionID = resume
			inv := runs.Invocation{Dir: "/w/run", Spec: spec}
			thread, _ := handshake(t, newDecoder(inv, nil), "th1") // no config.toml: no operator servers
			var p struct {
				Config struct {
					MCPServers map[string]map[string]any `json:"mcp_servers"`
					Grace      int                       `json:"mcp_optional_startup_grace_ms"`
				} `json:"config"`
			}
			b, _ := json.Marshal(thread["params"])
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			approve := "approve"
			if asks {
				approve = ""
			}
			want := map[string]map[string]any{
				"demo": {"command": "/opt/mcp/demo", "args": []any{"--stdio"}, "env": map[string]any{"DEMO_TOKEN": "env-secret"}},
				"remote": {"url": "https://mcp.example.test/mcp",
					"http_headers": map[string]any{"Authorization": "Bearer header-secret", "X-Region": "eu"}},
			}
			for _, v := range want {
				v["startup_timeout_sec"] = float64(mcpStartupSeconds)
				if approve != "" {
					v["default_tools_approval_mode"] = approve
				}
			}
			if p.Config.Grace != mcpStartupSeconds*1000 {
				t.Errorf("asks %v, resume %q: mcp_optional_startup_grace_ms = %d, want %d", asks, resume, p.Config.Grace, mcpStartupSeconds*1000)
			}
			if !reflect.DeepEqual(p.Config.MCPServers, want) {
				t.Errorf("asks %v, resume %q: %s mcp_servers = %v, want %v", asks, resume, thread["method"], p.Config.MCPServers, want)
			}
		}
	}
	thread, _ := handshake(t, newDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p"}}, nil), "th1")
	if _, ok := thread["params"].(map[string]any)["config"]; ok {
		t.Errorf("a run without MCP servers sent a config: %v", thread)
	}

	c, err := New().Command(runs.Invocation{Home: t.TempDir(), Spec: runs.Spec{Prompt: "p", MCPServers: testServers}})
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(c.Args, " "); strings.Contains(args, "mcp") || strings.Contains(args, "secret") {
		t.Errorf("the command line names the MCP servers: %s", args)
	}
	if want := []string{"Bearer header-secret", "env-secret", "eu"}; !slices.Equal(c.Secrets, want) {
		t.Errorf("Secrets = %q, want %q", c.Secrets, want)
	}
	if !slices.Contains(New().Describe().Fields, runs.FieldMCPServers) || !slices.Contains(New().Describe().Fields, runs.FieldAttachments) {
		t.Errorf("Fields %v lack mcp_servers or attachments", New().Describe().Fields)
	}
}

// TestOperatorMCPServersTurnedOff: a run with servers of its own turns
// off those of the operator's config.toml in its thread's config, and
// may not take one of their names; a run without servers leaves them.
func TestOperatorMCPServersTurnedOff(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, home, "[mcp_servers.ops]\ncommand = \"/opt/ops\"\n[mcp_servers.docs]\nurl = \"https://docs.example.test/mcp\"\n")
	inv := runs.Invocation{Home: home, Files: runs.HostFiles{}, Spec: runs.Spec{Prompt: "p", MCPServers: map[string]runs.MCPServer{"demo": {Command: "/x"}}}}
	if _, err := New().Command(inv); err != nil {
		t.Fatal(err)
	}
	d := New().NewDecoder(inv).(*decoder)
	thread, _ := handshake(t, d, "th1")
	b, _ := json.Marshal(thread["params"].(map[string]any)["config"])
	if want := `{"mcp_optional_startup_grace_ms":60000,"mcp_servers":{"demo":{"command":"/x","default_tools_approval_mode":"approve","startup_timeout_sec":60},"docs":{"enabled":false},"ops":{"enabled":false}}}`; string(b) != want {
		t.Errorf("config %s, want %s", b, want)
	}
	inv.Spec.MCPServers = map[string]runs.MCPServer{"ops": {Command: "/x"}}
	if _, err := New().Command(inv); !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), "ops") {
		t.Errorf("a run's server named as the operator's: %v, want invalid", err)
	}
	inv.Spec.MCPServers = nil
	thread, _ = handshake(t, New().NewDecoder(inv).(*decoder), "th1")
	if _, ok := thread["params"].(map[string]any)["config"]; ok {
		t.Errorf("a run without servers turned the operator's off: %v", thread)
	}
}

func TestCommandRefusesMCPServersCodexCannotTake(t *testing.T) {
	for name, s := range map[string]runs.MCPServer{
		"a.b":  {Command: "/x"},
		"":     {Command: "/x"},
		"sp c": {Command: "/x"},
		"both": {Command: "/x", URL: "http://127.0.0.1/mcp"},
		"none": {},
	} {
		_, err := New().Command(runs.Invocation{Home: t.TempDir(), Spec: runs.Spec{Prompt: "p",
			MCPServers: map[string]runs.MCPServer{name: s}}})
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != runs.FieldMCPServers || !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("server %q %+v: %v, want invalid mcp_servers", name, s, err)
		}
	}
}

// TestMCPToolCallEvents maps Codex's mcpToolCall items (as codex 0.171.0
// sends them) to tool calls that name the server and the tool, with the
// result's text as output, and a failed call's error message.
func TestMCPToolCallEvents(t *testing.T) {
	d := newDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p", MCPServers: testServers}}, nil)
	handshake(t, d, "root")
	d.Decode([]byte(`{"id":3,"result":{"turn":{"id":"t1"}}}`))
	started := d.Decode([]byte(`{"method":"item/started","params":{"threadId":"root","turnId":"t1","item":{"type":"mcpToolCall","id":"call_1","server":"demo","tool":"reverse_text","status":"inProgress","arguments":{"text":"hello mcp"},"result":null,"error":null}}}`))
	completed := d.Decode([]byte(`{"method":"item/completed","params":{"threadId":"root","turnId":"t1","item":{"type":"mcpToolCall","id":"call_1","server":"demo","tool":"reverse_text","status":"completed","arguments":{"text":"hello mcp"},"result":{"content":[{"type":"text","text":"reversed:pcm olleh"}],"structuredContent":null},"error":null,"durationMs":3}}}`))
	if len(started) != 1 || started[0].Type != runs.EventToolCallStarted {
		t.Fatalf("item/started gave %+v", started)
	}
	s := started[0].Data.(runs.ToolCallStartedData)
	if s.ID != "call_1" || s.Name != "mcp__demo__reverse_text" || s.MCPServer != "demo" || s.MCPTool != "reverse_text" ||
		string(s.Input) != `{"text":"hello mcp"}` {
		t.Errorf("tool_call.started %+v", s)
	}
	if len(completed) != 1 {
		t.Fatalf("item/completed gave %+v", completed)
	}
	if c := completed[0].Data.(runs.ToolCallCompletedData); c.ID != "call_1" || c.Output != "reversed:pcm olleh" || c.IsError {
		t.Errorf("tool_call.completed %+v", c)
	}

	// A failed call whose start was never seen: started, with its
	// server, then completed as an error.
	failed := d.Decode([]byte(`{"method":"item/completed","params":{"threadId":"root","turnId":"t1","item":{"type":"mcpToolCall","id":"call_2","server":"demo","tool":"show_token","status":"failed","arguments":{},"result":null,"error":{"message":"MCP tool call requires approval, but approval policy is never"}}}}`))
	if len(failed) != 2 || failed[0].Data.(runs.ToolCallStartedData).MCPServer != "demo" {
		t.Fatalf("failed call gave %+v", failed)
	}
	if c := failed[1].Data.(runs.ToolCallCompletedData); !c.IsError || c.Output != "MCP tool call requires approval, but approval policy is never" {
		t.Errorf("failed call completed %+v", c)
	}
}

// TestMCPElicitationIsAnApproval: with approvals ask, Codex's
// mcpServer/elicitation/request of kind mcp_tool_call is an
// approval.requested naming the server; allow accepts it, deny declines.
func TestMCPElicitationIsAnApproval(t *testing.T) {
	for dec, want := range map[runs.Decision]string{runs.Allow: "accept", runs.Deny: "decline", runs.AllowSession: "accept"} {
		d := newDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk, MCPServers: testServers}}, nil)
		s := session{d}
		handshake(t, d, "root")
		d.Decode([]byte(`{"id":3,"result":{"turn":{"id":"t1"}}}`))
		evs := d.Decode([]byte(`{"method":"mcpServer/elicitation/request","id":0,"params":{"threadId":"root","turnId":"t1","serverName":"demo","mode":"form","_meta":{"codex_approval_kind":"mcp_tool_call","persist":["session","always"],"tool_name":"reverse_text","tool_params":{"text":"hello mcp"},"call_id":"call_1"},"message":"Allow the demo MCP server to run tool \"reverse_text\"?","requestedSchema":{"type":"object","properties":{}}}}`))
		if len(evs) != 1 || evs[0].Type != runs.EventApprovalRequested {
			t.Fatalf("elicitation gave %+v", evs)
		}
		a := evs[0].Data.(runs.ApprovalRequestedData)
		if a.MCPServer != "demo" || a.Tool != "mcp__demo__reverse_text" || a.ToolCallID != "call_1" || string(a.Input) != `{"text":"hello mcp"}` {
			t.Errorf("approval.requested %+v", a)
		}
		if err := s.Answer(a.ID, dec, ""); err != nil {
			t.Fatal(err)
		}
		out, _ := d.Pending()
		msgs := sent(t, out)
		if len(msgs) != 1 || msgs[0]["id"] != float64(0) || msgs[0]["result"].(map[string]any)["action"] != want {
			t.Errorf("%s answered %v, want action %s", dec, msgs, want)
		}
	}
}

// TestImagesReachTurnStart: the prompt's images go with the first
// turn/start as localImage items, before its text; a message's with its
// turn/start or turn/steer.
func TestImagesReachTurnStart(t *testing.T) {
	ims := []runs.Image{{Path: "/tmp/run/a.png", MediaType: "image/png"}, {Path: "/tmp/run/b.jpg", MediaType: "image/jpeg"}}
	d := newDecoder(runs.Invocation{Images: ims, Spec: runs.Spec{Prompt: "look", Interactive: true}}, nil)
	_, turn := handshake(t, d, "root")
	want := []any{
		map[string]any{"type": "localImage", "path": "/tmp/run/a.png"},
		map[string]any{"type": "localImage", "path": "/tmp/run/b.jpg"},
		map[string]any{"type": "text", "text": "look"},
	}
	if got := turn["params"].(map[string]any)["input"]; !reflect.DeepEqual(got, want) {
		t.Errorf("turn/start input %v, want %v", got, want)
	}
	d.Decode([]byte(`{"id":3,"result":{"turn":{"id":"t1"}}}`))
	s := session{d}
	if err := s.Send("and this", ims[:1], true); err != nil {
		t.Fatal(err)
	}
	out, _ := d.Pending()
	msgs := sent(t, out)
	want = []any{map[string]any{"type": "localImage", "path": "/tmp/run/a.png"}, map[string]any{"type": "text", "text": "and this"}}
	if len(msgs) != 1 || msgs[0]["method"] != "turn/steer" || !reflect.DeepEqual(msgs[0]["params"].(map[string]any)["input"], want) {
		t.Errorf("steer with an image sent %v", msgs)
	}
	d.Decode([]byte(`{"method":"turn/completed","params":{"threadId":"root","turn":{"id":"t1","status":"completed","items":[]}}}`))
	if err := s.Send("", ims[1:], false); err != nil {
		t.Fatal(err)
	}
	out, _ = d.Pending()
	msgs = sent(t, out)
	want = []any{map[string]any{"type": "localImage", "path": "/tmp/run/b.jpg"}}
	if len(msgs) != 1 || msgs[0]["method"] != "turn/start" || !reflect.DeepEqual(msgs[0]["params"].(map[string]any)["input"], want) {
		t.Errorf("an image without text sent %v", msgs)
	}
}

func TestMCPOutput(t *testing.T) {
	for in, want := range map[string]string{
		`{"content":[{"type":"text","text":"a"},{"type":"image","data":"x"},{"type":"text","text":"b"}]}`: "a\nb",
		`{"content":[{"type":"image","data":"x"}]}`:                                                       `{"content":[{"type":"image","data":"x"}]}`,
		`null`: "",
		`"s"`:  `"s"`,
	} {
		if got := mcpOutput(json.RawMessage(in)); got != want {
			t.Errorf("mcpOutput(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestUsageOfAStoppedRun: usage.updated comes after each model request,
// not only at the turn's end, every tool call opened is closed, and a run
// whose process was killed mid-turn (a budget the gateway enforces) keeps
// the usage seen so far.
func TestUsageOfAStoppedRun(t *testing.T) {
	for _, interactive := range []bool{false, true} {
		d := newDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p", Interactive: interactive}}, nil)
		handshake(t, d, "root")
		d.Decode([]byte(`{"id":3,"result":{"turn":{"id":"t1"}}}`))
		usage := `{"method":"thread/tokenUsage/updated","params":{"threadId":"root","turnId":"t1","tokenUsage":{"total":{},"last":{"inputTokens":100,"cachedInputTokens":40,"outputTokens":10,"reasoningOutputTokens":2}}}}`
		evs := d.Decode([]byte(usage))
		if len(evs) != 1 || evs[0].Type != runs.EventUsageUpdated || evs[0].Data.(runs.UsageData).Usage.InputTokens != 100 {
			t.Fatalf("tokenUsage gave %+v", evs)
		}
		d.Decode([]byte(`{"method":"item/started","params":{"threadId":"root","turnId":"t1","item":{"type":"commandExecution","id":"c1","command":"sleep 1","status":"inProgress"}}}`))
		evs = d.Decode([]byte(usage))
		if u := evs[0].Data.(runs.UsageData).Usage; u.InputTokens != 200 || u.OutputTokens != 20 {
			t.Errorf("second request's usage.updated %+v, want the run's sum", u)
		}
		o := d.Finish(runs.Exit{Code: -1, Signal: "SIGKILL"}, nil)
		if o.Status != runs.Failed || o.Usage.InputTokens != 200 || o.Usage.CacheReadTokens != 80 || o.Usage.ReasoningTokens != 4 {
			t.Errorf("interactive %v: outcome %s usage %+v", interactive, o.Status, o.Usage)
		}
		closed := false
		for _, ev := range o.Events {
			if c, ok := ev.Data.(runs.ToolCallCompletedData); ok && c.ID == "c1" && c.IsError {
				closed = true
			}
		}
		if !closed {
			t.Errorf("interactive %v: the open tool call was not closed: %+v", interactive, o.Events)
		}
	}
}
