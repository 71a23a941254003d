package runs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

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
	Permission Permission
	// Dir is the run's directory: writable under WorkspaceWrite and
	// Full, read-only under ReadOnly.
	Dir string
	// Home is the agent's home, where its login and sessions live:
	// writable.
	Home string
	// TempDir is the run's own temporary directory (its TMPDIR):
	// writable, and removed when the run ends.
	TempDir string
}

// confine makes the run's temporary directory under Config.TempRoot and
// returns argv wrapped in the run's confinement, with that directory (to
// be removed when the run ends, also when err is set) and whether argv was
// wrapped at all (Full runs unconfined). Every level gets the temporary
// directory, so that TMPDIR means the same for every run.
func (s *Supervisor) confine(t *task, argv []string) (wrapped []string, tmp string, confined bool, err error) {
	root := s.cfg.TempRoot
	if root == "" {
		root = os.TempDir()
	}
	tmp, err = os.MkdirTemp(root, "agentgate-run-"+t.run.ID+"-")
	if err != nil {
		return nil, "", false, fmt.Errorf("make the run's temporary directory: %w", err)
	}
	c := Confinement{RunID: t.run.ID, Permission: t.inv.Spec.Permission, TempDir: tmp}
	if c.Dir, err = filepath.Abs(t.inv.Dir); err == nil {
		c.Home, err = filepath.Abs(t.agent.Home)
	}
	if err != nil {
		return nil, tmp, false, err
	}
	if c.Permission == "" {
		c.Permission = WorkspaceWrite
	}
	wrapped, err = s.cfg.Sandbox.Wrap(c, argv)
	if err != nil {
		return nil, tmp, false, err
	}
	return wrapped, tmp, c.Permission != Full, nil
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
