package proctree

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoCgroups is returned by OpenCgroups when this machine does not let
// the gateway give each run a cgroup: no cgroup v2 hierarchy, one it may
// not write, or a kernel that cannot start a process inside a cgroup. The
// supervisor then falls back to the reaper.
var ErrNoCgroups = errors.New("cgroups unavailable")

// ErrSweep is returned by OpenCgroups, with usable Cgroups, when some
// process a dead gateway left could not be killed or its cgroup removed:
// one stuck in the kernel, which the next start tries again.
var ErrSweep = errors.New("sweep the cgroups a dead gateway left")

// CgroupOptions configure OpenCgroups.
type CgroupOptions struct {
	// Root is the directory under which this package creates its cgroups;
	// empty means "agentgate" under the cgroup v2 mount found in
	// /proc/self/mountinfo. It must be writable: a hierarchy of its own
	// for a root gateway, or a subtree delegated to the gateway's user
	// (systemd's Delegate=yes).
	Root string
	// Replica names this gateway; its runs' cgroups live under
	// Root/Replica, and a gateway of the same replica sweeps what a dead
	// one left there.
	Replica string
	// Freeze, when set, kills a cgroup by freezing it and sending SIGKILL
	// to each of its processes even where the kernel has cgroup.kill (it
	// has since Linux 5.14): the way older kernels are served, forced so
	// that it is tested.
	Freeze bool
}

// Cgroups gives each run's processes a cgroup of their own, under one
// directory per gateway process, Root/Replica/Instance. A process is
// placed in its run's cgroup as it is created (clone3 with
// CLONE_INTO_CGROUP), so nothing it starts can fork before it is inside,
// and no process can leave a cgroup without privileges, whatever it does
// to its session, process group, parent or environment. Killing the
// cgroup kills every one of them.
type Cgroups struct {
	replicaDir string // Root/Replica
	dir        string // Replica's instance of this process
	useKill    bool   // cgroup.kill rather than freeze and SIGKILL
}

// Cgroup is one run's cgroup.
type Cgroup struct {
	path    string
	fd      int
	useKill bool
}

// cgroupProbe is the cgroup OpenCgroups starts a process in to learn
// whether the kernel can.
const cgroupProbe = "probe"

// OpenCgroups prepares this gateway's cgroup directory and returns it, or
// an error wrapping ErrNoCgroups when the machine does not allow it. It
// first kills every process a dead gateway of the same replica left in its
// cgroups, and removes them: a replica that restarts takes down what its
// previous life left, whatever became of the runs in the store. Gateways
// of the replica that are still alive (their pid lives with the same start
// time) are left alone. A sweep that fails returns the Cgroups with an
// error wrapping ErrSweep.
func OpenCgroups(ctx context.Context, opt CgroupOptions) (*Cgroups, error) {
	if opt.Replica == "" {
		return nil, fmt.Errorf("%w: no replica name", ErrNoCgroups)
	}
	root := opt.Root
	if root == "" {
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoCgroups, err)
		}
		mnt, ok := cgroup2Mount(mi)
		if !ok {
			return nil, fmt.Errorf("%w: no cgroup2 file system is mounted", ErrNoCgroups)
		}
		root = filepath.Join(mnt, "agentgate")
	}
	self, err := instanceName(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroups, err)
	}
	c := &Cgroups{replicaDir: filepath.Join(root, cgroupName(opt.Replica))}
	c.dir = filepath.Join(c.replicaDir, self)
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: create %s: %v", ErrNoCgroups, c.dir, err)
	}
	if err := c.probe(opt.Freeze); err != nil {
		_ = os.Remove(c.dir)
		return nil, err
	}
	if err := c.sweep(ctx); err != nil {
		return c, fmt.Errorf("%w of replica %s: %w", ErrSweep, opt.Replica, err)
	}
	return c, nil
}

// Dir is this gateway's cgroup directory; each run's cgroup is a
// directory in it.
func (c *Cgroups) Dir() string { return c.dir }

// probe checks that a process can be started in a cgroup here, and picks
// the way to kill one.
func (c *Cgroups) probe(forceFreeze bool) error {
	dir := filepath.Join(c.dir, cgroupProbe)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: create %s: %v", ErrNoCgroups, dir, err)
	}
	defer os.Remove(dir)
	_, errKill := os.Stat(filepath.Join(dir, "cgroup.kill"))
	_, errFreeze := os.Stat(filepath.Join(dir, "cgroup.freeze"))
	switch {
	case errKill == nil && !forceFreeze:
		c.useKill = true
	case errFreeze == nil:
	default:
		return fmt.Errorf("%w: %s has neither cgroup.kill nor cgroup.freeze", ErrNoCgroups, dir)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: open %s: %v", ErrNoCgroups, dir, err)
	}
	defer unix.Close(fd)
	// A program that cannot exist: the child is cloned into the cgroup
	// and its exec fails, which tells clone3's support from its refusal
	// without running anything. The cgroup file system holds no files of
	// ours, so the path is surely absent.
	_, err = syscall.ForkExec(filepath.Join(dir, "absent"), []string{"absent"}, &syscall.ProcAttr{
		Env: []string{}, Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd},
	})
	if !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w: the kernel cannot start a process in a cgroup (clone3 CLONE_INTO_CGROUP): %v", ErrNoCgroups, err)
	}
	return nil
}

