package opencode

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestMCPCommand: a run given MCP servers, stdio and remote, runs over
// ACP; session/new carries both as OpenCode takes them (env and headers
// as lists of {name, value}), and every value is a secret of the
// command. The command line and env carry none of them.
func TestMCPCommand(t *testing.T) {
	spec := runs.Spec{Prompt: "p", MCPServers: map[string]runs.MCPServer{
		"demo":   {Command: "/usr/bin/demo", Args: []string{"--serve"}, Env: map[string]string{"B_TOKEN": "tok-b", "A": "val-a"}},
		"remote": {URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer hdr-secret"}},
	}}
	a := New()
	if !a.PrefersSession(spec) || a.PrefersSession(runs.Spec{Prompt: "p"}) {
		t.Error("PrefersSession: want a run with MCP servers over ACP, one without not")
	}
	cmd, err := a.Command(inv(spec))
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Args[0] != "acp" || cmd.Stdin != nil {
		t.Errorf("command %q, stdin %q: want opencode acp", cmd.Args, cmd.Stdin)
	}
	slices.Sort(cmd.Secrets)
	if want := []string{"Bearer hdr-secret", "tok-b", "val-a"}; !slices.Equal(cmd.Secrets, want) {
		t.Errorf("secrets %q, want %q", cmd.Secrets, want)
	}
	for _, s := range append(append([]string(nil), cmd.Args...), cmd.Env...) {
		if strings.Contains(s, "tok-b") || strings.Contains(s, "hdr-secret") {
			t.Errorf("a secret in the command line or env: %q", s)
		}
	}
	entries := acp.MCPServers(spec.MCPServers)
	got := make([]string, len(entries))
	for i, e := range entries {
		got[i] = string(e)
	}
	want := []string{
		`{"name":"demo","command":"/usr/bin/demo","args":["--serve"],"env":[{"name":"A","value":"val-a"},{"name":"B_TOKEN","value":"tok-b"}]}`,
		`{"type":"http","name":"remote","url":"https://mcp.example/mcp","headers":[{"name":"Authorization","value":"Bearer hdr-secret"}]}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("mcpServers\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e := acp.MCPServers(nil); e != nil {
		t.Errorf("no servers: %s, want nil (the core sends [])", e)
	}
	stdio := acp.MCPServers(map[string]runs.MCPServer{"s": {Command: "/bin/s"}})
	if string(stdio[0]) != `{"name":"s","command":"/bin/s","args":[],"env":[]}` {
		t.Errorf("a bare stdio server: %s", stdio[0])
	}
}

// TestMCPCommandRefuses: a server with neither or both of command and
// url is invalid; a resumed one-shot run with MCP servers is unsupported
// (only an interactive run loads its session over ACP).
func TestMCPCommandRefuses(t *testing.T) {
	for name, m := range map[string]runs.MCPServer{"neither": {}, "both": {Command: "/bin/x", URL: "http://127.0.0.1:1/mcp"}} {
		_, err := New().Command(inv(runs.Spec{Prompt: "p", MCPServers: map[string]runs.MCPServer{name: m}}))
		var fe *runs.FieldError
		if !errors.Is(err, runs.ErrInvalid) || !errors.As(err, &fe) || fe.Field != runs.FieldMCPServers {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := New().Command(inv(runs.Spec{Prompt: "p", ResumeSessionID: "ses_x",
		MCPServers: map[string]runs.MCPServer{"demo": {Command: "/bin/x"}}}))
	if !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("resume with MCP servers: %v", err)
	}
}

// TestMCPNamer: OpenCode's "<server>_<tool>" maps back to the run's
// server and the tool, the longest server name first; names of no server
// of the run are built-in tools.
func TestMCPNamer(t *testing.T) {
	n := newMCPNamer(map[string]runs.MCPServer{"demo": {}, "a": {}, "a_b": {}, "my.srv": {}})
	for name, want := range map[string][2]string{
		"demo_reverse_text": {"demo", "reverse_text"},
		"a_b_x":             {"a_b", "x"},
		"a_x":               {"a", "x"},
		"my_srv_t":          {"my.srv", "t"},
		"bash":              {},
		"demo_":             {},
		"demox_y":           {},
	} {
		s, tool, ok := n.split(name)
		if ok != (want[0] != "") || s != want[0] || tool != want[1] {
			t.Errorf("%s: %q %q %v, want %q", name, s, tool, ok, want)
		}
	}
}

// TestDescribeGiven: the fields of what a run is given are listed.
func TestDescribeGiven(t *testing.T) {
	d := New().Describe()
	for _, f := range []string{runs.FieldMCPServers, runs.FieldAttachments} {
		if !slices.Contains(d.Fields, f) {
			t.Errorf("Fields lack %s", f)
		}
	}
	if !d.ReportsCost {
		t.Error("OpenCode reports cost")
	}
}

// TestImageSupport: a model takes images when the configuration it is
// found in lists "image" in its modalities.input; the run's model wins
// over the configuration's, and a later source's entry over an earlier
// one's.
func TestImageSupport(t *testing.T) {
	entry := func(model string) string {
		return `{"model":"p/m","provider":{"p":{"models":{"m":{` + model + `}, "other":{"modalities":{"input":["text","image"]}}}}}}`
	}
	yes := entry(`"modalities":{"input":["text","image"],"output":["text"]}`)
	for name, c := range map[string]struct {
		srcs  []string
		model string
		ok    bool
	}{
		"declared":             {[]string{yes}, "", true},
		"attachment only":      {[]string{entry(`"attachment":true`)}, "", false},
		"text only":            {[]string{entry(`"modalities":{"input":["text"]}`)}, "", false},
		"no entry":             {[]string{`{"model":"p/x"}`}, "", false},
		"no model":             {[]string{`{}`}, "", false},
		"run's model":          {[]string{entry(``)}, "p/other", true},
		"overridden":           {[]string{yes, entry(`"modalities":{"input":["text"]}`)}, "", false},
		"kept":                 {[]string{yes, entry(`"name":"M"`)}, "", true},
		"jsonc":                {[]string{"// c\n" + strings.Replace(yes, "}}}}}", "},}}},}", 1)}, "", true},
		"not json":             {[]string{"nope"}, "p/m", false},
		"model without prefix": {[]string{yes}, "m", false},
	} {
		var srcs []source
		for i, s := range c.srcs {
			srcs = append(srcs, source{name: string(rune('a' + i)), text: []byte(s)})
		}
		if err := imageSupport(srcs, c.model); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", name, err, c.ok)
		}
	}
}

// TestImageCommand: a run with an attachment is refused, naming
// attachments, unless the home's configuration (or, with WithGetenv, the
// operator's OPENCODE_CONFIG_CONTENT) declares image input for the
// model; then it runs over ACP.
func TestImageCommand(t *testing.T) {
	home := t.TempDir()
	spec := runs.Spec{Prompt: "p", Model: "mock/mock-model", Attachments: []runs.Attachment{{FileID: "f", MediaType: "image/png"}}}
	x := inv(spec)
	x.Home, x.Files = home, runs.HostFiles{}
	_, err := New().Command(x)
	var fe *runs.FieldError
	if !errors.Is(err, runs.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != runs.FieldAttachments ||
		!strings.Contains(err.Error(), "modalities") {
		t.Errorf("no configuration: %v", err)
	}
	cfg := mockConfig("http://127.0.0.1:1/v1", homeKeyEnv)
	env := map[string]string{"OPENCODE_CONFIG_CONTENT": cfg}
	cmd, err := New(WithGetenv(func(k string) string { return env[k] })).Command(x)
	if err != nil || cmd.Args[0] != "acp" {
		t.Errorf("declared in OPENCODE_CONFIG_CONTENT: %v, %q", err, cmd.Args)
	}
	if err := os.MkdirAll(configDir(home), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(configDir(home), "opencode.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New().Command(x); err != nil {
		t.Errorf("declared in the home: %v", err)
	}
	plain := mockConfigWith("http://127.0.0.1:1/v1", homeKeyEnv, `"modalities": {"input": ["text"], "output": ["text"]},`)
	env["OPENCODE_CONFIG_CONTENT"] = plain
	if _, err := New(WithGetenv(func(k string) string { return env[k] })).Command(x); !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("OPENCODE_CONFIG_CONTENT's plain entry overrides the home's: %v", err)
	}
	if e := New().Preflight(t.Context(), x, []string{homeKeyEnv + "=k", "OPENCODE_CONFIG_CONTENT=" + plain}); e == nil ||
		!strings.Contains(e.Message, "image") {
		t.Errorf("Preflight with a plain model in the run's environment: %+v", e)
	}
}

// FuzzImageSupport: no configuration text makes the check panic.
func FuzzImageSupport(f *testing.F) {
	f.Add(mockConfig("http://127.0.0.1:1/v1", "K"), "")
	f.Add(`{"provider":{"p":{"models":{"m":{"modalities":{"input":"image"}}}}}}`, "p/m")
	f.Add(`{"provider":{"p":{"models":[]}}}`, "p/m")
	f.Add(`{"provider":{"p":null}, /* c */ "model":"p/"}`, "")
	f.Fuzz(func(t *testing.T, text, model string) {
		_ = imageSupport([]source{{name: "fuzz", text: []byte(text)}}, model)
		var v any
		_ = json.Unmarshal([]byte(text), &v)
	})
}

// TestDecodeMCPTool: `run` prints an MCP call as tool demo_reverse_text
// (verified with the config route, mcp.demo of type local); the one-shot
// decoder names the run's server and tool on it too.
func TestDecodeMCPTool(t *testing.T) {
	d := newDecoder(inv(runs.Spec{Prompt: "p", MCPServers: map[string]runs.MCPServer{"demo": {Command: "/bin/demo"}}}))
	line := `{"type":"tool_use","timestamp":1,"sessionID":"ses_1","part":{"id":"prt_1","messageID":"msg_1","sessionID":"ses_1","type":"tool",` +
		`"tool":"demo_reverse_text","callID":"call_mcp_1","state":{"status":"completed","input":{"text":"hello mcp"},"output":"reversed:pcm olleh"}}}`
	var started runs.ToolCallStartedData
	for _, ev := range d.Decode([]byte(line)) {
		if ev.Type == runs.EventToolCallStarted {
			started = ev.Data.(runs.ToolCallStartedData)
		}
	}
	if started.MCPServer != "demo" || started.MCPTool != "reverse_text" {
		t.Errorf("tool_call.started %+v", started)
	}
}
