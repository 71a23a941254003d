package proctree_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// reapers returns the two binaries a gateway may run its agents under:
// its own (this test binary plays it, see TestMain) and the light reaper,
// built for the test.
func reapers(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{"gateway": os.Args[0], "light": proctreetest.BuildReaper(t)}
}

// startReaper starts reaper running argv as the supervisor does, marked
// with run id's cookie, and in g when g is not nil.
func startReaper(t *testing.T, reaper, id string, g *proctree.Cgroup, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(reaper, proctree.ReaperArgs(argv)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), proctree.Cookie(id)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: proctree.DeathSignal}
	if g != nil {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, g.FD()
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// exitCode waits for cmd and returns its exit code.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

// assertDead fails the test when process pid is alive.
func assertDead(t *testing.T, pid int, what string) {
	t.Helper()
	if err := syscall.Kill(pid, 0); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("%s (%d) outlived its reaper", what, pid)
	}
}

// readPid reads the pid a process of the test wrote to file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("no pid in %q", b)
	}
	return pid
}

// TestLightReaper runs the reaper tests against the light reaper,
// cmd/agentgate-reaper, and the gateway's own binary alike: the grandchild
// that clears its environment and leaves the session dies with the run,
// the agent's exit code comes back, an evil tree that exits leaves
// nothing, and one that hangs dies with a gateway killed by SIGKILL.
func TestLightReaper(t *testing.T) {
	for name, reaper := range reapers(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("reap", func(t *testing.T) {
				pidFile := filepath.Join(t.TempDir(), "pid")
				cmd := startReaper(t, reaper, uuid.NewString(), nil, "/bin/sh", "-c",
					`env -i setsid sh -c 'echo $$ > `+pidFile+`.new && mv `+pidFile+`.new `+pidFile+`; exec sleep 60' & while [ ! -s `+pidFile+` ]; do sleep 0.01; done; exit 3`)
				if code := exitCode(t, cmd); code != 3 {
					t.Fatalf("exit code %d, want the shell's 3", code)
				}
				assertDead(t, readPid(t, pidFile), "the escaped grandchild")
			})
			t.Run("signal", func(t *testing.T) {
				cmd := startReaper(t, reaper, uuid.NewString(), nil, "/bin/sh", "-c", "kill -KILL $$")
				if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the reaper ended with %v, want the agent's SIGKILL", err)
				}
			})
			t.Run("evil exits", func(t *testing.T) {
				evil := proctreetest.Build(t, 2*time.Minute)
				cmd := startReaper(t, reaper, uuid.NewString(), nil, append([]string{evil.Bin}, evil.Args("exit")...)...)
				if code := exitCode(t, cmd); code != 0 {
					t.Fatalf("exit code %d, want the evil agent's 0", code)
				}
				evil.AssertGone(t, 5*time.Second)
			})
			t.Run("forwards", func(t *testing.T) {
				// SIGINT goes to the agent, which exits 5 on it; SIGTERM
				// to the agent's group, where a child of the agent's
				// marks that it got it, and the agent exits 6 once it
				// sees the mark (7 if it does not within 10 s).
				dir := t.TempDir()
				agent := `trap 'exit 5' INT; ` +
					`trap 'i=0; while [ ! -e ` + dir + `/child-term ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; [ -e ` + dir + `/child-term ] && exit 6; exit 7' TERM; ` +
					`sh -c 'trap "touch ` + dir + `/child-term; exit 0" TERM; touch ` + dir + `/child; while :; do sleep 0.05; done' & ` +
					`while [ ! -e ` + dir + `/child ]; do sleep 0.01; done; touch ` + dir + `/ready; while :; do sleep 0.05; done`
				for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 5, syscall.SIGTERM: 6} {
					for _, f := range []string{"ready", "child", "child-term"} {
						_ = os.Remove(filepath.Join(dir, f))
					}
					cmd := startReaper(t, reaper, uuid.NewString(), nil, "/bin/sh", "-c", agent)
					proctreetest.WaitForFile(t, filepath.Join(dir, "ready"))
					if err := cmd.Process.Signal(sig); err != nil {
						t.Fatal(err)
					}
					if code := exitCode(t, cmd); code != want {
						t.Fatalf("after %v: exit code %d, want the agent's %d", sig, code, want)
					}
					_, err := os.Stat(filepath.Join(dir, "child-term"))
					if got := err == nil; got != (sig == syscall.SIGTERM) {
						t.Fatalf("after %v: the agent's child got SIGTERM: %v", sig, got)
					}
				}
			})
			t.Run("death signal while the gateway lives", func(t *testing.T) {
				// DeathSignal from anyone but a dying gateway is ignored.
				// SIGTERM sent after it is taken after it (the lower
				// signal first, in both reapers), and reaches the agent,
				// which is still there to exit 6 on it.
				ready := filepath.Join(t.TempDir(), "ready")
				cmd := startReaper(t, reaper, uuid.NewString(), nil, "/bin/sh", "-c",
					`trap 'exit 6' TERM; touch `+ready+`; while :; do sleep 0.05; done`)
				proctreetest.WaitForFile(t, ready)
				if err := cmd.Process.Signal(proctree.DeathSignal); err != nil {
					t.Fatal(err)
				}
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if code := exitCode(t, cmd); code != 6 {
					t.Fatalf("exit code %d, want the agent's 6: the death signal killed a live gateway's run", code)
				}
			})
			t.Run("gateway dies", func(t *testing.T) {
				evil := proctreetest.Build(t, 2*time.Minute)
				killGatewayRunning(t, evil, "reaper:", "PROCTREE_TEST_REAPER="+reaper)
				evil.AssertGone(t, 10*time.Second)
			})
		})
	}
}

