package qwen

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/netns"
	_ "github.com/agentgate/agentgate/internal/netns/lightshim"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestMain checks that the real-CLI tests leave no goroutine behind: the
// mock servers, the supervisors and the process readers they start.
func TestMain(m *testing.M) {
	netns.Main()   // the conformance suite's network shim is this binary
	mcptest.Main() // the conformance suite's MCP server is this binary
	goleak.VerifyTestMain(m)
}

func TestDescribe(t *testing.T) {
	d := New().Describe()
	if d.Name != Name || d.DefaultBin != "qwen" || d.VerifiedVersion != VerifiedVersion {
		t.Errorf("description %+v", d)
	}
	r := d.Reporting()
	if r.Usage != runs.UsageExact || r.Cost != runs.CostUnknown || r.ErrorClasses != runs.ErrorClassesHTTPStatus {
		t.Errorf("reports %+v", r)
	}
	if !d.Interaction.Steer || !d.Interaction.ResumesSession || d.ReportsCost {
		t.Errorf("interaction %+v, reports cost %v", d.Interaction, d.ReportsCost)
	}
	for _, f := range []string{runs.FieldSystemPrompt, runs.FieldEffort, runs.FieldMaxBudgetUSD} {
		err := runs.CheckFields(d, specWith(f))
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != f || !errors.Is(err, runs.ErrUnsupported) {
			t.Errorf("%s: %v, want unsupported_option naming it", f, err)
		}
	}
}

// specWith is a spec that sets field.
func specWith(field string) runs.Spec {
	s := runs.Spec{Prompt: "p"}
	switch field {
	case runs.FieldSystemPrompt:
		s.SystemPrompt = "be brief"
	case runs.FieldEffort:
		s.Effort = "high"
	case runs.FieldMaxBudgetUSD:
		s.MaxBudgetUSD = 1
	}
	return s
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{"0.24.4\n": "0.24.4", "v0.25.0-preview.1": "0.25.0-preview.1"} {
		if got, err := New().ParseVersion([]byte(in)); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := New().ParseVersion([]byte("Qwen Code\n")); err == nil {
		t.Error("a line without a version parsed")
	}
}

func TestCommand(t *testing.T) {
	inv := runs.Invocation{Spec: runs.Spec{Prompt: "hi", Model: "-odd"}, Home: "/h", Dir: "/d"}
	cmd, err := New().Command(inv)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cmd.Args, []string{"--acp", "--model=-odd"}) || cmd.Stdin != nil {
		t.Errorf("args %q, stdin %q", cmd.Args, cmd.Stdin)
	}
	if !slices.Contains(cmd.PassEnv, "OPENAI_API_KEY") || !slices.Contains(cmd.PassEnv, "OPENAI_BASE_URL") {
		t.Errorf("pass env %q", cmd.PassEnv)
	}
	// A run that resumes loads the session over ACP: same argv.
	inv.Spec.ResumeSessionID = "0196f0c2-7e1a-7000-8000-000000000001"
	for _, interactive := range []bool{false, true} {
		inv.Spec.Interactive = interactive
		if cmd, err := New().Command(inv); err != nil || !slices.Equal(cmd.Args, []string{"--acp", "--model=-odd"}) {
			t.Errorf("resume (interactive %v): %q, %v", interactive, cmd.Args, err)
		}
	}
	var fe *runs.FieldError
	inv.Spec.ResumeSessionID = "../x"
	if _, err := New().Command(inv); !errors.As(err, &fe) || fe.Field != runs.FieldResumeSessionID || !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("a session id with a slash: %v, want invalid naming it", err)
	}
	inv.Spec.ResumeSessionID, inv.Spec.Interactive = "", false
	inv.Spec.Permission = "root"
	if _, err := New().Command(inv); !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("unknown permission: %v", err)
	}
	if !New().PrefersSession(runs.Spec{}) {
		t.Error("a one-shot run does not go over ACP")
	}
}

func TestSessionModes(t *testing.T) {
	for _, c := range []struct {
		spec   runs.Spec
		mode   string
		refuse bool
	}{
		{runs.Spec{Permission: runs.ReadOnly}, modePlan, true},
		{runs.Spec{}, modeYolo, true},
		{runs.Spec{Permission: runs.Full}, modeYolo, true},
		{runs.Spec{Permission: runs.ReadOnly, Approvals: runs.ApprovalsAsk}, modePlan, true},
		{runs.Spec{Permission: runs.WorkspaceWrite, Approvals: runs.ApprovalsAsk}, modeDefault, false},
		{runs.Spec{Permission: runs.Full, Approvals: runs.ApprovalsAsk}, modeDefault, false},
	} {
		if mode, refuse := sessionMode(c.spec); mode != c.mode || refuse != c.refuse {
			t.Errorf("%+v: mode %q refuse %v, want %q %v", c.spec, mode, refuse, c.mode, c.refuse)
		}
	}
}

