package agentsfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// builtins are the reserved names the tests pass, as the gateway passes
// its built-in agents' names and aliases.
var builtins = []string{"claude", "codex", "openai", "gemini"}

const example = `
agents:
  - name: qwen-acp
    display_name: Qwen Code over ACP
    command: qwen
    args: ["--acp"]
    verified_version: "0.24.4"
    env:
      OPENAI_MODEL: mock-model
    pass_env: [OPENAI_BASE_URL]
    credentials:
      - {name: OPENAI_API_KEY, from_env: AGENTGATE_QWEN_KEY}
      - {name: OTHER_KEY, from_file: /run/secrets/other}
    home_files:
      .qwen/settings.json: '{"privacy":{"usageStatisticsEnabled":false}}'
    modes:
      read_only: plan
      workspace_write: auto-edit
      full: yolo
      ask: default
    session_allow_option: proceed_always_user
  - name: other
    command: /opt/other/bin/other
`

func TestParseExample(t *testing.T) {
	got, err := Parse("agents.yaml", []byte(example), builtins)
	if err != nil {
		t.Fatal(err)
	}
	want := []Agent{{
		Name: "qwen-acp", DisplayName: "Qwen Code over ACP", Command: "qwen", Args: []string{"--acp"},
		VersionArgs: []string{"--version"}, VerifiedVersion: "0.24.4",
		Env:     map[string]string{"OPENAI_MODEL": "mock-model"},
		PassEnv: []string{"OPENAI_BASE_URL"},
		Credentials: []Credential{
			{Name: "OPENAI_API_KEY", FromEnv: "AGENTGATE_QWEN_KEY"},
			{Name: "OTHER_KEY", FromFile: "/run/secrets/other"},
		},
		HomeFiles:          map[string]string{".qwen/settings.json": `{"privacy":{"usageStatisticsEnabled":false}}`},
		Modes:              Modes{ReadOnly: "plan", WorkspaceWrite: "auto-edit", Full: "yolo", Ask: "default"},
		SessionAllowOption: "proceed_always_user",
	}, {
		Name: "other", Command: "/opt/other/bin/other", VersionArgs: []string{"--version"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseJSON(t *testing.T) {
	got, err := Parse("agents.json", []byte(`{"agents":[{"name":"j","command":"j","args":["acp"],"version_args":["-v"]}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "j" || !reflect.DeepEqual(got[0].VersionArgs, []string{"-v"}) {
		t.Errorf("Parse(JSON) = %+v", got)
	}
}

// TestParseErrors checks that each bad file is refused with an error that
// names the agent and the field where the problem is.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml   string
		agent, field string
		says         string
	}{
		{"empty", ``, "", "", "is empty"},
		{"not a mapping", `- a`, "", "", "mapping"},
		{"unknown top key", "agent: []", "", "agent", "unknown key"},
		{"no agents", "agents: []", "", "agents", "lists no agent"},
		{"two documents", "agents: [{name: a, command: a}]\n---\nagents: []\n", "", "", "more than one"},
		{"not yaml", "agents: [", "", "", "not YAML"},
		{"unknown agent key", "agents: [{name: a, command: a, arg: [x]}]", "a", "arg", "unknown key"},
		{"name missing", "agents: [{command: a}]", "#1", "name", "missing"},
		{"name pattern", "agents: [{name: Big, command: a}]", "#1", "name", "must match"},
		{"name too long", "agents: [{name: " + strings.Repeat("a", 33) + ", command: a}]", "#1", "name", "must match"},
		{"builtin", "agents: [{name: claude, command: a}]", "claude", "name", "built-in"},
		{"alias", "agents: [{name: openai, command: a}]", "openai", "name", "built-in"},
		{"twice", "agents: [{name: a, command: a}, {name: a, command: b}]", "a", "name", "earlier agent"},
		{"key twice", "agents: [{name: a, command: a, command: b}]", "a", "command", "twice"},
		{"command missing", "agents: [{name: a}]", "a", "command", "missing"},
		{"command relative", "agents: [{name: a, command: bin/a}]", "a", "command", "absolute"},
		{"args not list", "agents: [{name: a, command: a, args: --acp}]", "a", "args", "list"},
		{"arg not string", "agents: [{name: a, command: a, args: [[x]]}]", "a", "args[1]", "string"},
		{"arg control", "agents: [{name: a, command: a, args: [\"a\\u0000b\"]}]", "a", "args[1]", "control"},
		{"version args empty", "agents: [{name: a, command: a, version_args: []}]", "a", "version_args", "empty"},
		{"verified version", "agents: [{name: a, command: a, verified_version: latest}]", "a", "verified_version", "dotted"},
		{"env name", "agents: [{name: a, command: a, env: {\"A-B\": x}}]", "a", "env.A-B", "variable name"},
		{"env home", "agents: [{name: a, command: a, env: {HOME: /tmp}}]", "a", "env.HOME", "gateway's"},
		{"env value", "agents: [{name: a, command: a, env: {A: [x]}}]", "a", "env.A", "string"},
		{"pass_env path", "agents: [{name: a, command: a, pass_env: [PATH]}]", "a", "pass_env[1]", "gateway's"},
		{"pass_env twice", "agents: [{name: a, command: a, pass_env: [A, A]}]", "a", "pass_env[2]", "twice"},
		{"env and pass_env", "agents: [{name: a, command: a, env: {A: x}, pass_env: [A]}]", "a", "pass_env", "env too"},
		{"credential both", "agents: [{name: a, command: a, credentials: [{name: K, from_env: X, from_file: /k}]}]", "a", "credentials[1]", "exactly one"},
		{"credential none", "agents: [{name: a, command: a, credentials: [{name: K}]}]", "a", "credentials[1]", "exactly one"},
		{"credential no name", "agents: [{name: a, command: a, credentials: [{from_env: X}]}]", "a", "credentials[1].name", "missing"},
		{"credential key", "agents: [{name: a, command: a, credentials: [{name: K, value: v}]}]", "a", "credentials[1].value", "unknown key"},
		{"credential relative file", "agents: [{name: a, command: a, credentials: [{name: K, from_file: k.txt}]}]", "a", "credentials[1].from_file", "absolute"},
		{"credential clash", "agents: [{name: a, command: a, env: {K: x}, credentials: [{name: K, from_env: X}]}]", "a", "credentials[1].name", "env too"},
		{"credential twice", "agents: [{name: a, command: a, credentials: [{name: K, from_env: X}, {name: K, from_env: Y}]}]", "a", "credentials[2].name", "twice"},
		{"home file up", "agents: [{name: a, command: a, home_files: {../x: y}}]", "a", "home_files[../x]", "inside the home"},
		{"home file absolute", "agents: [{name: a, command: a, home_files: {/etc/x: y}}]", "a", "home_files[/etc/x]", "inside the home"},
		{"home file unclean", "agents: [{name: a, command: a, home_files: {a/./b: y}}]", "a", "home_files[a/./b]", "clean"},
		{"home file dir of other", "agents: [{name: a, command: a, home_files: {a: x, a/b: y}}]", "a", "home_files[a/b]", "inside"},
		{"home file too big", "agents: [{name: a, command: a, home_files: {x: " + strings.Repeat("y", MaxHomeFileBytes+1) + "}}]", "a", "home_files[x]", "longer"},
		{"mode key", "agents: [{name: a, command: a, modes: {write: x}}]", "a", "modes.write", "unknown key"},
		{"mode empty", "agents: [{name: a, command: a, modes: {full: \"\"}}]", "a", "modes.full", "ACP id"},
		{"session option empty", "agents: [{name: a, command: a, session_allow_option: \"\"}]", "a", "session_allow_option", "ACP id"},
		{"endpoint not host:port", "agents: [{name: a, command: a, model_endpoints: [api.example.com]}]", "a", "model_endpoints[1]", "neither host:port"},
		{"endpoint port", "agents: [{name: a, command: a, model_endpoints: [\"api.example.com:0\"]}]", "a", "model_endpoints[1]", "port between"},
		{"endpoint scheme", "agents: [{name: a, command: a, model_endpoints: [\"ftp://x.example.com\"]}]", "a", "model_endpoints[1]", "http or https"},
		{"endpoint variable name", "agents: [{name: a, command: a, model_endpoints: [\"$A-B\"]}]", "a", "model_endpoints[1]", "variable name"},
		{"endpoint variable unset", "agents: [{name: a, command: a, model_endpoints: [\"$BASE\"]}]", "a", "model_endpoints[1]", "neither in env nor in pass_env"},
		{"too many args", "agents: [{name: a, command: a, args: [" + strings.Repeat("x,", MaxList) + "x]}]", "a", "args", "more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("/etc/agentgate/agents.yaml", []byte(c.yaml), builtins)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse = %v, want an *Error", err)
			}
			if e.File != "/etc/agentgate/agents.yaml" || e.Agent != c.agent || e.Field != c.field || !strings.Contains(e.Problem, c.says) {
				t.Errorf("error %+v (%q), want agent %q field %q saying %q", *e, err, c.agent, c.field, c.says)
			}
			for _, part := range []string{"/etc/agentgate/agents.yaml", c.agent, c.field} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("%q does not name %q", err, part)
				}
			}
		})
	}
}

func TestParseModelEndpoints(t *testing.T) {
	got, err := Parse("agents.yaml", []byte(`agents: [{name: a, command: a, pass_env: [BASE],
  model_endpoints: ["api.example.com:8443", "https://b.example.com/v1", "http://127.0.0.1:9/x", "http://[::1]:7/", "$BASE"]}]`), builtins)
	if err != nil {
		t.Fatal(err)
	}
	want := []ModelEndpoint{{HostPort: "api.example.com:8443"}, {HostPort: "b.example.com:443"},
		{HostPort: "127.0.0.1:9"}, {HostPort: "[::1]:7"}, {URLVar: "BASE"}}
	if !reflect.DeepEqual(got[0].ModelEndpoints, want) {
		t.Errorf("model_endpoints = %+v, want %+v", got[0].ModelEndpoints, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(path, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(path, builtins); err != nil || len(got) != 2 {
		t.Errorf("Load = %d agents, %v", len(got), err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("agents: []\n#"+strings.Repeat("x", MaxFileBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big, builtins); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(big) = %v, want the size refused", err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	if _, err := Load(missing, builtins); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) = %v, want an error naming the file", err)
	}
}

// FuzzParse checks that no input panics, that every error is an *Error
// naming the file, and that every accepted agent holds to the rules.
func FuzzParse(f *testing.F) {
	f.Add([]byte(example))
	f.Add([]byte(`{"agents":[{"name":"j","command":"j"}]}`))
	f.Add([]byte("agents: [{name: a, command: a, home_files: {../x: y}}]"))
	f.Add([]byte("agents: [{name: a, command: a, credentials: [{name: K, from_env: X}]}]"))
	f.Add([]byte("agents: &a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		agents, err := Parse("f.yaml", data, builtins)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "f.yaml" {
				t.Fatalf("error %v is not an *Error naming the file", err)
			}
			return
		}
		if len(agents) == 0 || len(agents) > MaxAgents {
			t.Fatalf("%d agents accepted", len(agents))
		}
		for _, a := range agents {
			if !namePattern.MatchString(a.Name) || a.Command == "" || len(a.VersionArgs) == 0 {
				t.Fatalf("accepted %+v", a)
			}
			for p, content := range a.HomeFiles {
				if !filepath.IsLocal(p) || len(content) > MaxHomeFileBytes {
					t.Fatalf("accepted home file %q", p)
				}
			}
			for _, c := range a.Credentials {
				if (c.FromEnv == "") == (c.FromFile == "") {
					t.Fatalf("accepted credential %+v", c)
				}
			}
		}
	})
}
