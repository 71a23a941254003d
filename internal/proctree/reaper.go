package proctree

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ReaperArg, as the first argument, makes the gateway's own binary run as
// a run's reaper (see Reap) instead of the gateway.
const ReaperArg = "__agentgate_reaper"

// Reap runs argv as a child of a process that is its subreaper, and
// returns the exit status to exit with. It is what the gateway binary does
// when started with ReaperArg.
//
// Processes of the run whose parent dies are re-parented to the reaper
// rather than to init, whatever they did to their session and
// environment. When the agent exits, the reaper kills and reaps every
// process left below it, so nothing outlives the run even if it escaped
// the cookie scan. Signals the reaper gets are passed on to the agent;
// its exit, code or signal, is the agent's.
func Reap(argv []string) int {
	if len(argv) == 0 {
		return 125
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		os.Stderr.WriteString("agentgate reaper: PR_SET_CHILD_SUBREAPER: " + err.Error() + "\n")
		return 125
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The agent dies with its reaper, as it would with the gateway. The
	// death signal follows the thread that started the child, so that
	// thread stays.
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		os.Stderr.WriteString("agentgate reaper: " + err.Error() + "\n")
		var ee *exec.Error
		if errors.As(err, &ee) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	_ = cmd.Wait()
	close(done)
	killChildren()
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

// killChildren kills and reaps every child of this process, again and
// again, until none is left alive: orphans of the run keep arriving as their
// parents die. A run that left nothing behind costs one scan.
func killChildren() {
	self := os.Getpid()
	tr := New()
	for range 500 {
		reapZombies()
		procs, err := tr.list()
		if err != nil {
			return
		}
		alive := 0
		for _, p := range procs {
			if p.ppid == self && !p.zombie {
				alive++
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
		if alive == 0 {
			reapZombies()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reapZombies waits for every child that has exited, without blocking.
func reapZombies() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
