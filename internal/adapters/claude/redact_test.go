package claude

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
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
	"github.com/agentgate/agentgate/internal/store"
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

	st := startStore(t)
	red, err := redact.New(redact.Options{NoBuiltin: true}) // the literal, not the sk-ant- pattern, must find it
	if err != nil {
		t.Fatal(err)
	}
	gw := map[string]string{"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": key}
	cfg := runs.Config{
		Replica: "redact", WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 2 * time.Second,
		DefaultTimeout: 3 * time.Minute, Getenv: func(k string) string { return gw[k] }, Redact: red,
	}
	core, logs := observer.New(zapcore.DebugLevel)
	sup := runs.NewSupervisor(cfg, st, []*runs.Agent{{Adapter: New(), Bin: bin, Home: t.TempDir()}}, nopObserver{}, zap.New(core))
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

	events := storedEvents(t, st, r.ID)
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

func startStore(t *testing.T) runs.Store {
	t.Helper()
	emb, err := store.StartEmbedded(filepath.Join(t.TempDir(), "nats"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := store.Open(context.Background(), nc, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// storedEvents reads the run's whole log as stored.
func storedEvents(t *testing.T, st runs.Store, id string) []runs.StoredEvent {
	t.Helper()
	last, err := st.LastEvent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := st.OpenCursor(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []runs.StoredEvent
	for uint64(len(out)) < last.Seq {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		batch, err := cur.Next(ctx, 512)
		cancel()
		if err != nil {
			t.Fatalf("read events of %s: %v", id, err)
		}
		out = append(out, batch...)
	}
	return out
}

type nopObserver struct{}

func (nopObserver) RunQueued(string)           {}
func (nopObserver) RunStarted(string, float64) {}
func (nopObserver) RunFinished(string, string, runs.State, runs.Class, float64, runs.Usage, *float64) {
}
func (nopObserver) Event(string, runs.EventType)                            {}
func (nopObserver) FirstEvent(string, float64)                              {}
func (nopObserver) QueueDepth(int, int)                                     {}
func (nopObserver) ApprovalRequested(string)                                {}
func (nopObserver) ApprovalResolved(string, runs.Decision, string, float64) {}
func (nopObserver) TurnStarted(string)                                      {}
func (nopObserver) TurnFinished(string, runs.State, float64)                {}
