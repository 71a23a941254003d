package gemini

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/netns"
	_ "github.com/agentgate/agentgate/internal/netns/lightshim"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestMain checks that the real-CLI tests leave no goroutine behind: the
// mock servers, the supervisors and the process readers they start.
func TestMain(m *testing.M) {
	netns.Main()   // the conformance suite's network shim is this binary (in C, by lightshim, with cgo)
	mcptest.Main() // the conformance suite's MCP server is this binary
	goleak.VerifyTestMain(m)
}

const runID = "0196f0c2-7e1a-7000-8000-000000000001"

func TestDescribe(t *testing.T) {
	a := New()
	d := a.Describe()
	if a.Name() != "gemini" || d.Name != "gemini" || d.DefaultBin != "gemini" || d.VerifiedVersion != "0.61.0" ||
		d.InstallCommand != "npm install -g @google/gemini-cli@0.61.0" || !slices.Equal(d.VersionArgs, []string{"--version"}) {
		t.Errorf("description = %+v", d)
	}
	for _, p := range []runs.Permission{runs.ReadOnly, runs.WorkspaceWrite, runs.Full} {
		if d.Permissions[p] == "" {
			t.Errorf("permission %s undocumented", p)
		}
	}
	if want := []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_MODEL"}; !slices.Equal(d.CredentialEnv, want) {
		t.Errorf("CredentialEnv = %v, want %v", d.CredentialEnv, want)
	}
	if !slices.Contains(d.Fields, runs.FieldModel) || !slices.Contains(d.Fields, runs.FieldResumeSessionID) ||
		slices.Contains(d.Fields, runs.FieldEffort) || slices.Contains(d.Fields, runs.FieldSystemPrompt) {
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
		"0.61.0\n":           "0.61.0",
		"  0.61.0  ":         "0.61.0",
		"0.62.0-preview.1\n": "0.62.0-preview.1",
	} {
		if got, err := a.ParseVersion([]byte(in)); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "gemini 0.61.0", "0.61", "0.61.0\nextra", "\xff", "v0.61.0"} {
		if got, err := a.ParseVersion([]byte(in)); err == nil {
			t.Errorf("ParseVersion(%q) = %q, want an error", in, got)
		}
	}
}

func invocation(spec runs.Spec) runs.Invocation {
	return runs.Invocation{RunID: runID, Spec: spec, Home: "/var/lib/agentgate/agents/gemini", Timeout: time.Minute}
}

func command(t *testing.T, spec runs.Spec) runs.Command {
	t.Helper()
	cmd, err := New().Command(invocation(spec))
	if err != nil {
		t.Fatalf("Command(%+v): %v", spec, err)
	}
	return cmd
}

func TestCommandNewRun(t *testing.T) {
	cmd := command(t, runs.Spec{Prompt: "hello"})
	want := []string{"--output-format=stream-json", "-p", "", "--approval-mode=auto_edit",
		"--policy=/var/lib/agentgate/agents/gemini/.gemini/agentgate-workspace-write.toml"}
	if !slices.Equal(cmd.Args, want) {
		t.Errorf("args =\n  %q\nwant\n  %q", cmd.Args, want)
	}
	if string(cmd.Stdin) != "hello" {
		t.Errorf("stdin = %q", cmd.Stdin)
	}
	if cmd.InterruptSignal != 0 {
		t.Errorf("interrupt = %d: the single-process CLI exits at once on SIGINT, like SIGTERM", cmd.InterruptSignal)
	}
	for _, e := range []string{"GEMINI_CLI_TRUST_WORKSPACE=true", "GEMINI_CLI_NO_RELAUNCH=true", "GEMINI_TELEMETRY_ENABLED=false", "NO_COLOR=1"} {
		if !slices.Contains(cmd.Env, e) {
			t.Errorf("env lacks %s: %v", e, cmd.Env)
		}
	}
	if want := []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_MODEL"}; !slices.Equal(cmd.PassEnv, want) {
		t.Errorf("pass env = %v, want %v", cmd.PassEnv, want)
	}
	for _, a := range cmd.Args {
		if strings.HasPrefix(a, "--model") || a == "-m" {
			t.Errorf("a run without a model names one (%s): GEMINI_MODEL and the settings' model.name would lose", a)
		}
		if strings.HasPrefix(a, "--session-id") {
			t.Errorf("%s: sessions named after UUIDv7 run ids share files (see Command)", a)
		}
	}
}

