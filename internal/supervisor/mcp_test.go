package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMCPAllowLists(t *testing.T) {
	d := runs.Description{Name: "x", Fields: []string{runs.FieldMCPServers}}
	cmds := []string{"/usr/bin/mcp-fs", "/opt/mcp/", "npx"}
	urls := []string{"https://mcp.example.com/v1", "http://127.0.0.1:8080/"}
	ok := []runs.MCPServer{
		{Command: "/usr/bin/mcp-fs"}, {Command: "npx"}, {Command: "/opt/mcp/server"}, {Command: "/opt/mcp/a/b"},
		{URL: "https://mcp.example.com/v1"}, {URL: "https://MCP.example.com:443/v1/sse"}, {URL: "http://127.0.0.1:8080/anything"},
	}
	for _, m := range ok {
		if err := checkMCPServers(d, map[string]runs.MCPServer{"s": m}, cmds, urls); err != nil {
			t.Errorf("%+v refused: %v", m, err)
		}
	}
	refused := []struct {
		m    runs.MCPServer
		code string
	}{
		{runs.MCPServer{Command: "/usr/bin/mcp-fs2"}, runs.CodeMCPCommandNotAllowed},
		{runs.MCPServer{Command: "/opt/mcp/../../bin/sh"}, runs.CodeMCPCommandNotAllowed},
		{runs.MCPServer{Command: "/opt/mcpx"}, runs.CodeMCPCommandNotAllowed},
		{runs.MCPServer{Command: "opt/mcp/x"}, runs.CodeMCPCommandNotAllowed},
		{runs.MCPServer{Command: "bash"}, runs.CodeMCPCommandNotAllowed},
		{runs.MCPServer{URL: "https://mcp.example.com/v2"}, runs.CodeMCPURLNotAllowed},
		{runs.MCPServer{URL: "https://mcp.example.com/v1x"}, runs.CodeMCPURLNotAllowed},
		{runs.MCPServer{URL: "http://mcp.example.com/v1"}, runs.CodeMCPURLNotAllowed},
		{runs.MCPServer{URL: "https://mcp.example.com:8443/v1"}, runs.CodeMCPURLNotAllowed},
		{runs.MCPServer{URL: "https://evil.com/v1"}, runs.CodeMCPURLNotAllowed},
		{runs.MCPServer{URL: "https://mcp.example.com/v1/../admin"}, runs.CodeMCPURLNotAllowed},
		{runs.MCPServer{URL: "https://mcp.example.com/v1/%2e%2e/x"}, runs.CodeMCPURLNotAllowed},
		{runs.MCPServer{URL: "https://u:p@mcp.example.com/v1"}, runs.CodeMCPURLNotAllowed},
		{runs.MCPServer{URL: "ftp://127.0.0.1:8080/"}, runs.CodeMCPURLNotAllowed},
		{runs.MCPServer{URL: "http://127.0.0.1:8081/"}, runs.CodeMCPURLNotAllowed},
	}
	for _, c := range refused {
		m, code := c.m, c.code
		err := checkMCPServers(d, map[string]runs.MCPServer{"s": m}, cmds, urls)
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Code != code || fe.Field != runs.FieldMCPServers || !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("%+v: %v, want %s", m, err, code)
		}
	}
	if err := checkMCPServers(d, map[string]runs.MCPServer{"s": {Command: "npx"}}, nil, nil); err == nil {
		t.Error("an empty allow-list allowed a command")
	}
	err := checkMCPServers(runs.Description{Name: "y"}, map[string]runs.MCPServer{"s": {Command: "npx"}}, cmds, urls)
	var fe *runs.FieldError
	if !errors.As(err, &fe) || !errors.Is(err, runs.ErrUnsupported) || fe.Field != runs.FieldMCPServers || fe.Agent != "y" {
		t.Errorf("an agent without MCP: %v", err)
	}
}

