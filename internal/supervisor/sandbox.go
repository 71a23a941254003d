package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// Sandbox confines an agent's processes to what its run's Permission
// allows, the same way for every CLI: the CLI's own permission flags are a
// second fence, not the only one. internal/sandbox implements it with
// bubblewrap. Without a Sandbox (Config.Sandbox nil) only the CLI enforces
// Permission.
type Sandbox interface {
	// Wrap returns the argv that runs argv inside the run's confinement.
	Wrap(c Confinement, argv []string) ([]string, error)
	// Enforcement names what enforces Permission besides the CLI, for
	// /v1/agents ("bubblewrap").
	Enforcement() string
}

// Confinement is what one run's agent may see and write.
type Confinement struct {
	RunID      string
	Permission runs.Permission
	// Dir is the run's directory: writable under WorkspaceWrite and
	// Full, read-only under ReadOnly.
	Dir string
	// Home is the agent's home, where its login and sessions live:
	// writable.
	Home string
	// TempDir is the run's own temporary directory (its TMPDIR):
	// writable, and removed when the run ends.
	TempDir string
	// Network, when set, gives the run a network namespace of its own
	// (only lo), and starts the CLI under the shim so that the gateway's
	// egress proxy is its only way out. Nil: the host's network.
	Network *NetConfinement
}

// NetConfinement is how a run with a network namespace of its own reaches
// out: through the listener the shim hands the gateway (see netns).
type NetConfinement struct {
	// Shim is the binary that runs netns.RunShim when given
	// netns.ShimArg; "" gives the run no way out at all (policy none).
	Shim string
	// Socket is the netns.Handoff's path, inside the run's TempDir.
	Socket string
}

// sandboxExit undoes what bubblewrap does to a CLI killed by a signal: it
// exits 128+n itself, as a shell would. n from 1 to 15 (SIGHUP to
// SIGTERM, the signals that kill: SIGKILL, SIGSEGV, SIGABRT, SIGPIPE…) is
// read back as the signal, so that a run is classed killed_by_signal
// sandboxed or not. Higher codes stay codes: a CLI may exit 144 and above
// on purpose (Gemini CLI exits with the HTTP status mod 256), and the
// rarer signals above 15 cannot be told from those.
func sandboxExit(e runs.Exit) runs.Exit {
	if e.Signal == "" && e.Code > 128 && e.Code <= 128+int(syscall.SIGTERM) {
		return runs.Exit{Code: -1, Signal: signalName(syscall.Signal(e.Code - 128)), Reason: e.Reason}
	}
	return e
}

// runTempDir makes the run's own temporary directory (its TMPDIR) under
// Config.TempRoot, to be removed when the run ends. Every run gets one,
// sandboxed or not, so that TMPDIR means the same for every run: a run's
// files never meet another's, and a CLI that treats its home differently
// when it lies under TMPDIR (Codex refuses to make its helper aliases
// there, and then cannot run its tools under a bubblewrap older than 0.9)
// finds its home outside it.
func (s *Supervisor) runTempDir(t *task) (string, error) {
	root := s.cfg.TempRoot
	if root == "" {
		root = os.TempDir()
	}
	tmp, err := os.MkdirTemp(root, "agentgate-run-"+t.run.ID+"-")
	if err != nil {
		return "", fmt.Errorf("make the run's temporary directory: %w", err)
	}
	return tmp, nil
}

// confine returns argv wrapped in the run's confinement, whose temporary
// directory is tmp, and whether argv was wrapped at all (Full runs
// unconfined).
func (s *Supervisor) confine(t *task, argv []string, tmp string, net *NetConfinement) (wrapped []string, confined bool, err error) {
	c := Confinement{RunID: t.run.ID, Permission: t.inv.Spec.Permission, TempDir: tmp, Network: net}
	if c.Dir, err = filepath.Abs(t.inv.Dir); err == nil {
		c.Home, err = filepath.Abs(t.inv.Home)
	}
	if err != nil {
		return nil, false, err
	}
	if c.Permission == "" {
		c.Permission = runs.WorkspaceWrite
	}
	wrapped, err = s.cfg.Sandbox.Wrap(c, argv)
	if err != nil {
		return nil, false, err
	}
	return wrapped, c.Permission != runs.Full || net != nil, nil
}

// confined points the session's kill of an interrupted turn's tools
// (Interaction.KillToolsOnInterrupt) at the sandbox's init: the process
// whose first child is the CLI, as the reaper is without a sandbox. pid is
// the process the run started (the reaper, or the sandbox itself); the
// sandbox's init is the first process below it that is pid 1 of a PID
// namespace of its own. It waits for that process to appear, at most
// until ctx ends or the process is gone; meanwhile the session keeps the
// pid it was started with.
func (ss *session) confined(ctx context.Context, pid int, log *zap.Logger) {
	deadline := time.Now().Add(30 * time.Second)
	delay := 5 * time.Millisecond
	for {
		if init, ok := namespaceInit(pid); ok {
			ss.mu.Lock()
			ss.agentPID, ss.reaped = init, true
			ss.mu.Unlock()
			return
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil || ctx.Err() != nil || time.Now().After(deadline) {
			log.Debug("no sandbox init found below the agent process", zap.Int("pid", pid))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// namespaceInit returns the first descendant of pid, breadth first, that is
// pid 1 of a PID namespace below pid's.
func namespaceInit(pid int) (int, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(stat); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	queue := slices.Clone(children[pid])
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err == nil && nsInit(status) {
			return p, true
		}
		queue = append(queue, children[p]...)
	}
	return 0, false
}

// parentOf reads the ppid from a /proc/<pid>/stat line: the fourth field,
// counted after the command's closing parenthesis (a command may hold
// spaces and parentheses).
func parentOf(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// nsInit reports whether /proc/<pid>/status describes pid 1 of a nested
// PID namespace: its NSpid line lists more than one pid, the last being 1.
func nsInit(status []byte) bool {
	for l := range strings.SplitSeq(string(status), "\n") {
		rest, ok := strings.CutPrefix(l, "NSpid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		return len(f) > 1 && f[len(f)-1] == "1"
	}
	return false
}
