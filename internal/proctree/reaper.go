package proctree

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ReaperArg, as the first argument, makes the gateway's own binary run as
// a run's reaper (see Reap) instead of the gateway.
const ReaperArg = "__agentgate_reaper"

// DeathSignal is the signal a reaper is to be started with as its
// Pdeathsig: it tells the reaper that the gateway died, and the reaper
// then kills the run's every process before it exits. It is caught, never
// forwarded; one that comes while the gateway lives (the thread that
// started the reaper ended, or someone else sent it) is ignored.
const DeathSignal = syscall.SIGUSR1

// ReaperArgs returns the arguments that make the gateway's binary run
// argv under a reaper whose gateway is this process: ReaperArg, the
// gateway's pid, then argv. The pid lets the reaper tell that the gateway
// died even before it could watch for DeathSignal.
func ReaperArgs(argv []string) []string {
	return ReaperArgsNice(0, argv)
}

// ReaperArgsNice is ReaperArgs with the agent, and everything it starts,
// at niceness nice (1 to 19; 0 leaves the gateway's): the agent's tools
// then yield the CPUs to the gateway, which must keep storing and
// streaming every run's events however busy the runs are. The reaper
// keeps the gateway's priority, so that it kills promptly.
func ReaperArgsNice(nice int, argv []string) []string {
	args := []string{ReaperArg, parentFlag + strconv.Itoa(os.Getpid())}
	if nice > 0 {
		args = append(args, niceFlag+strconv.Itoa(nice))
	}
	return append(args, argv...)
}

// MaxNice is the highest niceness, and so the lowest priority, Linux has.
const MaxNice = 19

const (
	parentFlag = "-gateway="
	niceFlag   = "-nice="
)

// ReaperName is the file name of the light reaper (cmd/agentgate-reaper),
// which a gateway uses when it is installed beside the gateway's binary.
const ReaperName = "agentgate-reaper"

// ReaperBeside returns the binary a gateway whose own binary is gateway
// runs each agent under: ReaperName in the same directory when it is an
// executable file there, and gateway itself otherwise. Both take
// ReaperArgs and do the same (Reap). Built with cgo, both reap in C before
// the Go runtime starts (package lightreaper), and cost a run about a
// millisecond and a megabyte; the gateway's binary built without cgo
// starts the Go runtime and initialises every package of the gateway for
// each run, which agentgate-reaper beside it spares.
func ReaperBeside(gateway string) string {
	light := filepath.Join(filepath.Dir(gateway), ReaperName)
	if fi, err := os.Stat(light); err == nil && fi.Mode().IsRegular() && unix.Access(light, unix.X_OK) == nil {
		return light
	}
	return gateway
}

