package copilot

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/supervisor"
	"os"
	"path/filepath"
	"slices"
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

// The real copilot given what a run is given, through the supervisor: MCP
// servers (the test binary, as mcptest's server) and images.

// givenWait bounds one run of these tests: a turn or two against the
// instant mock, the MCP server's start, and the CLI unpacking its package
// into a fresh home.
const givenWait = 2 * time.Minute

// gateway is a supervisor running the real copilot against one mock.
type gateway struct {
	sup    *supervisor.Supervisor
	st     runs.Store
	srv    *openai.Server
	images *openai.Images
}

// startGateway serves sc and starts a supervisor whose copilot uses it as
// its offline provider, with the test binary allowed as an MCP command.
func startGateway(t *testing.T, sc openai.Scenario) *gateway {
	t.Helper()
	bin := copilotBin(t)
	srv, images, err := openai.StartWithImages("127.0.0.1:0", sc, openai.RequireKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	red, err := redact.New(redact.Options{NoBuiltin: true}) // the run's own secrets, not a pattern, must find them
	if err != nil {
		t.Fatal(err)
	}
	env := providerEnv(srv.URL)
	cfg := supervisor.Config{
		Replica: "copilot-given", WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 2 * time.Second,
		DefaultTimeout: 3 * time.Minute, Getenv: func(k string) string { return env[k] }, Redact: red,
		MCPCommands: []string{exe},
	}
	cfg.VersionOutput = runstest.Versions.Output // one probe of the CLI per test binary
	st := runstest.Store(t)
	cfg.Uploads = runstest.Uploads(t, st) // as the gateway: attachments are kept as files
	sup := supervisor.New(cfg, st, []*supervisor.Agent{{Adapter: New(), Bin: bin, Home: t.TempDir()}}, runstest.NopObserver{},
		zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := sup.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		cancel()
	})
	return &gateway{sup: sup, st: st, srv: srv, images: images}
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
			t.Fatalf("run %s did not end within %s; events: %s", id, givenWait, givenTypes(runstest.StoredEvents(t, g.st, id)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitEvent waits for the n-th event (from 1) of type typ and returns it.
func (g *gateway) waitEvent(t *testing.T, id string, typ runs.EventType, n int) runs.StoredEvent {
	t.Helper()
	deadline := time.Now().Add(givenWait)
	for {
		k := 0
		evs := runstest.StoredEvents(t, g.st, id)
		for _, e := range evs {
			if e.Type == typ {
				if k++; k == n {
					return e
				}
			}
			if e.Type == runs.EventRunCompleted {
				t.Fatalf("the run ended before %s #%d; events: %s", typ, n, givenTypes(evs))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s #%d within %s; events: %s", typ, n, givenWait, givenTypes(evs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// givenData decodes a stored event's data into v.
func givenData(t *testing.T, e runs.StoredEvent, v any) {
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

func givenTypes(evs []runs.StoredEvent) string {
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

// givenCall is one MCP tool call as the events tell it.
type givenCall struct {
	started   runs.ToolCallStartedData
	completed runs.ToolCallCompletedData
	done      bool
}

// onlyMCPCall returns the run's one call of an MCP tool, failing the test
// unless there is exactly one and it completed.
func onlyMCPCall(t *testing.T, evs []runs.StoredEvent) *givenCall {
	t.Helper()
	calls := map[string]*givenCall{}
	for _, e := range evs {
		switch e.Type {
		case runs.EventToolCallStarted:
			var d runs.ToolCallStartedData
			givenData(t, e, &d)
			if d.MCPServer != "" || strings.HasPrefix(d.Name, mcptest.Name+"-") {
				calls[d.ID] = &givenCall{started: d}
			}
		case runs.EventToolCallCompleted:
			var d runs.ToolCallCompletedData
			givenData(t, e, &d)
			if c, ok := calls[d.ID]; ok {
				c.completed, c.done = d, true
			}
		}
	}
	if len(calls) != 1 {
		t.Fatalf("%d MCP tool calls, want 1; events: %s", len(calls), givenTypes(evs))
	}
	for _, c := range calls {
		if !c.done {
			t.Fatalf("MCP call %s never completed", c.started.ID)
		}
		return c
	}
	return nil
}

// checkReversed checks a run whose model called reverse_text with "hello
// mcp": the call is named after the run's server and the tool, and its
// result is in the events and reached the model.
func (g *gateway) checkReversed(t *testing.T, done runs.Run, evs []runs.StoredEvent, answer string) {
	t.Helper()
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v; events: %s", done.Status, done.Error, givenTypes(evs))
	}
	c := onlyMCPCall(t, evs)
	if c.started.MCPServer != mcptest.Name || c.started.MCPTool != "reverse_text" || c.started.Name != "demo-reverse_text" {
		t.Errorf("tool_call.started %+v, want mcp_server demo, mcp_tool reverse_text, name demo-reverse_text", c.started)
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

// TestGivenMCPTool gives a read_only one-shot run mcptest's server as
// "demo"; the mock model calls its reverse_text as Copilot offers it
// (demo-reverse_text). With approvals never the call runs unasked, as
// read_only pre-approves the run's servers. The suite's mcp_tool case
// runs the same call at workspace_write (--allow-all-tools); the names
// Copilot gives the call, which that case does not check, are the same
// at either level and checked here.
func TestGivenMCPTool(t *testing.T) {
	const answer = "The tool reversed it."
	g := startGateway(t, openai.CopilotMCPCall(mcptest.Name, "reverse_text", json.RawMessage(`{"text":"hello mcp"}`), answer))
	r := g.submit(t, runs.Spec{Prompt: "Reverse 'hello mcp' with the demo tool.", Permission: runs.ReadOnly,
		MCPServers: demoServers(t, "unused-"+rand.Text())})
	done, evs := g.wait(t, r.ID)
	g.checkReversed(t, done, evs, answer)
	if !slices.Contains(g.srv.Ledger()[0].Request.Tools, "demo-reverse_text") {
		t.Errorf("the model was offered %q", g.srv.Ledger()[0].Request.Tools)
	}
}

// TestGivenMCPInteractive is TestGivenMCPTool over ACP: an interactive
// run, whose MCP server comes with --additional-mcp-config too (the
// CLI's ACP drops stdio servers from session/new).
func TestGivenMCPInteractive(t *testing.T) {
	const answer = "Reversed over ACP."
	g := startGateway(t, openai.CopilotMCPCall(mcptest.Name, "reverse_text", json.RawMessage(`{"text":"hello mcp"}`), answer))
	r := g.submit(t, runs.Spec{Prompt: "Reverse 'hello mcp' with the demo tool.", Interactive: true,
		MCPServers: demoServers(t, "unused-"+rand.Text())})
	g.waitEvent(t, r.ID, runs.EventTurnCompleted, 1)
	if _, err := g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputClose}); err != nil {
		t.Fatalf("close: %v", err)
	}
	done, evs := g.wait(t, r.ID)
	g.checkReversed(t, done, evs, answer)
}

// TestGivenMCPSecretRedacted has the model call show_token, which echoes
// the secret in the server's env: the secret reaches the model (the tool
// ran with it) but no stored event, nor the run's record.
func TestGivenMCPSecretRedacted(t *testing.T) {
	secret := "mcp-secret-" + rand.Text()
	g := startGateway(t, openai.CopilotMCPCall(mcptest.Name, "show_token", nil, "Shown."))
	r := g.submit(t, runs.Spec{Prompt: "Show the demo token.", MCPServers: demoServers(t, secret)})
	done, evs := g.wait(t, r.ID)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v; events: %s", done.Status, done.Error, givenTypes(evs))
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

// TestGivenMCPApproval asks for approvals: Copilot asks for the MCP call,
// the gateway reports approval.requested naming the server, and the call
// runs once allowed.
func TestGivenMCPApproval(t *testing.T) {
	const answer = "Reversed once allowed."
	g := startGateway(t, openai.CopilotMCPCall(mcptest.Name, "reverse_text", json.RawMessage(`{"text":"hello mcp"}`), answer))
	r := g.submit(t, runs.Spec{Prompt: "Reverse 'hello mcp' with the demo tool.", Approvals: runs.ApprovalsAsk,
		MCPServers: demoServers(t, "unused-"+rand.Text())})
	e := g.waitEvent(t, r.ID, runs.EventApprovalRequested, 1)
	var req runs.ApprovalRequestedData
	givenData(t, e, &req)
	if req.MCPServer != mcptest.Name || req.Tool != "demo-reverse_text" || !strings.Contains(string(req.Input), "hello mcp") {
		t.Errorf("approval.requested %+v, want mcp_server demo, tool demo-reverse_text and the arguments", req)
	}
	if g.srv.Ledger().Seen(mcptest.Reversed("hello mcp")) {
		t.Fatal("the MCP call ran before it was allowed")
	}
	if _, err := g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: req.ID, Decision: runs.Allow}); err != nil {
		t.Fatalf("allow: %v", err)
	}
	done, evs := g.wait(t, r.ID)
	g.checkReversed(t, done, evs, answer)
}

// redPNG is an 8×8 red PNG.
var redPNG = mustBase64("iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEklEQVR4nGP4z8CAFWEXHbQSACj/P8Fu7N9hAAAAAElFTkSuQmCC")

func mustBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// acpResources lists the files Copilot's ACP writes for an image block
// (acp-resource-<hex>.png) in the gateway's own temporary directory,
// where a run's must never be: each run has its own TMPDIR.
func acpResources(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(os.TempDir(), "acp-resource-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGivenImageFollowUp sends an image with the second message of an
// interactive run, and with its first prompt: the model got both (ACP
// image blocks), and the temporary files the CLI writes for them were in
// the run's own TMPDIR, not the gateway's.
func TestGivenImageFollowUp(t *testing.T) {
	before := acpResources(t)
	g := startGateway(t, openai.Turns("Seen."))
	r := g.submit(t, runs.Spec{Prompt: "Look at this.", Interactive: true,
		Attachments: []runs.Attachment{{MediaType: "image/png", Name: "red.png", Data: redPNG}}})
	g.waitEvent(t, r.ID, runs.EventTurnCompleted, 1)
	b64 := base64.StdEncoding.EncodeToString(redPNG)
	if !g.images.Seen(b64) {
		t.Errorf("the first prompt's image never reached the model")
	}
	n := len(g.images.URLs())
	if _, err := g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputMessage, Text: "And at this one?",
		Attachments: []runs.Attachment{{MediaType: "image/png", Name: "again.png", Data: redPNG}}}); err != nil {
		t.Fatalf("message: %v", err)
	}
	g.waitEvent(t, r.ID, runs.EventTurnCompleted, 2)
	// The second request replays the first image and adds the new one.
	if urls := g.images.URLs(); len(urls) < n+2 {
		t.Errorf("%d image URLs after the follow-up, %d before: want the message's image too", len(urls), n)
	}
	if _, err := g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputClose}); err != nil {
		t.Fatalf("close: %v", err)
	}
	done, evs := g.wait(t, r.ID)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v; events: %s", done.Status, done.Error, givenTypes(evs))
	}
	for _, p := range acpResources(t) {
		if !slices.Contains(before, p) {
			t.Errorf("the CLI left %s in the gateway's temporary directory", p)
		}
	}
}

// TestGivenTokenBudgetInteractive stops an interactive run whose model
// calls a tool for ever at its max_total_tokens: the turn never ends, so
// the usage must come before it does (the session's record, through
// acp.Profile.UsageSoFar), and the run keeps it.
func TestGivenTokenBudgetInteractive(t *testing.T) {
	g := startGateway(t, openai.BashLoop("echo again"))
	r := g.submit(t, runs.Spec{Prompt: "Echo until told to stop.", Interactive: true, MaxTotalTokens: 1})
	done, evs := g.wait(t, r.ID)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.BudgetExceeded || done.Error.Budget != runs.BudgetMaxTotalTokens {
		t.Fatalf("run %s, error %+v; want failed budget_exceeded naming max_total_tokens; events: %s", done.Status, done.Error, givenTypes(evs))
	}
	billed := normalized(g.srv.Ledger().Billed())
	if done.Usage.InputTokens == 0 || done.Usage.InputTokens > billed.InputTokens || done.Usage.OutputTokens > billed.OutputTokens {
		t.Errorf("usage %+v, want some and no more than the mock billed %+v", done.Usage, billed)
	}
}