// TestLightReaperIsSmall: the light reaper, built as it ships, reaps in C
// before the Go runtime starts: while its agent runs it is one thread and
// holds well under 2 MiB, where the Go runtime alone takes several threads
// and more than 2 MiB. A build that lost its C (cgo off, the constructor
// gone) fails here, not only in a benchmark.
func TestLightReaperIsSmall(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := startReaper(t, proctreetest.BuildReaper(t), uuid.NewString(), nil, "/bin/sh", "-c", "touch "+ready+"; exec sleep 60")
	proctreetest.WaitForFile(t, ready)
	st := proctreetest.Status(t, cmd.Process.Pid)
	if st["Threads"] != 1 {
		t.Errorf("the light reaper runs %d threads, want 1: the Go runtime started", st["Threads"])
	}
	if st["VmRSS"] == 0 || st["VmRSS"] >= 2048 {
		t.Errorf("the light reaper holds %d KiB resident, want under 2 MiB", st["VmRSS"])
	}
	if st["RssAnon"] >= 512 {
		t.Errorf("the light reaper's own memory is %d KiB, want under 512", st["RssAnon"])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("the reaper ended with %v, want the agent's SIGTERM", err)
	}
}

// TestLightReaperWithoutCgo: built where there is no C compiler, the light
// reaper is proctree.Reap behind main, and still reaps.
func TestLightReaperWithoutCgo(t *testing.T) {
	bin := proctreetest.BuildReaperWithoutCgo(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := startReaper(t, bin, uuid.NewString(), nil, "/bin/sh", "-c",
		`setsid sh -c 'echo $$ > `+pidFile+`.new && mv `+pidFile+`.new `+pidFile+`; exec sleep 60' & while [ ! -s `+pidFile+` ]; do sleep 0.01; done; exit 3`)
	if code := exitCode(t, cmd); code != 3 {
		t.Fatalf("exit code %d, want the shell's 3", code)
	}
	assertDead(t, readPid(t, pidFile), "the escaped grandchild")
	out, err := exec.Command(bin).CombinedOutput()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), "usage: agentgate-reaper") {
		t.Fatalf("by hand: %v %q, want the usage and 125", err, out)
	}
}