// New creates the cgroup of run id, or takes over the one a previous
// start of the same run left, after killing what is in it. Start the
// run's first process with SysProcAttr{UseCgroupFD: true, CgroupFD:
// g.FD()}.
func (c *Cgroups) New(ctx context.Context, id string) (*Cgroup, error) {
	if !validName(id) || id == cgroupProbe {
		return nil, fmt.Errorf("run id %q cannot name a cgroup", id)
	}
	path := filepath.Join(c.dir, id)
	if err := os.Mkdir(path, 0o755); err != nil {
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create cgroup %s: %w", path, err)
		}
		if err := kill(ctx, path, c.useKill); err != nil {
			return nil, err
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("open cgroup %s: %w", path, err)
	}
	return &Cgroup{path: path, fd: fd, useKill: c.useKill}, nil
}

// Close kills whatever is left in this gateway's run cgroups and removes
// them and the gateway's directory. The supervisor has stopped every run
// by then; anything found was not stopped in time.
func (c *Cgroups) Close(ctx context.Context) error {
	if err := removeTree(ctx, c.dir, c.useKill); err != nil {
		return err
	}
	// The replica's directory goes with its last gateway; another one's
	// instance keeps it (ENOTEMPTY, EBUSY), as it should.
	_ = os.Remove(c.replicaDir)
	return nil
}

// sweep kills and removes the cgroups of every instance of this replica
// whose gateway process is gone.
func (c *Cgroups) sweep(ctx context.Context) error {
	entries, err := os.ReadDir(c.replicaDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || filepath.Join(c.replicaDir, e.Name()) == c.dir {
			continue
		}
		if pid, start, ok := parseInstance(e.Name()); ok && alive(pid, start) {
			continue
		}
		if err := removeTree(ctx, filepath.Join(c.replicaDir, e.Name()), c.useKill); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeTree kills every process in the cgroups below dir, and in dir,
// and removes them, deepest first.
func removeTree(ctx context.Context, dir string, useKill bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeTree(ctx, filepath.Join(dir, e.Name()), useKill))
		}
	}
	if err := kill(ctx, dir, useKill); err != nil {
		errs = append(errs, err)
	} else if err := rmdir(ctx, dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// FD is the cgroup's directory, open for SysProcAttr.CgroupFD.
func (g *Cgroup) FD() int { return g.fd }

// Path is the cgroup's directory.
func (g *Cgroup) Path() string { return g.path }

// Procs returns the pids of the processes in the cgroup.
func (g *Cgroup) Procs() ([]int, error) { return procs(g.path) }

// Kill kills every process in the cgroup and returns once none is left,
// or when ctx ends.
func (g *Cgroup) Kill(ctx context.Context) error { return kill(ctx, g.path, g.useKill) }

// Remove kills every process in the cgroup, waits until none is left and
// removes it.
func (g *Cgroup) Remove(ctx context.Context) error {
	defer unix.Close(g.fd)
	if err := g.Kill(ctx); err != nil {
		return err
	}
	return rmdir(ctx, g.path)
}

// kill empties the cgroup at path: cgroup.kill, which the kernel applies
// to processes forking meanwhile too, or, without it, freezing the cgroup
// so that nothing in it can fork, and SIGKILL to each process, which
// reaches frozen ones. Then it waits until the cgroup is not populated.
func kill(ctx context.Context, path string, useKill bool) error {
	// Most runs end with nothing left in their cgroup: the reaper killed
	// it, or the agent left nothing. Writing cgroup.kill costs several
	// milliseconds even then (the kernel waits out an RCU grace period),
	// so an empty cgroup is taken at its word. Nothing can enter an empty
	// cgroup but by the gateway's clone3 or a privileged move, which no
	// kill here could exclude either. One left frozen (a gateway that died
	// while freezing it) is thawed below first: a run started in it later
	// must be able to run.
	if b, err := os.ReadFile(filepath.Join(path, "cgroup.events")); err == nil {
		ev := parseEvents(b)
		if v, ok := ev["populated"]; ok && v == 0 && ev["frozen"] == 0 {
			return nil
		}
	}
	if useKill {
		if err := os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0); err != nil {
			return fmt.Errorf("kill cgroup %s: %w", path, err)
		}
		return waitEvent(ctx, path, "populated", 0)
	}
	freeze := filepath.Join(path, "cgroup.freeze")
	// Leave it thawed: a process moved in later must be able to run, and
	// an empty cgroup is removable either way.
	defer os.WriteFile(freeze, []byte("0"), 0)
	for {
		if err := os.WriteFile(freeze, []byte("1"), 0); err != nil {
			return fmt.Errorf("freeze cgroup %s: %w", path, err)
		}
		if err := waitEvent(ctx, path, "frozen", 1); err != nil {
			return err
		}
		pids, err := procs(path)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return waitEvent(ctx, path, "populated", 0)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// A frozen cgroup gains no process by fork, so these were all;
		// only a privileged process could move one in meanwhile, and
		// another round takes that too.
		if n, err := procsAfterKill(ctx, path); err != nil || n == 0 {
			return err
		}
	}
}

