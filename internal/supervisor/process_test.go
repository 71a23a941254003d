package supervisor

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
	"github.com/agentgate/agentgate/internal/runs"
)

// evilAdapter runs the evil agent of proctreetest in the mode the prompt
// names ("mode:hang"), decoded as the fake agent is.
type evilAdapter struct {
	fakeAdapter
	evil *proctreetest.Evil
}

func (a evilAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	mode, _ := strings.CutPrefix(inv.Spec.Prompt, "mode:")
	return runs.Command{Args: a.evil.Args(mode), InterruptSignal: int(syscall.SIGINT)}, nil
}

// newEvilHarness runs a supervisor whose one agent is the evil one, under
// the reaper, and in a cgroup per run when withCgroups. The reaper is the
// test binary, as a gateway's own binary is, or reaper when given.
func newEvilHarness(t *testing.T, withCgroups bool, reaper ...string) (*harness, *proctreetest.Evil) {
	t.Helper()
	evil := proctreetest.Build(t, 2*time.Minute)
	cfg := Config{
		WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), Reaper: os.Args[0], KillGrace: 300 * time.Millisecond,
	}
	// A run's deadline strikes when the test closes it: once the agent
	// and its escapees are up, which a timer cannot promise.
	deadline := make(chan time.Time)
	cfg.RunDeadline = func(string, time.Duration) <-chan time.Time { return deadline }
	if len(reaper) > 0 {
		cfg.Reaper = reaper[0]
	}
	if withCgroups {
		cgs, err := proctree.OpenCgroups(context.Background(), proctree.CgroupOptions{Replica: "test-" + uuid.NewString()[:8]})
		if err != nil {
			t.Fatalf("cgroups are needed for this test (cgroup v2, as root): %v", err)
		}
		// Registered first, so run last: after the supervisor stopped.
		t.Cleanup(func() {
			if err := cgs.Close(context.Background()); err != nil {
				t.Errorf("close cgroups: %v", err)
			}
		})
		cfg.Cgroups = cgs
	}
	store := newMemStore()
	agent := &Agent{Adapter: evilAdapter{fakeAdapter{}, evil}, Bin: evil.Bin, Home: t.TempDir()}
	sup := New(cfg, store, []*Agent{agent}, nopObserver{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	startSupervisor(t, sup)
	return &harness{sup: sup, store: store, root: cfg.WorkspaceRoot, deadline: deadline}, evil
}

// TestEvilAgentLeavesNothing runs an agent that ignores SIGTERM and
// SIGINT, starts children that clear their environment and detach, and
// keeps respawning one: at every end of its run, with a cgroup per run
// and with the reaper alone, no process of it is left; under the gateway's
// own binary as the reaper, and under the light one as the image ships it.
func TestEvilAgentLeavesNothing(t *testing.T) {
	light := proctreetest.BuildReaper(t)
	for _, mode := range []string{"cgroup", "reaper", "light-cgroup", "light"} {
		reaper := []string(nil)
		if strings.HasPrefix(mode, "light") {
			reaper = []string{light}
		}
		t.Run(mode, func(t *testing.T) {
			t.Run("exit", func(t *testing.T) {
				h, evil := newEvilHarness(t, strings.HasSuffix(mode, "cgroup"), reaper...)
				r := h.submit(t, "mode:exit")
				done := h.wait(t, r.ID, 30*time.Second)
				if done.Status != runs.Succeeded {
					t.Fatalf("run %s %+v", done.Status, done.Error)
				}
				h.waitFor(t, r.ID, runs.EventMessageCompleted, "ready")
				evil.AssertGone(t, 30*time.Second)
			})
			t.Run("cancel", func(t *testing.T) {
				h, evil := newEvilHarness(t, strings.HasSuffix(mode, "cgroup"), reaper...)
				r := h.submit(t, "mode:hang")
				h.waitFor(t, r.ID, runs.EventMessageCompleted, "ready")
				evil.WaitUp(t, time.Minute)
				if _, err := h.sup.Cancel(context.Background(), r.ID); err != nil {
					t.Fatal(err)
				}
				done := h.wait(t, r.ID, 30*time.Second)
				if done.Status != runs.Cancelled || done.Exit == nil || done.Exit.Signal != "SIGKILL" {
					t.Fatalf("run %s %+v, exit %+v", done.Status, done.Error, done.Exit)
				}
				evil.AssertGone(t, 30*time.Second)
			})
			t.Run("timeout", func(t *testing.T) {
				h, evil := newEvilHarness(t, strings.HasSuffix(mode, "cgroup"), reaper...)
				r, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "mode:hang", TimeoutSeconds: 3})
				if err != nil {
					t.Fatal(err)
				}
				h.waitFor(t, r.ID, runs.EventMessageCompleted, "ready")
				evil.WaitUp(t, time.Minute)
				close(h.deadline)
				done := h.wait(t, r.ID, 30*time.Second)
				if done.Status != runs.TimedOut {
					t.Fatalf("run %s %+v", done.Status, done.Error)
				}
				evil.AssertGone(t, 30*time.Second)
			})
			t.Run("shutdown", func(t *testing.T) {
				h, evil := newEvilHarness(t, strings.HasSuffix(mode, "cgroup"), reaper...)
				r := h.submit(t, "mode:hang")
				h.waitFor(t, r.ID, runs.EventMessageCompleted, "ready")
				evil.WaitUp(t, time.Minute)
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				_ = h.sup.Shutdown(ctx) // the run outlasts the grace: an error, and the point
				evil.AssertGone(t, 30*time.Second)
				if done, _ := h.store.GetRun(context.Background(), r.ID); done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.Interrupted {
					t.Fatalf("run after shutdown: %s %+v", done.Status, done.Error)
				}
			})
		})
	}
}

// TestEvilAgentThatKillsItsReaper kills its reaper with SIGKILL once its
// tree is up: the reaper's one escape. The run's cgroup still takes every
// process at the run's end; with the reaper alone, what cleared its
// environment and detached is out of reach, as the package says.
func TestEvilAgentThatKillsItsReaper(t *testing.T) {
	t.Run("cgroup", func(t *testing.T) {
		h, evil := newEvilHarness(t, true)
		r := h.submit(t, "mode:killreaper")
		done := h.wait(t, r.ID, 30*time.Second)
		if done.Status != runs.Failed || done.Exit == nil || done.Exit.Signal != "SIGKILL" {
			t.Fatalf("run %s %+v, exit %+v", done.Status, done.Error, done.Exit)
		}
		h.waitFor(t, r.ID, runs.EventMessageCompleted, "ready")
		evil.AssertGone(t, 30*time.Second)
	})
	t.Run("reaper", func(t *testing.T) {
		h, evil := newEvilHarness(t, false)
		r := h.submit(t, "mode:killreaper")
		h.wait(t, r.ID, 30*time.Second)
		h.waitFor(t, r.ID, runs.EventMessageCompleted, "ready")
		if len(evil.Alive()) == 0 {
			t.Fatal("nothing survived the reaper's death without a cgroup; the package doc overstates what escapes")
		}
	})
}
