package copilot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// The command and decoding of what a run is given: MCP servers and
// images.

var givenServers = map[string]runs.MCPServer{
	"demo": {Command: "/opt/mcp/demo", Args: []string{"--serve", "x y"}, Env: map[string]string{"DEMO_TOKEN": "s3cret-env"}},
	"web":  {URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret-header"}},
}

// mcpConfigArg finds --additional-mcp-config and decodes it.
func mcpConfigArg(t *testing.T, args []string) map[string]mcpEntry {
	t.Helper()
	var found []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--additional-mcp-config="); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one --additional-mcp-config in %q", args)
	}
	var cfg struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(found[0]), &cfg); err != nil {
		t.Fatalf("--additional-mcp-config %s: %v", found[0], err)
	}
	return cfg.MCPServers
}

func TestCommandMCPServers(t *testing.T) {
	for _, spec := range []runs.Spec{
		{Prompt: "p", MCPServers: givenServers},                                              // one-shot
		{Prompt: "p", MCPServers: givenServers, Interactive: true},                           // ACP, approvals never
		{Prompt: "p", MCPServers: givenServers, Approvals: runs.ApprovalsAsk},                // ACP, asked
		{Prompt: "p", MCPServers: givenServers, Interactive: true, Permission: runs.Full},    // ACP
		{Prompt: "p", MCPServers: givenServers, Permission: runs.WorkspaceWrite, Effort: ""}, // one-shot
	} {
		cmd, err := New().Command(testInv(spec))
		if err != nil {
			t.Fatalf("%+v: %v", spec, err)
		}
		got := mcpConfigArg(t, cmd.Args)
		want := map[string]mcpEntry{
			"demo": {Type: "local", Command: "/opt/mcp/demo", Args: []string{"--serve", "x y"},
				Env: map[string]string{"DEMO_TOKEN": "s3cret-env"}, Tools: []string{"*"}},
			"web": {Type: "http", URL: "https://mcp.example.com/mcp",
				Headers: map[string]string{"Authorization": "Bearer s3cret-header"}, Tools: []string{"*"}},
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("%+v: config\n  %s\nwant\n  %s", spec, gb, wb)
		}
		if !slices.Equal(cmd.Secrets, []string{"s3cret-env", "Bearer s3cret-header"}) {
			t.Errorf("%+v: secrets = %q", spec, cmd.Secrets)
		}
		for _, a := range cmd.Args {
			if strings.HasPrefix(a, "--allow-tool") {
				t.Errorf("%+v: %s, where the level already allows or asks", spec, a)
			}
		}
	}

	// read_only pre-approves nothing: without --allow-tool the CLI
	// denies the server's tools, with nobody to ask.
	for _, spec := range []runs.Spec{
		{Prompt: "p", MCPServers: givenServers, Permission: runs.ReadOnly},
		{Prompt: "p", MCPServers: givenServers, Permission: runs.ReadOnly, Interactive: true},
	} {
		cmd, err := New().Command(testInv(spec))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"--deny-tool=write", "--allow-tool=demo", "--allow-tool=web"} {
			if !slices.Contains(cmd.Args, want) {
				t.Errorf("%+v: args %q lack %s", spec, cmd.Args, want)
			}
		}
	}
	// read_only with approvals asks nobody, and allows no MCP tool either.
	cmd, err := New().Command(testInv(runs.Spec{Prompt: "p", MCPServers: givenServers, Permission: runs.ReadOnly,
		Approvals: runs.ApprovalsAsk}))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cmd.Args {
		if strings.HasPrefix(a, "--allow-tool") {
			t.Errorf("read_only with approvals: %s", a)
		}
	}

	// No servers, no flag and no secrets.
	cmd, err = New().Command(testInv(runs.Spec{Prompt: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(cmd.Args, func(a string) bool { return strings.HasPrefix(a, "--additional-mcp-config") }) || cmd.Secrets != nil {
		t.Errorf("a run without MCP servers: %q, secrets %q", cmd.Args, cmd.Secrets)
	}

	if !slices.Contains(New().Describe().Fields, runs.FieldMCPServers) || !slices.Contains(New().Describe().Fields, runs.FieldAttachments) {
		t.Errorf("fields = %q", New().Describe().Fields)
	}
}

func TestCommandMCPRefuses(t *testing.T) {
	for name, servers := range map[string]map[string]runs.MCPServer{
		"a name --allow-tool reads as a kind": {"shell": {Command: "/bin/true"}},
		"neither command nor url":             {"demo": {}},
	} {
		_, err := New().Command(testInv(runs.Spec{Prompt: "p", MCPServers: servers}))
		if !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), runs.FieldMCPServers) {
			t.Errorf("%s: err = %v, want invalid mcp_servers", name, err)
		}
	}
}