func TestSealRoundTrip(t *testing.T) {
	key := NewSealKey()
	in := map[string]runs.MCPServer{
		"demo": {Command: "/bin/mcp", Args: []string{"-v"}, Env: map[string]string{"TOKEN": "s3cret-value", "A": "b"}},
		"web":  {URL: "https://x.example/mcp", Headers: map[string]string{"Authorization": "Bearer tok-123"}},
		"bare": {Command: "/bin/other"},
	}
	sealedServers, err := sealMCPServers(key, "run-1", in)
	if err != nil {
		t.Fatal(err)
	}
	if in["demo"].Env == nil {
		t.Error("sealing changed its input")
	}
	for name, m := range sealedServers {
		if m.Env != nil || m.Headers != nil {
			t.Errorf("%s keeps its values in the clear", name)
		}
		if bytes.Contains(m.Sealed, []byte("s3cret-value")) || bytes.Contains(m.Sealed, []byte("tok-123")) {
			t.Errorf("%s: sealed holds the plain text", name)
		}
	}
	if got := sealedServers["demo"].EnvNames; len(got) != 2 || got[0] != "A" || got[1] != "TOKEN" {
		t.Errorf("env names %v", got)
	}
	if got := sealedServers["web"].HeaderNames; len(got) != 1 || got[0] != "Authorization" {
		t.Errorf("header names %v", got)
	}
	if sealedServers["bare"].Sealed != nil {
		t.Error("a server without values has a sealed blob")
	}
	opened, err := openMCPServers(key, "run-1", sealedServers)
	if err != nil {
		t.Fatal(err)
	}
	if opened["demo"].Env["TOKEN"] != "s3cret-value" || opened["web"].Headers["Authorization"] != "Bearer tok-123" || opened["demo"].Args[0] != "-v" {
		t.Errorf("opened %+v", opened)
	}
	if sealedServers["demo"].Env != nil {
		t.Error("opening changed its input")
	}
	if _, err := openMCPServers(key, "run-2", sealedServers); err == nil {
		t.Error("a sealed blob opened in another run")
	}
	if _, err := openMCPServers(NewSealKey(), "run-1", sealedServers); err == nil {
		t.Error("a sealed blob opened with another key")
	}
	if _, err := sealMCPServers([]byte("short"), "run-1", in); err == nil {
		t.Error("a bad key sealed")
	}
	secrets := mcpSecrets(opened)
	if len(secrets) != 3 {
		t.Errorf("secrets %v", secrets)
	}
}

// mcpLeakAdapter prints the env value of its run's MCP server everywhere a
// CLI could: a message, a tool's output, its result and stderr.
type mcpLeakAdapter struct{}

func (mcpLeakAdapter) Name() string { return "mcpleak" }
func (mcpLeakAdapter) Describe() runs.Description {
	return runs.Description{Name: "mcpleak", DefaultBin: "/bin/sh", VerifiedVersion: "1.0.0", VersionArgs: []string{"-c", "echo 1.0.0"},
		Fields: []string{runs.FieldMCPServers}}
}
func (mcpLeakAdapter) ParseVersion(b []byte) (string, error) {
	return strings.TrimSpace(string(b)), nil
}
func (mcpLeakAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	srv := inv.Spec.MCPServers["demo"]
	// The adapter writes the value into its command, as a CLI's MCP
	// config would carry it.
	script := `
printf '{"text":"the token is %s"}\n' "$DEMO_TOKEN"
printf '{"text":"header %s"}\n' "$DEMO_HEADER"
echo "mcp server failed with token $DEMO_TOKEN" >&2
`
	return runs.Command{Args: []string{"-c", script}, Env: []string{
		"DEMO_TOKEN=" + srv.Env["TOKEN"], "DEMO_HEADER=" + inv.Spec.MCPServers["web"].Headers["X-Api"]}}, nil
}
func (mcpLeakAdapter) NewDecoder(runs.Invocation) runs.Decoder { return &leakDecoder{} }

