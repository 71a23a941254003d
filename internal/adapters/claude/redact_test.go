package claude

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// TestRealCLISecretsNeverStored runs the real claude through the
// supervisor with a long API key in the gateway's environment and the
// mcptest server given a secret in its env. The mock model calls
// show_token, which prints the secret; then has Claude's Bash tool print
// the key, to stdout and to stderr; then answers with the key in its
// text. The model got both (so the test proves something), and no stored
// event, no field of the run's record and no log line holds either:
// each place one was holds the mark.
func TestRealCLISecretsNeverStored(t *testing.T) {
	key := "sk-ant-api03-" + rand.Text() + rand.Text()[:14] // 40 random characters
	secret := "mcp-secret-" + rand.Text() + rand.Text()
	srv, err := anthropic.Start("127.0.0.1:0", callsThenText("The key is "+key+".",
		anthropic.ToolUse(anthropic.MCPToolName(mcptest.Name, "show_token"), map[string]string{}),
		anthropic.Bash("printenv ANTHROPIC_API_KEY; echo \"to stderr: $ANTHROPIC_API_KEY\" >&2")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	sup, st, logs := startRedactingGateway(t, map[string]string{"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": key})

	r, err := sup.Submit(context.Background(), runs.Spec{Agent: "claude", Prompt: "Show the token, then print my API key.",
		Permission: runs.Full, MCPServers: demoServer(t, secret)})
	if err != nil {
		t.Fatal(err)
	}
	done := waitRun(t, st, r.ID)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v", done.Status, done.Error)
	}
	if !srv.Ledger().Messages().Seen("token:" + secret) {
		t.Fatal("the model never got the secret from show_token: the server did not get its env, and the test proves nothing")
	}
	if !srv.Ledger().Messages().Seen(key) {
		t.Fatal("the mock never saw the key in a tool result: the tool did not print it, and the test proves nothing")
	}
	wantStoredRedacted(t, runstest.StoredEvents(t, st, r.ID), key, secret)
	rec, err := json.Marshal(struct {
		R runs.Run
		S runs.Spec
	}{done, done.Spec})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"key": key, "secret": secret} {
		if strings.Contains(string(rec), s) {
			t.Errorf("the run record holds the %s: %s", name, rec)
		}
		for _, e := range logs.All() {
			b, _ := json.Marshal(e.ContextMap())
			if strings.Contains(e.Message+string(b), s) {
				t.Errorf("logged the %s: %s %s", name, e.Message, b)
			}
		}
	}
	if want := "The key is " + redact.Mark + "."; done.Result != want {
		t.Errorf("result %q, want %q", done.Result, want)
	}
}

// wantStoredRedacted checks the stored events of the run: none holds the
// key or the secret, or a long prefix of either; the MCP call is named;
// both tools' results and the answer hold the mark.
func wantStoredRedacted(t *testing.T, events []runs.StoredEvent, key, secret string) {
	t.Helper()
	var started, tokenMarked bool
	var markedResults int
	var marked []string
	for _, e := range events {
		j := string(e.JSON)
		for _, s := range []string{key, key[:24], secret, secret[:24]} {
			if strings.Contains(j, s) {
				t.Errorf("event %d (%s) holds %q: %s", e.Seq, e.Type, s, j)
			}
		}
		if strings.Contains(j, redact.Mark) {
			marked = append(marked, string(e.Type))
		}
		switch e.Type {
		case runs.EventToolCallStarted:
			started = started || strings.Contains(j, `"mcp_server":"demo"`) && strings.Contains(j, `"mcp_tool":"show_token"`)
		case runs.EventToolCallCompleted:
			if strings.Contains(j, redact.Mark) {
				markedResults++
			}
			tokenMarked = tokenMarked || strings.Contains(j, "token:"+redact.Mark)
		}
	}
	if !started {
		t.Error("no stored tool_call.started names the server and the tool")
	}
	if markedResults != 2 || !tokenMarked {
		t.Errorf("%d tool_call.completed hold the mark (show_token's where the secret was: %v), want show_token's and Bash's",
			markedResults, tokenMarked)
	}
	for _, want := range []runs.EventType{runs.EventMessageCompleted, runs.EventRunCompleted} {
		if !strings.Contains(strings.Join(marked, " "), string(want)) {
			t.Errorf("no %s event holds the mark (marked: %v)", want, marked)
		}
	}
}

// startRedactingGateway starts a supervisor of the real claude whose
// environment is gw, which redacts what the run's secrets are and takes
// the test binary as an MCP server, logging to the observer it returns.
func startRedactingGateway(t *testing.T, gw map[string]string) (*supervisor.Supervisor, runs.Store, *observer.ObservedLogs) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	red, err := redact.New(redact.Options{NoBuiltin: true}) // the literal, not the sk-ant- pattern, must find it
	if err != nil {
		t.Fatal(err)
	}
	cfg := supervisor.Config{
		Replica: "redact", WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 2 * time.Second,
		DefaultTimeout: 3 * time.Minute, Getenv: func(k string) string { return gw[k] }, Redact: red,
		MCPCommands: []string{exe},
	}
	cfg.VersionOutput = runstest.Versions.Output // one probe of the CLI per test binary
	st := runstest.Store(t)
	cfg.Uploads = runstest.Uploads(t, st) // as the gateway: attachments are kept as files
	core, logs := observer.New(zapcore.DebugLevel)
	agent := &supervisor.Agent{Adapter: New(), Bin: agenttest.ClaudeBin(t), Home: t.TempDir()}
	sup := supervisor.New(cfg, st, []*supervisor.Agent{agent}, runstest.NopObserver{}, zap.New(core))
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
	return sup, st, logs
}

// waitRun waits for the run to end and returns its record.
func waitRun(t *testing.T, st runs.Store, id string) runs.Run {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; {
		done, err := st.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status.Terminal() {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not finished: %s", id, done.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
