package gemini

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/googleai"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// The real-CLI tests of what a run is given, driven through the supervisor
// (which seals, redacts and stops the CLI): MCP servers, and the usage a
// looping run reports before its result. Images, and the token budget,
// are the conformance suite's (image_prompt, image_follow_up,
// max_total_tokens), which asserts all these tests did of them.

// gateway is a supervisor running gemini against one mock.
type gateway struct {
	sup *supervisor.Supervisor
	st  runs.Store
	srv *googleai.Server
}

func startGateway(t *testing.T, sc googleai.Scenario) *gateway {
	t.Helper()
	bin := agenttest.Bin(t, "gemini")
	srv, err := googleai.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	st := runstest.Store(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GOOGLE_GEMINI_BASE_URL": srv.URL, "GEMINI_API_KEY": testKey}
	cfg := supervisor.Config{
		Replica: "gemini-" + uuid.NewString()[:8], WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"),
		KillGrace: 2 * time.Second, DefaultTimeout: runDeadline, MaxTimeout: time.Hour,
		Getenv:      func(k string) string { return env[k] },
		MCPCommands: []string{exe}, // mcptest.Server: this test binary
	}
	cfg.VersionOutput = runstest.Versions.Output // one probe of the CLI per test binary
	cfg.Uploads = runstest.Uploads(t, st)        // as the gateway: attachments are kept as files
	sup := supervisor.New(cfg, st, []*supervisor.Agent{{Adapter: New(), Bin: bin, Home: t.TempDir()}},
		runstest.NopObserver{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
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
	return &gateway{sup: sup, st: st, srv: srv}
}

func (g *gateway) submit(t *testing.T, spec runs.Spec) runs.Run {
	t.Helper()
	spec.Agent = Name
	r, err := g.sup.Submit(context.Background(), spec)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return r
}

// wait waits for the run's end and returns it with its stored events.
func (g *gateway) wait(t *testing.T, id string, within time.Duration) (runs.Run, []storedEvent) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := g.st.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		// The record ends before run.completed is stored: wait for both.
		if r.Status.Terminal() && runstest.Completed(t, g.st, id) {
			return r, g.events(t, id)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not end within %s", id, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor waits for the run's first event of type typ.
func (g *gateway) waitFor(t *testing.T, id string, typ runs.EventType, within time.Duration) storedEvent {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, e := range g.events(t, id) {
			if e.Type == typ {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in run %s within %s", typ, id, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// storedEvent is an event as stored: its type and its whole JSON.
type storedEvent struct {
	Type runs.EventType
	JSON []byte
	Data json.RawMessage
}

func (g *gateway) events(t *testing.T, id string) []storedEvent {
	t.Helper()
	last, err := g.st.LastEvent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if last.Seq == 0 {
		return nil
	}
	cur, err := g.st.OpenCursor(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []storedEvent
	for uint64(len(out)) < last.Seq {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		batch, err := cur.Next(ctx, 512)
		cancel()
		if err != nil {
			t.Fatalf("read events of %s: %v", id, err)
		}
		for _, se := range batch {
			var e struct {
				Type runs.EventType  `json:"type"`
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(se.JSON, &e); err != nil {
				t.Fatal(err)
			}
			out = append(out, storedEvent{Type: e.Type, JSON: se.JSON, Data: e.Data})
		}
	}
	return out
}

func ofType(evs []storedEvent, typ runs.EventType) []storedEvent {
	var out []storedEvent
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// demoServer is the run's "demo" MCP server, with secret as its token.
func demoServer(t *testing.T, secret string) map[string]runs.MCPServer {
	t.Helper()
	srv, err := mcptest.Server(secret)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]runs.MCPServer{"demo": srv}
}

// mcpStarted returns the run's one tool_call.started and its
// tool_call.completed.
func mcpCall(t *testing.T, evs []storedEvent) (runs.ToolCallStartedData, runs.ToolCallCompletedData) {
	t.Helper()
	started, completed := ofType(evs, runs.EventToolCallStarted), ofType(evs, runs.EventToolCallCompleted)
	if len(started) != 1 || len(completed) != 1 {
		t.Fatalf("%d tool_call.started, %d completed", len(started), len(completed))
	}
	var s runs.ToolCallStartedData
	var c runs.ToolCallCompletedData
	if json.Unmarshal(started[0].Data, &s) != nil || json.Unmarshal(completed[0].Data, &c) != nil {
		t.Fatalf("tool events %s %s", started[0].JSON, completed[0].JSON)
	}
	return s, c
}

// TestGivenMCPTool: a one-shot run without approvals is given the demo
// server; the model calls its reverse_text, which runs unasked, and the
// run ends once the turn did, although the CLI does not exit at the end
// of its stdin with an MCP server.
func TestGivenMCPTool(t *testing.T) {
	t.Parallel()
	g := startGateway(t, googleai.MCPTool(mcptest.Name, "reverse_text", map[string]string{"text": "hello mcp"}, "Reversed it."))
	token := "tok-" + rand.Text()
	r := g.submit(t, runs.Spec{Prompt: "Reverse hello mcp.", MCPServers: demoServer(t, token)})
	done, evs := g.wait(t, r.ID, runDeadline)
	// The CLI outlives the end of its stdin with an MCP server; the
	// supervisor stops it a kill grace later, far before the run's
	// timeout (runDeadline).
	if took := done.FinishedAt.Sub(*done.StartedAt); took > runDeadline/2 {
		t.Errorf("the run took %s: the CLI was not stopped after its turn", took)
	}
	waitFor(func() bool { return len(serversOf(token)) == 0 }, 30*time.Second)
	if pids := serversOf(token); len(pids) > 0 {
		t.Errorf("the run's MCP server outlived it: pids %v", pids)
	}
	if done.Status != runs.Succeeded || done.Result != "Reversed it." {
		t.Fatalf("run %s %+v, result %q", done.Status, done.Error, done.Result)
	}
	s, c := mcpCall(t, evs)
	if s.MCPServer != "demo" || s.MCPTool != "reverse_text" || s.Name != "mcp_demo_reverse_text" {
		t.Errorf("tool_call.started %+v", s)
	}
	if want := mcptest.Reversed("hello mcp"); !strings.Contains(c.Output, want) || c.IsError {
		t.Errorf("tool output %q, want %q", c.Output, want)
	}
	if len(ofType(evs, runs.EventApprovalRequested)) != 0 {
		t.Error("a run without approvals asked")
	}
}

// TestGivenMCPSecretRedacted: show_token echoes the server's secret env
// value to the model; it must appear in no stored event and not in the
// record.
func TestGivenMCPSecretRedacted(t *testing.T) {
	t.Parallel()
	secret := "tok-" + rand.Text() + rand.Text()
	g := startGateway(t, googleai.MCPTool(mcptest.Name, "show_token", map[string]string{}, "Shown."))
	r := g.submit(t, runs.Spec{Prompt: "Show the token.", MCPServers: demoServer(t, secret)})
	done, evs := g.wait(t, r.ID, runDeadline)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s %+v", done.Status, done.Error)
	}
	if !g.srv.Ledger().Seen("token:" + secret) {
		t.Fatal("the model never got the token: the tool did not run, and the test proves nothing")
	}
	for _, e := range evs {
		if bytes.Contains(e.JSON, []byte(secret)) {
			t.Errorf("%s holds the secret: %s", e.Type, e.JSON)
		}
	}
	if _, c := mcpCall(t, evs); !strings.HasPrefix(c.Output, "token:") {
		t.Errorf("tool output %q", c.Output)
	}
	rec, _ := json.Marshal(done)
	if bytes.Contains(rec, []byte(secret)) {
		t.Errorf("the record holds the secret: %s", rec)
	}
}

// TestGivenMCPAsk: with approvals ask the MCP call is an approval naming
// its server, and runs once allowed.
func TestGivenMCPAsk(t *testing.T) {
	t.Parallel()
	g := startGateway(t, googleai.MCPTool(mcptest.Name, "reverse_text", map[string]string{"text": "hello mcp"}, "Reversed it."))
	token := "tok-" + rand.Text()
	r := g.submit(t, runs.Spec{Prompt: "Reverse hello mcp.", Approvals: runs.ApprovalsAsk, MCPServers: demoServer(t, token)})
	ev := g.waitFor(t, r.ID, runs.EventApprovalRequested, runDeadline)
	if len(serversOf(token)) == 0 {
		t.Error("no MCP server process while its tool call waits: serversOf finds nothing")
	}
	var a runs.ApprovalRequestedData
	if err := json.Unmarshal(ev.Data, &a); err != nil {
		t.Fatal(err)
	}
	if a.MCPServer != "demo" || a.Tool != "mcp_demo_reverse_text" {
		t.Errorf("approval %s", ev.JSON)
	}
	if _, err := g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: a.ID, Decision: runs.Allow}); err != nil {
		t.Fatalf("allow: %v", err)
	}
	done, evs := g.wait(t, r.ID, runDeadline)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s %+v", done.Status, done.Error)
	}
	s, c := mcpCall(t, evs)
	if s.MCPServer != "demo" || s.MCPTool != "reverse_text" || !strings.Contains(c.Output, mcptest.Reversed("hello mcp")) {
		t.Errorf("tool call %+v → %+v", s, c)
	}
	waitFor(func() bool { return len(serversOf(token)) == 0 }, 30*time.Second)
	if pids := serversOf(token); len(pids) > 0 {
		t.Errorf("the run's MCP server outlived it: pids %v", pids)
	}
}

// serversOf lists the pids of processes whose environment holds the MCP
// server token: the run's MCP server, still alive.
func serversOf(token string) []string {
	want := []byte(mcptest.TokenEnv + "=" + token + "\x00")
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append(env, 0), want) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestGivenUsageBeforeResult: a one-shot run that loops on a tool reports
// its usage at each tool call, from the CLI's chat recording, before any
// result line; cancelled, it keeps what it was billed so far.
func TestGivenUsageBeforeResult(t *testing.T) {
	t.Parallel()
	g := startGateway(t, googleai.ToolLoop("echo again"))
	r := g.submit(t, runs.Spec{Prompt: "Loop.", Permission: runs.Full})
	deadline := time.Now().Add(runDeadline)
	var updates []runs.Usage
	for len(updates) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d usage.updated within %s", len(updates), runDeadline)
		}
		updates = updates[:0]
		for _, e := range ofType(g.events(t, r.ID), runs.EventUsageUpdated) {
			var u runs.UsageData
			if err := json.Unmarshal(e.Data, &u); err != nil {
				t.Fatal(err)
			}
			updates = append(updates, u.Usage)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if updates[0].IsZero() || updates[1].InputTokens <= updates[0].InputTokens {
		t.Errorf("usage does not grow: %+v", updates)
	}
	if _, err := g.sup.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	done, _ := g.wait(t, r.ID, runDeadline)
	if done.Status != runs.Cancelled {
		t.Errorf("run %s %+v", done.Status, done.Error)
	}
	billed := normalized(g.srv.Ledger().Billed())
	if done.Usage.InputTokens < updates[1].InputTokens || done.Usage.InputTokens > billed.InputTokens ||
		done.Usage.OutputTokens > billed.OutputTokens || done.Usage.CacheReadTokens > billed.CacheReadTokens {
		t.Errorf("usage %+v: seen %+v, billed %+v", done.Usage, updates[1], billed)
	}
}
