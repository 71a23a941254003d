package claude

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/netns"
	_ "github.com/agentgate/agentgate/internal/netns/lightshim"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestMain checks that the real-CLI tests leave no goroutine behind: the
// mock servers and the process readers they start.
func TestMain(m *testing.M) {
	netns.Main()   // the conformance suite's network shim is this binary (in C, by lightshim, with cgo)
	mcptest.Main() // the conformance suite's MCP server is this binary
	goleak.VerifyTestMain(m)
}

const runID = "0196f0c2-7e1a-7000-8000-000000000001"

func TestDescribe(t *testing.T) {
	a := New()
	d := a.Describe()
	if a.Name() != "claude" || d.Name != "claude" || d.DefaultBin != "claude" || d.VerifiedVersion != "2.1.332" ||
		d.InstallCommand != "npm install -g @anthropic-ai/claude-code@2.1.332" || !slices.Equal(d.VersionArgs, []string{"--version"}) {
		t.Errorf("description = %+v", d)
	}
	for _, p := range []runs.Permission{runs.ReadOnly, runs.WorkspaceWrite, runs.Full} {
		if d.Permissions[p] == "" {
			t.Errorf("permission %s undocumented", p)
		}
	}
	for _, v := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_MODEL"} {
		if !slices.Contains(d.CredentialEnv, v) {
			t.Errorf("CredentialEnv lacks %s", v)
		}
	}
	if !slices.Contains(d.Fields, runs.FieldEffort) || !slices.Contains(d.Fields, runs.FieldOutputSchema) {
		t.Errorf("fields = %v", d.Fields)
	}
	d.Permissions[runs.Full] = "changed"
	d.CredentialEnv[0] = "changed"
	if d2 := a.Describe(); d2.Permissions[runs.Full] == "changed" || d2.CredentialEnv[0] == "changed" {
		t.Error("Describe shares its tables with the caller")
	}
}

func TestParseVersion(t *testing.T) {
	a := New()
	for in, want := range map[string]string{
		"2.1.332 (Claude Code)\n":    "2.1.332",
		"  2.1.332 (Claude Code)  ":  "2.1.332",
		"3.0.0-beta.1 (Claude Code)": "3.0.0-beta.1",
	} {
		if got, err := a.ParseVersion([]byte(in)); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "2.1.332", "claude 2.1.332", "2.1 (Claude Code)", "2.1.332 (Claude Code)\nextra", "\xff"} {
		if got, err := a.ParseVersion([]byte(in)); err == nil {
			t.Errorf("ParseVersion(%q) = %q, want an error", in, got)
		}
	}
}

