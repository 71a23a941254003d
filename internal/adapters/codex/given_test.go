package codex

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/supervisor"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
)

// The real codex given what a run is given, through the supervisor: MCP
// servers (the test binary, as mcptest's server) and images.

// givenWait bounds one run of these tests: each is a turn or two against
// the instant mock, plus the MCP server's start.
const givenWait = 90 * time.Second

// gateway is a supervisor running the real codex against one mock.
type gateway struct {
	sup    *supervisor.Supervisor
	st     runs.Store
	srv    *openai.Server
	images *openai.Images
	home   string // the Codex home, with config.toml
}

// startGateway serves sc and starts a supervisor whose codex uses it,
// with the test binary allowed as an MCP command, and mcpURLs as remote
// MCP servers.
func startGateway(t *testing.T, sc openai.Scenario, mcpURLs ...string) *gateway {
	t.Helper()
	bin := codexBin(t)
	srv, images, err := openai.StartWithImages("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(mockConfig(srv.URL, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	red, err := redact.New(redact.Options{NoBuiltin: true}) // the run's own secrets, not a pattern, must find them
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{testKeyEnv: testKey}
	cfg := supervisor.Config{
		Replica: "codex-given", WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 2 * time.Second,
		DefaultTimeout: 3 * time.Minute, Getenv: func(k string) string { return env[k] }, Redact: red,
		MCPCommands: []string{exe, missingMCP}, MCPURLs: mcpURLs,
	}
	cfg.VersionOutput = runstest.Versions.Output // one probe of the CLI per test binary
	st := runstest.Store(t)
	cfg.Uploads = runstest.Uploads(t, st) // as the gateway: attachments are kept as files
	sup := supervisor.New(cfg, st, []*supervisor.Agent{{Adapter: New(), Bin: bin, Home: home}}, runstest.NopObserver{},
		zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		if err := sup.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		cancel()
	})
	return &gateway{sup: sup, st: st, srv: srv, images: images, home: home}
}

// submit starts a run of spec with the mock's model.
func (g *gateway) submit(t *testing.T, spec runs.Spec) runs.Run {
	t.Helper()
	spec.Agent, spec.Model = Name, openai.DefaultModel
	if spec.Permission == "" {
		spec.Permission = runs.WorkspaceWrite
	}
	r, err := g.sup.Submit(context.Background(), spec)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return r
}