// TestReaperExecFailures: an agent that cannot be started gives 127 when
// there is no such program and 126 when there is one that cannot run, with
// a line on stderr, from either reaper; the supervisor reads the codes as
// a shell's.
func TestReaperExecFailures(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, reaper := range reapers(t) {
		for argv0, want := range map[string]int{"no-such-agent-anywhere": 127, "/no/such/agent": 127, notExec: 126} {
			cmd := exec.Command(reaper, proctree.ReaperArgs([]string{argv0, "--flag"})...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != want {
				t.Errorf("%s, %s: %v, want exit %d", name, argv0, err, want)
			}
			if !strings.Contains(string(out), "agentgate reaper: ") || !strings.Contains(string(out), argv0) {
				t.Errorf("%s, %s: stderr %q names neither the reaper nor the agent", name, argv0, out)
			}
		}
	}
}

// TestLightReaperUsage: started by hand, without the reaper argument, the
// light reaper says what it is and runs nothing.
func TestLightReaperUsage(t *testing.T) {
	bin := proctreetest.BuildReaper(t)
	out, err := exec.Command(bin, "/bin/echo", "ran").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Fatalf("exit %v, want 125", err)
	}
	if !strings.Contains(string(out), "usage: agentgate-reaper") || strings.Contains(string(out), "ran") {
		t.Fatalf("output %q", out)
	}
}