func command(t *testing.T, spec runs.Spec) runs.Command {
	t.Helper()
	cmd, err := New().Command(runs.Invocation{RunID: runID, Spec: spec, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Command(%+v): %v", spec, err)
	}
	return cmd
}

func TestCommandNewRun(t *testing.T) {
	cmd := command(t, runs.Spec{Prompt: "hello"})
	want := []string{"-p", "--input-format=stream-json", "--output-format=stream-json", "--verbose", "--include-partial-messages",
		"--session-id=" + runID, "--permission-mode=acceptEdits", "--allowedTools=Bash"}
	if !slices.Equal(cmd.Args, want) {
		t.Errorf("args =\n  %q\nwant\n  %q", cmd.Args, want)
	}
	// One run's input is one stream-json user line, then the end of stdin.
	if string(cmd.Stdin) != string(mustLine(t, "hello")) || !strings.HasSuffix(string(cmd.Stdin), "}\n") {
		t.Errorf("stdin = %q", cmd.Stdin)
	}
	if cmd.InterruptSignal != int(syscall.SIGINT) {
		t.Errorf("interrupt = %d", cmd.InterruptSignal)
	}
	for _, e := range []string{"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=2", "API_TIMEOUT_MS=20000"} {
		if !slices.Contains(cmd.Env, e) {
			t.Errorf("env lacks %s: %v", e, cmd.Env)
		}
	}
	// The shared test list and the adapter's must not drift apart.
	for _, e := range agenttest.NoPhoneHomeEnv() {
		if !slices.Contains(cmd.Env, e) {
			t.Errorf("env lacks %s, which agenttest.NoPhoneHomeEnv lists", e)
		}
	}
	if slices.Contains(cmd.Env, "IS_SANDBOX=1") {
		t.Error("IS_SANDBOX outside full permission")
	}
	if !slices.Contains(cmd.PassEnv, "ANTHROPIC_API_KEY") || !slices.Contains(cmd.PassEnv, "ANTHROPIC_BASE_URL") {
		t.Errorf("pass env = %v", cmd.PassEnv)
	}
}

func TestCommandFields(t *testing.T) {
	cmd := command(t, runs.Spec{
		Prompt: "-p looks like a flag", SystemPrompt: "--be brief", Model: "claude-opus-5-5", Effort: "xhigh",
		MaxTurns: 7, MaxBudgetUSD: 0.25, OutputSchema: json.RawMessage("{\n  \"type\": \"object\"\n}"),
		ResumeSessionID: "0196F0C2-7E1A-7000-8000-0000000000AB", Permission: runs.Full,
	})
	for _, a := range []string{"--resume=0196F0C2-7E1A-7000-8000-0000000000AB", "--model=claude-opus-5-5",
		"--append-system-prompt=--be brief", "--effort=xhigh", "--max-turns=7", "--max-budget-usd=0.25",
		`--json-schema={"type":"object"}`, "--dangerously-skip-permissions"} {
		if !slices.Contains(cmd.Args, a) {
			t.Errorf("args lack %q: %q", a, cmd.Args)
		}
	}
	for _, a := range cmd.Args {
		if strings.HasPrefix(a, "--session-id") || strings.HasPrefix(a, "--permission-mode") {
			t.Errorf("unexpected %q", a)
		}
	}
	if !slices.Contains(cmd.Env, "IS_SANDBOX=1") {
		t.Error("full permission without IS_SANDBOX=1")
	}
	if string(cmd.Stdin) != string(mustLine(t, "-p looks like a flag")) {
		t.Errorf("stdin = %q", cmd.Stdin)
	}
}

func TestCommandPermissions(t *testing.T) {
	for perm, want := range map[runs.Permission][]string{
		"":                  {"--permission-mode=acceptEdits", "--allowedTools=Bash"},
		runs.WorkspaceWrite: {"--permission-mode=acceptEdits", "--allowedTools=Bash"},
		runs.ReadOnly:       {"--permission-mode=dontAsk", "--disallowedTools=Edit,Write,NotebookEdit"},
		runs.Full:           {"--dangerously-skip-permissions"},
	} {
		cmd := command(t, runs.Spec{Prompt: "x", Permission: perm})
		if got := cmd.Args[6:]; !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", perm, got, want)
		}
	}
}

func TestCommandRefuses(t *testing.T) {
	long := strings.Repeat("x", maxArg+1)
	for _, c := range []struct {
		name  string
		spec  runs.Spec
		runID string
		kind  error
		field string
	}{
		{"empty prompt", runs.Spec{}, runID, runs.ErrInvalid, "prompt"},
		{"resume not a uuid", runs.Spec{Prompt: "x", ResumeSessionID: "abc"}, runID, runs.ErrInvalid, runs.FieldResumeSessionID},
		{"resume urn form", runs.Spec{Prompt: "x", ResumeSessionID: "urn:uuid:0196f0c2-7e1a-7000-8000-000000000001"}, runID, runs.ErrInvalid, runs.FieldResumeSessionID},
		{"unknown effort", runs.Spec{Prompt: "x", Effort: "minimal"}, runID, runs.ErrUnsupported, runs.FieldEffort},
		{"negative turns", runs.Spec{Prompt: "x", MaxTurns: -1}, runID, runs.ErrInvalid, runs.FieldMaxTurns},
		{"negative budget", runs.Spec{Prompt: "x", MaxBudgetUSD: -1}, runID, runs.ErrInvalid, runs.FieldMaxBudgetUSD},
		{"NaN budget", runs.Spec{Prompt: "x", MaxBudgetUSD: math.NaN()}, runID, runs.ErrInvalid, runs.FieldMaxBudgetUSD},
		{"infinite budget", runs.Spec{Prompt: "x", MaxBudgetUSD: math.Inf(1)}, runID, runs.ErrInvalid, runs.FieldMaxBudgetUSD},
		{"schema array", runs.Spec{Prompt: "x", OutputSchema: json.RawMessage(`[]`)}, runID, runs.ErrInvalid, runs.FieldOutputSchema},
		{"schema not json", runs.Spec{Prompt: "x", OutputSchema: json.RawMessage(`{nope`)}, runID, runs.ErrInvalid, runs.FieldOutputSchema},
		{"schema too long", runs.Spec{Prompt: "x", OutputSchema: json.RawMessage(`{"description":"` + long + `"}`)}, runID, runs.ErrUnsupported, runs.FieldOutputSchema},
		{"system prompt too long", runs.Spec{Prompt: "x", SystemPrompt: long}, runID, runs.ErrUnsupported, runs.FieldSystemPrompt},
		{"unknown permission", runs.Spec{Prompt: "x", Permission: "root"}, runID, runs.ErrInvalid, runs.FieldPermission},
		{"run id not a uuid", runs.Spec{Prompt: "x"}, "run-1", nil, ""},
	} {
		_, err := New().Command(runs.Invocation{RunID: c.runID, Spec: c.spec})
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if c.kind == nil {
			continue
		}
		var fe *runs.FieldError
		if !errors.Is(err, c.kind) || !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want %v on field %s", c.name, err, c.kind, c.field)
		}
		if c.kind == runs.ErrUnsupported && fe.Agent != "claude" {
			t.Errorf("%s: agent %q", c.name, fe.Agent)
		}
	}
}