// wait waits for the run to end, and returns it with its stored events.
func (g *gateway) wait(t *testing.T, id string) (runs.Run, []runs.StoredEvent) {
	t.Helper()
	deadline := time.Now().Add(givenWait)
	for {
		r, err := g.st.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		// The record ends before run.completed is stored: wait for both.
		if r.Status.Terminal() && runstest.Completed(t, g.st, id) {
			return r, runstest.StoredEvents(t, g.st, id)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not end within %s; events: %s", id, givenWait, eventTypes(runstest.StoredEvents(t, g.st, id)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitEvent waits for an event of type typ and returns it.
func (g *gateway) waitEvent(t *testing.T, id string, typ runs.EventType) runs.StoredEvent {
	t.Helper()
	deadline := time.Now().Add(givenWait)
	for {
		for _, e := range runstest.StoredEvents(t, g.st, id) {
			if e.Type == typ {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s; events: %s", typ, givenWait, eventTypes(runstest.StoredEvents(t, g.st, id)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventData decodes a stored event's data into v.
func eventData(t *testing.T, e runs.StoredEvent, v any) {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(e.JSON, &env); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		t.Fatalf("event %d (%s): %v", e.Seq, e.Type, err)
	}
}

func eventTypes(evs []runs.StoredEvent) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(string(e.Type))
		b.WriteByte(' ')
	}
	return b.String()
}

// demoServers is a run's mcp_servers: mcptest's server as "demo", with
// token as its secret.
func demoServers(t *testing.T, token string) map[string]runs.MCPServer {
	t.Helper()
	s, err := mcptest.Server(token)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]runs.MCPServer{mcptest.Name: s}
}

// mcpCall is one MCP tool call as the events tell it.
type mcpCall struct {
	started   runs.ToolCallStartedData
	completed runs.ToolCallCompletedData
	done      bool
}

// mcpCalls returns the run's tool calls of MCP tools, by call id.
func mcpCalls(t *testing.T, evs []runs.StoredEvent) map[string]*mcpCall {
	t.Helper()
	calls := map[string]*mcpCall{}
	for _, e := range evs {
		switch e.Type {
		case runs.EventToolCallStarted:
			var d runs.ToolCallStartedData
			eventData(t, e, &d)
			if d.MCPServer != "" || strings.HasPrefix(d.Name, "mcp__") {
				calls[d.ID] = &mcpCall{started: d}
			}
		case runs.EventToolCallCompleted:
			var d runs.ToolCallCompletedData
			eventData(t, e, &d)
			if c, ok := calls[d.ID]; ok {
				c.completed, c.done = d, true
			}
		}
	}
	return calls
}

// onlyMCPCall returns the run's one MCP call, failing the test unless
// there is exactly one and it completed.
func onlyMCPCall(t *testing.T, evs []runs.StoredEvent) *mcpCall {
	t.Helper()
	calls := mcpCalls(t, evs)
	if len(calls) != 1 {
		t.Fatalf("%d MCP tool calls, want 1; events: %s", len(calls), eventTypes(evs))
	}
	for _, c := range calls {
		if !c.done {
			t.Fatalf("MCP call %s never completed", c.started.ID)
		}
		return c
	}
	return nil
}

// TestRealCLIMCPSecretRedacted has the model call show_token, which
// echoes the secret in the server's env: the secret reaches the model
// (the tool ran with it) but no stored event, nor the run's record.
func TestRealCLIMCPSecretRedacted(t *testing.T) {
	secret := "mcp-secret-" + rand.Text()
	g := startGateway(t, openai.MCPTurn(mcptest.Name, "show_token", `{}`, "Shown."))
	r := g.submit(t, runs.Spec{Prompt: "Show the demo token.", MCPServers: demoServers(t, secret)})
	done, evs := g.wait(t, r.ID)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v; events: %s", done.Status, done.Error, eventTypes(evs))
	}
	if !g.srv.Ledger().Seen("token:" + secret) {
		t.Fatal("the model never got the token from the tool: the test proves nothing")
	}
	c := onlyMCPCall(t, evs)
	if !strings.Contains(c.completed.Output, redact.Mark) {
		t.Errorf("show_token's output %q holds no redaction mark", c.completed.Output)
	}
	for _, e := range evs {
		if strings.Contains(string(e.JSON), secret) {
			t.Errorf("event %d (%s) holds the secret: %s", e.Seq, e.Type, e.JSON)
		}
	}
	rec, err := json.Marshal(done)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rec), secret) {
		t.Errorf("the run record holds the secret: %s", rec)
	}
}

// missingMCP is an MCP command the gateway allows that does not exist.
const missingMCP = "/nonexistent/agentgate-mcp-server"

// TestRealCLIMCPServerFails gives a server whose command does not exist:
// Codex goes on without its tools, and the run says so with a warning.
func TestRealCLIMCPServerFails(t *testing.T) {
	g := startGateway(t, openai.MCPTurn(mcptest.Name, "reverse_text", `{"text":"hello mcp"}`, "Reversed."))
	servers := map[string]runs.MCPServer{mcptest.Name: {Command: missingMCP}}
	r := g.submit(t, runs.Spec{Prompt: "Reverse 'hello mcp' with the demo tool.", MCPServers: servers})
	done, evs := g.wait(t, r.ID)
	if done.Status != runs.Succeeded || done.Result != openai.NoMCPToolText {
		t.Fatalf("run %s, result %q: %+v", done.Status, done.Result, done.Error)
	}
	var warned bool
	for _, e := range evs {
		if e.Type == runs.EventWarning {
			var w runs.WarningData
			eventData(t, e, &w)
			warned = warned || (w.Code == "mcp_server_failed" && strings.Contains(w.Message, `"demo"`))
		}
	}
	if !warned {
		t.Errorf("no mcp_server_failed warning naming demo; events: %s", eventTypes(evs))
	}
}