func TestCommandFields(t *testing.T) {
	for _, c := range []struct {
		spec runs.Spec
		want []string
		not  []string
	}{
		{
			spec: runs.Spec{Prompt: "x", Model: "-gemini-odd", ResumeSessionID: "0196F0C2-7E1A-7000-8000-0000000000AB", Permission: runs.ReadOnly},
			want: []string{"--model=-gemini-odd", "--resume=0196F0C2-7E1A-7000-8000-0000000000AB", "--approval-mode=default"},
		},
		{
			spec: runs.Spec{Prompt: "x", Permission: runs.Full, KeepSession: true, Cwd: "sub", TimeoutSeconds: 5},
			want: []string{"--approval-mode=yolo"},
			not:  []string{"--approval-mode=auto_edit"},
		},
	} {
		cmd := command(t, c.spec)
		for _, a := range c.want {
			if !slices.Contains(cmd.Args, a) {
				t.Errorf("%+v: args %q lack %q", c.spec, cmd.Args, a)
			}
		}
		for _, a := range c.not {
			if slices.Contains(cmd.Args, a) {
				t.Errorf("%+v: args %q have %q", c.spec, cmd.Args, a)
			}
		}
		for _, a := range cmd.Args {
			if strings.HasPrefix(a, "--policy") {
				t.Errorf("%s got the workspace_write policy: %q", c.spec.Permission, cmd.Args)
			}
		}
	}
}

// TestCommandRefuses checks the fields Gemini does not take, which the
// gateway refuses for it (runs.CheckFields, from Describe), and the values
// Command refuses.
func TestCommandRefuses(t *testing.T) {
	unsupported := map[string]runs.Spec{
		runs.FieldSystemPrompt: {SystemPrompt: "Be brief."},
		runs.FieldEffort:       {Effort: "high"},
		runs.FieldMaxBudgetUSD: {MaxBudgetUSD: 1},
	}
	for field, spec := range unsupported {
		spec.Prompt = "x"
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
		runs.FieldMaxTurns:     {Prompt: "x", MaxTurns: 3},
		runs.FieldOutputSchema: {Prompt: "x", OutputSchema: json.RawMessage(`{"type":"object"}`)},
	} {
		if err := runs.CheckFields(New().Describe(), spec); err != nil {
			t.Errorf("%s, which the gateway enforces, was refused: %v", field, err)
		}
		if a := runs.AdapterSpec(New().Describe(), spec); a.MaxTurns != 0 || a.MaxBudgetUSD != 0 || len(a.OutputSchema) > 0 {
			t.Errorf("%s reaches the adapter: %+v", field, a)
		}
	}
	invalid := map[string]runs.Spec{
		"prompt":                        {},
		runs.FieldResumeSessionID:       {Prompt: "x", ResumeSessionID: "latest"},
		runs.FieldPermission:            {Prompt: "x", Permission: "root"},
		runs.FieldResumeSessionID + "2": {Prompt: "x", ResumeSessionID: "5"},
	}
	for name, spec := range invalid {
		_, err := New().Command(invocation(spec))
		var fe *runs.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, runs.ErrInvalid) || !strings.HasPrefix(name, fe.Field) {
			t.Errorf("%s: %v, want invalid naming it", name, err)
		}
	}
	inv := invocation(runs.Spec{Prompt: "x"})
	inv.Home = ""
	if _, err := New().Command(inv); err == nil {
		t.Error("a run without a home was accepted")
	}
}

func readSettings(t *testing.T, home string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(settingsPath(home))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func at(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[k]
	}
	return v
}

func TestPrepareHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "fresh")
	a := New()
	if err := a.PrepareHome(home); err != nil {
		t.Fatal(err)
	}
	m := readSettings(t, home)
	for path, want := range map[string]any{
		"security.auth.selectedType":           "gemini-api-key",
		"privacy.usageStatisticsEnabled":       false,
		"telemetry.enabled":                    false,
		"general.enableAutoUpdate":             false,
		"general.enableAutoUpdateNotification": false,
		"general.maxAttempts":                  float64(MaxAttempts),
		"model.name":                           DefaultModel,
		"advanced.ignoreLocalEnv":              true,
	} {
		if got := at(m, strings.Split(path, ".")...); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	policy, err := os.ReadFile(policyPath(home))
	if err != nil || !strings.Contains(string(policy), `toolName = "run_shell_command"`) || !strings.Contains(string(policy), `modes = ["autoEdit"]`) {
		t.Errorf("policy = %q, %v", policy, err)
	}
	if fi, err := os.Stat(settingsPath(home)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("settings mode = %v, %v", fi, err)
	}
	before, _ := os.ReadFile(settingsPath(home))
	if err := a.PrepareHome(home); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(settingsPath(home)); string(after) != string(before) {
		t.Errorf("a second PrepareHome changed the file:\n%s\n%s", before, after)
	}
	if left, _ := filepath.Glob(filepath.Join(home, ".gemini", ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestPrepareHomeKeepsTheOperatorsSettings(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	op := `{"ui":{"theme":"dark"},"model":{"name":"gemini-operator"},"general":{"maxAttempts":5,"enableAutoUpdate":true},
	"security":{"auth":{"selectedType":"vertex-ai"}},"privacy":{"usageStatisticsEnabled":true},"mcpServers":{"x":{"command":"y"}}}`
	if err := os.WriteFile(settingsPath(home), []byte(op), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := New().PrepareHome(home); err != nil {
		t.Fatal(err)
	}
	m := readSettings(t, home)
	for path, want := range map[string]any{
		"ui.theme":                       "dark",
		"model.name":                     "gemini-operator",
		"general.maxAttempts":            float64(5),
		"security.auth.selectedType":     "vertex-ai",
		"mcpServers.x.command":           "y",
		"general.enableAutoUpdate":       false,
		"privacy.usageStatisticsEnabled": false,
		"telemetry.enabled":              false,
	} {
		if got := at(m, strings.Split(path, ".")...); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
}

func TestPrepareHomeRefuses(t *testing.T) {
	for name, content := range map[string]string{
		"comments":   "// a comment the CLI allows\n{}",
		"not_object": `{"general":"fast"}`,
		"array":      `[1]`,
	} {
		home := t.TempDir()
		_ = os.MkdirAll(filepath.Join(home, ".gemini"), 0o700)
		if err := os.WriteFile(settingsPath(home), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := New().PrepareHome(home); err == nil || !strings.Contains(err.Error(), "settings.json") {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
		if b, _ := os.ReadFile(settingsPath(home)); string(b) != content {
			t.Errorf("%s: the file was changed to %q", name, b)
		}
	}
	if err := New().PrepareHome(""); err == nil {
		t.Error("an empty home was accepted")
	}
}

func decode(lines ...string) ([]runs.Event, runs.Outcome) {
	dec := New().NewDecoder(runs.Invocation{CLIVersion: VerifiedVersion})
	var evs []runs.Event
	for _, l := range lines {
		evs = append(evs, dec.Decode([]byte(l))...)
	}
	o := dec.Finish(runs.Exit{}, nil)
	return append(evs, o.Events...), o
}

// TestUsageIncludesThoughts pins the mapping of the CLI's stats, with the
// numbers of a real run: total_tokens (1219) counts the 7 thought tokens
// that output_tokens (12) leaves out, and input_tokens (1200) includes the
// 300 cached.
func TestUsageIncludesThoughts(t *testing.T) {
	evs, o := decode(
		`{"type":"init","timestamp":"t","session_id":"s1","model":"gemini-2.5-flash"}`,
		`{"type":"result","timestamp":"t","status":"success","stats":{"total_tokens":1219,"input_tokens":1200,"output_tokens":12,"cached":300,"input":900,"duration_ms":98,"tool_calls":0,"models":{"gemini-2.5-flash":{"total_tokens":1219,"input_tokens":1200,"output_tokens":12,"cached":300,"input":900}}}}`,
	)
	want := runs.Usage{InputTokens: 1200, CacheReadTokens: 300, OutputTokens: 19, ReasoningTokens: 7}
	if o.Usage != want || o.Status != runs.Succeeded {
		t.Errorf("outcome = %+v, want usage %+v", o, want)
	}
	if evs[len(evs)-2].Type != tReason || evs[len(evs)-1].Type != tUsage || evs[len(evs)-1].Data.(runs.UsageData).Usage != want {
		t.Errorf("events = %+v", evs)
	}
	// Only the per-model entries: the same sums.
	_, o = decode(`{"type":"result","status":"success","stats":{"models":{"a":{"total_tokens":120,"input_tokens":100,"output_tokens":20},"b":{"total_tokens":1219,"input_tokens":1200,"output_tokens":12,"cached":300}}}}`)
	if want := (runs.Usage{InputTokens: 1300, CacheReadTokens: 300, OutputTokens: 39, ReasoningTokens: 7}); o.Usage != want || o.Model != "a" {
		t.Errorf("per-model usage = %+v (model %q), want %+v", o.Usage, o.Model, want)
	}
	// No thoughts: no reasoning event.
	evs, _ = decode(`{"type":"result","status":"success","stats":{"total_tokens":120,"input_tokens":100,"output_tokens":20}}`)
	if len(evs) != 1 || evs[0].Type != tUsage {
		t.Errorf("events = %+v", evs)
	}
}

func TestDecodeLines(t *testing.T) {
	evs, o := decode(
		`{"type":"init","session_id":"s1","model":"auto"}`,
		``,
		`{"type":"message","role":"user","content":"hi"}`,
		`{"type":"message","role":"assistant","content":"a ","delta":true}`,
		`{"type":"message","role":"assistant","content":"b","delta":true}`,
		`{"type":"error","severity":"warning","message":"Loop detected, stopping execution"}`,
		`{"type":"message","role":"assistant","content":"whole"}`,
		`{"type":"tool_use","tool_name":"read_file","tool_id":"read_file__1","parameters":null}`,
		`{"type":"tool_result","tool_id":"read_file__1","status":"success","output":{"not":"a string"}}`,
		`{"type":"tool_use","tool_name":"glob","tool_id":"glob__2","parameters":{"pattern":"*"}}`,
		`{"type":"message","role":"system","content":"?"}`,
		`{"type":"message","role":"assistant","content":5,"delta":true}`,
		`{"type":"telemetry"}`,
		`{"no":"type"}`,
		`not json`,
		`{"type":"message","role":"assistant","content":"tail","delta":true}`,
	)
	var types []runs.EventType
	for _, ev := range evs {
		types = append(types, ev.Type)
		if ev.Type != runs.EventAgentUnparsed && ev.SessionID != "s1" {
			t.Errorf("%s without the session: %+v", ev.Type, ev)
		}
	}
	want := []runs.EventType{tStart, tWarn, tDelta, tDelta, tWarn, tMsg, tMsg, tTool, tToolEnd, tTool,
		runs.EventAgentUnparsed, runs.EventAgentUnparsed, runs.EventAgentUnparsed, runs.EventAgentUnparsed, runs.EventAgentUnparsed,
		tDelta, tMsg, tToolEnd}
	if !slices.Equal(types, want) {
		t.Fatalf("types =\n  %v\nwant\n  %v", types, want)
	}
	if w := evs[1].Data.(runs.WarningData); w.Code != "model_routing" {
		t.Errorf("auto model warning = %+v", w)
	}
	if m := evs[5].Data.(runs.MessageData); m.Text != "a b" {
		t.Errorf("streamed message = %+v", m)
	}
	if in := evs[7].Data.(runs.ToolCallStartedData); string(in.Input) != "{}" {
		t.Errorf("null parameters = %s", in.Input)
	}
	if out := evs[8].Data.(runs.ToolCallCompletedData); out.Output != `{"not":"a string"}` || out.IsError {
		t.Errorf("object output = %+v", out)
	}
	if end := evs[len(evs)-1].Data.(runs.ToolCallCompletedData); end.ID != "glob__2" || !end.IsError {
		t.Errorf("open call closed as %+v", end)
	}
	// No result: a crash, with the text so far as the result.
	if o.Status != runs.Failed || o.Error.Class != runs.AgentCrashed || o.Result != "tail" {
		t.Errorf("outcome = %+v", o)
	}
}

func TestToolResultError(t *testing.T) {
	evs, _ := decode(
		`{"type":"tool_use","tool_name":"run_shell_command","tool_id":"x","parameters":{}}`,
		`{"type":"tool_result","tool_id":"x","status":"error","output":"","error":{"type":"tool_not_registered","message":"Tool \"run_shell_command\" not found."}}`,
		`{"type":"tool_result","tool_id":"y","status":"error","error":{"type":"TOOL_EXECUTION_ERROR","message":"boom"}}`,
	)
	if len(evs) != 4 || evs[2].Type != tWarn || evs[3].Type != tToolEnd {
		t.Fatalf("events = %+v", evs)
	}
	if end := evs[1].Data.(runs.ToolCallCompletedData); !end.IsError || !strings.Contains(end.Output, "not found") {
		t.Errorf("refused call = %+v", end)
	}
	if end := evs[3].Data.(runs.ToolCallCompletedData); !end.IsError || end.Output != "boom" {
		t.Errorf("failed call = %+v", end)
	}
}

// resultError is a failed result line with message msg.
func resultError(typ, msg string) string {
	b, _ := json.Marshal(map[string]any{"type": "result", "status": "error", "error": map[string]string{"type": typ, "message": msg},
		"stats": map[string]any{"total_tokens": 0}})
	return string(b)
}

func TestClassifyResult(t *testing.T) {
	body := func(code int, status, reason, msg string) string {
		e := map[string]any{"code": code, "message": msg, "status": status}
		if reason != "" {
			e["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason}}
		}
		b, _ := json.Marshal(map[string]any{"error": e})
		return "[API Error: " + string(b) + "]"
	}
	for _, c := range []struct {
		name, typ, msg string
		exit           int
		stderr         string
		want           runs.Class
		wantMsg        string
	}{
		{"401", "unknown", body(401, "UNAUTHENTICATED", "", "bad credentials"), 145, "", runs.NotAuthenticated, "bad credentials (401 UNAUTHENTICATED)"},
		{"403", "unknown", body(403, "PERMISSION_DENIED", "", "denied"), 147, "", runs.NotAuthenticated, ""},
		{"invalid key", "unknown", body(400, "INVALID_ARGUMENT", "API_KEY_INVALID", "API key not valid."), 144, "", runs.NotAuthenticated, ""},
		{"400", "unknown", body(400, "INVALID_ARGUMENT", "", "bad field"), 144, "", runs.APIError, "bad field (400 INVALID_ARGUMENT)"},
		{"context", "unknown", body(400, "INVALID_ARGUMENT", "", "The input token count (2000000) exceeds the maximum number of tokens allowed (1048576)."), 144, "", runs.ContextExceeded, ""},
		{"500", "unknown", body(500, "INTERNAL", "", "internal"), 244, "", runs.TransientAPIError, ""},
		// The CLI rewrites a 429's and a 503's message: only the exit
		// code and stderr still say.
		{"429", "unknown", "[API Error: Resource has been exhausted (e.g. check quota).\nSuggested retry after 1s.]\nPlease wait and try again later.", 173, "", runs.RateLimited, ""},
		{"503", "unknown", "[API Error: The model is overloaded. Please try again later.]", 247, "", runs.TransientAPIError, ""},
		{"429 from stderr", "unknown", "[API Error: slow down]", 1, "Error: x\n  status: 429\n}", runs.RateLimited, ""},
		{"404", "unknown", "[API Error: models/x is not found for API version v1beta]", 1, "ModelNotFoundError: models/x\n  code: 404\n}", runs.APIError, ""},
		{"fetch failed", "unknown", "[API Error: exception TypeError: fetch failed sending request]", 1, "", runs.TransientAPIError, ""},
		{"quota text", "unknown", "You have exhausted your daily quota on this model.", 1, "", runs.RateLimited, ""},
		{"turn limit", "FatalTurnLimitedError", "Reached max session turns for this session.", 53, "", runs.MaxTurns, ""},
		{"cancelled", "FatalCancellationError", "Operation cancelled.", 130, "", runs.Interrupted, ""},
		{"tool fatal", "FatalToolExecutionError", "Error executing tool x: disk full", 54, "", runs.AgentCrashed, ""},
		{"other", "Error", "something odd", 1, "", runs.AgentCrashed, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dec := New().NewDecoder(runs.Invocation{})
			dec.Decode([]byte(resultError(c.typ, c.msg)))
			o := dec.Finish(runs.Exit{Code: c.exit}, []byte(c.stderr))
			if o.Status != runs.Failed || o.Error == nil || o.Error.Class != c.want || o.Error.Retryable != c.want.Retryable() || o.Error.Message == "" {
				t.Fatalf("outcome = %+v, error %+v, want %s", o, o.Error, c.want)
			}
			if c.wantMsg != "" && o.Error.Message != c.wantMsg {
				t.Errorf("message = %q, want %q", o.Error.Message, c.wantMsg)
			}
		})
	}
	// A failed result without an error takes the last error line's.
	dec := New().NewDecoder(runs.Invocation{})
	dec.Decode([]byte(`{"type":"error","severity":"error","message":"Maximum session turns exceeded"}`))
	dec.Decode([]byte(`{"type":"result","status":"error","stats":{}}`))
	if o := dec.Finish(runs.Exit{}, nil); o.Error == nil || o.Error.Class != runs.MaxTurns {
		t.Errorf("outcome = %+v", o)
	}
}

func TestClassifyNoResult(t *testing.T) {
	for _, c := range []struct {
		name    string
		exit    runs.Exit
		stderr  string
		version string
		want    runs.Class
		hint    string
	}{
		{"killed", runs.Exit{Code: -1, Signal: "SIGKILL"}, "", "", runs.ProcessKilled, ""},
		{"no key", runs.Exit{Code: 41}, "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.\n", "", runs.NotAuthenticated, hintAuth},
		{"auth type", runs.Exit{Code: 41}, "Invalid auth method selected.\n", "", runs.NotAuthenticated, hintAuth},
		{"resume", runs.Exit{Code: 42}, "Error resuming session: Invalid session identifier \"x\".\n", "", runs.SessionNotFound, hintResume},
		{"unknown flag", runs.Exit{Code: 1}, "Usage: gemini [options]\n\nUnknown arguments: no-such, noSuch\n", "0.50.0", runs.FlagRejected, "0.50.0"},
		{"untrusted", runs.Exit{Code: 55}, "Gemini CLI is not running in a trusted directory.\n", "", runs.AgentCrashed, "GEMINI_CLI_TRUST_WORKSPACE"},
		{"config", runs.Exit{Code: 52}, "Invalid telemetry configuration\n", "", runs.AgentCrashed, hintHome},
		{"status exit", runs.Exit{Code: 173}, "", "", runs.RateLimited, hintRate},
		{"sigterm", runs.Exit{Code: 0}, "Warning: Basic terminal detected\n", "", runs.AgentCrashed, hintCrash},
		{"crash", runs.Exit{Code: 1}, "TypeError: x is undefined\n    at foo (bar.js:1:1)\n", "", runs.AgentCrashed, hintCrash},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := New().NewDecoder(runs.Invocation{CLIVersion: c.version}).Finish(c.exit, []byte(c.stderr))
			if o.Status != runs.Failed || o.Error == nil || o.Error.Class != c.want || o.Error.Message == "" {
				t.Fatalf("outcome = %+v, error %+v, want %s", o, o.Error, c.want)
			}
			if !strings.Contains(o.Error.Hint, c.hint) {
				t.Errorf("hint = %q, want it to contain %q", o.Error.Hint, c.hint)
			}
			if strings.Contains(o.Error.Message, "    at ") || strings.Contains(o.Error.Message, "Warning: ") {
				t.Errorf("message carries noise: %q", o.Error.Message)
			}
		})
	}
}
