package proctree_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
)

// openCgroups opens the cgroups of a replica of the test's own; this
// machine, like CI, must have cgroup v2 writable.
func openCgroups(t *testing.T, replica string, freeze bool) *proctree.Cgroups {
	t.Helper()
	cgs, err := proctree.OpenCgroups(context.Background(), proctree.CgroupOptions{Replica: replica, Freeze: freeze})
	if err != nil {
		t.Fatalf("cgroups are needed for this test (cgroup v2, as root): %v", err)
	}
	t.Cleanup(func() {
		if err := cgs.Close(context.Background()); err != nil {
			t.Errorf("close cgroups: %v", err)
		}
		if _, err := os.Stat(cgs.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the gateway's cgroup directory %s is left: %v", cgs.Dir(), err)
		}
	})
	return cgs
}

func replicaName(t *testing.T) string {
	return "test-" + uuid.NewString()[:8]
}

// startIn starts argv with its first instruction in g, as the supervisor
// starts an agent.
func startIn(t *testing.T, g *proctree.Cgroup, argv []string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: g.FD()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// TestCgroupKillsEvilTree runs the evil agent in a run cgroup: every one
// of its processes, detached and respawning as they are, is inside, and
// killing the cgroup leaves none, with cgroup.kill and with freezing.
func TestCgroupKillsEvilTree(t *testing.T) {
	for _, freeze := range []bool{false, true} {
		name := "kill"
		if freeze {
			name = "freeze"
		}
		t.Run(name, func(t *testing.T) {
			cgs := openCgroups(t, replicaName(t), freeze)
			g, err := cgs.New(context.Background(), uuid.NewString())
			if err != nil {
				t.Fatal(err)
			}
			evil := proctreetest.Build(t, 2*time.Minute)
			cmd := startIn(t, g, append([]string{evil.Bin}, evil.Args("hang")...))
			evil.WaitUp(t, 30*time.Second)
			in, err := g.Procs()
			if err != nil {
				t.Fatal(err)
			}
			for _, pid := range evil.Alive() {
				if !slices.Contains(in, pid) && syscall.Kill(pid, 0) == nil {
					t.Errorf("process %d of the run is outside its cgroup %v", pid, in)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := g.Remove(ctx); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			evil.AssertGone(t, 5*time.Second)
			if _, err := os.Stat(g.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the run's cgroup is left: %v", err)
			}
		})
	}
}

// TestCgroupsSweepDeadGateway kills a gateway with SIGKILL while its run's
// evil tree runs, without a reaper: the tree lives on, and the next
// gateway of the same replica kills it as it opens its cgroups. A gateway
// of the replica that is alive keeps its runs.
func TestCgroupsSweepDeadGateway(t *testing.T) {
	replica := replicaName(t)
	live := openCgroups(t, replica, false)
	g, err := live.New(context.Background(), uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	sleeper := startIn(t, g, []string{"/bin/sh", "-c", "read x"})

	evil := proctreetest.Build(t, 2*time.Minute)
	killGatewayRunning(t, evil, "cgroup:"+replica+":")
	// Its agent dies of Pdeathsig; what it detached does not.
	if len(evil.Alive()) == 0 {
		t.Fatal("the evil tree died with its gateway; this test no longer shows the sweep's work")
	}

	again := openCgroups(t, replica, false)
	evil.AssertGone(t, 5*time.Second)
	entries, err := os.ReadDir(filepath.Dir(again.Dir()))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(filepath.Dir(again.Dir()), e.Name()))
		}
	}
	slices.Sort(dirs)
	want := []string{live.Dir(), again.Dir()}
	slices.Sort(want)
	if !slices.Equal(dirs, want) {
		t.Fatalf("the replica's cgroups after the sweep: %v, want the live gateways' %v", dirs, want)
	}
	if syscall.Kill(sleeper.Process.Pid, 0) != nil {
		t.Fatal("the sweep killed a run of a gateway that is alive")
	}
}

// TestReaperKillsTreeWhenGatewayDies kills a gateway with SIGKILL while
// its run's evil tree runs under a reaper, without a cgroup: the reaper
// learns of it and kills the whole tree at once.
func TestReaperKillsTreeWhenGatewayDies(t *testing.T) {
	evil := proctreetest.Build(t, 2*time.Minute)
	killGatewayRunning(t, evil, "reaper:")
	evil.AssertGone(t, 10*time.Second)
}

// killGatewayRunning starts a test gateway (this binary, see
// PROCTREE_TEST_GATEWAY) in mode running evil's hanging tree, with env
// added to its environment, waits until the tree is up, and kills the
// gateway with SIGKILL.
func killGatewayRunning(t *testing.T, evil *proctreetest.Evil, mode string, env ...string) {
	t.Helper()
	gw := exec.Command(os.Args[0])
	gw.Env = append(os.Environ(), "PROCTREE_TEST_GATEWAY="+mode+evil.Bin+" "+strings.Join(evil.Args("hang"), " "))
	gw.Env = append(gw.Env, env...)
	gw.Stderr = os.Stderr
	out, err := gw.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Process.Kill(); gw.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "started\n" {
		t.Fatalf("the gateway said %q", line)
	}
	evil.WaitUp(t, 30*time.Second)
	if err := gw.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = gw.Wait()
}

// TestKillDescendantsInCgroup ends an interrupted turn's tools the way a
// session does with a cgroup: the root plays the reaper, its first child
// the agent with a tool below it, and the root also holds an orphan. What
// is below the root dies, the agent is spared, and both are left running.
func TestKillDescendantsInCgroup(t *testing.T) {
	cgs := openCgroups(t, replicaName(t), false)
	g, err := cgs.New(context.Background(), "run-"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Remove(context.Background()) })
	cmd := exec.Command("/bin/sh", "-c", `exec 9<&0; sh -c 'sleep 63 & read y' <&9 & sleep 64 & read x`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: g.FD()}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	var procs []int
	for deadline := time.Now().Add(time.Minute); len(procs) < 4; {
		if time.Now().After(deadline) {
			t.Fatalf("the cgroup holds %v, want 4 processes", procs)
		}
		time.Sleep(5 * time.Millisecond)
		if procs, err = g.Procs(); err != nil {
			t.Fatal(err)
		}
	}
	children := childrenOf(cmd.Process.Pid)
	if len(children) != 2 {
		t.Fatalf("the root has children %v, want the agent and an orphan", children)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proctree.New().KillDescendantsIn(ctx, g, cmd.Process.Pid, true); err != nil {
		t.Fatal(err)
	}
	left, err := g.Procs()
	if err != nil {
		t.Fatal(err)
	}
	// The agent is the child that runs the tool.
	agent := -1
	for _, c := range children {
		if cl, _ := os.ReadFile("/proc/" + c + "/cmdline"); strings.Contains(string(cl), "read y") {
			agent, _ = strconv.Atoi(c)
		}
	}
	slices.Sort(left)
	want := []int{cmd.Process.Pid, agent}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("left in the cgroup %v, want the root and the agent %v", left, want)
	}
}
