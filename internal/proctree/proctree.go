// Package proctree finds and kills every process that belongs to one run,
// including the ones that left the run's process group and session, and
// those that outlive the gateway itself.
//
// Agent CLIs start tool shells in a session of their own (setsid), so a
// signal to the CLI's process group does not reach them, and when the CLI
// dies they are re-parented away from it. Three means, used together,
// keep a run's processes within reach.
//
// The cookie. The supervisor marks each run's process with an environment
// variable, which every descendant inherits, and finds the run's processes
// by scanning /proc for it, the way Jenkins' ProcessTreeKiller does.
// Descendants of a marked process are included too, so a child that
// cleared its environment is still found as long as its parent lives. A
// process that both clears its environment and detaches escapes it.
//
// The reaper (Reap). The agent runs below a reaper, which is its child
// subreaper: the light reaper, cmd/agentgate-reaper, when it is installed
// beside the gateway's binary, or else the gateway's own binary started
// again (ReaperBeside); both do the same. Whatever dies above a process
// of the run, the process is re-parented to the reaper, not to init. The
// agent has a
// process group of its own, so that a group signal, the agent's or the
// supervisor's, does not take the reaper down first. The reaper kills
// everything below it when the agent exits, and exits only once it has no
// child left, which, unlike a scan of /proc, proves nothing is below it
// (in a run's cgroup it finds what to kill by the cgroup's list of
// processes, so that its cost does not grow with the host's processes);
// the supervisor's last step of a stop kills everything below the reaper
// and then waits for the reaper rather than killing it; and when the
// gateway dies, even by SIGKILL, the reaper is told by its parent-death
// signal and kills everything below it. Every kill of a tree stops each
// process (SIGSTOP) before it kills it, so that a tree that forks as fast
// as it is killed cannot outrun the kill. It needs no
// privileges. What escapes it: a process of the run that kills the
// reaper (its orphans then go to init and are reached only by the cookie,
// if they kept it), and a process stopped in the kernel past a minute.
//
// The cgroup (Cgroups), where the machine allows it: cgroup v2 writable by
// the gateway, as root or in a delegated subtree, and a kernel with clone3
// CLONE_INTO_CGROUP (Linux 5.7) and cgroup.kill (5.14) or cgroup.freeze.
// Each run's first process is created inside a cgroup of the run's own,
// so every process of the run is in it from its first instruction,
// whatever it does to its session, group, parent or environment, and the
// run ends with the cgroup killed whole (at exit, cancel, timeout and
// shutdown alike) and removed once empty. A gateway that died leaves its
// runs' cgroups behind; the reaper kills their contents at once, and the
// next start of the same replica kills whatever is left (a run that also
// killed its reaper) and removes them. What escapes it: a privileged
// process of the run that moves itself to another cgroup and kills its
// reaper (the reaper takes an emigrant that is still its descendant; the
// supervisor no longer scans /proc for the cookie of a run whose cgroup it
// removed, so as not to pay a cost that grows with the host), and, after
// a gateway's death, anything left until the replica starts again.
package proctree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CookieVar is the environment variable that marks a run's processes.
const CookieVar = "AGENTGATE_RUN"

// Cookie returns the "KEY=value" environment entry that marks the
// processes of run id.
func Cookie(id string) string { return CookieVar + "=" + id }

// Tree scans a proc filesystem. The zero value is not usable; use New.
type Tree struct {
	procDir string
	self    int
}

// New returns a Tree over /proc.
func New() *Tree { return &Tree{procDir: "/proc", self: os.Getpid()} }

type proc struct {
	pid, ppid int
	zombie    bool
	// stopped is a process in a stop (SIGSTOP, or a tracer's): it runs
	// no instruction, so it neither forks nor exits, until continued or
	// killed.
	stopped bool
}

// Find returns the pids of live processes marked with run id's cookie and
// of every live descendant of a marked process. The calling process is
// never included.
func (t *Tree) Find(id string) ([]int, error) {
	return t.find(func(env []byte) bool { return hasCookie(env, Cookie(id)) })
}