func TestAPITimeout(t *testing.T) {
	for run, want := range map[time.Duration]time.Duration{
		0:                10 * time.Minute,
		-time.Second:     10 * time.Minute,
		time.Second:      time.Second,
		3 * time.Second:  time.Second,
		time.Minute:      20 * time.Second,
		24 * time.Hour:   10 * time.Minute,
		90 * time.Second: 30 * time.Second,
	} {
		if got := APITimeout(run); got != want {
			t.Errorf("APITimeout(%v) = %v, want %v", run, got, want)
		}
	}
}

// decode feeds lines to a fresh decoder and returns the events.
func decode(lines ...string) ([]runs.Event, *decoder) {
	d := newDecoder(runs.Invocation{CLIVersion: VerifiedVersion})
	var evs []runs.Event
	for _, l := range lines {
		evs = append(evs, d.Decode([]byte(l))...)
	}
	return evs, d
}

func one(t *testing.T, evs []runs.Event, typ runs.EventType) runs.Event {
	t.Helper()
	if len(evs) != 1 || evs[0].Type != typ {
		t.Fatalf("events = %+v, want one %s", evs, typ)
	}
	return evs[0]
}

func TestDecodeBlocks(t *testing.T) {
	evs, _ := decode(`{"type":"assistant","message":{"id":"m1","content":[{"type":"redacted_thinking","data":"x"}]},"parent_tool_use_id":"toolu_parent","session_id":"s1"}`)
	ev := one(t, evs, runs.EventReasoningCompleted)
	if ev.Data != (runs.ReasoningData{Visibility: runs.VisibilityRedacted}) || ev.ParentToolCallID != "toolu_parent" || ev.SessionID != "s1" {
		t.Errorf("redacted = %+v", ev)
	}
	evs, _ = decode(`{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"","signature":"s"}]}}`)
	if d := one(t, evs, runs.EventReasoningCompleted).Data.(runs.ReasoningData); d.Visibility != runs.VisibilityRedacted {
		t.Errorf("empty thinking = %+v", d)
	}
	evs, _ = decode(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Read"}]}}`)
	if d := one(t, evs, runs.EventToolCallStarted).Data.(runs.ToolCallStartedData); string(d.Input) != "{}" || d.Name != "Read" {
		t.Errorf("tool without input = %+v", d)
	}
	evs, _ = decode(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]}]}}`)
	if d := one(t, evs, runs.EventToolCallCompleted).Data.(runs.ToolCallCompletedData); d.Output != "a\n[image]\nb" || !d.IsError || d.ID != "t1" {
		t.Errorf("array tool result = %+v", d)
	}
	evs, _ = decode(`{"type":"user","message":{"role":"user","content":"a replayed prompt"},"isReplay":true}`,
		`{"type":"user","message":{"content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]}}`)
	if len(evs) != 0 {
		t.Errorf("prompt lines gave events: %+v", evs)
	}
	evs, _ = decode(`{"type":"stream_event","event":{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"x"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"s"}}}`,
		`{"type":"stream_event","event":{"type":"message_stop"}}`)
	if d := one(t, evs, runs.EventReasoningDelta).Data.(runs.DeltaData); d.Text != "x" || d.ID != ":2" {
		t.Errorf("thinking delta = %+v", d)
	}
	if len(evs) != 1 {
		t.Errorf("signature and stop events gave events: %+v", evs)
	}
}

func TestDecodeSystem(t *testing.T) {
	evs, _ := decode(`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":2,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed"}`)
	if w := one(t, evs, runs.EventWarning).Data.(runs.WarningData); w.Code != "api_retry" || !strings.Contains(w.Message, "401") {
		t.Errorf("401 retry = %+v", w)
	}
	evs, _ = decode(`{"type":"system","subtype":"api_retry","attempt":2,"max_retries":2,"retry_delay_ms":1100,"error_status":529,"error":"overloaded"}`)
	if r := one(t, evs, runs.EventRateLimit).Data.(runs.RateLimitData); r != (runs.RateLimitData{Attempt: 2, MaxRetries: 2, RetryDelayMS: 1100, Status: 529, Error: "overloaded"}) {
		t.Errorf("529 retry = %+v", r)
	}
	evs, _ = decode(`{"type":"system","subtype":"init","session_id":"s"}`)
	if d := one(t, evs, runs.EventSessionStarted).Data.(runs.SessionStartedData); d.Tools == nil {
		t.Error("tools must marshal as [], not null")
	}
	evs, _ = decode(`{"type":"system","subtype":"task_notification","status":"stopped"}`, `{"type":"system","subtype":"status","status":"requesting"}`)
	if len(evs) != 0 {
		t.Errorf("progress lines gave events: %+v", evs)
	}
}

func TestDecodeRateLimitEvent(t *testing.T) {
	evs, _ := decode(`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","isUsingOverage":false}}`)
	if len(evs) != 0 {
		t.Errorf("allowed = %+v", evs)
	}
	evs, _ = decode(`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","rateLimitType":"five_hour","resetsAt":1700000000}}`)
	if w := one(t, evs, runs.EventWarning).Data.(runs.WarningData); w.Code != "rate_limit_warning" || !strings.Contains(w.Message, "five_hour") {
		t.Errorf("warning = %+v", w)
	}
	evs, _ = decode(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","rateLimitType":"seven_day"}}`)
	if r := one(t, evs, runs.EventRateLimit).Data.(runs.RateLimitData); !strings.Contains(r.Error, "seven_day") {
		t.Errorf("rejected = %+v", r)
	}
}

func TestDecodeUnparsed(t *testing.T) {
	for line, reason := range map[string]string{
		`{"type":"x`:                        "invalid JSON",
		`not json`:                          "invalid JSON",
		`[1,2]`:                             "invalid JSON",
		`null`:                              "no type field",
		`{"subtype":"init"}`:                "no type field",
		`{"type":"tool_use_summary"}`:       `unknown type "tool_use_summary"`,
		`{"type":"system","subtype":"new"}`: `unknown system subtype "new"`,
		`{"type":"system"}`:                 "without subtype",
		`{"type":"assistant","message":{"content":[{"type":"server_tool_use"}]}}`: `unknown assistant block type "server_tool_use"`,
		`{"type":"assistant","message":"text"}`:                                   "assistant message",
		`{"type":"assistant","message":{"content":"text"}}`:                       "assistant content",
		`{"type":"user","message":[]}`:                                            "user message",
		`{"type":"stream_event"}`:                                                 "without event",
		`{"type":"rate_limit_event"}`:                                             "without rate_limit_info",
		`{"type":"rate_limit_event","rate_limit_info":{"status":"odd"}}`:          "unknown rate limit status",
		`{"type":"system","subtype":"init","tools":5}`:                            "invalid JSON",
	} {
		evs, _ := decode(line)
		ev := one(t, evs, runs.EventAgentUnparsed)
		d := ev.Data.(runs.UnparsedData)
		if !strings.Contains(d.Reason, reason) || d.Line != line || d.Bytes != len(line) {
			t.Errorf("%s: %+v, want reason containing %q", line, d, reason)
		}
	}
	if evs, _ := decode("", "  \r"); len(evs) != 0 {
		t.Errorf("blank lines gave %+v", evs)
	}
}

func TestNormalize(t *testing.T) {
	evs, d := decode(`{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.5,` +
		`"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":40,"output_tokens_details":{"thinking_tokens":5}}}`)
	u := one(t, evs, runs.EventUsageUpdated).Data.(runs.UsageData)
	if u.Usage != (runs.Usage{InputTokens: 60, CacheReadTokens: 30, CacheWriteTokens: 20, OutputTokens: 40, ReasoningTokens: 5}) || *u.CostUSD != 0.5 {
		t.Errorf("usage = %+v", u)
	}
	if o := d.Finish(runs.Exit{}, nil); o.Usage != u.Usage || o.Status != runs.Succeeded {
		t.Errorf("outcome = %+v", o)
	}
	// All-zero usage falls back to modelUsage, summed over models.
	evs, _ = decode(`{"type":"result","subtype":"error_max_budget_usd","is_error":true,"usage":{"input_tokens":0,"output_tokens":0},` +
		`"modelUsage":{"a":{"inputTokens":1,"outputTokens":2,"cacheReadInputTokens":3,"cacheCreationInputTokens":4},"b":{"inputTokens":10,"outputTokens":20,"thinkingTokens":7}}}`)
	if u := one(t, evs, runs.EventUsageUpdated).Data.(runs.UsageData).Usage; u != (runs.Usage{InputTokens: 18, CacheReadTokens: 3, CacheWriteTokens: 4, OutputTokens: 22, ReasoningTokens: 7}) {
		t.Errorf("fallback usage = %+v", u)
	}
}

func TestFinishWithResult(t *testing.T) {
	for _, c := range []struct {
		name   string
		lines  []string
		class  runs.Class
		status runs.State
	}{
		{"not logged in even on success", []string{`{"type":"result","subtype":"success","is_error":false,"result":"Not logged in · Please run /login"}`}, runs.NotAuthenticated, runs.Failed},
		{"refusal", []string{`{"type":"result","subtype":"success","is_error":true,"stop_reason":"refusal","terminal_reason":"completed"}`}, runs.Refused, runs.Failed},
		{"refusal reported as success", []string{`{"type":"result","subtype":"success","is_error":false,"result":"I can't help with that.","stop_reason":"refusal","terminal_reason":"completed"}`}, runs.Refused, runs.Failed},
		{"403", []string{`{"type":"result","subtype":"success","is_error":true,"api_error_status":403,"terminal_reason":"api_error","result":"Failed to authenticate"}`}, runs.NotAuthenticated, runs.Failed},
		{"404 model", []string{`{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"There's an issue with the selected model"}]},"error":"model_not_found","is_api_error_message":true}`,
			`{"type":"result","subtype":"success","is_error":true,"api_error_status":404,"terminal_reason":"api_error"}`}, runs.APIError, runs.Failed},
		{"413", []string{`{"type":"result","subtype":"success","is_error":true,"api_error_status":413,"terminal_reason":"image_error","result":"Request too large"}`}, runs.APIError, runs.Failed},
		{"refused connection", []string{`{"type":"assistant","message":{"content":[{"type":"text","text":"API Error: Connection refused"}]},"error":"server_error","is_api_error_message":true}`,
			`{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"terminal_reason":"api_error"}`}, runs.TransientAPIError, runs.Failed},
		{"unknown timeout", []string{`{"type":"assistant","message":{"content":[{"type":"text","text":"Request timed out."}]},"error":"unknown","is_api_error_message":true}`,
			`{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error"}`}, runs.TransientAPIError, runs.Failed},
		{"during execution", []string{`{"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"turn_setup_failed","errors":["[ede_diagnostic] x","boom"]}`}, runs.AgentCrashed, runs.Failed},
		{"aborted streaming", []string{`{"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"aborted_streaming"}`}, runs.Interrupted, runs.Failed},
		{"success", []string{`{"type":"result","subtype":"success","is_error":false,"result":"ok","structured_output":null}`}, "", runs.Succeeded},
	} {
		_, d := decode(c.lines...)
		o := d.Finish(runs.Exit{Code: 1}, nil)
		if o.Status != c.status || (c.class == "") != (o.Error == nil) || (o.Error != nil && o.Error.Class != c.class) {
			t.Errorf("%s: status %s error %+v, want %s %q", c.name, o.Status, o.Error, c.status, c.class)
		}
		if o.Error != nil && (o.Error.Message == "" || strings.Contains(o.Error.Message, "ede_diagnostic")) {
			t.Errorf("%s: message %q", c.name, o.Error.Message)
		}
		if o.StructuredOutput != nil {
			t.Errorf("%s: structured output %s", c.name, o.StructuredOutput)
		}
	}
}

func TestFinishWithoutResult(t *testing.T) {
	for _, c := range []struct {
		name     string
		lines    []string
		exit     runs.Exit
		stderr   string
		class    runs.Class
		inHint   string
		version  string
		inMsgArg string
	}{
		{"not logged in, exit 0", nil, runs.Exit{Code: 0}, "Not logged in · Please run /login\n", runs.NotAuthenticated, "setup-token", "", ""},
		{"killed", nil, runs.Exit{Code: -1, Signal: "SIGKILL"}, "", runs.ProcessKilled, "", "", "SIGKILL"},
		{"unknown option, older cli", nil, runs.Exit{Code: 1}, "error: unknown option '--include-partial-messages'\n", runs.FlagRejected, "2.0.1", "2.0.1", "unknown option"},
		{"bad choice, same cli", nil, runs.Exit{Code: 1}, "error: option '--effort <level>' argument 'x' is invalid.\n", runs.FlagRejected, "check the request", VerifiedVersion, ""},
		{"unknown version", nil, runs.Exit{Code: 1}, "error: unknown option '--x'\n", runs.FlagRejected, "unknown version", "", ""},
		{"session in use", nil, runs.Exit{Code: 1}, "Error: Session ID 0196f0c2-7e1a-7000-8000-000000000001 is already in use.\n", runs.FlagRejected, "", "", "already in use"},
		{"root bypass", nil, runs.Exit{Code: 1}, "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n", runs.FlagRejected, "", "", ""},
		{"resume unknown", nil, runs.Exit{Code: 1}, "No conversation found with session ID: x\n", runs.SessionNotFound, "resume_session_id", "", ""},
		{"401 on stderr", nil, runs.Exit{Code: 1}, "API Error: 401 {\"type\":\"error\"}\n", runs.NotAuthenticated, "", "", "401"},
		{"429 on stderr", nil, runs.Exit{Code: 1}, "API Error: 429\n", runs.RateLimited, "", "", ""},
		{"529 on stderr", nil, runs.Exit{Code: 1}, "API Error: 529\n", runs.TransientAPIError, "", "", ""},
		{"overloaded on stderr", nil, runs.Exit{Code: 1}, "the API is Overloaded\n", runs.TransientAPIError, "", "", ""},
		{"400 on stderr", nil, runs.Exit{Code: 1}, "API Error: 400\n", runs.APIError, "", "", ""},
		{"crash", nil, runs.Exit{Code: 3}, "panic: something\nline two\n", runs.AgentCrashed, "", "", "code 3"},
		{"exit 0 without result", []string{`{"type":"system","subtype":"init","session_id":"s"}`}, runs.Exit{Code: 0}, "", runs.AgentCrashed, "", "", "code 0"},
		{"api error line then killed", []string{`{"type":"assistant","message":{"content":[{"type":"text","text":"API Error: Request rejected (429)"}]},"error":"rate_limit","is_api_error_message":true}`},
			runs.Exit{Code: 143}, "", runs.RateLimited, "", "", "429"},
		{"synthetic not logged in, no stderr", []string{`{"type":"assistant","message":{"content":[{"type":"text","text":"Not logged in · Please run /login"}]},"error":"authentication_failed","is_api_error_message":true}`},
			runs.Exit{Code: 1}, "", runs.NotAuthenticated, "", "", "Not logged in"},
	} {
		d := newDecoder(runs.Invocation{CLIVersion: c.version})
		for _, l := range c.lines {
			d.Decode([]byte(l))
		}
		o := d.Finish(c.exit, []byte(c.stderr))
		if o.Status != runs.Failed || o.Error == nil || o.Error.Class != c.class {
			t.Errorf("%s: %s %+v, want %s", c.name, o.Status, o.Error, c.class)
			continue
		}
		if !strings.Contains(o.Error.Hint, c.inHint) || !strings.Contains(o.Error.Message, c.inMsgArg) {
			t.Errorf("%s: %+v, want hint containing %q and message containing %q", c.name, o.Error, c.inHint, c.inMsgArg)
		}
		if o.Error.Retryable != c.class.Retryable() {
			t.Errorf("%s: retryable %v", c.name, o.Error.Retryable)
		}
	}
}

func TestFinishClosesOpenToolCalls(t *testing.T) {
	_, d := decode(
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"Bash","input":{}}]}}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"b","name":"Bash","input":{}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":"done"}]}}`,
	)
	o := d.Finish(runs.Exit{Code: 143}, nil)
	if len(o.Events) != 1 {
		t.Fatalf("events = %+v", o.Events)
	}
	if c := o.Events[0].Data.(runs.ToolCallCompletedData); c.ID != "b" || !c.IsError {
		t.Errorf("closed = %+v", c)
	}
}

