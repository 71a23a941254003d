package acpagent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/agentsfile"
	"github.com/agentgate/agentgate/internal/runs"
)

func testEntry(t *testing.T) agentsfile.Agent {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(secret, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return agentsfile.Agent{
		Name: "acme", Command: "acme", Args: []string{"--acp"}, VersionArgs: []string{"--version"},
		Env:     map[string]string{"B_SETTING": "2", "A_SETTING": "1"},
		PassEnv: []string{"ACME_BASE_URL"},
		Credentials: []agentsfile.Credential{
			{Name: "ACME_KEY", FromEnv: "GW_ACME_KEY"},
			{Name: "OTHER_KEY", FromFile: secret},
			{Name: "UNSET_KEY", FromEnv: "GW_UNSET"},
		},
		HomeFiles: map[string]string{".acme/settings.json": `{"telemetry":false}`, "top.txt": "x"},
		Modes:     agentsfile.Modes{ReadOnly: "plan", WorkspaceWrite: "edit", Full: "yolo", Ask: "default"},
	}
}

func gatewayEnv(k string) string {
	return map[string]string{"GW_ACME_KEY": "env-secret"}[k]
}

func TestCommand(t *testing.T) {
	a := New(testEntry(t), gatewayEnv)
	cmd, err := a.Command(runs.Invocation{Spec: runs.Spec{Prompt: "hi"}, Files: runs.HostFiles{}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cmd.Args, []string{"--acp"}) || cmd.Stdin != nil {
		t.Errorf("args %q, stdin %q: want the entry's args and the prompt over ACP", cmd.Args, cmd.Stdin)
	}
	wantEnv := []string{"A_SETTING=1", "B_SETTING=2", "ACME_KEY=env-secret", "OTHER_KEY=file-secret"}
	if !slices.Equal(cmd.Env, wantEnv) {
		t.Errorf("env %q, want %q (an unset credential left out)", cmd.Env, wantEnv)
	}
	if !slices.Equal(cmd.PassEnv, []string{"ACME_BASE_URL"}) {
		t.Errorf("pass env %q", cmd.PassEnv)
	}
	if !slices.Equal(cmd.Secrets, []string{"env-secret", "file-secret"}) {
		t.Errorf("secrets %q: every credential must be redacted", cmd.Secrets)
	}
}

func TestCommandRefuses(t *testing.T) {
	a := New(testEntry(t), gatewayEnv)
	for field, spec := range map[string]runs.Spec{
		runs.FieldResumeSessionID: {Prompt: "hi", ResumeSessionID: "s1"},
		runs.FieldAttachments:     {Prompt: "hi", Attachments: []runs.Attachment{{}}},
	} {
		_, err := a.Command(runs.Invocation{Spec: spec})
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, runs.ErrUnsupported) {
			t.Errorf("%s: %v, want unsupported naming it", field, err)
		}
	}
	e := testEntry(t)
	e.Credentials = []agentsfile.Credential{{Name: "K", FromFile: filepath.Join(t.TempDir(), "missing")}}
	if _, err := New(e, gatewayEnv).Command(runs.Invocation{Spec: runs.Spec{Prompt: "hi"}, Files: runs.HostFiles{}}); err == nil || !strings.Contains(err.Error(), "credential K") {
		t.Errorf("missing credential file: %v, want an error naming it", err)
	}
}

func TestDescribe(t *testing.T) {
	d := New(testEntry(t), gatewayEnv).Describe()
	if d.Source != runs.SourceConfigured || d.ReportsCost {
		t.Errorf("source %q, reports cost %v", d.Source, d.ReportsCost)
	}
	want := runs.Reports{Usage: runs.UsageUnknown, Cost: runs.CostUnknown, ErrorClasses: runs.ErrorClassesGeneric}
	if got := d.Reporting(); got != want {
		t.Errorf("reports %+v, want %+v", got, want)
	}
	caps := runs.Capabilities(d)
	for _, f := range []string{runs.FieldInteractive, runs.FieldApprovals, runs.FieldMCPServers, runs.FieldMaxTurns} {
		if !slices.Contains(caps, f) {
			t.Errorf("capabilities %v lack %s", caps, f)
		}
	}
	for _, f := range []string{runs.FieldModel, runs.FieldMaxTotalTokens, runs.FieldMaxBudgetUSD} {
		if slices.Contains(caps, f) {
			t.Errorf("capabilities %v list %s, which it cannot honour", caps, f)
		}
		err := runs.CheckFields(d, runs.Spec{Prompt: "hi", Model: "m", MaxTotalTokens: 1, MaxBudgetUSD: 1})
		if !errors.Is(err, runs.ErrUnsupported) {
			t.Errorf("CheckFields = %v, want unsupported", err)
		}
	}
	if !slices.Equal(d.CredentialEnv, []string{"GW_ACME_KEY", "GW_UNSET"}) || d.DefaultBin != "acme" || d.DisplayName != "acme" {
		t.Errorf("description %+v", d)
	}
}

func TestParseVersion(t *testing.T) {
	a := New(testEntry(t), nil)
	for in, want := range map[string]string{
		"0.24.4\n":                      "0.24.4",
		"Cline CLI v3.0.65 (node 20)\n": "3.0.65",
		"tool 1.2.3-beta.1 build 77":    "1.2.3-beta.1",
		"1.2\n":                         "1.2",
	} {
		if got, err := a.ParseVersion([]byte(in)); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := a.ParseVersion([]byte("no version here")); err == nil {
		t.Errorf("ParseVersion(no version) = %q, want an error", got)
	}
}

func TestPrepareHome(t *testing.T) {
	a := New(testEntry(t), nil)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".acme"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".acme", "settings.json"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.PrepareHome(home); err != nil {
		t.Fatal(err)
	}
	for rel, want := range testEntry(t).HomeFiles {
		b, err := os.ReadFile(filepath.Join(home, rel))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", rel, b, err, want)
		}
	}
	if got := a.BaseFiles(); !slices.Equal(got, []string{".acme/settings.json", "top.txt"}) {
		t.Errorf("BaseFiles = %q", got)
	}
}

// TestModes plays the handshake and checks the session/set_mode the
// client sends, and whether it refuses what the CLI asks, per run.
func TestModes(t *testing.T) {
	a := New(testEntry(t), nil)
	for _, c := range []struct {
		spec   runs.Spec
		mode   string
		refuse bool
	}{
		{runs.Spec{Prompt: "hi"}, "edit", true},
		{runs.Spec{Prompt: "hi", Permission: runs.ReadOnly}, "plan", true},
		{runs.Spec{Prompt: "hi", Permission: runs.Full, Interactive: true}, "yolo", true},
		{runs.Spec{Prompt: "hi", Permission: runs.Full, Approvals: runs.ApprovalsAsk}, "default", false},
	} {
		d := a.NewDecoder(runs.Invocation{Spec: c.spec, Dir: "/w"}).(runs.Conversation)
		d.Open()
		d.Decode([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}`))
		d.Pending()
		d.Decode([]byte(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`))
		out, _ := d.Pending()
		var msg struct {
			Method string `json:"method"`
			Params struct {
				ModeID string `json:"modeId"`
			} `json:"params"`
		}
		if err := json.Unmarshal(out, &msg); err != nil || msg.Method != "session/set_mode" || msg.Params.ModeID != c.mode {
			t.Errorf("%+v: client wrote %s, want set_mode %s", c.spec, out, c.mode)
			continue
		}
		// Start the turn, then the CLI asks for a permission.
		d.Decode([]byte(`{"jsonrpc":"2.0","id":3,"result":{}}`))
		d.Pending()
		evs := d.Decode([]byte(`{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"S1","toolCall":{"toolCallId":"c1","kind":"execute","title":"ls"},"options":[{"optionId":"y","kind":"allow_once","name":"Allow"},{"optionId":"n","kind":"reject_once","name":"Reject"}]}}`))
		asked := slices.ContainsFunc(evs, func(e runs.Event) bool { return e.Type == runs.EventApprovalRequested })
		if asked == c.refuse {
			t.Errorf("%+v: approval.requested %v, want it only when the run asks", c.spec, asked)
		}
	}
}