// FindAny returns every live process carrying any run cookie, keyed by
// run id. It is used at startup to sweep processes left by a gateway that
// died.
func (t *Tree) FindAny() (map[string][]int, error) {
	out := map[string][]int{}
	procs, err := t.list()
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		if p.zombie || p.pid == t.self {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("%s/%d/environ", t.procDir, p.pid))
		if err != nil {
			continue
		}
		if id, ok := cookieValue(env); ok {
			out[id] = append(out[id], p.pid)
		}
	}
	return out, nil
}

func (t *Tree) find(marked func(env []byte) bool) ([]int, error) {
	procs, err := t.list()
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	zombie := map[int]bool{}
	var roots []int
	for _, p := range procs {
		if p.pid == t.self {
			continue
		}
		// A zombie is walked through, not counted: see descendants.
		children[p.ppid] = append(children[p.ppid], p.pid)
		if p.zombie {
			zombie[p.pid] = true
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("%s/%d/environ", t.procDir, p.pid))
		if err != nil {
			continue // exited meanwhile, or not ours to read
		}
		if marked(env) {
			roots = append(roots, p.pid)
		}
	}
	seen := map[int]bool{}
	var out []int
	var walk func(pid int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		if !zombie[pid] {
			out = append(out, pid)
		}
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out, nil
}

// list reads pid, ppid and state of every process.
func (t *Tree) list() ([]proc, error) {
	entries, err := os.ReadDir(t.procDir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.procDir, err)
	}
	procs := make([]proc, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", t.procDir, pid))
		if err != nil {
			continue
		}
		p, ok := parseStat(pid, stat)
		if ok {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// stats reads the processes pids from /proc, skipping those gone.
func (t *Tree) stats(pids []int) []proc {
	procs := make([]proc, 0, len(pids))
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", t.procDir, pid))
		if err != nil {
			continue
		}
		if p, ok := parseStat(pid, stat); ok {
			procs = append(procs, p)
		}
	}
	return procs
}

// parseStat reads state and ppid from /proc/PID/stat. The command name is
// in parentheses and may itself contain spaces and parentheses, so the
// fields are taken after the last ')'.
func parseStat(pid int, stat []byte) (proc, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return proc{}, false
	}
	fields := strings.Fields(string(stat[i+2:]))
	if len(fields) < 2 {
		return proc{}, false
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return proc{}, false
	}
	st := fields[0]
	return proc{pid: pid, ppid: ppid, zombie: st == "Z" || st == "X", stopped: st == "T" || st == "t"}, true
}

func hasCookie(env []byte, cookie string) bool {
	for _, kv := range bytes.Split(env, []byte{0}) {
		if string(kv) == cookie {
			return true
		}
	}
	return false
}

func cookieValue(env []byte) (string, bool) {
	prefix := []byte(CookieVar + "=")
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) {
			return string(kv[len(prefix):]), true
		}
	}
	return "", false
}

// Signal sends sig to every process of run id and returns how many it
// signalled.
func (t *Tree) Signal(id string, sig syscall.Signal) (int, error) {
	pids, err := t.Find(id)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err == nil {
			n++
		}
	}
	return n, nil
}

// ErrSurvivors is returned by Kill when processes were still alive when
// its context ended.
var ErrSurvivors = errors.New("processes survived SIGKILL")

// Kill sends SIGKILL to every process of run id, again and again, until
// none is left or ctx ends. A process may fork between a scan and the
// kill, so one pass is not enough.
func (t *Tree) Kill(ctx context.Context, id string) error {
	delay := 5 * time.Millisecond
	for {
		n, err := t.Signal(id, syscall.SIGKILL)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			left, _ := t.Find(id)
			return fmt.Errorf("%w: %d left of run %s", ErrSurvivors, len(left), id)
		case <-time.After(delay):
		}
		if delay < 100*time.Millisecond {
			delay *= 2
		}
	}
}

// KillDescendants kills every live descendant of pid, again and again,
// until none is left or ctx ends; pid itself is spared. Each process is
// stopped before it is killed (see freezer). With spareFirstChild, pid's
// oldest child is spared too, with its own descendants killed: pid is then
// a reaper (see Reap) whose first child is the agent. It ends a turn's
// tools while the agent lives on, for a CLI that does not stop them itself
// when a turn is interrupted.
//
// A scan of /proc is no snapshot: a process re-parented while it is read
// can be missed, so "none left" here is a strong hint, not proof. Below a
// reaper the proof is the reaper's own: it exits only once it has no
// child left (killTree).
func (t *Tree) KillDescendants(ctx context.Context, pid int, spareFirstChild bool) error {
	return t.killDescendants(ctx, pid, spareFirstChild, t.list)
}