func TestCommandSession(t *testing.T) {
	d := New().Describe()
	if !slices.Contains(d.Fields, runs.FieldInteractive) || !slices.Contains(d.Fields, runs.FieldApprovals) ||
		!d.Interaction.Steer || d.Interaction.DenyEndsTurn || d.Interaction.KillToolsOnInterrupt {
		t.Errorf("description: fields %v, interaction %+v", d.Fields, d.Interaction)
	}
	for _, c := range []struct {
		spec      runs.Spec
		perm      []string
		noSandbox bool
	}{
		{spec: runs.Spec{Interactive: true}, perm: []string{"--permission-mode=acceptEdits", "--allowedTools=Bash"}},
		{spec: runs.Spec{Approvals: runs.ApprovalsAsk},
			perm: []string{"--permission-mode=default", "--permission-prompt-tool=stdio"}},
		{spec: runs.Spec{Interactive: true, Approvals: runs.ApprovalsAsk, Permission: runs.Full},
			perm: []string{"--permission-mode=default", "--permission-prompt-tool=stdio"}, noSandbox: true},
		{spec: runs.Spec{Approvals: runs.ApprovalsAsk, Permission: runs.ReadOnly},
			perm: []string{"--permission-mode=dontAsk", "--disallowedTools=Edit,Write,NotebookEdit", "--permission-prompt-tool=stdio"}},
	} {
		c.spec.Prompt = "x"
		cmd := command(t, c.spec)
		if cmd.Stdin != nil {
			t.Errorf("%+v: stdin %q, want nil: the prompt goes through Open", c.spec, cmd.Stdin)
		}
		if cmd.Args[1] != "--input-format=stream-json" || cmd.Args[5] != "--replay-user-messages" {
			t.Errorf("%+v: args %q", c.spec, cmd.Args)
		}
		if got := cmd.Args[7:]; !slices.Equal(got, c.perm) {
			t.Errorf("%+v: permission args %q, want %q", c.spec, got, c.perm)
		}
		if c.noSandbox && slices.Contains(cmd.Env, "IS_SANDBOX=1") {
			t.Errorf("%+v: IS_SANDBOX without --dangerously-skip-permissions", c.spec)
		}
		if _, ok := New().NewDecoder(runs.Invocation{Spec: c.spec}).(runs.Session); !ok {
			t.Errorf("%+v: the decoder is not a Session", c.spec)
		}
	}
	if _, ok := New().NewDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "x"}}).(runs.Conversation); ok {
		t.Error("a one-shot run's decoder is a Conversation")
	}
	// TestSessionPermissions runs workspace_write with ask against the
	// real CLI and lets full with ask stand on it: they must be one
	// command.
	ask := func(p runs.Permission) runs.Command {
		return command(t, runs.Spec{Prompt: "x", Interactive: true, Approvals: runs.ApprovalsAsk, Permission: p})
	}
	if ww, full := ask(runs.WorkspaceWrite), ask(runs.Full); !slices.Equal(ww.Args, full.Args) || !slices.Equal(ww.Env, full.Env) {
		t.Errorf("full with ask runs\n  %q %q\nworkspace_write with ask\n  %q %q", full.Args, full.Env, ww.Args, ww.Env)
	}
}

func mustLine(t *testing.T, text string) []byte {
	t.Helper()
	b, err := userLine(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
