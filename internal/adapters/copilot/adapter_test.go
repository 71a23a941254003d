package copilot

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/netns"
	_ "github.com/agentgate/agentgate/internal/netns/lightshim"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/runs"
)

// testCache is the package cache (COPILOT_CACHE_HOME) the real-CLI runs
// share: each CLI home would otherwise unpack its own 235 MB copy.
var testCache string

// TestMain checks that the tests leave no goroutine behind, and removes
// the shared package cache.
func TestMain(m *testing.M) {
	netns.Main()   // the conformance suite's network shim is this binary (in C, by lightshim, with cgo)
	mcptest.Main() // the conformance suite's MCP server is this binary
	dir, err := os.MkdirTemp("", "agentgate-copilot-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testCache = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

func testInv(spec runs.Spec) runs.Invocation {
	return runs.Invocation{RunID: "0196f0c2-7e1a-7000-8000-000000000001", Spec: spec, Dir: "/work/run", Bin: "copilot",
		Home: "/data/agents/copilot", CLIVersion: VerifiedVersion}
}

func TestCommand(t *testing.T) {
	inv := testInv(runs.Spec{Prompt: "-fix it", Model: "gpt-5.4", Effort: "xhigh", Permission: runs.WorkspaceWrite})
	cmd, err := New().Command(inv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--output-format=json", "--session-id=" + inv.RunID,
		"--usage-output-file=/data/agents/copilot/.agentgate-usage/" + inv.RunID + ".json",
		"--no-auto-update", "--disable-client-telemetry", "--model=gpt-5.4", "--reasoning-effort=xhigh", "--allow-all-tools"}
	if !slices.Equal(cmd.Args, want) {
		t.Errorf("args =\n  %q\nwant\n  %q", cmd.Args, want)
	}
	if string(cmd.Stdin) != "-fix it" {
		t.Errorf("stdin = %q, want the prompt", cmd.Stdin)
	}
	if !slices.Contains(cmd.Env, "COPILOT_AUTO_UPDATE=false") {
		t.Errorf("env = %q", cmd.Env)
	}
	wantPass := []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_OFFLINE", "COPILOT_PROVIDER_BASE_URL",
		"COPILOT_PROVIDER_TYPE", "COPILOT_PROVIDER_API_KEY", "COPILOT_PROVIDER_API_KEY_COMMAND", "COPILOT_PROVIDER_BEARER_TOKEN",
		"COPILOT_PROVIDER_WIRE_API", "COPILOT_PROVIDER_TRANSPORT", "COPILOT_PROVIDER_AZURE_API_VERSION", "COPILOT_PROVIDER_HEADERS",
		"COPILOT_PROVIDER_MODEL_ID", "COPILOT_PROVIDER_WIRE_MODEL", "COPILOT_PROVIDER_MAX_PROMPT_TOKENS",
		"COPILOT_PROVIDER_MAX_OUTPUT_TOKENS", "COPILOT_MODEL"}
	if !slices.Equal(cmd.PassEnv, wantPass) || !slices.Equal(New().Describe().CredentialEnv, wantPass) {
		t.Errorf("pass env = %q", cmd.PassEnv)
	}
	for _, e := range cmd.Env {
		name, _, _ := strings.Cut(e, "=")
		if slices.Contains(wantPass, name) {
			t.Errorf("env sets the credential variable %s", name)
		}
	}

	for perm, flags := range map[runs.Permission][]string{
		runs.ReadOnly: {"--deny-tool=write"}, runs.WorkspaceWrite: {"--allow-all-tools"}, "": {"--allow-all-tools"}, runs.Full: {"--allow-all"},
	} {
		cmd, err := New().Command(testInv(runs.Spec{Prompt: "p", Permission: perm}))
		if err != nil {
			t.Fatal(err)
		}
		tail := cmd.Args[len(cmd.Args)-len(flags):]
		if !slices.Equal(tail, flags) {
			t.Errorf("%q: args end in %q, want %q", perm, tail, flags)
		}
		for _, a := range cmd.Args {
			if perm == runs.ReadOnly && strings.HasPrefix(a, "--allow") {
				t.Errorf("read_only has %s", a)
			}
		}
	}
}

// TestCommandRefuses checks what the gateway refuses for Copilot on the
// way to its adapter: the fields it does not take (runs.CheckFields, from
// Describe), then the values Command refuses.
func TestCommandRefuses(t *testing.T) {
	d := New().Describe()
	for _, c := range []struct {
		spec  runs.Spec
		field string
		kind  error
	}{
		{runs.Spec{Prompt: "p", SystemPrompt: "s"}, runs.FieldSystemPrompt, runs.ErrUnsupported},
		{runs.Spec{Prompt: "p", MaxBudgetUSD: 1}, runs.FieldMaxBudgetUSD, runs.ErrUnsupported},
		{runs.Spec{Prompt: "p", Effort: "extreme"}, runs.FieldEffort, runs.ErrUnsupported},
		{runs.Spec{Prompt: "p", Permission: "root"}, runs.FieldPermission, runs.ErrInvalid},
		{runs.Spec{}, "prompt", runs.ErrInvalid},
	} {
		err := runs.CheckFields(d, c.spec)
		if err == nil {
			_, err = New().Command(testInv(runs.AdapterSpec(d, c.spec)))
		}
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, c.kind) {
			t.Errorf("%+v: %v, want %v naming %s", c.spec, err, c.kind, c.field)
		}
	}
	// The gateway enforces these itself: they are taken, and the adapter
	// never sees them.
	for _, spec := range []runs.Spec{{Prompt: "p", MaxTurns: 2}, {Prompt: "p", OutputSchema: json.RawMessage(`{}`)}} {
		if err := runs.CheckFields(d, spec); err != nil {
			t.Errorf("%+v, which the gateway enforces, was refused: %v", spec, err)
		}
		if a := runs.AdapterSpec(d, spec); a.MaxTurns != 0 || len(a.OutputSchema) > 0 {
			t.Errorf("%+v reaches the adapter: %+v", spec, a)
		}
	}
	c, err := New().Command(testInv(runs.Spec{Prompt: "p", ResumeSessionID: "0196f0c2-7e1a-7000-8000-000000000009"}))
	if err != nil || !slices.Contains(c.Args, "--resume=0196f0c2-7e1a-7000-8000-000000000009") || slices.ContainsFunc(c.Args, func(a string) bool {
		return strings.HasPrefix(a, "--session-id")
	}) {
		t.Errorf("resume: %v, %v; want --resume with the session and no new --session-id", c.Args, err)
	}
	inv := testInv(runs.Spec{Prompt: "p"})
	inv.Home = "relative"
	if _, err := New().Command(inv); err == nil {
		t.Error("a relative home was taken")
	}
}