func TestNarrowAllowAlways(t *testing.T) {
	const req = `{"jsonrpc":"2.0","id":4,"method":"session/request_permission","params":{"sessionId":"S","toolCall":{"toolCallId":"c"},"options":[` +
		`{"optionId":"proceed_always_project","kind":"allow_always","name":"project"},` +
		`{"optionId":"proceed_always_user","kind":"allow_always","name":"user"},` +
		`{"optionId":"proceed_once","kind":"allow_once","name":"once"}]}}`
	ids := func(line []byte) []string {
		var m struct {
			Params struct {
				Options []struct{ OptionID string }
			}
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range m.Params.Options {
			out = append(out, o.OptionID)
		}
		return out
	}
	if got := ids(narrowAllowAlways([]byte(req), "proceed_always_user")); !slices.Equal(got, []string{"proceed_always_user", "proceed_once"}) {
		t.Errorf("with the entry's option: %v", got)
	}
	if got := ids(narrowAllowAlways([]byte(req), "")); !slices.Equal(got, []string{"proceed_once"}) {
		t.Errorf("several allow_always and no option named: %v, want none of them", got)
	}
	one := `{"jsonrpc":"2.0","id":4,"method":"session/request_permission","params":{"options":[{"optionId":"a","kind":"allow_always"}]}}`
	if got := narrowAllowAlways([]byte(one), ""); string(got) != one {
		t.Errorf("one allow_always was changed: %s", got)
	}
	other := `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"text":"allow_always session/request_permission"}}}`
	if got := narrowAllowAlways([]byte(other), ""); string(got) != other {
		t.Errorf("another message was changed: %s", got)
	}
}
