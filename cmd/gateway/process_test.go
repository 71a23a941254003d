package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestGatewayKilledLeavesNoProcess kills a gateway with SIGKILL while the
// real claude CLI runs the evil agent as its tool: a tree that ignores
// SIGTERM, clears its environment, detaches and respawns. Under the reaper
// alone the tree dies with the gateway. With a cgroup per run it dies with
// the gateway too; and when its reaper is killed as well, so that nothing
// of the run is left to act, the gateway's next start on the same data
// kills it.
func TestGatewayKilledLeavesNoProcess(t *testing.T) {
	t.Run("reaper", func(t *testing.T) {
		settings := gatewayEnv(t, t.TempDir())
		evil := evilInWorkspace(t, settings)
		mock := startMock(t, anthropic.ToolTurn(evil.Command("hang"), "The command finished."))
		settings["AGENTGATE_PROCESS_ISOLATION"] = "reaper"
		g, cmd := startGatewayProcess(t, settings, mockCreds(mock))
		r := g.post(t, `{"agent":"claude","prompt":"run the long command","cwd":"evil"}`)
		evil.WaitUp(t, 60*time.Second)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		evil.AssertGone(t, 30*time.Second)
		assertNoProcessesWithin(t, r.ID, 30*time.Second)
	})
	t.Run("cgroup", func(t *testing.T) {
		settings := gatewayEnv(t, t.TempDir())
		evil := evilInWorkspace(t, settings)
		mock := startMock(t, anthropic.ToolTurn(evil.Command("hang"), "The command finished."))
		settings["AGENTGATE_PROCESS_ISOLATION"] = "cgroup"
		g, cmd := startGatewayProcess(t, settings, mockCreds(mock))
		// Unconfined, files and network alike (a network policy wraps a
		// full run too): the sandbox's own PID namespace would die with
		// the killed reaper (bwrap's --die-with-parent) and take the tree
		// with it, and this test is of the cgroup's sweep at restart.
		r := g.post(t, `{"agent":"claude","prompt":"run the long command","permission":"full","network":"open","cwd":"evil"}`)
		evil.WaitUp(t, 60*time.Second)
		killGatewayAndReaper(t, cmd, r.ID)
		if len(evil.Alive()) == 0 {
			t.Fatal("the evil tree died with its gateway and reaper; this test no longer shows the restart's sweep")
		}
		again := startGateway(t, settings, mockCreds(mock))
		evil.AssertGone(t, 30*time.Second)
		assertNoProcessesWithin(t, r.ID, 30*time.Second)
		if done := again.get(t, r.ID); done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.Interrupted {
			t.Fatalf("run after restart: %s %+v", done.Status, done.Error)
		}
	})
	t.Run("sandbox", func(t *testing.T) {
		// Sandboxed, the tree lives in a PID namespace of its own whose
		// bwrap dies with the reaper: a reaper stopped and then killed
		// with its gateway takes the tree with it, cgroup or not.
		settings := gatewayEnv(t, t.TempDir())
		evil := evilInWorkspace(t, settings)
		mock := startMock(t, anthropic.ToolTurn(evil.Command("hang"), "The command finished."))
		settings["AGENTGATE_PROCESS_ISOLATION"] = "reaper"
		g, cmd := startGatewayProcess(t, settings, mockCreds(mock))
		r := g.post(t, `{"agent":"claude","prompt":"run the long command","cwd":"evil"}`)
		evil.WaitUp(t, 60*time.Second)
		killGatewayAndReaper(t, cmd, r.ID)
		evil.AssertGone(t, 30*time.Second)
		assertNoProcessesWithin(t, r.ID, 30*time.Second)
	})
}

// killGatewayAndReaper stops the run's reaper before the gateway dies, so
// that it cannot act on the gateway's death, kills the gateway with
// SIGKILL, and then kills the reaper: nothing of the run is left to act.
func killGatewayAndReaper(t *testing.T, gateway *exec.Cmd, runID string) {
	t.Helper()
	reaper := reaperOf(t, runID)
	if err := syscall.Kill(reaper, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := gateway.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gateway.Wait()
	if err := syscall.Kill(reaper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// evilInWorkspace builds the evil agent and has it report its roles in
// the directory "evil" of the workspace root, which its runs work in
// (cwd "evil"): a place each run may write, sandboxed or not, that the
// test reads from outside. (A run's home is its own, and the agent's base
// home is hidden from it.)
func evilInWorkspace(t *testing.T, settings map[string]string) *proctreetest.Evil {
	t.Helper()
	evil := proctreetest.Build(t, 3*time.Minute)
	evil.Dir = filepath.Join(settings["AGENTGATE_DATA_DIR"], "workspaces", "evil")
	if err := os.MkdirAll(evil.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return evil
}

// reaperOf returns the pid of the run's reaper: the process of the run
// whose command line starts with the reaper argument.
func reaperOf(t *testing.T, id string) int {
	t.Helper()
	pids, err := proctree.New().Find(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if args := bytes.Split(cmdline, []byte{0}); len(args) > 1 && string(args[1]) == proctree.ReaperArg {
			return pid
		}
	}
	t.Fatalf("no reaper among the run's processes %v", pids)
	return 0
}

// assertNoProcessesWithin waits until no process carries the run's cookie:
// the processes were killed already, and within only covers their last
// steps on a busy machine.
func assertNoProcessesWithin(t *testing.T, id string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		pids, err := proctree.New().Find(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of run %s left: %v", len(pids), id, pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