func TestCommandAttachments(t *testing.T) {
	images := []runs.Image{{Path: "/tmp/run/a.png", MediaType: "image/png"}, {Path: "/tmp/run/b.jpg", MediaType: "image/jpeg"}}
	inv := testInv(runs.Spec{Prompt: "look"})
	inv.Images = images
	cmd, err := New().Command(inv)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(cmd.Args, "--attachment=/tmp/run/a.png")
	if i < 0 || i+1 >= len(cmd.Args) || cmd.Args[i+1] != "--attachment=/tmp/run/b.jpg" {
		t.Errorf("args = %q, want both images in order", cmd.Args)
	}
	if string(cmd.Stdin) != "look" {
		t.Errorf("stdin = %q", cmd.Stdin)
	}
	// Over ACP the images are the first prompt's image blocks, not flags.
	inv.Spec.Interactive = true
	cmd, err = New().Command(inv)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(cmd.Args, func(a string) bool { return strings.HasPrefix(a, "--attachment") }) {
		t.Errorf("a session's args = %q", cmd.Args)
	}
	inv.Spec.Interactive = false
	inv.Images = []runs.Image{{Path: "rel.png", MediaType: "image/png"}}
	if _, err := New().Command(inv); err == nil {
		t.Error("a relative image path was taken")
	}
}

// The lines of a one-shot run whose model called the demo server's
// reverse_text (copilot 1.0.102, trimmed).
var mcpLines = []string{
	`{"type":"session.mcp_server_status_changed","data":{"serverName":"demo","status":"pending"},"ephemeral":true,"id":"1","timestamp":"2026-12-01T17:17:17.338Z","parentId":"0"}`,
	`{"type":"session.mcp_server_status_changed","data":{"serverName":"demo","status":"connected","configSource":"user"},"ephemeral":true,"id":"2","timestamp":"2026-12-01T17:17:17.345Z","parentId":"0"}`,
	`{"type":"session.mcp_server_tools_loaded","data":{"serverName":"demo","toolCount":2},"ephemeral":true,"id":"3","timestamp":"2026-12-01T17:17:17.347Z","parentId":"0"}`,
	`{"type":"user.message","data":{"content":"reverse hello mcp\n"},"id":"4","timestamp":"2026-12-01T17:17:17.429Z","parentId":"0"}`,
	`{"type":"assistant.message","data":{"messageId":"m1","model":"mock-model","content":"","toolRequests":[{"toolCallId":"call_1","name":"demo-reverse_text","arguments":{"text":"hello mcp"},"type":"function","toolTitle":"reverse_text","mcpServerName":"demo","mcpToolName":"reverse_text"}]},"id":"5","timestamp":"2026-12-01T17:17:17.466Z","parentId":"4"}`,
	`{"type":"tool.execution_start","data":{"toolCallId":"call_1","toolName":"demo-reverse_text","arguments":{"text":"hello mcp"},"toolTitle":"reverse_text","mcpServerName":"demo","mcpConfigServerName":"demo","mcpTransport":"stdio","mcpConfigSource":"user","mcpToolName":"reverse_text"},"id":"6","timestamp":"2026-12-01T17:17:17.472Z","parentId":"5"}`,
	`{"type":"tool.execution_complete","data":{"toolCallId":"call_1","success":true,"result":{"content":"reversed:pcm olleh","detailedContent":"reversed:pcm olleh"}},"id":"7","timestamp":"2026-12-01T17:17:17.480Z","parentId":"6"}`,
	`{"type":"tool.execution_start","data":{"toolCallId":"call_2","toolName":"other-thing","arguments":{},"mcpServerName":"other","mcpToolName":"thing"},"id":"8","timestamp":"2026-12-01T17:17:17.481Z","parentId":"6"}`,
	`{"type":"session.mcp_server_status_changed","data":{"serverName":"demo","status":"failed"},"ephemeral":true,"id":"9","timestamp":"2026-12-01T17:17:17.482Z","parentId":"0"}`,
}

