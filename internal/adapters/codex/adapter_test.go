package codex

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/netns"
	_ "github.com/agentgate/agentgate/internal/netns/lightshim"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/runs"
)

func TestMain(m *testing.M) {
	netns.Main()   // the conformance suite's network shim is this binary (in C, by lightshim, with cgo)
	mcptest.Main() // the conformance suite's MCP server is this binary
	goleak.VerifyTestMain(m)
}

func writeConfig(t *testing.T, home, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{
		"codex-cli 0.171.0\n":       "0.171.0",
		"codex-cli 0.172.0-alpha.1": "0.172.0-alpha.1",
	} {
		if got, err := New().ParseVersion([]byte(in)); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0.171.0", "codex 0.171.0", "codex-cli 0.171"} {
		if _, err := New().ParseVersion([]byte(in)); err == nil {
			t.Errorf("ParseVersion(%q) accepted", in)
		}
	}
}

// TestGatewayRefusesWhatCodexCannotHonour: Codex takes no spending limit,
// which the gateway refuses for it from Describe (runs.CheckFields); its
// turns the gateway counts itself, so max_turns is taken and never reaches
// the adapter.
func TestGatewayRefusesWhatCodexCannotHonour(t *testing.T) {
	d := New().Describe()
	spec := runs.Spec{Prompt: "x", MaxBudgetUSD: 1}
	err := runs.CheckFields(d, spec)
	var fe *runs.FieldError
	if !errorsAs(err, &fe) || fe.Kind != runs.ErrUnsupported || fe.Agent != Name || fe.Field != runs.FieldMaxBudgetUSD {
		t.Errorf("CheckFields(%+v) = %v, want unsupported_option for codex", spec, err)
	}
	turns := runs.Spec{Prompt: "x", MaxTurns: 3}
	if err := runs.CheckFields(d, turns); err != nil || runs.AdapterSpec(d, turns).MaxTurns != 0 {
		t.Errorf("max_turns: %v, adapter spec %+v; want it taken and kept from the adapter", err, runs.AdapterSpec(d, turns))
	}
}

func errorsAs(err error, fe **runs.FieldError) bool {
	f, ok := err.(*runs.FieldError)
	if ok {
		*fe = f
	}
	return ok
}

func TestCommandKeepsTheOperatorsProvider(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, home, `
model_provider = "corp"
[model_providers.corp]
name = "corp"
base_url = "http://127.0.0.1:9/v1"
env_key = "CORP_KEY"
request_max_retries = 3
[model_providers.corp.env_http_headers]
X-Team = "CORP_TEAM"
`)
	c, err := New().Command(runs.Invocation{Spec: runs.Spec{Prompt: "x"}, Home: home, Files: runs.HostFiles{}})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(c.Args, " ")
	if c.Args[0] != "app-server" {
		t.Errorf("args %q: not the app-server", args)
	}
	for _, want := range []string{"analytics.enabled=false", `otel.metrics_exporter="none"`, "--disable plugins", "--disable apps",
		"model_providers.corp.stream_max_retries=1", "-c sandbox_workspace_write.exclude_slash_tmp=true"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if strings.Contains(args, "request_max_retries") {
		t.Errorf("args %q override the operator's request_max_retries", args)
	}
	for _, want := range []string{"CORP_KEY", "CORP_TEAM", "OPENAI_API_KEY", "CODEX_API_KEY"} {
		if !slices.Contains(c.PassEnv, want) {
			t.Errorf("PassEnv %v lacks %s", c.PassEnv, want)
		}
	}
	if !slices.Contains(c.Env, "CODEX_HOME="+home) {
		t.Errorf("Env %v lacks CODEX_HOME", c.Env)
	}
	if c.Stdin != nil {
		t.Error("the prompt must travel in turn/start, not as stdin bytes")
	}

	// The built-in provider cannot be redefined, so it gets no overrides.
	c, err = New().Command(runs.Invocation{Spec: runs.Spec{Prompt: "x"}, Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(c.Args, " "); strings.Contains(args, "model_providers") {
		t.Errorf("args %q redefine the built-in provider, which codex refuses", args)
	}
}

func TestLoadProviderProfiles(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, home, `
model_provider = "a"
profile = "fast"
[profiles.fast]
model_provider = "b"
[model_providers.b]
env_key = "B_KEY"
`)
	p, err := loadProvider(runs.HostFiles{}, home)
	if err != nil || p.ID != "b" || p.Builtin || p.Config.EnvKey != "B_KEY" {
		t.Fatalf("loadProvider = %+v, %v; want the profile's provider b", p, err)
	}
	writeConfig(t, home, "model_provider = [")
	if _, err := loadProvider(runs.HostFiles{}, home); err == nil {
		t.Error("a broken config.toml was accepted")
	}
}

func TestPreflight(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, home, "model_provider = \"m\"\n[model_providers.m]\nenv_key = \"M_KEY\"\n")
	inv := runs.Invocation{Home: home, Bin: "/nonexistent/codex"}
	err := New().Preflight(context.Background(), inv, []string{"PATH=/bin"})
	if err == nil || err.Class != runs.NotAuthenticated || !strings.Contains(err.Message, "M_KEY") || !strings.Contains(err.Hint, "M_KEY") {
		t.Fatalf("missing env_key: %+v", err)
	}
	if err := New().Preflight(context.Background(), inv, []string{"M_KEY=k"}); err != nil {
		t.Fatalf("env_key set: %+v", err)
	}
	// No key variable on the provider: nothing to check.
	writeConfig(t, home, "model_provider = \"local\"\n[model_providers.local]\nbase_url = \"http://127.0.0.1:1\"\n")
	if err := New().Preflight(context.Background(), inv, nil); err != nil {
		t.Fatalf("keyless provider: %+v", err)
	}
	// The built-in provider with an API key variable.
	if err := New().Preflight(context.Background(), runs.Invocation{Home: t.TempDir()}, []string{"CODEX_API_KEY=k"}); err != nil {
		t.Fatalf("built-in with CODEX_API_KEY: %+v", err)
	}
	writeConfig(t, home, "model_provider = [")
	if err := New().Preflight(context.Background(), inv, nil); err == nil || !strings.Contains(err.Message, "config.toml") {
		t.Fatalf("broken config.toml: %+v", err)
	}
}