// procsAfterKill waits a moment for the killed processes of a frozen
// cgroup to go, and says how many are left: 0 once it is not populated.
func procsAfterKill(ctx context.Context, path string) (int, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := waitEvent(wctx, path, "populated", 0); err == nil {
		return 0, nil
	} else if ctx.Err() != nil {
		return 0, err
	}
	pids, err := procs(path)
	return len(pids), err
}

// waitEvent waits until key in the cgroup's cgroup.events has value want.
// The kernel signals each change of that file to inotify; the poll timeout
// only bounds a missed signal.
func waitEvent(ctx context.Context, path, key string, want int64) error {
	file := filepath.Join(path, "cgroup.events")
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("watch %s: %w", file, err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, file, unix.IN_MODIFY); err != nil {
		return fmt.Errorf("watch %s: %w", file, err)
	}
	buf := make([]byte, 4096)
	for {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read %s: %w", file, err)
		}
		if v, ok := parseEvents(b)[key]; ok && v == want {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cgroup %s: %s not %d: %w", path, key, want, context.Cause(ctx))
		}
		fds := []unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 50); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("watch %s: %w", file, err)
		}
		for {
			if n, err := unix.Read(in, buf); n <= 0 || err != nil {
				break
			}
		}
	}
}

// rmdir removes an empty cgroup. Its last processes may still be on their
// way out for a moment after cgroup.events says it is not populated.
func rmdir(ctx context.Context, path string) error {
	delay := time.Millisecond
	for {
		err := os.Remove(path)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("remove cgroup %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove cgroup %s: %w (%w)", path, err, context.Cause(ctx))
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

func procs(path string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("read %s/cgroup.procs: %w", path, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// parseEvents reads the "key value" lines of a cgroup.events file.
func parseEvents(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// cgroup2Mount returns the mount point of the first cgroup2 file system
// in a /proc/PID/mountinfo.
func cgroup2Mount(mountinfo []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(fs) < 1 || fs[0] != "cgroup2" {
			continue
		}
		if mnt := unescapeMount(fields[4]); strings.HasPrefix(mnt, "/") {
			return mnt, true
		}
	}
	return "", false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// instanceName names this process's directory under its replica: its pid
// and start time, which tell a live gateway from a dead one whose pid was
// reused, and a random part, since one process may run several gateways
// (tests do).
func instanceName(pid int) (string, error) {
	start, ok := startTime(pid)
	if !ok {
		return "", fmt.Errorf("read the start time of process %d", pid)
	}
	// Unique, not secret: math/rand/v2 is seeded at random by the
	// runtime, and spares the reaper, which imports this package, the
	// start-up cost of crypto/rand.
	return fmt.Sprintf("%d-%d-%08x", pid, start, rand.Uint32()), nil
}

// parseInstance reads the pid and start time back from an instance name.
func parseInstance(name string) (pid int, start uint64, ok bool) {
	parts := strings.Split(name, "-")
	if len(parts) != 3 {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return pid, start, true
}

// alive reports whether process pid runs and started at start.
func alive(pid int, start uint64) bool {
	got, ok := startTime(pid)
	return ok && got == start
}

// startTime is field 22 of /proc/PID/stat: clock ticks since boot.
func startTime(pid int) (uint64, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, false
	}
	fields := strings.Fields(string(stat[i+2:]))
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	return start, err == nil
}

// validName reports whether s can be one directory name in the cgroup
// file system: a run id is a UUID.
func validName(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, r := range s {
		if !nameRune(r) {
			return false
		}
	}
	return true
}

// cgroupName turns a replica's name into a directory name: a character
// that could mean a path, or make it collide with a control file
// ("<controller>.<name>"), becomes '_'.
func cgroupName(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.Map(func(r rune) rune {
		if nameRune(r) {
			return r
		}
		return '_'
	}, s)
}

func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}