// TestRealCLIMCPDenied asks for approvals: Codex asks for the MCP call
// (an elicitation), and the gateway reports approval.requested naming the
// server, the tool as Codex offers it and the model's arguments, with the
// call not run. Denied, Codex declines it (action decline), the tool never
// runs, the call completes as an error, and the turn goes on to the
// model's answer. The conformance suite's mcp_approval allows such a call.
func TestRealCLIMCPDenied(t *testing.T) {
	g := startGateway(t, openai.MCPTurn(mcptest.Name, "reverse_text", `{"text":"hello mcp"}`, "Not allowed, then."))
	r := g.submit(t, runs.Spec{Prompt: "Reverse 'hello mcp' with the demo tool.", Approvals: runs.ApprovalsAsk,
		MCPServers: demoServers(t, "unused-"+rand.Text())})
	var req runs.ApprovalRequestedData
	eventData(t, g.waitEvent(t, r.ID, runs.EventApprovalRequested), &req)
	if req.MCPServer != mcptest.Name || req.Tool != "mcp__demo__reverse_text" || !strings.Contains(string(req.Input), "hello mcp") {
		t.Errorf("approval.requested %+v, want mcp_server demo, tool mcp__demo__reverse_text and the arguments", req)
	}
	for _, c := range mcpCalls(t, runstest.StoredEvents(t, g.st, r.ID)) {
		if c.done && !c.completed.IsError {
			t.Fatalf("the MCP call completed before it was answered: %+v", c.completed)
		}
	}
	if _, err := g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: req.ID, Decision: runs.Deny}); err != nil {
		t.Fatalf("deny: %v", err)
	}
	done, evs := g.wait(t, r.ID)
	if done.Status != runs.Succeeded || done.Result != "Not allowed, then." {
		t.Fatalf("run %s, result %q: %+v; events: %s", done.Status, done.Result, done.Error, eventTypes(evs))
	}
	c := onlyMCPCall(t, evs)
	if !c.completed.IsError || strings.Contains(c.completed.Output, "reversed:") {
		t.Errorf("a denied call completed %+v", c.completed)
	}
	if g.srv.Ledger().Seen(mcptest.Reversed("hello mcp")) {
		t.Error("the denied tool ran: the model got its result")
	}
	t.Logf("the model was told: %q", c.completed.Output)
}

