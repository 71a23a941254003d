package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// A replica whose disk runs low stops its running runs with class
// disk_full, refuses new ones, is not ready, and leaves queued runs in the
// queue; once the disk has room it takes them again.
func TestDegradeStopsRunsAndResumes(t *testing.T) {
	h := newHarness(t, Config{MaxConcurrent: 1})
	running := h.submit(t, "mode:tool")
	h.waitFor(t, running.ID, runs.EventMessageCompleted, "tool started")
	h.sup.Degrade(errors.New("the store's disk has 1 MiB free"))

	done := h.wait(t, running.ID, 30*time.Second)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.DiskFull || !done.Error.Retryable {
		t.Fatalf("running run after the disk ran low: %s %+v", done.Status, done.Error)
	}
	assertNoProcesses(t, running.ID)
	if _, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hello"}); !errors.Is(err, runs.ErrStorageFull) {
		t.Fatalf("submit while degraded = %v, want ErrStorageFull", err)
	}
	if err := h.sup.Ready(context.Background()); !errors.Is(err, runs.ErrStorageFull) {
		t.Fatalf("ready while degraded = %v", err)
	}
	// A new reason replaces the old one in what readiness says.
	h.sup.Degrade(errors.New("4 MiB free, too little for the reserve"))
	if err := h.sup.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "4 MiB free") {
		t.Fatalf("ready after a new reason = %v", err)
	}

	// A run queued meanwhile (by another replica) waits. Its id is fresh:
	// a run's processes are found by it, and another copy of this suite
	// on the machine queues the same run.
	r := runs.Run{ID: uuid.Must(uuid.NewV7()).String(), Agent: "fake", Status: runs.Queued, CreatedAt: time.Now(),
		Spec: runs.Spec{Agent: "fake", Prompt: "mode:hello"}}
	h.store.CreateRun(context.Background(), r)
	h.store.AppendEvents(context.Background(), r.ID, []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued, JSON: []byte(`{}`)}})
	if err := h.store.Enqueue(context.Background(), r.ID, r.Spec); err != nil {
		t.Fatal(err)
	}
	h.sup.Degrade(nil)
	if err := h.sup.Ready(context.Background()); err != nil {
		t.Fatalf("ready after the disk has room = %v", err)
	}
	if got := h.wait(t, r.ID, 30*time.Second); got.Status != runs.Succeeded {
		t.Fatalf("queued run after recovery: %s %+v", got.Status, got.Error)
	}
}

// A run stopped for a low disk gets no grace: its every process is killed
// at once, even one that ignores SIGTERM, and StoppingForDisk says so
// until they are gone, so that the disk guard keeps its reserve from them.
func TestDegradeKillsAtOnce(t *testing.T) {
	// A grace of two minutes: a stop that used it would outlast the wait.
	h := newHarness(t, Config{MaxConcurrent: 1, KillGrace: 2 * time.Minute})
	r := h.submit(t, "mode:stubborn")
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "ignoring signals")
	if h.sup.StoppingForDisk() {
		t.Fatal("StoppingForDisk before anything was stopped")
	}
	h.sup.Degrade(errors.New("the store's disk has 0 B free"))
	done := h.wait(t, r.ID, 60*time.Second)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.DiskFull {
		t.Fatalf("run stopped for a low disk: %s %+v", done.Status, done.Error)
	}
	if done.Exit == nil || done.Exit.Signal != "SIGKILL" {
		t.Fatalf("exit = %+v, want SIGKILL without a grace", done.Exit)
	}
	assertNoProcesses(t, r.ID)
	if h.sup.StoppingForDisk() {
		t.Fatal("StoppingForDisk once the run's processes are gone")
	}
}

