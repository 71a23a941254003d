package proctree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// freshID is a run id of this test's own: processes are found by their
// run's id, so a fixed one would have two copies of the suite running at
// once on one machine find, and kill, each other's processes.
func freshID(t *testing.T, prefix string) string {
	return prefix + "-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + uuid.NewString()[:8]
}

// startTree starts a shell marked with id's cookie that runs one child in
// its own session (as agent CLIs start tool shells) and one in its group.
func startTree(t *testing.T, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `setsid sh -c 'sleep 60; :' & sleep 60 & wait`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), Cookie(id)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = New().Kill(context.Background(), id); _ = cmd.Wait() })
	return cmd
}

func waitCount(t *testing.T, tr *Tree, id string, want int) []int {
	t.Helper()
	// A guard, not a wait: it returns as soon as the count is reached,
	// and a loaded machine (two suites on two cores) may take seconds to
	// start a few shells.
	deadline := time.Now().Add(time.Minute)
	for {
		pids, err := tr.Find(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) >= want || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKillReachesOtherSessions(t *testing.T) {
	tr := New()
	id := freshID(t, "test")
	cmd := startTree(t, id)
	// sh, the setsid'd sh and its sleep, and the group's sleep.
	pids := waitCount(t, tr, id, 4)
	if len(pids) < 4 {
		t.Fatalf("found %d processes of the run, want at least 4: %v", len(pids), pids)
	}
	// A process-group kill alone leaves the other session running: the
	// reason this package exists.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	left := waitCount(t, tr, id, 1)
	if len(left) == 0 {
		t.Fatal("process-group kill took the setsid child too; the test no longer shows the problem")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Kill(ctx, id); err != nil {
		t.Fatal(err)
	}
	if pids, _ := tr.Find(id); len(pids) != 0 {
		t.Fatalf("%d processes left after Kill: %v", len(pids), pids)
	}
}

func TestFindIgnoresOtherRuns(t *testing.T) {
	tr := New()
	a, b := freshID(t, "run-a"), freshID(t, "run-b")
	startTree(t, a)
	waitCount(t, tr, a, 4)
	if pids, _ := tr.Find(b); len(pids) != 0 {
		t.Fatalf("found %d processes for a run that started none", len(pids))
	}
	all, err := tr.FindAny()
	if err != nil {
		t.Fatal(err)
	}
	if len(all[a]) < 4 {
		t.Fatalf("FindAny = %v, want run-a's processes", all)
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in              string
		ppid            int
		zombie, stopped bool
		ok              bool
	}{
		{"12 (bash) S 7 12 12 0", 7, false, false, true},
		{"12 (a) b) (c) Z 1 12 12", 1, true, false, true},
		{"12 (evil) T 3 12 12", 3, false, true, true},
		{"12 (traced) t 3 12 12", 3, false, true, true},
		{"12 (x", 0, false, false, false},
		{"12 (x) R", 0, false, false, false},
	} {
		p, ok := parseStat(12, []byte(tc.in))
		if ok != tc.ok || (ok && (p.ppid != tc.ppid || p.zombie != tc.zombie || p.stopped != tc.stopped)) {
			t.Errorf("parseStat(%q) = %+v, %v", tc.in, p, ok)
		}
	}
}

// TestReap runs a shell under Reap the way the supervisor runs an agent:
// its grandchild, which clears its environment and leaves the session, is
// killed when the shell exits, and the shell's exit code comes back.
func TestReap(t *testing.T) {
	if os.Getenv("PROCTREE_TEST_REAP") == "" {
		// Reap sets this process as a subreaper; do it in a child.
		cmd := exec.Command(os.Args[0], "-test.run=^TestReap$")
		cmd.Env = append(os.Environ(), "PROCTREE_TEST_REAP=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	code := Reap([]string{"/bin/sh", "-c", `env -i setsid sh -c 'echo $$ > ` + pidFile + `; exec sleep 60' & sleep 0.2; exit 3`})
	if code != 3 {
		t.Fatalf("exit code %d, want the shell's 3", code)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid == 0 {
		t.Fatalf("no pid in %q", b)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the escaped grandchild %d outlived its reaper", pid)
	}
}

func TestKillDescendantsSparesTheAgent(t *testing.T) {
	for _, spareFirst := range []bool{false, true} {
		t.Run(strconv.FormatBool(spareFirst), func(t *testing.T) {
			tr := New()
			id := freshID(t, "test")
			// The root plays a reaper whose first child is the agent: the
			// agent runs a tool, and the root holds an orphan of its own.
			// Both shells wait on stdin, so that they outlive their
			// children (a background job's stdin would be /dev/null
			// without the explicit redirection).
			cmd := exec.Command("/bin/sh", "-c", `exec 9<&0; sh -c 'sleep 63 & read y' <&9 & sleep 64 & read x`)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), Cookie(id)}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tr.Kill(context.Background(), id); stdin.Close(); _ = cmd.Wait() })
			if pids := waitCount(t, tr, id, 4); len(pids) < 4 {
				t.Fatalf("found %d processes, want 4: %v", len(pids), pids)
			}
			procs, err := tr.list()
			if err != nil {
				t.Fatal(err)
			}
			var children []int
			for _, p := range procs {
				if p.ppid == cmd.Process.Pid {
					children = append(children, p.pid)
				}
			}
			agent, ok := oldest(tr.procDir, children)
			if !ok {
				t.Fatal("no child of the root")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tr.KillDescendants(ctx, cmd.Process.Pid, spareFirst); err != nil {
				t.Fatal(err)
			}
			want := map[int]bool{cmd.Process.Pid: true}
			if spareFirst {
				want[agent] = true
			}
			left, _ := tr.Find(id)
			got := map[int]bool{}
			for _, pid := range left {
				got[pid] = true
			}
			if len(got) != len(want) {
				t.Fatalf("left %v, want %v", left, want)
			}
			for pid := range want {
				if !got[pid] {
					t.Fatalf("left %v, want %v", left, want)
				}
			}
		})
	}
}
