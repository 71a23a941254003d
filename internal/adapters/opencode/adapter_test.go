package opencode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/netns"
	_ "github.com/agentgate/agentgate/internal/netns/lightshim"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestMain(m *testing.M) {
	netns.Main()   // the conformance suite's network shim is this binary (in C, by lightshim, with cgo)
	mcptest.Main() // the conformance suite's MCP server is this binary
	os.Exit(m.Run())
}

func inv(spec runs.Spec) runs.Invocation {
	return runs.Invocation{RunID: "r1", Spec: spec, Dir: "/w", Bin: "/bin/opencode", Home: "/nonexistent-home", Timeout: time.Minute}
}

func TestCommandDefaults(t *testing.T) {
	cmd, err := New().Command(inv(runs.Spec{Prompt: "-hi \"there\""}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"run", "--format=json", "--pure", "--thinking", "--title="}; !reflect.DeepEqual(cmd.Args, want) {
		t.Errorf("args = %q, want %q", cmd.Args, want)
	}
	if string(cmd.Stdin) != "-hi \"there\"" {
		t.Errorf("stdin = %q, want the prompt as written", cmd.Stdin)
	}
	want := []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_PERMISSION=" + permissionEnv[runs.WorkspaceWrite]}
	if !reflect.DeepEqual(cmd.Env, want) {
		t.Errorf("env = %q, want %q", cmd.Env, want)
	}
	if !reflect.DeepEqual(cmd.PassEnv, credentialEnv) {
		t.Errorf("pass env = %q, want %q", cmd.PassEnv, credentialEnv)
	}
	if cmd.InterruptSignal != 0 {
		t.Errorf("interrupt signal %d: SIGINT does not stop a running tool, SIGTERM (0) ends OpenCode", cmd.InterruptSignal)
	}
}

func TestCommandFields(t *testing.T) {
	spec := runs.Spec{Prompt: "p", Model: "mock/m", Effort: "high", ResumeSessionID: "ses_abc", Permission: runs.Full, KeepSession: true,
		TimeoutSeconds: 30, Cwd: "sub"}
	a := &Adapter{extraArgs: []string{"--x"}, titles: true}
	cmd, err := a.Command(inv(spec))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run", "--format=json", "--pure", "--thinking", "--session=ses_abc", "--model=mock/m", "--variant=high", "--auto", "--x"}
	if !reflect.DeepEqual(cmd.Args, want) {
		t.Errorf("args = %q, want %q", cmd.Args, want)
	}
	if !slices.Contains(cmd.Env, `OPENCODE_PERMISSION={"*":"allow"}`) {
		t.Errorf("env = %q", cmd.Env)
	}
	for p, perm := range map[runs.Permission]string{
		runs.ReadOnly: `{"edit":"deny","bash":"deny","external_directory":"deny"}`, "": permissionEnv[runs.WorkspaceWrite],
	} {
		cmd, err := New().Command(inv(runs.Spec{Prompt: "p", Permission: p}))
		if err != nil || !slices.Contains(cmd.Env, "OPENCODE_PERMISSION="+perm) || slices.Contains(cmd.Args, "--auto") {
			t.Errorf("%q: %v, env %q, args %q", p, err, cmd.Env, cmd.Args)
		}
	}
}

// TestCommandRefuses checks the fields OpenCode does not take, which the
// gateway refuses for it (runs.CheckFields, from Describe), and the values
// Command refuses.
func TestCommandRefuses(t *testing.T) {
	for field, spec := range map[string]runs.Spec{
		runs.FieldSystemPrompt: {Prompt: "p", SystemPrompt: "s"},
	} {
		err := runs.CheckFields(New().Describe(), spec)
		var fe *runs.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, runs.ErrUnsupported) || fe.Field != field || fe.Agent != Name {
			t.Errorf("%s: %v, want unsupported naming it", field, err)
		}
		if slices.Contains(New().Describe().Fields, field) {
			t.Errorf("%s is refused but listed as supported", field)
		}
	}
	// The gateway enforces these itself: they are taken, and the adapter
	// never sees them.
	for field, spec := range map[string]runs.Spec{
		runs.FieldMaxTurns:     {Prompt: "p", MaxTurns: 2},
		runs.FieldMaxBudgetUSD: {Prompt: "p", MaxBudgetUSD: 1},
		runs.FieldOutputSchema: {Prompt: "p", OutputSchema: []byte(`{}`)},
	} {
		if err := runs.CheckFields(New().Describe(), spec); err != nil {
			t.Errorf("%s, which the gateway enforces, was refused: %v", field, err)
		}
		if a := runs.AdapterSpec(New().Describe(), spec); a.MaxTurns != 0 || a.MaxBudgetUSD != 0 || len(a.OutputSchema) > 0 {
			t.Errorf("%s reaches the adapter: %+v", field, a)
		}
	}
	for _, c := range []struct {
		field string
		spec  runs.Spec
	}{
		{"prompt", runs.Spec{}},
		{runs.FieldPermission, runs.Spec{Prompt: "p", Permission: "root"}},
		{runs.FieldResumeSessionID, runs.Spec{Prompt: "p", ResumeSessionID: "ses x"}},
		{runs.FieldResumeSessionID, runs.Spec{Prompt: "p", ResumeSessionID: " ses_x"}},
	} {
		_, err := New().Command(inv(c.spec))
		var fe *runs.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, runs.ErrInvalid) || fe.Field != c.field {
			t.Errorf("%+v: %v, want invalid naming %s", c.spec, err, c.field)
		}
	}
}