func TestParseVersion(t *testing.T) {
	v, err := New().ParseVersion([]byte("GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.\n"))
	if err != nil || v != "1.0.102" {
		t.Errorf("= %q, %v", v, err)
	}
	for _, bad := range []string{"", "1.0.102", "GitHub Copilot CLI\n", "Copilot 1.0.102."} {
		if v, err := New().ParseVersion([]byte(bad)); err == nil {
			t.Errorf("%q parsed as %q", bad, v)
		}
	}
}

func TestResolveBinary(t *testing.T) {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" {
		t.Fatalf("no copilot platform package for %s", runtime.GOARCH)
	}
	root := t.TempDir()
	scope := filepath.Join(root, "node_modules", "@github")
	loader := filepath.Join(scope, "copilot", "npm-loader.js")
	native := filepath.Join(scope, "copilot-linux-"+arch, "copilot")
	bin := filepath.Join(root, "node_modules", ".bin", "copilot")
	for _, d := range []string{filepath.Dir(loader), filepath.Dir(native), filepath.Dir(bin)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(loader, []byte("#!/usr/bin/env node\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../@github/copilot/npm-loader.js", bin); err != nil {
		t.Fatal(err)
	}
	if _, err := New().ResolveBinary(bin); err == nil || !strings.Contains(err.Error(), "native binary is not installed") {
		t.Errorf("without the platform package: %v", err)
	}
	if err := os.WriteFile(native, []byte("\x7fELF fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := New().ResolveBinary(bin)
	if err != nil || got != native {
		t.Errorf("= %q, %v; want %q", got, err, native)
	}
	if got, err := New().ResolveBinary(native); err != nil || got != native {
		t.Errorf("the native binary resolved to %q, %v", got, err)
	}
}

// TestFinishReadsUsageFile checks the decoder's one piece of I/O: Finish
// reads the usage file the command named, through the Invocation's Files,
// sums its models, and removes it.
func TestFinishReadsUsageFile(t *testing.T) {
	inv := testInv(runs.Spec{Prompt: "p"})
	inv.Home = t.TempDir()
	inv.Files = runs.HostFiles{}
	path := UsagePath(inv)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	usage := `{"currentModel":"m1","modelMetrics":{` +
		`"m1":{"usage":{"inputTokens":10200,"outputTokens":80,"cacheReadTokens":8900,"cacheWriteTokens":3,"reasoningTokens":19}},` +
		`"m2":{"usage":{"inputTokens":100,"outputTokens":10,"cacheReadTokens":0,"cacheWriteTokens":0,"reasoningTokens":1}}}}`
	if err := os.WriteFile(path, []byte(usage), 0o600); err != nil {
		t.Fatal(err)
	}
	dec := New().NewDecoder(inv)
	dec.Decode([]byte(`{"type":"result","sessionId":"s1","exitCode":0}`))
	o := dec.Finish(runs.Exit{}, nil)
	want := runs.Usage{InputTokens: 10300, CacheReadTokens: 8900, CacheWriteTokens: 3, OutputTokens: 90, ReasoningTokens: 20}
	if o.Status != runs.Succeeded || o.Usage != want || o.Model != "m1" || o.SessionID != "s1" {
		t.Errorf("outcome = %+v", o)
	}
	if len(o.Events) != 1 || o.Events[0].Type != runs.EventUsageUpdated || o.Events[0].Data.(runs.UsageData).Usage != want {
		t.Errorf("events = %+v", o.Events)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the usage file is still there: %v", err)
	}

	// A run that finished its prompt without the file says so.
	dec = New().NewDecoder(inv)
	dec.Decode([]byte(`{"type":"result","sessionId":"s1","exitCode":0}`))
	if o := dec.Finish(runs.Exit{}, nil); o.Status != runs.Succeeded || !o.Usage.IsZero() || len(o.Events) != 1 ||
		o.Events[0].Data.(runs.WarningData).Code != "usage_missing" {
		t.Errorf("without the file: %+v", o)
	}
}

// tokenNotValidStderr is what the CLI printed, offline, for a
// fine-grained token it could not check.
const tokenNotValidStderr = `Error: Authentication token found but could not be validated.

  Failed to fetch PAT user login: network fetch failed: request failed: error sending request for url (https://api.github.com/copilot_internal/user)
  Failed to fetch GitHub CLI user login: network fetch failed: request failed: error sending request for url (https://api.github.com/copilot_internal/user)

Your token may still be valid. Check your network connection and try again.

To authenticate, you can use any of the following methods:
  • Start 'copilot' and run the '/login' command
  • Set the COPILOT_GITHUB_TOKEN, GH_TOKEN, or GITHUB_TOKEN environment variable
  • Run 'gh auth login' to authenticate with the GitHub CLI
`

func TestClassifyWithoutStream(t *testing.T) {
	for _, c := range []struct {
		stderr string
		exit   runs.Exit
		class  runs.Class
		msg    string
	}{
		{tokenNotValidStderr, runs.Exit{Code: 1}, runs.NotAuthenticated, "Authentication token found but could not be validated."},
		{"Error: No authentication information found.\n\nCopilot can be …\n", runs.Exit{Code: 1}, runs.NotAuthenticated, "No authentication information found."},
		{"Offline mode requires a local model provider. Set COPILOT_PROVIDER_BASE_URL to configure one.\n", runs.Exit{Code: 1}, runs.NotAuthenticated, "Offline mode"},
		{"error: invalid value 'bogus' for '--reasoning-effort <level>'\n  [possible values: none]\n\nFor more information, try '--help'.\n", runs.Exit{Code: 1}, runs.FlagRejected, "invalid value"},
		{"Error: No session, task, or name matched 'x'.\n\nTo resume …\n", runs.Exit{Code: 1}, runs.SessionNotFound, "No session"},
		{"", runs.Exit{Code: -1, Signal: "SIGKILL"}, runs.ProcessKilled, "SIGKILL"},
		{"Error executing prompt: boom\n", runs.Exit{Code: 1}, runs.AgentCrashed, "boom"},
	} {
		inv := testInv(runs.Spec{Prompt: "p"})
		inv.CLIVersion = "1.0.200"
		o := newDecoder(inv, replayFiles{}).Finish(c.exit, []byte(c.stderr))
		if o.Status != runs.Failed || o.Error == nil || o.Error.Class != c.class || !strings.Contains(o.Error.Message, c.msg) {
			t.Errorf("%q: %+v, want %s with %q", c.stderr, o.Error, c.class, c.msg)
			continue
		}
		if c.class == runs.NotAuthenticated && o.Error.Hint == "" {
			t.Errorf("%q: no hint", c.stderr)
		}
		if c.class == runs.FlagRejected && c.msg == "invalid value" && (!strings.Contains(o.Error.Hint, "1.0.200") || !strings.Contains(o.Error.Hint, VerifiedVersion)) {
			t.Errorf("flag hint %q names neither version", o.Error.Hint)
		}
		if o.SessionID != "" {
			t.Errorf("session %q for a CLI that never started one", o.SessionID)
		}
	}
}

func TestClassifySessionError(t *testing.T) {
	failure := func(status int, kind, code string) string {
		return fmt.Sprintf(`{"type":"model.call_failure","data":{"statusCode":%d,"failureKind":%q,"errorCode":%q}}`, status, kind, code)
	}
	for _, c := range []struct {
		lines []string
		class runs.Class
	}{
		{[]string{failure(401, "api", ""), `{"type":"session.error","data":{"errorType":"authentication","message":"m","statusCode":401}}`}, runs.NotAuthenticated},
		{[]string{`{"type":"session.error","data":{"errorType":"rate_limit","message":"m","statusCode":429}}`}, runs.RateLimited},
		{[]string{`{"type":"session.error","data":{"errorType":"query","message":"m","statusCode":500}}`}, runs.TransientAPIError},
		{[]string{`{"type":"session.error","data":{"errorType":"query","message":"m","statusCode":503}}`}, runs.TransientAPIError},
		{[]string{`{"type":"session.error","data":{"errorType":"query","message":"m","statusCode":400}}`}, runs.APIError},
		{[]string{failure(0, "transport", ""), `{"type":"session.error","data":{"errorType":"query","message":"Could not connect"}}`}, runs.TransientAPIError},
		{[]string{failure(0, "api", "context_length_exceeded"), `{"type":"session.error","data":{"errorType":"query","message":"too long"}}`}, runs.ContextExceeded},
		{[]string{`{"type":"assistant.turn_retry","data":{"reason":"forced_compaction"},"ephemeral":true}`, `{"type":"session.error","data":{"errorType":"query"}}`}, runs.ContextExceeded},
	} {
		dec := newDecoder(testInv(runs.Spec{Prompt: "p"}), replayFiles{})
		for _, l := range c.lines {
			for _, ev := range dec.Decode([]byte(l)) {
				if ev.Type == runs.EventAgentUnparsed {
					t.Errorf("%s: unparsed", l)
				}
			}
		}
		dec.Decode([]byte(`{"type":"result","exitCode":1}`))
		o := dec.Finish(runs.Exit{Code: 1}, nil)
		if o.Status != runs.Failed || o.Error == nil || o.Error.Class != c.class || o.Error.Message == "" || o.Error.Retryable != c.class.Retryable() {
			t.Errorf("%v: %+v, want %s", c.lines, o.Error, c.class)
		}
	}
}

func TestDecodeLines(t *testing.T) {
	dec := newDecoder(testInv(runs.Spec{Prompt: "p"}), replayFiles{})
	for _, c := range []struct {
		line string
		want []runs.EventType
	}{
		{`not json`, []runs.EventType{runs.EventAgentUnparsed}},
		{`{"data":{}}`, []runs.EventType{runs.EventAgentUnparsed}},
		{`{"type":"brand.new","data":{}}`, []runs.EventType{runs.EventAgentUnparsed}},
		{`{"type":"brand.new.progress","data":{},"ephemeral":true}`, nil},
		{`{"type":"session.tools_updated","data":{"model":"m"},"ephemeral":true}`, []runs.EventType{runs.EventSessionStarted}},
		{`{"type":"user.message","data":{"content":"p"}}`, nil},
		{`{"type":"assistant.message_delta","data":{"messageId":"m1","deltaContent":"Hel"},"ephemeral":true}`, []runs.EventType{runs.EventMessageDelta}},
		{`{"type":"assistant.message","data":{"messageId":"m1","content":"Hello","reasoningText":"r","toolRequests":[{"toolCallId":"c1","name":"view","arguments":{"path":"a"}}]}}`,
			[]runs.EventType{runs.EventReasoningCompleted, runs.EventMessageCompleted, runs.EventToolCallStarted}},
		{`{"type":"tool.execution_start","data":{"toolCallId":"c1","toolName":"view"}}`, nil},
		{`{"type":"tool.execution_start","data":{"toolCallId":"c2","toolName":"bash","arguments":{"command":"x"}}}`, []runs.EventType{runs.EventToolCallStarted}},
		{`{"type":"tool.execution_complete","data":{"toolCallId":"c2","success":false,"error":{"message":"Permission denied","code":"denied"}}}`,
			[]runs.EventType{runs.EventToolCallCompleted, runs.EventWarning}},
		{`{"type":"assistant.turn_retry","data":{"reason":"rate_limit"},"ephemeral":true}`, []runs.EventType{runs.EventRateLimit}},
		{`{"type":"assistant.turn_retry","data":{"reason":"api_error"},"ephemeral":true}`, []runs.EventType{runs.EventWarning}},
		{`{"type":"session.info","data":{"infoType":"model_retry","message":"Retrying..."},"ephemeral":true}`, nil},
		{`{"type":"session.info","data":{"infoType":"quota","message":"Low"},"ephemeral":true}`, []runs.EventType{runs.EventWarning}},
	} {
		var got []runs.EventType
		for _, ev := range dec.Decode([]byte(c.line)) {
			got = append(got, ev.Type)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.line, got, c.want)
		}
	}
	// c1 never completed: Finish closes it as failed.
	o := dec.Finish(runs.Exit{Code: -1, Signal: "SIGKILL"}, nil)
	if len(o.Events) != 1 || o.Events[0].Data.(runs.ToolCallCompletedData).ID != "c1" || !o.Events[0].Data.(runs.ToolCallCompletedData).IsError {
		t.Errorf("outcome events = %+v", o.Events)
	}
	if o.Result != "Hello" || o.Model != "m" || o.SessionID != testInv(runs.Spec{}).RunID {
		t.Errorf("outcome = %+v", o)
	}
}

// TestAbortedPrompt checks that a prompt the CLI aborted is interrupted,
// even when the CLI still ends it with a result line and exit code 0.
func TestAbortedPrompt(t *testing.T) {
	for _, lines := range [][]string{
		{`{"type":"abort","data":{"reason":"user_abort"}}`},
		{`{"type":"abort","data":{"reason":"user_abort"}}`, `{"type":"result","sessionId":"s","exitCode":0}`},
	} {
		dec := newDecoder(testInv(runs.Spec{Prompt: "p"}), replayFiles{})
		for _, l := range lines {
			dec.Decode([]byte(l))
		}
		o := dec.Finish(runs.Exit{}, nil)
		if o.Status != runs.Failed || o.Error == nil || o.Error.Class != runs.Interrupted || o.StopReason != "aborted" {
			t.Errorf("%v: %+v", lines, o)
		}
	}
}
