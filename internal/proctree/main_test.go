package proctree

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/netns"
	"github.com/agentgate/agentgate/internal/testproc"
)

// gatewayEnv makes the test binary play a gateway that runs the argv in
// the variable's value (space-separated) as a run, and is then killed by
// its test: with "reaper:" first under a reaper, with "cgroup:REPLICA:"
// first in a run cgroup of its own.
const gatewayEnv = "PROCTREE_TEST_GATEWAY"

// reaperEnv names the reaper binary a fake gateway (gatewayEnv) runs its
// run under; empty means this binary, as the gateway's own.
const reaperEnv = "PROCTREE_TEST_REAPER"

// ownCgroupEnv makes the test binary print what ownCgroup says of the
// cgroup it was started in, with its parent as the gateway.
const ownCgroupEnv = "PROCTREE_TEST_OWN_CGROUP"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ReaperArg {
		testproc.Exit(Reap(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == netns.ShimArg {
		testproc.Exit(netns.RunShim(os.Args[2:])) // a sandboxed run's network shim
	}
	if os.Getenv(ownCgroupEnv) != "" {
		dir, ok := ownCgroup(os.Getppid())
		fmt.Println(dir, ok)
		testproc.Exit(0)
	}
	if spec := os.Getenv(gatewayEnv); spec != "" {
		testproc.Exit(fakeGateway(spec))
	}
	os.Exit(m.Run())
}

// fakeGateway starts one run as the supervisor does, says "started" and
// waits to be killed.
func fakeGateway(spec string) int {
	runtime.LockOSThread()
	kind, rest, _ := strings.Cut(spec, ":")
	var cmd *exec.Cmd
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	switch kind {
	case "reaper":
		argv := strings.Fields(rest)
		reaper := os.Getenv(reaperEnv)
		if reaper == "" {
			reaper = os.Args[0]
		}
		cmd = exec.Command(reaper, ReaperArgs(argv)...)
		attr.Pdeathsig = DeathSignal
	case "cgroup":
		replica, line, _ := strings.Cut(rest, ":")
		cgs, err := OpenCgroups(context.Background(), CgroupOptions{Replica: replica})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		g, err := cgs.New(context.Background(), "run")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		argv := strings.Fields(line)
		cmd = exec.Command(argv[0], argv[1:]...)
		attr.UseCgroupFD, attr.CgroupFD = true, g.FD()
	default:
		return 2
	}
	cmd.SysProcAttr = attr
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("started")
	time.Sleep(time.Hour)
	return 0
}
