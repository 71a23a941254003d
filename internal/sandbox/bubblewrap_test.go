package sandbox

import (
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

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// bwrapPath is where the Debian package installs bwrap; a machine without
// it fails these tests (scripts/test.sh installs it).
const bwrapPath = "/usr/bin/bwrap"

func newBwrap(t *testing.T, hide ...string) *Bubblewrap {
	t.Helper()
	if _, err := os.Stat(bwrapPath); err != nil {
		t.Fatalf("bubblewrap is not installed (apt-get install bubblewrap): %v", err)
	}
	b, err := New(Options{Bwrap: bwrapPath, Hide: hide})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// confinement returns a run's directories, each made under a fresh root.
func confinement(t *testing.T, perm runs.Permission) supervisor.Confinement {
	t.Helper()
	root := t.TempDir()
	c := supervisor.Confinement{RunID: "run-1", Permission: perm,
		Dir: filepath.Join(root, "ws", "run-1"), Home: filepath.Join(root, "home"), TempDir: filepath.Join(root, "tmp")}
	for _, d := range []string{c.Dir, c.Home, c.TempDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// shell runs script under sh in c, and returns its combined output and
// exit code.
func shell(t *testing.T, b *Bubblewrap, c supervisor.Confinement, script string, env ...string) (string, int) {
	t.Helper()
	argv, err := b.Wrap(c, []string{"/bin/sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "TMPDIR=" + c.TempDir, "HOME=" + c.Home}, env...)
	cmd.Dir = c.Dir
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %v: %v", argv, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestWrapArgv(t *testing.T) {
	hidden := t.TempDir()
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newBwrap(t, hidden, keys, "/nonexistent/agentgate-hidden")
	argv := []string{"/usr/bin/claude", "-p", "hi"}

	full := confinement(t, runs.Full)
	if got, err := b.Wrap(full, argv); err != nil || !slices.Equal(got, argv) {
		t.Errorf("full: %v, %v; want argv unchanged", got, err)
	}
	for _, perm := range []runs.Permission{runs.ReadOnly, runs.WorkspaceWrite} {
		c := confinement(t, perm)
		got, err := b.Wrap(c, argv)
		if err != nil {
			t.Fatal(err)
		}
		line := strings.Join(got, " ")
		if !strings.HasSuffix(line, " -- "+b.env+" --default-signal=INT,TERM /usr/bin/claude -p hi") {
			t.Errorf("%s: argv does not end with the CLI's: %s", perm, line)
		}
		if got[0] != b.env || got[1] != "--ignore-signal=INT,TERM" || got[2] != bwrapPath {
			t.Errorf("%s: argv starts %v", perm, got[:3])
		}
		for _, want := range []string{
			"--die-with-parent", "--unshare-pid --unshare-ipc", "--ro-bind / / --dev /dev --proc /proc",
			"--tmpfs " + hidden, "--ro-bind /dev/null " + keys,
			"--bind " + c.Home + " " + c.Home, "--bind " + c.TempDir + " " + c.TempDir,
			"--remount-ro " + hidden, "--chdir " + c.Dir,
		} {
			if !strings.Contains(line, want) {
				t.Errorf("%s: no %q in %s", perm, want, line)
			}
		}
		if root := os.Geteuid() == 0; root != strings.Contains(line, "--cap-drop ALL --cap-add CAP_SETFCAP") {
			t.Errorf("%s: running as root is %v, but the capabilities flags are: %s", perm, root, line)
		}
		dirBind := "--bind " + c.Dir + " " + c.Dir
		if perm == runs.ReadOnly {
			dirBind = "--ro-bind " + c.Dir + " " + c.Dir
		}
		idx := func(s string) int { return strings.Index(line, s) }
		if idx(dirBind) < 0 {
			t.Errorf("%s: no %q in %s", perm, dirBind, line)
		}
		// Hide first, bind the run's own back on top, then seal the
		// hiding tmpfs: mounts apply in order.
		if !(idx("--ro-bind / /") < idx("--tmpfs "+hidden) && idx("--tmpfs "+hidden) < idx("--bind "+c.Home) &&
			idx(dirBind) < idx("--remount-ro "+hidden)) {
			t.Errorf("%s: mounts out of order: %s", perm, line)
		}
		if strings.Contains(line, "nonexistent") {
			t.Errorf("%s: a missing hidden path was mounted: %s", perm, line)
		}
		if strings.Contains(line, "--unshare-net") || strings.Contains(line, "--unshare-all") {
			t.Errorf("%s: the network must stay reachable: %s", perm, line)
		}
	}
	if _, err := b.Wrap(supervisor.Confinement{Permission: runs.WorkspaceWrite, Dir: "rel", Home: "/", TempDir: "/"}, argv); err == nil {
		t.Error("a relative run dir was accepted")
	}
	if _, err := b.Wrap(confinement(t, "sideways"), argv); err == nil {
		t.Error("an unknown permission was accepted")
	}
}

func TestWorkspaceWrite(t *testing.T) {
	b := newBwrap(t)
	c := confinement(t, runs.WorkspaceWrite)
	outside := filepath.Join(filepath.Dir(t.TempDir()), "outside-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { os.Remove(outside) })
	out, code := shell(t, b, c, `set -e
echo ws > ./out.txt
echo home > "$HOME/home.txt"
echo tmp > "$TMPDIR/tmp.txt"
if echo evil > "$X"; then echo WROTE-OUTSIDE; fi
exit 0`, "X="+outside)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for p, want := range map[string]string{
		filepath.Join(c.Dir, "out.txt"): "ws", filepath.Join(c.Home, "home.txt"): "home", filepath.Join(c.TempDir, "tmp.txt"): "tmp",
	} {
		if b, err := os.ReadFile(p); err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	if strings.Contains(out, "WROTE-OUTSIDE") || !strings.Contains(out, "Read-only file system") {
		t.Errorf("writing %s outside the run: %s", outside, out)
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists: %v", outside, err)
	}
}

func TestReadOnly(t *testing.T) {
	b := newBwrap(t)
	c := confinement(t, runs.ReadOnly)
	if err := os.WriteFile(filepath.Join(c.Dir, "given.txt"), []byte("given"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := shell(t, b, c, `cat given.txt; echo; if echo x > ./out.txt; then echo WROTE-DIR; fi; echo home > "$HOME/h" && echo tmp > "$TMPDIR/t" && echo OTHERS-OK`)
	if code != 0 || !strings.Contains(out, "given") || strings.Contains(out, "WROTE-DIR") ||
		!strings.Contains(out, "Read-only file system") || !strings.Contains(out, "OTHERS-OK") {
		t.Errorf("exit %d: %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "out.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("out.txt in a read_only run's dir: %v", err)
	}
}

func TestHiddenPaths(t *testing.T) {
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "runs.db"), []byte("SECRET-STORE-CONTENT"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(t.TempDir(), "api-keys")
	if err := os.WriteFile(keys, []byte("SECRET-KEY-CONTENT"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newBwrap(t, data, keys)
	c := confinement(t, runs.WorkspaceWrite)
	// The run's home under the hidden data dir, as the gateway keeps it.
	c.Home = filepath.Join(data, "agents", "claude")
	if err := os.MkdirAll(c.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	out, code := shell(t, b, c, `ls -a "$D"; cat "$D/runs.db"; cat "$K"; echo home > "$HOME/h" && echo HOME-OK;
if echo x > "$D/new"; then echo WROTE-HIDDEN; fi; grep -r SECRET "$T" --include=runs.db 2>/dev/null; exit 0`,
		// The search stays in this test's own directories: another
		// suite on the machine has files of the same name, unhidden.
		"D="+data, "K="+keys, "HOME="+c.Home, "T="+filepath.Dir(data))
	if code != 0 || strings.Contains(out, "SECRET-") || !strings.Contains(out, "HOME-OK") || strings.Contains(out, "WROTE-HIDDEN") {
		t.Errorf("exit %d: %s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(c.Home, "h")); err != nil || strings.TrimSpace(string(b)) != "home" {
		t.Errorf("the home under a hidden dir was not writable: %q, %v", b, err)
	}
}

// TestCannotUnhide is the escape the gateway's root user would otherwise
// allow: a root process keeping its capabilities in the sandbox's mount
// namespace can unmount the tmpfs that hides a path, or remount / rw. It
// keeps CAP_SETFCAP alone (bit 31), and a user namespace it makes with it
// cannot undo the sandbox's mounts either: they are locked.
func TestCannotUnhide(t *testing.T) {
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("SECRET-UNDER-TMPFS"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newBwrap(t, data)
	c := confinement(t, runs.WorkspaceWrite)
	probe := filepath.Join(filepath.Dir(t.TempDir()), "remount-probe-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { os.Remove(probe) })
	caps := "CapEff:\t0000000000000000"
	if os.Geteuid() == 0 {
		caps = "CapEff:\t0000000080000000"
	}
	out, _ := shell(t, b, c, `umount "$D"; umount -l "$D"; cat "$D/f"; mount -o remount,bind,rw / && echo x > "$P" && echo REMOUNTED;
unshare -Urm sh -c 'umount "$D"; umount -l "$D"; cat "$D/f"; mount -o remount,bind,rw / && echo x > "$P" && echo REMOUNTED'
grep CapEff /proc/self/status; exit 0`, "D="+data, "P="+probe)
	if strings.Contains(out, "SECRET-UNDER-TMPFS") || strings.Contains(out, "REMOUNTED") || !strings.Contains(out, caps) {
		t.Errorf("the sandbox could be undone: %s", out)
	}
}

func TestProcIsolated(t *testing.T) {
	// A process of the same user with a secret in its environment, as the
	// gateway has its keys: outside the sandbox its environ is readable.
	secret := "agentgate-test-secret-" + strconv.Itoa(os.Getpid())
	gw := exec.Command("sleep", "600")
	gw.Env = []string{"AGENTGATE_TEST_GATEWAY_SECRET=" + secret}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = gw.Process.Kill()
		_ = gw.Wait()
	})
	pid := strconv.Itoa(gw.Process.Pid)
	// Until the child has exec'd, its environ is its parent's: wait for
	// the exec, which a loaded machine may delay.
	for deadline := time.Now().Add(time.Minute); ; {
		env, err := os.ReadFile("/proc/" + pid + "/environ")
		if err == nil && strings.Contains(string(env), secret) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in gateway's environment is not readable from outside: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b := newBwrap(t)
	c := confinement(t, runs.WorkspaceWrite)
	out, code := shell(t, b, c, `cat /proc/$G/environ && echo READ-GATEWAY; cat /proc/$T/environ && echo READ-TEST;
cat /proc/*/environ | tr '\0' '\n'; ls /proc | grep -c '^[0-9]'; exit 0`, "G="+pid, "T="+strconv.Itoa(os.Getpid()))
	if code != 0 || strings.Contains(out, secret) || strings.Contains(out, "READ-") {
		t.Errorf("exit %d: another process's environment was readable: %s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// sh, ls, grep and bwrap's init: a handful, never the host's.
	if n, err := strconv.Atoi(lines[len(lines)-1]); err != nil || n > 8 {
		t.Errorf("the sandbox sees %q processes: %s", lines[len(lines)-1], out)
	}
}

// TestGroupSignal checks that the SIGTERM the supervisor sends to the
// run's process group reaches the CLI, which can stop gracefully, rather
// than killing bwrap and the whole sandbox at once.
func TestGroupSignal(t *testing.T) {
	b := newBwrap(t)
	c := confinement(t, runs.WorkspaceWrite)
	ready := filepath.Join(c.Dir, "ready")
	argv, err := b.Wrap(c, []string{"/bin/sh", "-c", `trap 'echo graceful > stopped; exit 3' TERM; : > ready; while :; do sleep 0.05; done`})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = c.Dir, []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the confined shell never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("exit = %v (code %d), want the shell's own 3", err, code)
	}
	if b, err := os.ReadFile(filepath.Join(c.Dir, "stopped")); err != nil || strings.TrimSpace(string(b)) != "graceful" {
		t.Errorf("the shell's trap did not run: %q, %v", b, err)
	}
}

func TestProbe(t *testing.T) {
	b := newBwrap(t, t.TempDir())
	if err := b.Probe(context.Background()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	// A "bwrap" that cannot sandbox: the probe says so, and why.
	fake := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad, err := New(Options{Bwrap: fake})
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Probe(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "No permissions to create new namespace") {
		t.Errorf("probe of a failing bwrap = %v", err)
	}
}

func TestNewMissing(t *testing.T) {
	_, err := New(Options{Bwrap: "/nonexistent/bwrap"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "bubblewrap") {
		t.Errorf("New with no bwrap = %v", err)
	}
	if _, err := New(Options{Bwrap: bwrapPath, Hide: []string{"relative/data"}}); err == nil {
		t.Error("a relative hidden path was accepted")
	}
}

// TestCommandPathWithEquals: env takes a word with "=" before its command
// for a variable to set, so a CLI installed under such a path must still
// start, with its arguments, under the sandbox.
func TestCommandPathWithEquals(t *testing.T) {
	b := newBwrap(t)
	c := confinement(t, runs.WorkspaceWrite)
	dir := filepath.Join(t.TempDir(), "rate=200")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(dir, "cli")
	if err := os.WriteFile(cli, []byte("#!/bin/sh\necho \"args:$#:$1:$2\"\ntrap - TERM\nkill -TERM $$\necho SURVIVED-TERM\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	argv, err := b.Wrap(c, []string{cli, "-p", "two words"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + c.TempDir, "HOME=" + c.Home}
	cmd.Dir = c.Dir
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "args:2:-p:two words") {
		t.Errorf("the CLI under %s did not run with its arguments: %s", dir, out)
	}
	// SIGTERM is back to its default for the CLI, as for any other path.
	if strings.Contains(string(out), "SURVIVED-TERM") {
		t.Errorf("SIGTERM is ignored by the CLI: %s", out)
	}
}