// TestRealCLIMCPAllowSession answers the first of two identical MCP calls
// allow_session (action accept with _meta.persist "session"): the second
// runs unasked, and nothing is kept beyond the session.
func TestRealCLIMCPAllowSession(t *testing.T) {
	g := startGateway(t, openai.MCPTwice(mcptest.Name, "reverse_text", `{"text":"hello mcp"}`, "Twice."))
	r := g.submit(t, runs.Spec{Prompt: "Reverse 'hello mcp' twice with the demo tool.", Approvals: runs.ApprovalsAsk,
		MCPServers: demoServers(t, "unused-"+rand.Text())})
	var req runs.ApprovalRequestedData
	eventData(t, g.waitEvent(t, r.ID, runs.EventApprovalRequested), &req)
	if _, err := g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: req.ID, Decision: runs.AllowSession}); err != nil {
		t.Fatalf("allow_session: %v", err)
	}
	done, evs := g.wait(t, r.ID)
	if done.Status != runs.Succeeded || done.Result != "Twice." {
		t.Fatalf("run %s, result %q: %+v; events: %s", done.Status, done.Result, done.Error, eventTypes(evs))
	}
	asked := 0
	for _, e := range evs {
		if e.Type == runs.EventApprovalRequested {
			asked++
		}
	}
	calls := mcpCalls(t, evs)
	if asked != 1 || len(calls) != 2 {
		t.Fatalf("%d approvals for %d MCP calls, want 1 for 2; events: %s", asked, len(calls), eventTypes(evs))
	}
	for _, c := range calls {
		if want := mcptest.Reversed("hello mcp"); !c.done || c.completed.IsError || c.completed.Output != want {
			t.Errorf("call %s completed %+v, want %q", c.started.ID, c.completed, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(g.home, "config.toml")); err != nil || string(b) != mockConfig(g.srv.URL, "") {
		t.Errorf("the Codex home's config.toml changed: %v\n%s", err, b)
	}
}

// TestRealCLIMCPResumed resumes a kept session with an MCP server the
// first run did not have: thread/resume's config brings it in.
func TestRealCLIMCPResumed(t *testing.T) {
	g := startGateway(t, openai.MCPTurn(mcptest.Name, "reverse_text", `{"text":"hello mcp"}`, "Reversed."))
	first := g.submit(t, runs.Spec{Prompt: "Hello.", KeepSession: true})
	done, evs := g.wait(t, first.ID)
	if done.Status != runs.Succeeded || done.Result != openai.NoMCPToolText || done.SessionID == "" {
		t.Fatalf("first run %s, result %q, session %q: %+v", done.Status, done.Result, done.SessionID, done.Error)
	}
	if calls := mcpCalls(t, evs); len(calls) != 0 {
		t.Fatalf("the first run, without MCP servers, made %d MCP calls", len(calls))
	}
	session := done.SessionID
	second := g.submit(t, runs.Spec{Prompt: "Reverse 'hello mcp' with the demo tool.", ResumeSessionID: session,
		MCPServers: demoServers(t, "unused-"+rand.Text())})
	done, evs = g.wait(t, second.ID)
	if done.Status != runs.Succeeded || done.SessionID != session {
		t.Fatalf("resumed run %s in session %q, want %q: %+v", done.Status, done.SessionID, session, done.Error)
	}
	if c := onlyMCPCall(t, evs); c.completed.Output != mcptest.Reversed("hello mcp") || c.started.MCPServer != mcptest.Name {
		t.Errorf("resumed run's MCP call %+v %+v", c.started, c.completed)
	}
}

// TestRealCLIOperatorMCPOff: the operator's config.toml has an MCP server
// of its own; a run given its own servers sees only those (the
// operator's is turned off for its thread), and config.toml is left as
// it was, and the run's server, slow to start, is waited for. The mock
// model calls the run's reverse_text, as Codex offers
// it (function reverse_text of namespace mcp__demo): with approvals never
// the call runs unasked, and its result reaches the events and the model.
func TestRealCLIOperatorMCPOff(t *testing.T) {
	const answer = "The tool reversed it."
	g := startGateway(t, openai.MCPTurn(mcptest.Name, "reverse_text", `{"text":"hello mcp"}`, answer))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	config := mockConfig(g.srv.URL, "") + fmt.Sprintf("\n[mcp_servers.operator]\ncommand = %q\nargs = [\"-test.run=^$\"]\nenv = { %s = \"1\" }\n",
		exe, mcptest.ServeEnv)
	if err := os.WriteFile(filepath.Join(g.home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// The run's server takes 12 s to start, past Codex's default
	// startup_timeout_sec of 10, which dropped it: the gateway's 60 keep it.
	servers := demoServers(t, "unused-"+rand.Text())
	servers[mcptest.Name].Env[mcptest.StartDelayEnv] = "12s"
	r := g.submit(t, runs.Spec{Prompt: "Reverse 'hello mcp' with the demo tool.", MCPServers: servers})
	done, evs := g.wait(t, r.ID)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v; events: %s", done.Status, done.Error, eventTypes(evs))
	}
	reqs := g.srv.Ledger().Responses()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	for _, e := range reqs {
		if e.Request.HasTool("mcp__operator") || !e.Request.HasTool("mcp__demo.reverse_text") {
			t.Errorf("request %d offers %v: want the run's demo server and not the operator's", e.Request.Seq, e.Request.Tools)
		}
	}
	if b, err := os.ReadFile(filepath.Join(g.home, "config.toml")); err != nil || string(b) != config {
		t.Errorf("config.toml changed: %v\n%s", err, b)
	}
	wantReversed(t, g, done, evs, answer)
}

// wantReversed checks the run's one MCP call, demo's reverse_text of
// "hello mcp", unasked: named as Codex offers it, with the model's
// arguments, its result in the events and sent to the model, and the
// model's answer the run's result.
func wantReversed(t *testing.T, g *gateway, done runs.Run, evs []runs.StoredEvent, answer string) {
	t.Helper()
	c := onlyMCPCall(t, evs)
	if c.started.MCPServer != mcptest.Name || c.started.MCPTool != "reverse_text" || c.started.Name != "mcp__demo__reverse_text" {
		t.Errorf("tool_call.started %+v, want mcp_server demo, mcp_tool reverse_text, name mcp__demo__reverse_text", c.started)
	}
	if !strings.Contains(string(c.started.Input), "hello mcp") {
		t.Errorf("input %s, want the model's arguments", c.started.Input)
	}
	want := mcptest.Reversed("hello mcp")
	if c.completed.IsError || c.completed.Output != want {
		t.Errorf("tool_call.completed %+v, want output %q", c.completed, want)
	}
	if !g.srv.Ledger().Seen(want) {
		t.Error("the model never got the tool's result")
	}
	if done.Result != answer {
		t.Errorf("result %q, want %q", done.Result, answer)
	}
}
