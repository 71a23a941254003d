package claude

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestRealCLIKeyNeverStored runs the real claude through the supervisor
// with a long API key in the gateway's environment. The mock model has
// Claude's Bash tool print the key, to stdout and to stderr, and then
// answers with the key in its text: no stored event and no field of the
// run's record may hold it, and each place it was holds the mark.
func TestRealCLIKeyNeverStored(t *testing.T) {
	bin := agenttest.ClaudeBin(t)
	key := "sk-ant-api03-" + rand.Text() + rand.Text()[:14] // 40 random characters
	srv, err := anthropic.Start("127.0.0.1:0", anthropic.ToolTurn(
		"printenv ANTHROPIC_API_KEY; echo \"to stderr: $ANTHROPIC_API_KEY\" >&2", "The key is "+key+"."))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	st := runstest.Store(t)
	red, err := redact.New(redact.Options{NoBuiltin: true}) // the literal, not the sk-ant- pattern, must find it
	if err != nil {
		t.Fatal(err)
	}
	gw := map[string]string{"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": key}
	cfg := runs.Config{
		Replica: "redact", WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 2 * time.Second,
		DefaultTimeout: 3 * time.Minute, Getenv: func(k string) string { return gw[k] }, Redact: red,
	}
	cfg.VersionOutput = runstest.Versions.Output // one probe of the CLI per test binary
	core, logs := observer.New(zapcore.DebugLevel)
	sup := runs.NewSupervisor(cfg, st, []*runs.Agent{{Adapter: New(), Bin: bin, Home: t.TempDir()}}, runstest.NopObserver{}, zap.New(core))
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

	r, err := sup.Submit(context.Background(), runs.Spec{Agent: "claude", Prompt: "Print my API key.", Permission: runs.Full})
	if err != nil {
		t.Fatal(err)
	}
	var done runs.Run
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if done, err = st.GetRun(context.Background(), r.ID); err != nil {
			t.Fatal(err)
		}
		if done.Status.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not finished", r.ID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v", done.Status, done.Error)
	}
	if !srv.Ledger().Messages().Seen(key) {
		t.Fatal("the mock never saw the key in a tool result: the tool did not print it, and the test proves nothing")
	}

	events := runstest.StoredEvents(t, st, r.ID)
	var marked []string
	for _, e := range events {
		if strings.Contains(string(e.JSON), key) || strings.Contains(string(e.JSON), key[:24]) {
			t.Errorf("event %d (%s) holds the key: %s", e.Seq, e.Type, e.JSON)
		}
		if strings.Contains(string(e.JSON), redact.Mark) {
			marked = append(marked, string(e.Type))
		}
	}
	for _, want := range []runs.EventType{runs.EventToolCallCompleted, runs.EventMessageCompleted, runs.EventRunCompleted} {
		if !strings.Contains(strings.Join(marked, " "), string(want)) {
			t.Errorf("no %s event holds the mark (marked: %v)", want, marked)
		}
	}
	rec, err := json.Marshal(struct {
		R runs.Run
		S runs.Spec
	}{done, done.Spec})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rec), key) {
		t.Errorf("the run record holds the key: %s", rec)
	}
	if want := "The key is " + redact.Mark + "."; done.Result != want {
		t.Errorf("result %q, want %q", done.Result, want)
	}
	for _, e := range logs.All() {
		b, _ := json.Marshal(e.ContextMap())
		if strings.Contains(e.Message+string(b), key) {
			t.Errorf("logged the key: %s %s", e.Message, b)
		}
	}
}