func TestClassifyRPC(t *testing.T) {
	for _, c := range []struct {
		e    acp.RPCError
		want runs.Class
	}{
		{acp.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"details":"401 Incorrect API key provided"}`)}, runs.NotAuthenticated},
		{acp.RPCError{Code: 429, Message: "Rate limit exceeded. Try again later."}, runs.RateLimited},
		{acp.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"details":"500 The server had an error"}`)}, runs.TransientAPIError},
		{acp.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"details":"[API Error: 503 Service Unavailable]"}`)}, runs.TransientAPIError},
		{acp.RPCError{Code: -32000, Message: "Authentication required: Use Qwen Code CLI to authenticate first."}, runs.NotAuthenticated},
		{acp.RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(`{"details":"something odd"}`)}, runs.APIError},
	} {
		got := classifyRPC("session/prompt", &c.e)
		if got.Class != c.want || got.Hint == "" || got.Message == "" {
			t.Errorf("%+v: %+v, want class %s", c.e, got, c.want)
		}
	}
}

func TestClassifyExit(t *testing.T) {
	if e := classifyExit(runs.Exit{Signal: "SIGKILL"}, nil); e != nil {
		t.Errorf("signal: %+v, want the core's", e)
	}
	if e := classifyExit(runs.Exit{Code: 1}, []byte("No auth type is selected.")); e.Class != runs.NotAuthenticated {
		t.Errorf("no auth: %+v", e)
	}
	if e := classifyExit(runs.Exit{Code: 1}, []byte("boom")); e.Class != runs.AgentCrashed || !strings.Contains(e.Message, "boom") {
		t.Errorf("crash: %+v", e)
	}
}

func TestPrepareHome(t *testing.T) {
	home := t.TempDir()
	path := settingsPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"privacy":{"usageStatisticsEnabled":true},"model":{"name":"qwen3","generationConfig":{"maxRetries":3}},"ui":{"theme":"x"}}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := New().PrepareHome(home); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Privacy struct{ UsageStatisticsEnabled *bool }
		Memory  struct{ EnableManagedAutoMemory *bool }
		UI      struct {
			EnableFollowupSuggestions *bool
			Theme                     string
		}
		Model struct {
			Name             string
			GenerationConfig struct{ MaxRetries *int }
		}
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	off := func(p *bool) bool { return p != nil && !*p }
	if !off(s.Privacy.UsageStatisticsEnabled) || !off(s.Memory.EnableManagedAutoMemory) || !off(s.UI.EnableFollowupSuggestions) {
		t.Errorf("settings %s: phone-home or a hidden model request left on", b)
	}
	if s.UI.Theme != "x" || s.Model.Name != "qwen3" || s.Model.GenerationConfig.MaxRetries == nil || *s.Model.GenerationConfig.MaxRetries != 3 {
		t.Errorf("settings %s: the operator's values were not kept", b)
	}
	if err := os.WriteFile(path, []byte(`{"ui": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := New().PrepareHome(home); err == nil || !strings.Contains(err.Error(), "ui") {
		t.Errorf("a section that is no object: %v", err)
	}
}

func TestModelEndpoints(t *testing.T) {
	env := map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}
	if got := New().ModelEndpoints(func(k string) string { return env[k] }, ""); !slices.Equal(got, []string{"127.0.0.1:8080"}) {
		t.Errorf("endpoints %q", got)
	}
	if got := New().ModelEndpoints(func(string) string { return "" }, ""); !slices.Equal(got, []string{openAIEndpoint}) {
		t.Errorf("default endpoints %q", got)
	}
}

// TestImagesNeedDeclaredInput: an image is refused unless the home's
// settings declare the model's image input, since qwen drops it without
// a word otherwise.
func TestImagesNeedDeclaredInput(t *testing.T) {
	home := t.TempDir()
	inv := runs.Invocation{Spec: runs.Spec{Prompt: "look", Attachments: []runs.Attachment{{MediaType: "image/png"}}},
		Home: home, Dir: "/d", Files: runs.HostFiles{}}
	var fe *runs.FieldError
	if _, err := New().Command(inv); !errors.As(err, &fe) || fe.Field != runs.FieldAttachments || !errors.Is(err, runs.ErrUnsupported) {
		t.Fatalf("undeclared image input: %v, want unsupported_option on attachments", err)
	}
	if err := declareImageInput(home); err != nil {
		t.Fatal(err)
	}
	if _, err := New().Command(inv); err != nil {
		t.Fatalf("declared image input: %v", err)
	}
}

// TestShellOutput: a shell call's output is the command's own, with a
// non-zero exit code after it, not the framed text the model gets.
func TestShellOutput(t *testing.T) {
	line := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update",` +
		`"toolCallId":"c1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Command: false\nOutput: nope\nExit Code: 2"}}],` +
		`"rawOutput":{"type":"shell_result","output":"nope","exitCode":2}}}}`
	var m struct {
		Params struct {
			Update struct {
				Content []struct {
					Content struct{ Text string }
				}
			}
		}
	}
	if err := json.Unmarshal(withShellOutput([]byte(line)), &m); err != nil {
		t.Fatal(err)
	}
	if c := m.Params.Update.Content; len(c) != 1 || c[0].Content.Text != "nope\nexit code 2" {
		t.Errorf("content %+v", c)
	}
	other := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"rawOutput":{"type":"other"}}}}`)
	if got := withShellOutput(other); string(got) != string(other) {
		t.Errorf("another tool's line changed: %s", got)
	}
}

// TestProjectFolder: the folder of a directory's sessions, as Qwen Code
// 0.24.4 names it (seen: a directory with "_" in its name).
func TestProjectFolder(t *testing.T) {
	for dir, want := range map[string]string{
		"/tmp/TestX_one_shot123/001": "-tmp-TestX-one-shot123-001",
		"/srv/a.b c/é":               "-srv-a-b-c--",
		"/x/😀":                       "-x---",
	} {
		if got := projectFolder(dir); got != want {
			t.Errorf("projectFolder(%q) = %q, want %q", dir, got, want)
		}
	}
}