func TestReaperBeside(t *testing.T) {
	dir := t.TempDir()
	gateway := filepath.Join(dir, "agentgate")
	light := filepath.Join(dir, proctree.ReaperName)
	if err := os.WriteFile(gateway, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := proctree.ReaperBeside(gateway); got != gateway {
		t.Fatalf("no light reaper: %s, want the gateway's binary", got)
	}
	if err := os.WriteFile(light, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := proctree.ReaperBeside(gateway); got != gateway {
		t.Fatalf("a light reaper that is not executable: %s, want the gateway's binary", got)
	}
	if err := os.Chmod(light, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := proctree.ReaperBeside(gateway); got != light {
		t.Fatalf("ReaperBeside = %s, want %s", got, light)
	}
	if err := os.Remove(light); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(light, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := proctree.ReaperBeside(gateway); got != gateway {
		t.Fatalf("a directory of the reaper's name: %s, want the gateway's binary", got)
	}
}

// TestReaperKnowsItsRunCgroup: a reaper started in its run's cgroup (named
// by the run's id, and not the gateway's) kills what is left by the
// cgroup's list of processes; in any other cgroup it scans /proc.
func TestReaperKnowsItsRunCgroup(t *testing.T) {
	cgs := openCgroups(t, replicaName(t), false)
	id := uuid.NewString()
	g, err := cgs.New(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove(context.Background())
	ask := func(g *proctree.Cgroup, cookie string) string {
		cmd := exec.Command(os.Args[0])
		cmd.Env = []string{"PROCTREE_TEST_OWN_CGROUP=1", proctree.Cookie(cookie)}
		if g != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	if got, want := ask(g, id), g.Path()+" true"; got != want {
		t.Errorf("in the run's cgroup: %q, want %q", got, want)
	}
	if got := ask(g, "another-run"); got != "false" {
		t.Errorf("in a cgroup of another name: %q, want false", got)
	}
	if got := ask(nil, id); got != "false" {
		t.Errorf("in the gateway's own cgroup: %q, want false", got)
	}
}

// TestReaperInRunCgroup runs each reaper in its run's cgroup, as the
// supervisor does with PROCESS_ISOLATION=cgroup: an evil tree that exits
// leaves nothing, and a privileged process that moved itself to another
// cgroup (so that the cgroup's list no longer has it) is still found below
// the reaper and killed before the reaper exits.
func TestReaperInRunCgroup(t *testing.T) {
	cgs := openCgroups(t, replicaName(t), false)
	for name, reaper := range reapers(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("evil exits", func(t *testing.T) {
				id := uuid.NewString()
				g, err := cgs.New(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Remove(context.Background())
				evil := proctreetest.Build(t, 2*time.Minute)
				cmd := startReaper(t, reaper, id, g, append([]string{evil.Bin}, evil.Args("exit")...)...)
				if code := exitCode(t, cmd); code != 0 {
					t.Fatalf("exit code %d, want the evil agent's 0", code)
				}
				evil.AssertGone(t, 5*time.Second)
				if left, err := g.Procs(); err != nil || len(left) != 0 {
					t.Fatalf("left in the run's cgroup: %v %v", left, err)
				}
			})
			t.Run("leaves the cgroup", func(t *testing.T) {
				id := uuid.NewString()
				g, err := cgs.New(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Remove(context.Background())
				elsewhere := filepath.Join(cgs.Dir(), "elsewhere-"+id)
				if err := os.Mkdir(elsewhere, 0o755); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(elsewhere)
				pidFile := filepath.Join(t.TempDir(), "pid")
				cmd := startReaper(t, reaper, id, g, "/bin/sh", "-c",
					`env -i setsid sh -c 'echo $$ > `+elsewhere+`/cgroup.procs && echo $$ > `+pidFile+`.new && mv `+pidFile+`.new `+pidFile+` && exec sleep 60' & while [ ! -s `+pidFile+` ]; do sleep 0.01; done; exit 3`)
				if code := exitCode(t, cmd); code != 3 {
					t.Fatalf("exit code %d, want the shell's 3", code)
				}
				assertDead(t, readPid(t, pidFile), "the process that left the run's cgroup")
			})
		})
	}
}

// TestReaperEmptiesItsCgroupWithNoChildLeft: an agent that exits leaving
// no process below the reaper still leaves the reaper a cgroup to empty:
// a process of it that the reaper did not start is killed, not left to
// run (or stopped, were its children to end between the rounds that stop
// and then kill it).
func TestReaperEmptiesItsCgroupWithNoChildLeft(t *testing.T) {
	cgs := openCgroups(t, replicaName(t), false)
	for name, reaper := range reapers(t) {
		id := uuid.NewString()
		g, err := cgs.New(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		stranger := startIn(t, g, []string{"sleep", "60"})
		cmd := startReaper(t, reaper, id, g, "/bin/sh", "-c", "exit 0")
		if code := exitCode(t, cmd); code != 0 {
			t.Fatalf("%s: exit code %d", name, code)
		}
		died := make(chan struct{})
		go func() { _ = stranger.Wait(); close(died) }()
		select {
		case <-died:
		case <-time.After(30 * time.Second):
			t.Errorf("%s: a process of the run's cgroup lived on 30 s after the reaper, which had no child left", name)
			_ = stranger.Process.Kill()
			<-died
		}
		if sig := stranger.ProcessState.Sys().(syscall.WaitStatus).Signal(); sig != syscall.SIGKILL {
			t.Errorf("%s: the stranger died of %v, want the reaper's SIGKILL", name, sig)
		}
		g.Remove(context.Background())
	}
}

// TestReaperKillsByItsCgroup: in its run's cgroup, a reaper kills what the
// cgroup lists, whether or not it is below the reaper, without reading all
// of /proc; started with another run's cookie, the cgroup is not its run's,
// and it kills only what is below it.
func TestReaperKillsByItsCgroup(t *testing.T) {
	cgs := openCgroups(t, replicaName(t), false)
	for name, reaper := range reapers(t) {
		for _, own := range []bool{true, false} {
			id := uuid.NewString()
			g, err := cgs.New(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			// A process of the cgroup that the reaper did not start.
			stranger := startIn(t, g, []string{"sleep", "60"})
			cookie := id
			if !own {
				cookie = "another-run"
			}
			cmd := startReaper(t, reaper, cookie, g, "/bin/sh", "-c", "sleep 60 & exit 0")
			if code := exitCode(t, cmd); code != 0 {
				t.Fatalf("%s: exit code %d", name, code)
			}
			if !own {
				// Left alone, the stranger is neither stopped nor
				// killed: a SIGKILL the reaper sent is the exit
				// status whatever comes after it, and a SIGTERM of
				// the test's own, with SIGCONT for a stop, is what it
				// then dies of.
				if st, ok := proctreetest.StatFields(strconv.Itoa(stranger.Process.Pid)); !ok || st[0] == "T" || st[0] == "t" {
					t.Errorf("%s in a cgroup not its run's: it stopped (or killed) a process not below it", name)
				}
				_ = stranger.Process.Signal(syscall.SIGTERM)
				_ = stranger.Process.Signal(syscall.SIGCONT)
			}
			died := make(chan struct{})
			go func() { _ = stranger.Wait(); close(died) }()
			select {
			case <-died:
			case <-time.After(30 * time.Second):
				t.Errorf("%s: a process of the cgroup lived on 30 s after the reaper (own cgroup: %v)", name, own)
				_ = stranger.Process.Kill()
				<-died
			}
			if sig := stranger.ProcessState.Sys().(syscall.WaitStatus).Signal(); own && sig != syscall.SIGKILL {
				t.Errorf("%s in its run's cgroup: the stranger died of %v, want the reaper's SIGKILL", name, sig)
			} else if !own && sig != syscall.SIGTERM {
				t.Errorf("%s in a cgroup not its run's: the stranger died of %v, want the test's SIGTERM: the reaper killed a process not below it", name, sig)
			}
			g.Remove(context.Background())
		}
	}
}

// TestLightReaperImportsLittle: the light reaper is light because it
// imports nothing but this package, the network shim's (netns), x/sys and
// the standard library; a
// dependency of the gateway's (the store, the API, metrics, logging) that
// crept in would initialise itself in every run's reaper again.
func TestLightReaperImportsLittle(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "cmd", "agentgate-reaper")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{
		"github.com/agentgate/agentgate/cmd/agentgate-reaper":          true,
		"github.com/agentgate/agentgate/internal/proctree":             true,
		"github.com/agentgate/agentgate/internal/proctree/lightreaper": true,
		"github.com/agentgate/agentgate/internal/netns":                true, // the shim's Go, for builds without cgo
		"github.com/agentgate/agentgate/internal/netns/lightshim":      true,
		"golang.org/x/sys/unix":                                        true,
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/agentgate/agentgate/internal/proctree") {
		t.Fatalf("go list names no proctree among the reaper's dependencies: %q", out)
	}
	for _, dep := range deps {
		if !allowed[dep] {
			t.Errorf("the light reaper imports %s", dep)
		}
	}
}

// TestReaperNice: with a niceness, either reaper starts the agent at it,
// and all the agent starts inherits it, while the reaper keeps the
// gateway's, to kill promptly; without one the agent has the gateway's.
func TestReaperNice(t *testing.T) {
	base, _ := proctreetest.Nice(t, "self")
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
field() { cut -d' ' -f19 "$1"; }
echo "agent $(field /proc/$$/stat)"
sh -c 'echo "child $(cut -d" " -f19 /proc/$$/stat)"'
for task in /proc/$PPID/task/*; do echo "reaper $(field $task/stat)"; done
`), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, reaper := range reapers(t) {
		for _, nice := range []int{0, 7} {
			want := max(base, nice)
			cmd := exec.Command(reaper, proctree.ReaperArgsNice(nice, []string{script})...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s, nice %d: %v: %s", name, nice, err, out)
			}
			seen := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				who, value, _ := strings.Cut(line, " ")
				got, err := strconv.Atoi(value)
				if err != nil {
					t.Fatalf("%s, nice %d: line %q", name, nice, line)
				}
				seen[who] = true
				switch {
				case who == "reaper" && got != base && (name == "light" || os.Geteuid() == 0):
					// An unprivileged Go reaper cannot take its
					// thread's niceness back (see Reap).
					t.Errorf("%s, nice %d: a thread of the reaper at %d, want the gateway's %d", name, nice, got, base)
				case who != "reaper" && got != want:
					t.Errorf("%s, nice %d: the %s at %d, want %d", name, nice, who, got, want)
				}
			}
			if !seen["agent"] || !seen["child"] || !seen["reaper"] {
				t.Fatalf("%s, nice %d: output %q lacks a line", name, nice, out)
			}
		}
	}
}
