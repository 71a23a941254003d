//go:build cgo && linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentgate/agentgate/internal/netns"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
)

// TestGatewayBinaryIsALightReaper: a gateway built with cgo that runs its
// agents under its own binary (no agentgate-reaper beside it, as with go
// run) reaps in C before the Go runtime and its every package start: while
// the agent runs, its reaper is one thread and holds little memory of its
// own. This test binary is such a gateway: it imports what main imports.
func TestGatewayBinaryIsALightReaper(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(os.Args[0], proctree.ReaperArgs([]string{"/bin/sh", "-c", "touch " + ready + "; exec sleep 60"})...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: proctree.DeathSignal}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	proctreetest.WaitForFile(t, ready)
	st := proctreetest.Status(t, cmd.Process.Pid)
	t.Logf("the gateway's binary as a reaper: %d thread(s), %d KiB resident, %d KiB of it anonymous", st["Threads"], st["VmRSS"], st["RssAnon"])
	if st["Threads"] != 1 {
		t.Errorf("%d threads, want 1: the Go runtime started", st["Threads"])
	}
	if st["RssAnon"] == 0 || st["RssAnon"] >= 512 {
		t.Errorf("%d KiB of its own memory, want under 512", st["RssAnon"])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("the reaper ended with %v, want the agent's SIGTERM", err)
	}
}

// TestGatewayBinaryIsALightShim: a gateway built with cgo that starts its
// confined CLIs under its own binary runs their network shim in C, before
// the Go runtime and every package here start. GODEBUG=inittrace=1 makes
// a Go runtime that starts say so on stderr: the C shim, refusing its
// arguments, says its one line and nothing else.
func TestGatewayBinaryIsALightShim(t *testing.T) {
	cmd := exec.Command(os.Args[0], netns.ShimArg, "-socket=/nonexistent/handoff.sock", "/bin/true")
	cmd.Env = []string{"GODEBUG=inittrace=1"}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 125 {
		t.Fatalf("the shim ended with %v, want exit 125; it said: %s", err, out)
	}
	if !strings.HasPrefix(string(out), "agentgate netshim: usage") || strings.Count(string(out), "\n") != 1 {
		t.Errorf("the shim said %q, want its one usage line and no Go runtime's init trace", out)
	}
}
