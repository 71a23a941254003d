package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/runs/runstest"

	"github.com/agentgate/agentgate/internal/runs"
)

// homeScript is a run of homeAdapter that reports its home, checks the
// base's files are copies there, leaves a planted file in the home, and
// appends a line to its session's file.
const homeScript = `set -e
echo "{\"text\":\"home $HOME\"}"
test "$(cat "$HOME/login.json")" = login
test "$(cat "$HOME/conf/settings")" = settings
test ! -L "$HOME/login.json"
if test -e "$HOME/planted"; then echo '{"text":"planted seen"}'; fi
echo hook > "$HOME/planted"
mkdir -p "$HOME/sessions"
echo "turn of $AGENTGATE_RUN" >> "$HOME/sessions/s1"
echo "{\"text\":\"session: $(cat "$HOME/sessions/s1" | tr '\n' '|')\"}"
`

func homeCluster(t *testing.T) *wsCluster {
	t.Helper()
	c := newWSCluster(t, homeAdapter{})
	if err := os.WriteFile(filepath.Join(c.base, "login.json"), []byte("login"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(c.base, "conf"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.base, "conf", "settings"), []byte("settings"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.base, "unlisted"), []byte("not for runs"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// texts is the text of the run's message.completed events.
func texts(t *testing.T, evs []runs.StoredEvent) string {
	t.Helper()
	var out []string
	for _, e := range evs {
		if e.Type == runs.EventMessageCompleted {
			var v struct {
				Data runs.MessageData `json:"data"`
			}
			if err := json.Unmarshal(e.JSON, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v.Data.Text)
		}
	}
	return strings.Join(out, "\n")
}

func TestRunsGetHomesOfTheirOwnAndSessionsFollowThem(t *testing.T) {
	c := homeCluster(t)
	a := c.replica(t, "a")
	first := c.submit(t, a, runs.Spec{Prompt: strings.ReplaceAll(homeScript, "$AGENTGATE_RUN", "one"), Metadata: map[string]string{"session": "s1"}})
	r1, evs := c.wait(t, first.ID)
	succeeded(t, r1)
	out := texts(t, evs)
	wantHome := filepath.Join(a.homes, r1.ID)
	if !strings.Contains(out, "home "+wantHome) || !strings.Contains(out, "session: turn of one|") {
		t.Fatalf("the first run said:\n%s\nwant home %s and one turn", out, wantHome)
	}
	if _, err := os.Stat(wantHome); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the first run's home is left after it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.base, "planted")); err == nil {
		t.Fatal("a run's file reached the base home")
	}

	// The session is resumed on another replica: its file is there, what
	// the run planted beside it is not.
	a.stop()
	b := c.replica(t, "b")
	second := c.submit(t, b, runs.Spec{Prompt: strings.ReplaceAll(homeScript, "$AGENTGATE_RUN", "two"), ResumeSessionID: "s1"})
	r2, evs := c.wait(t, second.ID)
	succeeded(t, r2)
	out = texts(t, evs)
	if !strings.Contains(out, "session: turn of one|turn of two|") {
		t.Fatalf("the resumed run said:\n%s\nwant both turns of session s1", out)
	}
	if strings.Contains(out, "planted seen") {
		t.Fatalf("a file the first run wrote in its home outside its session reached the next run:\n%s", out)
	}
	if !strings.Contains(out, "home "+filepath.Join(b.homes, r2.ID)) {
		t.Fatalf("the resumed run's home is not its own:\n%s", out)
	}
	ents, err := os.ReadDir(b.homes)
	if err != nil || len(ents) != 0 {
		t.Fatalf("homes left after the runs: %v (%v)", ents, err)
	}
}

// gated waits, in the run's directory, for a file the test makes.
const gated = `echo '{"text":"first"}'; while ! test -e "$GATE"; do sleep 0.01; done`

func TestResumingABusySessionIsAConflictUntilItEnds(t *testing.T) {
	c := homeCluster(t)
	a := c.replica(t, "a")
	first := c.submit(t, a, runs.Spec{Prompt: "true", Metadata: map[string]string{"session": "s1"}})
	r1, _ := c.wait(t, first.ID)
	succeeded(t, r1)
	gate := filepath.Join(t.TempDir(), "go")
	holder := c.submit(t, a, runs.Spec{Prompt: strings.ReplaceAll(gated, "$GATE", gate), ResumeSessionID: "s1"})
	waitEvent(t, c, holder.ID, `"first"`)
	_, err := a.sup.Submit(as("acme", "k1"), runs.Spec{Agent: "sh", Prompt: "true", ResumeSessionID: "s1"})
	var ce *runs.ConflictError
	if !errors.As(err, &ce) || ce.Code != runs.ConflictSessionBusy {
		t.Fatalf("a second run of a busy session: %v, want a %s conflict", err, runs.ConflictSessionBusy)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r2, _ := c.wait(t, holder.ID)
	succeeded(t, r2)
	third := c.submit(t, a, runs.Spec{Prompt: "true", ResumeSessionID: "s1"})
	r3, _ := c.wait(t, third.ID)
	succeeded(t, r3)
}

func waitEvent(t *testing.T, c *wsCluster, id, text string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound against a hang, not a target
	for time.Now().Before(deadline) {
		for _, e := range runstestEvents(t, c, id) {
			if strings.Contains(string(e.JSON), text) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no event with %s in run %s within a minute", text, id)
}

func runstestEvents(t *testing.T, c *wsCluster, id string) []runs.StoredEvent {
	t.Helper()
	last, err := c.st.LastEvent(context.Background(), id)
	if err != nil || last.Seq == 0 {
		return nil
	}
	return runstest.StoredEvents(t, c.st, id)
}

// hidingStore hides the record of run hide from its first read: a
// request with an idempotency key then finds the key's run still being
// recorded by the request before it.
type hidingStore struct {
	runs.Store
	hide   string
	hidden atomic.Bool
}

func (s *hidingStore) GetRun(ctx context.Context, id string) (runs.Run, error) {
	if id == s.hide && s.hidden.CompareAndSwap(false, true) {
		return runs.Run{}, runs.ErrNotFound
	}
	return s.Store.GetRun(ctx, id)
}

func TestARetryWithTheSameKeyLeavesItsRunsSessionLocked(t *testing.T) {
	c := homeCluster(t)
	ctx := context.Background()
	holder := uuid.NewString()
	spec := runs.Spec{Agent: "sh", Prompt: "true", ResumeSessionID: "s1", Tenant: "acme"}
	if err := c.st.SetSession(ctx, "sh", "s1", runs.SessionRecord{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if err := c.st.CreateRun(ctx, runs.Run{ID: holder, Agent: "sh", Status: runs.Running, Tenant: "acme", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.st.ClaimIdempotencyKey(ctx, "tenant:acme:k", runs.IdempotencyRecord{RunID: holder, RequestHash: hashSpec(spec)}); err != nil {
		t.Fatal(err)
	}
	if err := c.st.(runs.SessionLocks).LockSession(ctx, "acme", "sh", "s1", holder, time.Hour); err != nil {
		t.Fatal(err)
	}
	c.replicaStore = &hidingStore{Store: c.st, hide: holder}
	a := c.replica(t, "a")
	retry := spec
	retry.Tenant, retry.IdempotencyKey = "", "k"
	got, err := a.sup.Submit(as("acme", "k1"), retry)
	if err != nil || got.ID != holder {
		t.Fatalf("the retry: run %q, %v; want the key's run %s", got.ID, err, holder)
	}
	_, err = a.sup.Submit(as("acme", "k1"), runs.Spec{Agent: "sh", Prompt: "true", ResumeSessionID: "s1"})
	var ce *runs.ConflictError
	if !errors.As(err, &ce) || ce.Code != runs.ConflictSessionBusy {
		t.Fatalf("a run of the session the key's run holds, after the retry: %v, want a %s conflict", err, runs.ConflictSessionBusy)
	}
}

// A turn's end that comes to keep the run's work after the run's end has
// kept it (the run's end removes its home next) keeps nothing more, and
// says nothing after the run's end.
func TestATurnsKeepAfterTheRunsEndKeepsNothing(t *testing.T) {
	c := homeCluster(t)
	a := c.replica(t, "a")
	id := uuid.Must(uuid.NewV7()).String()
	root, err := a.sup.tenantRoot("acme")
	if err != nil {
		t.Fatal(err)
	}
	dir, home := filepath.Join(root, id), filepath.Join(a.homes, id)
	for _, d := range []string{dir, filepath.Join(home, "sessions")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "sessions", "s9"), []byte("turn 1"), 0o600); err != nil {
		t.Fatal(err)
	}
	task := &task{run: runs.Run{ID: id, Agent: "sh", Tenant: "acme", SessionID: "s9", Spec: runs.Spec{WorkDir: id, Interactive: true}},
		inv: runs.Invocation{Dir: dir}, home: home, agent: a.sup.agents["sh"]}
	a.sup.keepWork(context.Background(), task, "s9")
	a.sup.removeHome(task)
	a.sup.keepTurn(task)
	if rec, ok, err := c.st.Session(context.Background(), "sh", "s9"); err != nil || ok {
		t.Errorf("a turn's keep after the run's end recorded the session: %+v, %v", rec, err)
	}
	for _, e := range runstestEvents(t, c, id) {
		t.Errorf("a turn's keep after the run's end said: %s", e.JSON)
	}
}

// A home that cannot be made from the base (here a symlink loop in it)
// fails the run, and leaves nothing of itself behind.
func TestAHomeThatCannotBeMadeIsNotLeft(t *testing.T) {
	c := homeCluster(t)
	if err := os.RemoveAll(filepath.Join(c.base, "conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(c.base, "conf")); err != nil {
		t.Fatal(err)
	}
	a := c.replica(t, "a")
	run := c.submit(t, a, runs.Spec{Prompt: "true"})
	r, _ := c.wait(t, run.ID)
	if r.Status != runs.Failed || r.Error == nil || r.Error.Class != runs.Internal {
		t.Fatalf("a run whose home cannot be made ended %s (%+v), want failed, internal", r.Status, r.Error)
	}
	if ents, err := os.ReadDir(a.homes); err != nil || len(ents) != 0 {
		t.Fatalf("homes left after the run: %v (%v)", ents, err)
	}
}
