// Package proctreetest builds and watches the evil agent of
// internal/proctree/testdata/evil for the tests of the packages that
// contain a run's processes: the agent that ignores SIGTERM, clears its
// environment, detaches and respawns.
package proctreetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Evil is one evil agent tree of a test.
type Evil struct {
	// Bin is the evil binary.
	Bin string
	// Marker is in the command line of every process of the tree.
	Marker string
	// Dir receives a file per role of the tree once it runs.
	Dir string

	lifetime time.Duration
}

// Build compiles the evil agent into a temporary directory and returns it
// with a fresh marker. Every process it starts exits by itself within
// lifetime, and the test's cleanup kills whatever of it is left.
func Build(t testing.TB, lifetime time.Duration) *Evil {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "testdata", "evil")
	bin := filepath.Join(t.TempDir(), "evil")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the evil agent: %v\n%s", err, out)
	}
	e := &Evil{Bin: bin, Marker: "evil-" + uuid.NewString(), Dir: t.TempDir()}
	e.lifetime = lifetime
	t.Cleanup(e.killAll(t))
	return e
}

// killAll returns the cleanup that kills whatever of the tree is left. It
// stops the processes before it kills them: the respawner forks between a
// scan and the kills, however slowly a loaded machine scans, but a
// stopped one forks no more, so rounds of stopping converge. Every
// process exits by itself within lifetime: one alive past it (and a
// margin) is a leak.
func (e *Evil) killAll(t testing.TB) func() {
	return func() {
		deadline := time.Now().Add(e.lifetime + 30*time.Second)
		stopped := map[int]bool{}
		for pids := e.Alive(); len(pids) > 0; pids = e.Alive() {
			if time.Now().After(deadline) {
				t.Errorf("evil processes alive past their lifetime of %s: %s", e.lifetime, describe(pids))
				return
			}
			fresh := false
			for _, pid := range pids {
				if !stopped[pid] {
					_ = syscall.Kill(pid, syscall.SIGSTOP)
					stopped[pid], fresh = true, true
				}
			}
			if !fresh {
				// All of them stopped: none can fork now.
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				clear(stopped)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Args returns the evil agent's arguments for mode: "exit", "hang" or
// "killreaper" (see the program's doc).
func (e *Evil) Args(mode string) []string {
	exp := time.Now().Add(e.lifetime).Unix()
	return []string{"agent", e.Marker, e.Dir, mode, strconv.FormatInt(exp, 10)}
}

// Command returns a shell command line that runs the evil agent in mode,
// for a tool call.
func (e *Evil) Command(mode string) string {
	return e.Bin + " " + strings.Join(e.Args(mode), " ")
}

// Alive returns the pids of live processes whose command line holds the
// marker. A zombie has no command line left, so it is not counted: it is
// dead, only not yet reaped.
func (e *Evil) Alive() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, []byte(e.Marker)) {
			out = append(out, pid)
		}
	}
	return out
}

// WaitUp waits until the tree is whole: its detached grandchild, its
// respawner and a respawned child have all run, and at least four of its
// processes are alive.
func (e *Evil) WaitUp(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		up := true
		for _, role := range []string{"grandchild", "respawner", "child"} {
			if _, err := os.Stat(filepath.Join(e.Dir, role)); err != nil {
				up = false
			}
		}
		if up && len(e.Alive()) >= 4 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the evil tree did not come up within %s: %d processes", within, len(e.Alive()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// AssertGone waits until no process of the tree is alive, and fails the
// test with what is left once within has passed. The processes were
// killed already; within only covers the kernel's and the reaper's last
// steps on a busy machine.
func (e *Evil) AssertGone(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := e.Alive()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the evil tree outlived it: %s", len(left), describe(left))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// describe says what each pid is, for a failure message.
func describe(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if f := strings.Fields(string(stat)); len(f) > 4 {
			stat = []byte("state " + f[2] + " ppid " + f[3] + " pgid " + f[4])
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		fmt.Fprintf(&b, "\n  %d (%s): %s", pid, stat, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	}
	return b.String()
}

// ReaperLDFlags are the linker flags the light reaper ships with (see the
// Dockerfile): linked statically, so that a run's reaper maps no shared
// library and its memory is its own few pages.
const ReaperLDFlags = "-extldflags=-static"

// BuildReaper compiles the light reaper, cmd/agentgate-reaper, as it
// ships: with cgo, so that it reaps in C before the Go runtime starts, and
// linked statically.
func BuildReaper(t testing.TB) string {
	t.Helper()
	return buildReaper(t, "1", "-ldflags="+ReaperLDFlags)
}

// BuildReaperWithoutCgo compiles cmd/agentgate-reaper without cgo, as a
// build on a machine without a C compiler makes it: main then reaps with
// proctree.Reap.
func BuildReaperWithoutCgo(t testing.TB) string {
	t.Helper()
	return buildReaper(t, "0")
}

func buildReaper(t testing.TB, cgo string, flags ...string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "..", "cmd", "agentgate-reaper")
	bin := filepath.Join(t.TempDir(), "agentgate-reaper")
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, ".")...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the light reaper (CGO_ENABLED=%s): %v\n%s", cgo, err, out)
	}
	return bin
}

// WaitForFile waits until file exists: a process of a test says that it is
// ready that way.
func WaitForFile(t testing.TB, file string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(file); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within a minute", file)
		}
	}
}

// Status reads the numeric fields of /proc/PID/status, without their
// unit: Threads, VmRSS and RssAnon in KiB, and so on.
func Status(t testing.TB, pid int) map[string]int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB")); err == nil {
			out[k] = n
		}
	}
	return out
}

// StatFields reads /proc/PID/stat (pid may also be "self", or
// "PID/task/TID" for a thread) and returns its fields after the command's
// name, which is in parentheses and may hold spaces: the state is [0],
// the niceness [16]. It reports false when the process is gone.
func StatFields(pid string) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, false
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])), true
}

// Nice reads the niceness of process or thread pid (see StatFields), and
// whether it is still there to read.
func Nice(t testing.TB, pid string) (int, bool) {
	t.Helper()
	fields, ok := StatFields(pid)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatalf("/proc/%s/stat: niceness %q", pid, fields[16])
	}
	return n, true
}