// TestCommandHomeEnvRefs checks that the variables the home's
// configuration names are passed, and nothing a comment mentions.
func TestCommandHomeEnvRefs(t *testing.T) {
	home := t.TempDir()
	dir := configDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"opencode.json":  `{"provider":{"a":{"options":{"apiKey":"{env:KEY_A}","baseURL":"http://x//y"}},"b":{"options":{"apiKey":"{env:OPENAI_API_KEY}"}}}}`,
		"opencode.jsonc": "{\n // \"apiKey\": \"{env:COMMENTED}\"\n /* {env:ALSO_COMMENTED} */ \"x\": \"{env:KEY_B}\", \"y\": \"{env:not-a-name}\",\n}",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	i := inv(runs.Spec{Prompt: "p"})
	i.Home = home
	// Command reads the home only through the Invocation's Files: with
	// none, it sees no configuration.
	if cmd, err := New().Command(i); err != nil || !reflect.DeepEqual(cmd.PassEnv, credentialEnv) {
		t.Errorf("without Files: pass env = %q, %v; want %q", cmd.PassEnv, err, credentialEnv)
	}
	i.Files = runs.HostFiles{}
	cmd, err := New().Command(i)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]string(nil), credentialEnv...), "KEY_A", "KEY_B")
	if !reflect.DeepEqual(cmd.PassEnv, want) {
		t.Errorf("pass env = %q, want %q", cmd.PassEnv, want)
	}
}

