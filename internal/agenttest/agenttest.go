package agenttest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentgate/agentgate/internal/runs"
)

// ClaudeBinEnv names the variable that points the tests at a claude binary.
const ClaudeBinEnv = "AGENTGATE_CLAUDE_BIN"

// InstallHint tells a person how to get the pinned agent CLIs.
const InstallHint = "run scripts/install-agents.sh from the repository root (it installs the pinned CLIs into tools/agents)"

// ClaudeBin returns the claude binary the real-CLI tests run (see Bin).
func ClaudeBin(t testing.TB) string {
	t.Helper()
	return Bin(t, "claude")
}

// Bin returns the binary of the agent CLI called name that the real-CLI
// tests run: $AGENTGATE_<NAME>_BIN, else
// <repo>/tools/agents/node_modules/.bin/<name>, else name on PATH. It
// fails the test, never skips it, when there is none: a missing CLI must
// not look like a pass.
func Bin(t testing.TB, name string) string {
	t.Helper()
	env := "AGENTGATE_" + strings.ToUpper(name) + "_BIN"
	if p := os.Getenv(env); p != "" {
		if isExecutable(p) {
			return p
		}
		t.Fatalf("$%s=%q is not an executable file; %s", env, p, InstallHint)
		return ""
	}
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, "tools", "agents", "node_modules", ".bin", name)
		if isExecutable(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	t.Fatalf("the %s CLI is not installed: %s, or set $%s", name, InstallHint, env)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// RepoRoot returns the directory holding the module's go.mod, found by
// walking up from the working directory (a package directory under test).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/agentgate/agentgate\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("agenttest: go.mod of github.com/agentgate/agentgate not found above the working directory")
		}
		dir = parent
	}
}

// NoPhoneHomeEnv returns the variables that keep Claude Code from talking
// to anything but its model endpoint: telemetry, update checks, error
// reports and other non-essential traffic.
func NoPhoneHomeEnv() []string {
	return []string{
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
}

// MinimalEnv returns the environment every agent process starts from in
// tests: a fixed PATH (the CLIs' tools need bash and perl), home, a UTF-8
// locale, and a TMPDIR of its own inside home (made here), as the gateway
// gives every run. Nothing of the test's own environment leaks in.
//
// The TMPDIR matters: a test's home is under the system's temporary
// directory, and Codex refuses to make its helper aliases in a home under
// TMPDIR; under a system bubblewrap older than 0.9 (Debian 12's 0.8.0),
// which lacks --argv0, it then cannot start its sandbox helper and every
// tool call fails.
func MinimalEnv(home string) []string {
	tmp := filepath.Join(home, ".tmp")
	_ = os.MkdirAll(tmp, 0o700) // a missing one fails the agent's own writes, visibly
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home,
		"LANG=C.UTF-8",
		"TMPDIR=" + tmp,
	}
}

// Proc is an agent process started by Start. Its stdout arrives line by
// line on Lines; Wait reaps it.
type Proc struct {
	cmd    *exec.Cmd
	stdout *os.File // read end of the stdout pipe
	lines  chan []byte
	stderr Buffer
	read   chan struct{} // closed when stdout reached EOF
	once   sync.Once

	mu   sync.Mutex
	out  [][]byte
	exit runs.Exit
}

// stdoutGrace is how long Wait waits for stdout to end after the process
// exited: a tool process the agent left behind may hold the pipe open.
const stdoutGrace = 5 * time.Second

// Start runs bin with args in dir with exactly env, feeding stdin and then
// closing it. The process leads its own process group; the test's cleanup
// kills the group and reaps the process if the test did not Wait.
func Start(t testing.TB, bin string, args, env []string, dir string, stdin []byte) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	p := &Proc{cmd: cmd, stdout: pr, lines: make(chan []byte, 1024), read: make(chan struct{})}
	// An *os.File as Stdout: exec copies nothing and Wait does not wait
	// for the pipe to close, so a grandchild holding it cannot hang Wait.
	cmd.Stdout, cmd.Stderr = pw, &p.stderr
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		t.Fatalf("start %s: %v", bin, err)
	}
	go p.readLines(pr)
	t.Cleanup(func() {
		p.Kill()
		p.Wait()
	})
	return p
}

func (p *Proc) readLines(r io.Reader) {
	defer close(p.read)
	defer close(p.lines)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if l := bytes.TrimRight(line, "\r\n"); len(l) > 0 {
			p.mu.Lock()
			p.out = append(p.out, l)
			p.mu.Unlock()
			select {
			case p.lines <- l:
			default: // nobody is watching closely; Wait still has every line
			}
		}
		if err != nil {
			return
		}
	}
}

// Lines delivers stdout lines as they arrive, for a test that reacts to
// them (e.g. interrupts once a tool started); it is closed at EOF. A line
// may be dropped here when the test does not read; Wait returns them all.
func (p *Proc) Lines() <-chan []byte { return p.lines }

// Kill sends SIGKILL to the process group.
func (p *Proc) Kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// Signal sends sig to the process (not its group).
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Result is how an agent process ended.
type Result struct {
	Stdout [][]byte
	Stderr []byte
	Exit   runs.Exit
}

// Wait waits for the process to exit and its stdout to end, then returns
// every stdout line, stderr and the exit. It may be called more than once.
func (p *Proc) Wait() Result {
	p.once.Do(func() {
		err := p.cmd.Wait()
		select {
		case <-p.read:
		case <-time.After(stdoutGrace):
			p.stdout.Close()
			<-p.read
		}
		p.stdout.Close()
		p.mu.Lock()
		p.exit = exitOf(p.cmd.ProcessState, err)
		p.mu.Unlock()
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	return Result{Stdout: p.out, Stderr: p.stderr.Bytes(), Exit: p.exit}
}

// exitOf turns a process state into runs.Exit.
func exitOf(ps *os.ProcessState, err error) runs.Exit {
	if ps == nil {
		return runs.Exit{Code: -1, Reason: "wait: " + err.Error()}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return runs.Exit{Code: -1, Signal: unix.SignalName(ws.Signal())}
	}
	return runs.Exit{Code: ps.ExitCode()}
}

// Buffer is a bytes.Buffer safe for the writer goroutine exec starts
// and a reader.
// Buffer is a bytes.Buffer that a process may write (as its stderr) while
// a test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

// String returns what was written so far.
func (b *Buffer) String() string { return string(b.Bytes()) }

// ProcessesMatching returns the pids of live processes whose command line
// contains marker, for tests that check an agent left no tool process
// behind.
func ProcessesMatching(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// WaitGone polls until no process matches marker or the timeout passes,
// and returns the pids still alive. None must match twice in a row: a
// process in the middle of an exec shows no command line for a moment,
// and one look could miss it.
func WaitGone(marker string, timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	quiet := 0
	for {
		pids := ProcessesMatching(marker)
		if len(pids) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if quiet == 2 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WantEdited checks the file at path after an agent's edit tool was asked
// to change it: allowed, it holds after; denied, it is as it was: absent
// when before is nil (the tool would have created it), else before.
func WantEdited(t testing.TB, path string, allowed bool, before *string, after string) {
	t.Helper()
	got, err := os.ReadFile(path)
	switch {
	case allowed && string(got) != after:
		t.Errorf("allowed: %s = %q (%v), want %q", path, got, err, after)
	case !allowed && before == nil && !errors.Is(err, os.ErrNotExist):
		t.Errorf("denied: %s = %q (%v), want no file", path, got, err)
	case !allowed && before != nil && string(got) != *before:
		t.Errorf("denied: %s = %q (%v), want it unchanged, %q", path, got, err, *before)
	}
}