func TestResolveBinary(t *testing.T) {
	dir := t.TempDir()
	plat, triple, err := platform()
	if err != nil {
		t.Skip(err) // only amd64 and arm64 have a native codex
	}
	pkg := filepath.Join(dir, "node_modules", "@openai", "codex")
	launcher := filepath.Join(pkg, "bin", "codex.js")
	native := filepath.Join(dir, "node_modules", "@openai", plat, "vendor", triple, "bin", "codex")
	for _, f := range []struct {
		path, body string
	}{{launcher, "#!/usr/bin/env node\n"}, {native, "\x7fELF fake"}} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "node_modules", ".bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../@openai/codex/bin/codex.js", filepath.Join(bin, "codex")); err != nil {
		t.Fatal(err)
	}
	got, err := New().ResolveBinary(filepath.Join(bin, "codex"))
	if err != nil || got != native {
		t.Fatalf("ResolveBinary = %q, %v; want the native %q", got, err, native)
	}
	if got, err := New().ResolveBinary(native); err != nil || got != native {
		t.Errorf("ResolveBinary(native) = %q, %v", got, err)
	}
	if err := os.Remove(native); err != nil {
		t.Fatal(err)
	}
	if _, err := New().ResolveBinary(filepath.Join(bin, "codex")); err == nil || !strings.Contains(err.Error(), "native binary") {
		t.Errorf("launcher without its native binary: %v", err)
	}
}

// TestClassify pins each codexErrorInfo the CLI sends, as the real CLI
// sent it against the mock (see TestRealCLI), onto a class.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		info, msg string
		want      runs.Class
	}{
		{`{"httpConnectionFailed":{"httpStatusCode":401}}`, "unexpected status 401 Unauthorized", runs.NotAuthenticated},
		{`{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`, "exceeded retry limit, last status: 429", runs.RateLimited},
		{`"internalServerError"`, "We’re currently experiencing high demand", runs.TransientAPIError},
		{`"contextWindowExceeded"`, "Codex ran out of room", runs.ContextExceeded},
		{`{"responseStreamDisconnected":{"httpStatusCode":null}}`, "stream disconnected before completion: idle timeout waiting for SSE", runs.TransientAPIError},
		{`{"responseStreamConnectionFailed":{"httpStatusCode":503}}`, "503", runs.TransientAPIError},
		{`{"httpConnectionFailed":{"httpStatusCode":404}}`, "404", runs.APIError},
		{`"usageLimitExceeded"`, "limit", runs.RateLimited},
		{`"unauthorized"`, "no", runs.NotAuthenticated},
		{`"cyberPolicy"`, "no", runs.Refused},
		{`"other"`, `{"error":{"message":"Invalid request","code":"invalid_request"}}`, runs.APIError},
		{`"other"`, "Missing environment variable: `MOCK_KEY`.", runs.NotAuthenticated},
		{`"other"`, "stream disconnected before completion: idle timeout waiting for SSE", runs.TransientAPIError},
		{`"someFutureKind"`, "what", runs.APIError},
		{``, "what", runs.APIError},
		{`{"x":1}`, "what", runs.APIError},
	} {
		got := classify(turnError{Message: c.msg, Info: json.RawMessage(c.info)})
		if got.class != c.want {
			t.Errorf("classify(%s, %q) = %s, want %s", c.info, c.msg, got.class, c.want)
		}
	}
	e := turnError{Message: `{"error":{"message":"Invalid request: unsupported parameter","code":"invalid_request"}}`, Info: json.RawMessage(`"other"`)}
	if re := classify(e).runError(e); re.Message != "Invalid request: unsupported parameter (invalid_request)" || re.Retryable {
		t.Errorf("400 body: %+v, want the body's message, not retryable", re)
	}
}

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{"configWarning": "config_warning", "warning": "warning", "model/rerouted": "model_rerouted"} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEnsureDaemonDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "codex-daemon-x")
	if err := ensureDaemonDir(dir); err != nil {
		t.Fatalf("a new directory: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("made %v, %v; want a directory of mode 0700", fi, err)
	}
	if err := ensureDaemonDir(dir); err != nil {
		t.Errorf("the same directory again: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := ensureDaemonDir(dir); err == nil {
		t.Error("a directory open to every user was accepted")
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := ensureDaemonDir(link); err == nil {
		t.Error("a link was accepted")
	}
}