func TestMCPSecretsNeverStored(t *testing.T) {
	token, header := "mcp-token-"+randomHex(t, 12), "mcp-header-"+randomHex(t, 12)
	core, logs := observer.New(zapcore.DebugLevel)
	store := newMemStore()
	cfg := Config{
		WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 300 * time.Millisecond, StoreRetry: 500 * time.Millisecond,
		MCPCommands: []string{"/usr/local/bin/"}, MCPURLs: []string{"https://mcp.example.com/"},
	}
	agent := &Agent{Adapter: mcpLeakAdapter{}, Bin: "/bin/sh", Home: t.TempDir()}
	sup := New(cfg, store, []*Agent{agent}, nopObserver{}, zap.New(core))
	startSupervisor(t, sup)
	spec := runs.Spec{Agent: "mcpleak", Prompt: "hi", MCPServers: map[string]runs.MCPServer{
		"demo": {Command: "/usr/local/bin/demo-mcp", Env: map[string]string{"TOKEN": token}},
		"web":  {URL: "https://mcp.example.com/mcp", Headers: map[string]string{"X-Api": header}},
	}}
	r, err := sup.Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if spec.MCPServers["demo"].Env["TOKEN"] != token {
		t.Error("Submit changed the caller's spec")
	}
	h := &harness{sup: sup, store: store}
	done := h.wait(t, r.ID, 30*time.Second)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v", done.Status, done.Error)
	}
	leaks := func(where string, b []byte) {
		t.Helper()
		for _, s := range []string{token, header} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds %q: %s", where, s, b)
			}
		}
	}
	var texts int
	for _, e := range store.eventsOf(r.ID) {
		leaks(fmt.Sprintf("event %d (%s)", e.Seq, e.Type), e.JSON)
		if strings.Contains(string(e.JSON), "the token is") {
			texts++
		}
	}
	if texts == 0 {
		t.Error("the agent's message is missing: the test proves nothing")
	}
	got, err := store.GetRun(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(got)
	leaks("the record", rec)
	queued, _ := json.Marshal(got.Spec)
	leaks("the stored spec", queued)
	if m := got.Spec.MCPServers["demo"]; len(m.Sealed) == 0 || len(m.EnvNames) != 1 || m.EnvNames[0] != "TOKEN" || m.Env != nil {
		t.Errorf("stored demo server = %+v, want its env sealed, its names kept", m)
	}
	for _, entry := range logs.All() {
		line, _ := json.Marshal(entry.ContextMap())
		leaks("log line "+entry.Message, append([]byte(entry.Message), line...))
	}
}

func TestMCPPolicyAtSubmission(t *testing.T) {
	store := newMemStore()
	cfg := Config{WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), MCPCommands: []string{"/usr/local/bin/demo-mcp"}}
	sup := New(cfg, store, []*Agent{
		{Adapter: mcpLeakAdapter{}, Bin: "/bin/sh", Home: t.TempDir()},
		{Adapter: leakAdapter{}, Bin: "/bin/sh", Home: t.TempDir()},
	}, nopObserver{}, zap.NewNop())
	startSupervisor(t, sup)
	for _, c := range []struct {
		agent string
		srv   runs.MCPServer
		code  string
		kind  error
	}{
		{"mcpleak", runs.MCPServer{Command: "/bin/sh"}, runs.CodeMCPCommandNotAllowed, runs.ErrInvalid},
		{"mcpleak", runs.MCPServer{URL: "https://mcp.example.com/"}, runs.CodeMCPURLNotAllowed, runs.ErrInvalid},
		{"leak", runs.MCPServer{Command: "/usr/local/bin/demo-mcp"}, "", runs.ErrUnsupported},
	} {
		_, err := sup.Submit(context.Background(), runs.Spec{Agent: c.agent, Prompt: "0", MCPServers: map[string]runs.MCPServer{"s": c.srv}})
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Code != c.code || !errors.Is(err, c.kind) || fe.Field != runs.FieldMCPServers {
			t.Errorf("%s %+v: %v, want %s", c.agent, c.srv, err, c.code)
		}
	}
	_, err := sup.Submit(context.Background(), runs.Spec{Agent: "leak", Prompt: "0", OutputSchema: json.RawMessage(`{"type": 5}`)})
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != runs.FieldOutputSchema || !strings.Contains(err.Error(), "compile") {
		t.Errorf("a schema that does not compile: %v", err)
	}
}