func TestDecodeMCPTool(t *testing.T) {
	d := newDecoder(testInv(runs.Spec{Prompt: "p", MCPServers: map[string]runs.MCPServer{"demo": {Command: "/x"}}}), runs.HostFiles{})
	var evs []runs.Event
	for _, l := range mcpLines {
		evs = append(evs, d.Decode([]byte(l))...)
	}
	var started []runs.ToolCallStartedData
	var completed []runs.ToolCallCompletedData
	var warnings []string
	for _, ev := range evs {
		switch data := ev.Data.(type) {
		case runs.ToolCallStartedData:
			started = append(started, data)
		case runs.ToolCallCompletedData:
			completed = append(completed, data)
		case runs.WarningData:
			warnings = append(warnings, data.Code)
		}
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("unparsed: %+v", ev.Data)
		}
	}
	if len(started) != 2 {
		t.Fatalf("tool_call.started = %+v", started)
	}
	if s := started[0]; s.ID != "call_1" || s.Name != "demo-reverse_text" || s.MCPServer != "demo" || s.MCPTool != "reverse_text" ||
		string(s.Input) != `{"text":"hello mcp"}` {
		t.Errorf("the MCP call started as %+v", s)
	}
	// A server that is not the run's (the operator's own) is no MCP
	// server of the run.
	if s := started[1]; s.MCPServer != "" || s.MCPTool != "" {
		t.Errorf("a call of another server's tool: %+v", s)
	}
	if len(completed) != 1 || completed[0].Output != "reversed:pcm olleh" || completed[0].IsError {
		t.Errorf("tool_call.completed = %+v", completed)
	}
	if !slices.Equal(warnings, []string{"mcp_server_failed"}) {
		t.Errorf("warnings = %q, want only the failed server's", warnings)
	}
}

func TestDecodeMCPToolByName(t *testing.T) {
	// Without the CLI's own names, the tool's name is split after the
	// run's servers, the longest first.
	servers := map[string]runs.MCPServer{"my": {Command: "/x"}, "my-demo": {Command: "/y"}}
	d := newDecoder(testInv(runs.Spec{Prompt: "p", MCPServers: servers}), runs.HostFiles{})
	evs := d.Decode([]byte(`{"type":"tool.execution_start","data":{"toolCallId":"c","toolName":"my-demo-reverse_text","arguments":{}},"id":"1","timestamp":"t","parentId":"0"}`))
	if len(evs) != 1 {
		t.Fatalf("events = %+v", evs)
	}
	if s := evs[0].Data.(runs.ToolCallStartedData); s.MCPServer != "my-demo" || s.MCPTool != "reverse_text" {
		t.Errorf("started = %+v", s)
	}
}

// recordFiles serves the session's record as the CLI writes it.
type recordFiles struct {
	path   string
	record []byte
}

func (f *recordFiles) ReadFile(name string) ([]byte, error) {
	if name != f.path {
		return nil, fs.ErrNotExist
	}
	return f.record, nil
}

func (*recordFiles) Remove(string) error { return nil }

func usageRecord(call string, in, cached, out, reasoning int) string {
	return fmt.Sprintf(`{"type":"session.usage_record","data":{"usage":{"model":"mock-model","inputTokens":%d,"outputTokens":%d,`+
		`"cacheReadTokens":%d,"cacheWriteTokens":0,"reasoningTokens":%d,"cost":0.0,"apiCallId":%q}},"id":"x","timestamp":"t"}`,
		in, out, cached, reasoning, call)
}

func TestLiveUsage(t *testing.T) {
	inv := testInv(runs.Spec{Prompt: "p"})
	f := &recordFiles{path: filepath.Join(inv.Home, ".copilot", "session-state", inv.RunID, "events.jsonl")}
	// An earlier run's request of the session, which this run never
	// names, and a line being written.
	f.record = []byte(usageRecord("resp_old", 9, 0, 9, 0) + "\n" + `{"type":"session.start"}` + "\n")
	d := newDecoder(inv, f)
	usages := func(evs []runs.Event) []runs.Usage {
		var out []runs.Usage
		for _, ev := range evs {
			if u, ok := ev.Data.(runs.UsageData); ok {
				out = append(out, u.Usage)
			}
		}
		return out
	}
	msg := func(call string) []byte {
		return []byte(`{"type":"assistant.message","data":{"messageId":"m","content":"","apiCallId":"` + call + `","toolRequests":[]},"id":"1","timestamp":"t"}`)
	}
	// The record is not written yet when the message is printed: a later
	// line finds it.
	if u := usages(d.Decode(msg("resp_1"))); u != nil {
		t.Fatalf("usage before the record: %+v", u)
	}
	f.record = append(f.record, usageRecord("resp_1", 5000, 4000, 50, 12)+"\n"+`{"type":"session.usage_rec`...)
	got := usages(d.Decode([]byte(`{"type":"assistant.turn_end","data":{"turnId":"0"},"id":"2","timestamp":"t"}`)))
	first := runs.Usage{InputTokens: 5000, CacheReadTokens: 4000, OutputTokens: 50, ReasoningTokens: 12}
	if !slices.Equal(got, []runs.Usage{first}) {
		t.Fatalf("usage.updated %+v, want %+v", got, first)
	}
	f.record = append(f.record, []byte("\n"+usageRecord("resp_2", 5200, 4900, 30, 7)+"\n")...)
	got = usages(d.Decode(msg("resp_2")))
	want := first.Add(runs.Usage{InputTokens: 5200, CacheReadTokens: 4900, OutputTokens: 30, ReasoningTokens: 7})
	if !slices.Equal(got, []runs.Usage{want}) {
		t.Fatalf("usage.updated %+v, want the sum %+v", got, want)
	}
	// Nothing new: no event, and a request is billed once.
	if u := usages(d.Decode(msg("resp_2"))); u != nil {
		t.Errorf("a request billed twice: %+v", u)
	}

	// A resumed session's id that is not one path element is not read.
	for _, id := range []string{"../x", "..", "a/b"} {
		if p := sessionRecordPath("/home", id); p != "" {
			t.Errorf("session %q read at %s", id, p)
		}
	}
}