func TestDescribe(t *testing.T) {
	d := New().Describe()
	if d.Name != Name || d.VerifiedVersion != VerifiedVersion || d.InstallCommand != "npm install -g opencode-ai@1.18.33" ||
		!reflect.DeepEqual(d.VersionArgs, []string{"--version"}) || d.DefaultBin != "opencode" {
		t.Errorf("describe = %+v", d)
	}
	for _, p := range []runs.Permission{runs.ReadOnly, runs.WorkspaceWrite, runs.Full} {
		if !strings.Contains(d.Permissions[p], permissionEnv[p]) {
			t.Errorf("permission %s documented as %q, which does not show %s", p, d.Permissions[p], permissionEnv[p])
		}
	}
	for _, name := range credentialEnv {
		if !slices.Contains(d.CredentialEnv, name) {
			t.Errorf("CredentialEnv lacks %s", name)
		}
	}
	for _, f := range d.Fields {
		spec := runs.Spec{Prompt: "p", Model: "a/b", Effort: "low", TimeoutSeconds: 9, ResumeSessionID: "ses_1", KeepSession: true, Cwd: "x",
			Permission: runs.ReadOnly}
		if _, err := New().Command(inv(spec)); err != nil {
			t.Errorf("field %s listed, but a spec with every listed field is refused: %v", f, err)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for out, want := range map[string]string{"1.18.33\n": "1.18.33", "v1.2.3": "1.2.3", "1.19.0-beta.1\n": "1.19.0-beta.1"} {
		if got, err := New().ParseVersion([]byte(out)); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %q, %v", out, got, err)
		}
	}
	for _, bad := range []string{"", "opencode 1.18.33", "1.18", "Error: postinstall script was not run"} {
		if v, err := New().ParseVersion([]byte(bad)); err == nil {
			t.Errorf("ParseVersion(%q) = %q", bad, v)
		}
	}
}

// TestResolveBinary lays out the npm package as installed with and
// without its install script.
func TestResolveBinary(t *testing.T) {
	root := t.TempDir()
	nm := filepath.Join(root, "node_modules")
	write := func(path, content string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const elf, stub = "\x7fELF native", "echo \"Error: opencode-ai's postinstall script was not run.\" >&2\nexit 1\n"
	native := write(filepath.Join(nm, platformPackages()[0], "bin", "opencode"), elf)
	pkgBin := write(filepath.Join(nm, "opencode-ai", "bin", "opencode.exe"), stub)
	link := filepath.Join(nm, ".bin", "opencode")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../opencode-ai/bin/opencode.exe", link); err != nil {
		t.Fatal(err)
	}
	if got, err := New().ResolveBinary(link); err != nil || got != native {
		t.Errorf("stub = %q, %v; want the platform package's %q", got, err, native)
	}
	// Installed with its script: the command is the native binary.
	write(pkgBin, elf)
	if got, err := New().ResolveBinary(link); err != nil || got != pkgBin {
		t.Errorf("native = %q, %v; want itself", got, err)
	}
	// A stub whose platform package is nested under it.
	nested := t.TempDir()
	nstub := write(filepath.Join(nested, "opencode-ai", "bin", "opencode.exe"), stub)
	nnative := write(filepath.Join(nested, "opencode-ai", "node_modules", platformPackages()[0], "bin", "opencode"), elf)
	if got, err := New().ResolveBinary(nstub); err != nil || got != nnative {
		t.Errorf("nested = %q, %v; want %q", got, err, nnative)
	}
	// A stub without any native binary.
	lone := write(filepath.Join(t.TempDir(), "opencode-ai", "bin", "opencode.exe"), stub)
	if _, err := New().ResolveBinary(lone); err == nil || !strings.Contains(err.Error(), "no native binary") {
		t.Errorf("lone stub: %v", err)
	}
	// Something else on the PATH (a wrapper script) runs as it is.
	other := write(filepath.Join(t.TempDir(), "opencode"), "#!/bin/sh\n")
	if got, err := New().ResolveBinary(other); err != nil || got != other {
		t.Errorf("other = %q, %v", got, err)
	}
	if _, err := New().ResolveBinary(filepath.Join(root, "missing")); err == nil {
		t.Error("a missing path resolved")
	}
}

func TestPreflightKey(t *testing.T) {
	home := t.TempDir()
	content := `{"model":"mock/m","provider":{"mock":{"options":{"apiKey":"{env:MOCK_KEY}"}},"other":{"options":{"apiKey":"{env:UNSET}"}}}}`
	run := func(spec runs.Spec, env ...string) *runs.RunError {
		i := inv(spec)
		i.Home = home
		return New().Preflight(context.Background(), i, env)
	}
	e := run(runs.Spec{Prompt: "p"}, "OPENCODE_CONFIG_CONTENT="+content)
	if e == nil || e.Class != runs.NotAuthenticated || e.Retryable || !strings.Contains(e.Message, "{env:MOCK_KEY}") ||
		!strings.Contains(e.Message, "OPENCODE_CONFIG_CONTENT") || !strings.Contains(e.Hint, "MOCK_KEY") {
		t.Errorf("missing key = %+v", e)
	}
	if e := run(runs.Spec{Prompt: "p"}, "OPENCODE_CONFIG_CONTENT="+content, "MOCK_KEY=k"); e != nil {
		t.Errorf("with the key = %+v", e)
	}
	// Another provider's missing key does not matter.
	if e := run(runs.Spec{Prompt: "p", Model: "opencode/big-pickle"}, "OPENCODE_CONFIG_CONTENT="+content); e != nil {
		t.Errorf("OpenCode's own provider = %+v", e)
	}
	if e := run(runs.Spec{Prompt: "p", Model: "other/x"}, "OPENCODE_CONFIG_CONTENT="+content, "MOCK_KEY=k"); e == nil || !strings.Contains(e.Message, "UNSET") {
		t.Errorf("model of the other provider = %+v", e)
	}
	// A file named by OPENCODE_CONFIG, in JSONC.
	file := filepath.Join(t.TempDir(), "oc.jsonc")
	if err := os.WriteFile(file, []byte("{\n // the key\n \"provider\": {\"mock\": {\"options\": {\"apiKey\": \"{env:FILE_KEY}\",},},},\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := run(runs.Spec{Prompt: "p", Model: "mock/m"}, "OPENCODE_CONFIG="+file); e == nil || !strings.Contains(e.Message, "FILE_KEY") {
		t.Errorf("OPENCODE_CONFIG file = %+v", e)
	}
	// Built-in providers: the key variable, or a login.
	if e := run(runs.Spec{Prompt: "p", Model: "openai/gpt-5"}); e == nil || !strings.Contains(e.Message, "OPENAI_API_KEY") ||
		!strings.Contains(e.Hint, "opencode auth login") {
		t.Errorf("openai without a key = %+v", e)
	}
	if e := run(runs.Spec{Prompt: "p", Model: "openai/gpt-5"}, "OPENAI_API_KEY=sk"); e != nil {
		t.Errorf("openai with a key = %+v", e)
	}
	if err := os.MkdirAll(filepath.Dir(authFile(home)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(authFile(home), []byte(`{"anthropic":{"type":"api","key":"x"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := run(runs.Spec{Prompt: "p", Model: "anthropic/claude"}); e != nil {
		t.Errorf("anthropic logged in = %+v", e)
	}
	// The home's file, and no model anywhere.
	if err := os.MkdirAll(configDir(home), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(configDir(home), "opencode.json"), []byte(`{"model":"mock/m","provider":{"mock":{"options":{"apiKey":"{env:HOME_KEY}"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := run(runs.Spec{Prompt: "p"}); e == nil || !strings.Contains(e.Message, "HOME_KEY") {
		t.Errorf("home file = %+v", e)
	}
	if e := run(runs.Spec{Prompt: "p"}, "HOME_KEY=k"); e != nil {
		t.Errorf("home file with its key = %+v", e)
	}
	if e := New().Preflight(context.Background(), inv(runs.Spec{Prompt: "p"}), nil); e != nil {
		t.Errorf("nothing configured = %+v: OpenCode's own default needs no key", e)
	}
}

func TestPreflightSessionListFails(t *testing.T) {
	i := inv(runs.Spec{Prompt: "p", ResumeSessionID: "ses_1"})
	i.Bin, i.Dir = "/bin/false", t.TempDir()
	if e := New().Preflight(context.Background(), i, nil); e == nil || e.Class != runs.AgentCrashed || !strings.Contains(e.Message, "session list") {
		t.Errorf("session list failing = %+v", e)
	}
	i.Bin = "/bin/echo" // prints its arguments: not a list
	if e := New().Preflight(context.Background(), i, nil); e == nil || e.Class != runs.FlagRejected {
		t.Errorf("session list printing something else = %+v", e)
	}
}

func TestJSONC(t *testing.T) {
	in := "{\"a\": \"x // not a comment\", // comment\n \"b\": \"/* nor this */\", /* block */ \"c\": [1, 2,], \"d\": \"\\\"\",}"
	c, ok := parseConfig([]byte(`{"model":"p/m",}`))
	if !ok || c.Model != "p/m" {
		t.Errorf("trailing comma: %+v %v", c, ok)
	}
	got := string(stripTrailingCommas(stripJSONC([]byte(in))))
	want := "{\"a\": \"x // not a comment\", \n \"b\": \"/* nor this */\",   \"c\": [1, 2], \"d\": \"\\\"\"}"
	if got != want {
		t.Errorf("stripped =\n%q\nwant\n%q", got, want)
	}
	if string(stripJSONC([]byte("{/* unterminated"))) != "{" {
		t.Error("unterminated comment")
	}
	if _, ok := parseConfig([]byte("[1]")); ok {
		t.Error("an array parsed as a configuration")
	}
}