// KillDescendantsIn is KillDescendants among the processes of cgroup g:
// each round reads g's cgroup.procs and those processes' stat, not all of
// /proc, so its cost does not grow with the host's processes. A process
// of the run that left g (only a privileged one can) is not found here;
// the run's end still kills it by its cookie. With g nil, or once g
// cannot be read (removed), it is KillDescendants.
func (t *Tree) KillDescendantsIn(ctx context.Context, g *Cgroup, pid int, spareFirstChild bool) error {
	if g == nil {
		return t.KillDescendants(ctx, pid, spareFirstChild)
	}
	return t.killDescendants(ctx, pid, spareFirstChild, func() ([]proc, error) {
		pids, err := g.Procs()
		if err != nil {
			return t.list()
		}
		return t.stats(pids), nil
	})
}

func (t *Tree) killDescendants(ctx context.Context, pid int, spareFirstChild bool, list func() ([]proc, error)) error {
	delay := 5 * time.Millisecond
	f := newFreezer()
	for {
		procs, err := list()
		if err != nil {
			return err
		}
		var live []proc
		var firstGen []int
		for _, p := range procs {
			if p.pid == t.self {
				continue
			}
			live = append(live, p)
			if p.ppid == pid && !p.zombie {
				firstGen = append(firstGen, p.pid)
			}
		}
		spare := map[int]bool{}
		if spareFirstChild {
			if first, ok := oldest(t.procDir, firstGen); ok {
				spare[first] = true
			}
		}
		var victims []proc
		for _, v := range descendants(live, pid) {
			if !spare[v.pid] && !v.zombie {
				victims = append(victims, v)
			}
		}
		if len(victims) == 0 {
			return nil
		}
		f.round(victims)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %d left below %d", ErrSurvivors, len(victims), pid)
		case <-time.After(delay):
		}
		if delay < 100*time.Millisecond {
			delay *= 2
		}
	}
}

// stopTries is how many rounds a freezer sends SIGSTOP to a process that
// does not stop before it kills it running: a process waiting in the
// kernel for a vfork child that was stopped before its exec, or one in
// state D, stops only once that wait ends, while SIGKILL ends it now.
const stopTries = 5

// freezer kills a tree of processes that forks while it is being killed,
// the way a cgroup is frozen and then killed. Killing a process at once
// leaves the children it forked between the scan and the kill alive, and
// re-parents them; a child that takes over forking when its parent dies
// then multiplies with each round, and under load the rounds never catch
// up (81 of an evil tree were left after 10 s of rounds). A stopped
// process neither forks nor dies, so its children stay its children, and
// the round that kills it finds them and stops them too. So a round stops
// what runs, and kills what is stopped. SIGSTOP and SIGKILL can be neither
// caught nor ignored.
type freezer struct {
	tries map[int]int
}

func newFreezer() *freezer { return &freezer{tries: map[int]int{}} }

// round sends each victim SIGKILL when it is stopped (or is a zombie,
// whose other threads may still run) or has been sent SIGSTOP stopTries
// times already, and SIGSTOP otherwise.
func (f *freezer) round(victims []proc) {
	for _, v := range victims {
		if v.stopped || v.zombie || f.tries[v.pid] >= stopTries {
			_ = syscall.Kill(v.pid, syscall.SIGKILL)
			continue
		}
		f.tries[v.pid]++
		_ = syscall.Kill(v.pid, syscall.SIGSTOP)
	}
}

// oldest returns the pid among pids that started first, by the start time
// in /proc/PID/stat (field 22, clock ticks since boot).
func oldest(procDir string, pids []int) (int, bool) {
	best, bestStart := 0, uint64(0)
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", procDir, pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			continue
		}
		fields := strings.Fields(string(stat[i+2:]))
		if len(fields) < 20 {
			continue
		}
		start, err := strconv.ParseUint(fields[19], 10, 64)
		if err != nil {
			continue
		}
		if best == 0 || start < bestStart || (start == bestStart && pid < best) {
			best, bestStart = pid, start
		}
	}
	return best, best != 0
}