// FuzzLiveUsage feeds the session's record, as the CLI left it, to the
// decoder: it must never panic, and bills only the requests named.
func FuzzLiveUsage(f *testing.F) {
	f.Add([]byte(usageRecord("resp_1", 1, 0, 1, 0)), "resp_1")
	f.Add([]byte(`{"type":"session.usage_record","data":{"usage":{"inputTokens":"x","apiCallId":"resp_1"}}}`), "resp_1")
	f.Add([]byte(`{"type":"session.usage_record","data":null}`+"\n\n{"), "")
	f.Add([]byte(`{"type":"session.usage_record","data":{"usage":[]}}`), "resp_1")
	f.Fuzz(func(t *testing.T, record []byte, call string) {
		inv := testInv(runs.Spec{Prompt: "p"})
		files := &recordFiles{path: filepath.Join(inv.Home, ".copilot", "session-state", inv.RunID, "events.jsonl"), record: record}
		d := newDecoder(inv, files)
		line, _ := json.Marshal(map[string]any{"type": "assistant.message", "data": map[string]any{"content": "", "apiCallId": call}})
		for _, ev := range d.Decode(line) {
			if ev.Type == runs.EventUsageUpdated && call == "" {
				t.Errorf("a request with no id billed: %+v", ev.Data)
			}
		}
	})
}

func TestSessionMCPNames(t *testing.T) {
	servers := map[string]runs.MCPServer{"demo": {Command: "/x"}}
	d := newSessionDecoder(testInv(runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk, MCPServers: servers}))
	// The tool_call names the tool as the model sees it; the permission
	// request that follows has only the tool's own title.
	d.update("tool_call", json.RawMessage(`{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"demo-reverse_text","kind":"other","status":"pending","rawInput":{"text":"hello mcp"}}`))
	asked := acp.ToolCall{ToolCallID: "call_1", Title: "reverse_text", Kind: "other"}
	if s, tool, ok := d.mcpTool(asked); !ok || s != "demo" || tool != "reverse_text" {
		t.Errorf("mcpTool = %q %q %v", s, tool, ok)
	}
	if n := d.toolName(asked); n != "demo-reverse_text" {
		t.Errorf("toolName = %q", n)
	}
	// A built-in tool is none of the run's servers'.
	d.update("tool_call", json.RawMessage(`{"sessionUpdate":"tool_call","toolCallId":"call_2","title":"ls","kind":"execute"}`))
	bash := acp.ToolCall{ToolCallID: "call_2", Title: "ls", Kind: "execute"}
	if _, _, ok := d.mcpTool(bash); ok || d.toolName(bash) != "bash" {
		t.Errorf("a bash call taken for an MCP call: %q", d.toolName(bash))
	}
}

// TestLiveUsageGivesUp: a request the record never bills is looked for a
// few times only, not at every later line.
func TestLiveUsageGivesUp(t *testing.T) {
	inv := testInv(runs.Spec{Prompt: "p"})
	reads := 0
	f := countingFiles{n: &reads}
	d := newDecoder(inv, f)
	d.Decode([]byte(`{"type":"assistant.message","data":{"content":"","apiCallId":"resp_never"},"id":"1","timestamp":"t"}`))
	for range 50 {
		d.Decode([]byte(`{"type":"assistant.turn_end","data":{"turnId":"0"},"id":"2","timestamp":"t"}`))
	}
	if reads > maxMisses {
		t.Errorf("the record was read %d times for a request it never bills", reads)
	}
}

type countingFiles struct{ n *int }

func (f countingFiles) ReadFile(string) ([]byte, error) { *f.n++; return []byte("{}\n"), nil }
func (countingFiles) Remove(string) error               { return nil }