// Reap runs argv as a child of a process that is its subreaper, and
// returns the exit status to exit with. It is what the gateway's binary,
// and the light reaper (cmd/agentgate-reaper), do when started with
// ReaperArg and built without cgo; built with cgo, both do the same in C
// (package lightreaper), which follows this function step by step: a
// change here is a change there.
//
// Processes of the run whose parent dies are re-parented to the reaper
// rather than to init, whatever they did to their session and
// environment. When the agent exits, the reaper kills and reaps every
// process left below it, so nothing outlives the run even if it escaped
// the cookie scan. The agent runs in a process group of its own, so a
// signal the agent sends to its group, or the supervisor to the reaper's,
// does not take the reaper down before what is below it. SIGTERM and
// SIGINT are passed on to the agent's process group, as the supervisor
// meant them for the whole group (SIGINT as a terminal's Ctrl-C: under the
// sandbox the agent's own process is bwrap's, which ignores both, and
// only the group reaches the CLI); SIGHUP and SIGQUIT to the agent alone.
// Its exit, code or signal, is the agent's.
//
// When the gateway dies (DeathSignal, with the reaper's parent changed),
// the reaper kills the agent and everything below it, and exits. Given a
// niceness (ReaperArgsNice), it starts the agent at it.
func Reap(argv []string) int {
	gateway := os.Getppid()
	if v, ok := strings.CutPrefix(firstOf(argv), parentFlag); ok {
		gateway, _ = strconv.Atoi(v)
		argv = argv[1:]
	}
	nice := 0
	if v, ok := strings.CutPrefix(firstOf(argv), niceFlag); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= MaxNice {
			nice = n
		}
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return 125
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		os.Stderr.WriteString("agentgate reaper: PR_SET_CHILD_SUBREAPER: " + err.Error() + "\n")
		return 125
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, DeathSignal)
	if os.Getppid() != gateway {
		// The gateway died before the signal was watched (the Go runtime
		// drops a DeathSignal nobody asked for): start nothing.
		os.Stderr.WriteString("agentgate reaper: the gateway is gone\n")
		return 125
	}
	own, _ := ownCgroup(gateway)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The agent dies with its reaper, as it would with the gateway. The
	// death signal follows the thread that started the child, so that
	// thread stays.
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// A child takes the niceness of the thread that forks it, and
	// os/exec runs no code of ours between fork and exec: this thread
	// takes the agent's niceness for the start, and its own back after,
	// which only a privileged reaper may (lowering a niceness needs
	// CAP_SYS_NICE); an unprivileged one goes on at the agent's.
	tid := unix.Gettid()
	if nice > 0 {
		_ = unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
	}
	err := cmd.Start()
	if nice > 0 {
		_ = unix.Setpriority(unix.PRIO_PROCESS, tid, 0)
	}
	if err != nil {
		os.Stderr.WriteString("agentgate reaper: " + err.Error() + "\n")
		var ee *exec.Error
		if errors.As(err, &ee) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	agent := cmd.Process.Pid
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				switch {
				case s == DeathSignal:
					if os.Getppid() != gateway {
						// Everything below goes once the agent's wait
						// returns (killTree); the agent first, so that
						// it stops starting more.
						_ = syscall.Kill(-agent, syscall.SIGKILL)
						_ = syscall.Kill(agent, syscall.SIGKILL)
					}
				case s == syscall.SIGTERM || s == syscall.SIGINT:
					_ = syscall.Kill(-agent, s.(syscall.Signal))
				default:
					_ = cmd.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	_ = cmd.Wait()
	close(done)
	killTree(own)
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		// Die of the same signal, so the supervisor sees what the agent
		// met.
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		time.Sleep(time.Second)
	}
	return cmd.ProcessState.ExitCode()
}

// reaperGiveUp bounds how long a reaper keeps killing: a process stuck in
// the kernel (state D) does not die of SIGKILL until it leaves, and the
// run must end some time.
const reaperGiveUp = time.Minute