// StoppingForDisk holds from the stop until the agent's processes are
// gone, not longer: the run's last writes need what the guard frees.
func TestStoppingForDiskWhileProcessLives(t *testing.T) {
	h := newHarness(t, Config{MaxConcurrent: 1})
	r := h.submit(t, "mode:stubborn")
	h.waitFor(t, r.ID, runs.EventMessageCompleted, "ignoring signals")
	h.sup.mu.Lock()
	tk := h.sup.tasks[r.ID]
	h.sup.mu.Unlock()
	// As a stop for the disk looks between its cause and the kill.
	tk.mu.Lock()
	tk.stopErr = errDiskFull
	tk.mu.Unlock()
	if !h.sup.StoppingForDisk() {
		t.Fatal("StoppingForDisk is false while a run stopped for the disk has its process")
	}
	tk.mu.Lock()
	cancel := tk.cancel
	tk.mu.Unlock()
	cancel(errDiskFull)
	h.wait(t, r.ID, 60*time.Second)
	assertNoProcesses(t, r.ID)
	if h.sup.StoppingForDisk() {
		t.Fatal("StoppingForDisk once the run ended")
	}
}

// While degraded, the workers take nothing from the queue: a worker whose
// pull was already waiting when the disk ran low gives the run back
// unclaimed, and the others do not pull.
func TestDegradedReplicaTakesNothing(t *testing.T) {
	h := newHarness(t, Config{MaxConcurrent: 2})
	waitUntil(t, "both workers to pull", func() bool { return h.store.pullers() == 2 })
	h.sup.Degrade(errors.New("low"))
	r := runs.Run{ID: uuid.Must(uuid.NewV7()).String(), Agent: "fake", Status: runs.Queued, CreatedAt: time.Now(),
		Spec: runs.Spec{Agent: "fake", Prompt: "mode:hello"}}
	h.store.CreateRun(context.Background(), r)
	h.store.Enqueue(context.Background(), r.ID, r.Spec)
	// The workers were pulling before the degrade: one of them gets the
	// run, and must give it back.
	waitUntil(t, "a waiting pull to give the run back", func() bool { return h.store.naksOf(r.ID) > 0 })
	if n := h.store.claimsMade(); n != 0 {
		t.Fatalf("%d claims while degraded", n)
	}
	if got, _ := h.store.GetRun(context.Background(), r.ID); got.Owner != "" || got.Status != runs.Queued {
		t.Fatalf("run while degraded: %s owner %q", got.Status, got.Owner)
	}
	h.sup.Degrade(nil)
	if got := h.wait(t, r.ID, 30*time.Second); got.Status != runs.Succeeded {
		t.Fatalf("run after recovery: %s", got.Status)
	}
}

// waitUntil waits for cond, checking every few milliseconds, and fails the
// test after a deadline far above what a loaded machine needs.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A replica that found none of its agents' CLIs would fail every run: it
// is not ready, and says which CLIs are missing. One found is enough.
func TestNotReadyWithoutAnAgent(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-cli")
	start := func(bins ...string) *Supervisor {
		var agents []*Agent
		for i, bin := range bins {
			agents = append(agents, &Agent{Adapter: namedFake{fakeAdapter{mode: "hello"}, fmt.Sprintf("fake%d", i)}, Bin: bin, Home: t.TempDir()})
		}
		sup := New(Config{WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH")}, newMemStore(), agents, nopObserver{},
			zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
		startSupervisor(t, sup)
		return sup
	}
	err := start(missing).Ready(context.Background())
	if !errors.Is(err, runs.ErrNoAgent) || !strings.Contains(err.Error(), "fake0") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("ready with the only CLI missing = %v, want ErrNoAgent naming it", err)
	}
	if err := start(missing, os.Args[0]).Ready(context.Background()); err != nil {
		t.Errorf("ready with one CLI of two found = %v, want nil", err)
	}
}

// namedFake is fakeAdapter under another name, for a supervisor of several.
type namedFake struct {
	fakeAdapter
	name string
}

func (a namedFake) Name() string { return a.name }
func (a namedFake) Describe() runs.Description {
	d := a.fakeAdapter.Describe()
	d.Name = a.name
	return d
}