// killTree kills every descendant of this process, again and again, and
// reaps the children among them, until this process has no child left:
// orphans of the run keep arriving as their parents die, and a process may
// fork between a scan and the kill, so a scan that finds nothing alive is
// no proof (a process re-parented while /proc is read is missed, and a
// reaper that exited on it handed that process to init). Having no child
// is proof: everything below a process descends from one of its children.
// Each process is stopped before it is killed (see freezer), so that a
// tree that keeps forking cannot outrun the rounds. A run that left
// nothing behind costs no scan.
//
// With cgroup, the directory of the run's own cgroup that this reaper was
// started in (see ownCgroup), the victims of a round are the processes of
// that cgroup, whatever the number of processes on the host: everything
// below the reaper is in it from its first instruction. Only a privileged
// process can leave it; a round that finds the cgroup empty but for the
// reaper while children remain, twice in a row (once could be a child
// that exited after the reaping), scans /proc for what is below. With a
// cgroup, no child left is not the end: a process of the cgroup that is
// not below the reaper is stopped in one round and killed in a later one,
// and the reaper's own children dying in between must not leave it
// stopped, so the rounds go on until the cgroup lists no live process.
func killTree(cgroup string) {
	self := os.Getpid()
	f := newFreezer()
	delay := time.Millisecond
	deadline := time.Now().Add(reaperGiveUp)
	emptyRounds := 0
	for {
		childless := reapChildren()
		var victims []proc
		scan := cgroup == ""
		if !scan {
			var err error
			victims, err = cgroupProcs(cgroup, self)
			if err != nil || !anyAlive(victims) {
				if childless {
					return
				}
				emptyRounds++
				scan = emptyRounds > 1
			} else {
				emptyRounds = 0
			}
		} else if childless {
			return
		}
		if scan {
			procs, err := New().list()
			if err != nil {
				return
			}
			// Zombies too: a zombie leader may have threads still running.
			victims = descendants(procs, self)
		}
		f.round(victims)
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(delay)
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// anyAlive says whether victims holds a process that is not a zombie.
func anyAlive(victims []proc) bool {
	for _, v := range victims {
		if !v.zombie {
			return true
		}
	}
	return false
}

// cgroupProcs returns the processes of the cgroup at dir but self, with
// their state.
func cgroupProcs(dir string, self int) ([]proc, error) {
	pids, err := procs(dir)
	if err != nil {
		return nil, err
	}
	out := make([]proc, 0, len(pids))
	for _, pid := range pids {
		if pid == self {
			continue
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if p, ok := parseStat(pid, stat); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// ownCgroup returns the directory of this process's cgroup when it is the
// run's own: a cgroup v2 whose name is the run's id (the cookie in this
// process's environment, see Cgroups.New) and that the gateway is not in.
// The reaper was then started into it (CLONE_INTO_CGROUP), and every
// process of the cgroup but the reaper is below the reaper, so the reaper
// may kill them all. Anything else (no cgroup v2, the gateway's own
// cgroup, a name that is not the run's) is not the run's alone, and the
// reaper scans /proc instead.
func ownCgroup(gateway int) (string, bool) {
	id := os.Getenv(CookieVar)
	if id == "" {
		return "", false
	}
	mine, ok := readCgroup("/proc/self/cgroup")
	if !ok || filepath.Base(mine) != id {
		return "", false
	}
	if theirs, ok := readCgroup("/proc/" + strconv.Itoa(gateway) + "/cgroup"); !ok || theirs == mine {
		return "", false
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	mnt, ok := cgroup2Mount(mi)
	if !ok {
		return "", false
	}
	dir := filepath.Join(mnt, mine)
	if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
		return "", false
	}
	return dir, true
}

// readCgroup returns the cgroup v2 path in a /proc/PID/cgroup file (its
// "0::PATH" line).
func readCgroup(file string) (string, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", false
	}
	return parseCgroupFile(b)
}

// parseCgroupFile reads the cgroup v2 path of a /proc/PID/cgroup: the
// line of hierarchy 0 with no controllers, "0::PATH".
func parseCgroupFile(b []byte) (string, bool) {
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok && strings.HasPrefix(p, "/") && !strings.Contains(p, "/../") && !strings.HasSuffix(p, "/..") {
			return p, true
		}
	}
	return "", false
}

// descendants returns the processes below pid in procs, zombies included.
// A zombie is walked through: a multi-threaded process being killed shows
// as a zombie once its main thread is gone, while its children are still
// its own until its last thread exits, and only then go to the reaper.
func descendants(procs []proc, pid int) []proc {
	children := map[int][]proc{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []proc
	seen := map[int]bool{}
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			if seen[c.pid] {
				continue
			}
			seen[c.pid] = true
			out = append(out, c)
			walk(c.pid)
		}
	}
	walk(pid)
	return out
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// reapChildren waits for every child that has exited, without blocking,
// and reports whether this process has no child left at all, live or
// zombie. __WALL counts a child whatever signal it is to send its parent
// at its exit.
func reapChildren() (none bool) {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG|syscall.WALL, nil)
		switch {
		case errors.Is(err, syscall.ECHILD):
			return true
		case errors.Is(err, syscall.EINTR):
		case err != nil || pid <= 0:
			return false
		}
	}
}
