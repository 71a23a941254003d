package netguard

import (
	"fmt"
	"syscall"
)

// Descriptors the gateway needs besides its connections, by what holds
// them; DefaultTotal leaves them free.
const (
	// reserveProcess is the runtime's (epoll, eventfd), the logs', the
	// store's (the embedded server's files and its client connections)
	// and the process scans' (/proc, cgroup files).
	reserveProcess = 64
	// reservePerRun is one run's: its stdin, stdout and stderr pipes, the
	// pidfd, its cgroup's files and the reaper's pipes, with room to spare.
	reservePerRun = 16
	// reserveSpare keeps descriptors free at the bound: for the
	// refusals under way (maxRefusing) and a few more, so that Accept can
	// still take a connection to refuse it rather than fail with EMFILE.
	reserveSpare = maxRefusing + 16
	// minTotal is the least DefaultTotal returns, however low the limit.
	minTotal = 16
)

// DefaultTotal is the bound on open connections for a process whose soft
// descriptor limit is nofile and which runs at most maxRuns agents at once:
//
//	nofile − (64 + 16·maxRuns + 48), and at least 16
//
// 64 for the process and the store, 16 per run for its pipes and cgroup,
// 48 for the refusals under way and to spare, so that a full listener still
// accepts to refuse. With the common limit of 1024 and 4 runs that is 848
// connections.
func DefaultTotal(nofile uint64, maxRuns int) int {
	reserve := uint64(reserveProcess + reservePerRun*max(maxRuns, 0) + reserveSpare)
	if nofile <= reserve+minTotal {
		return minTotal
	}
	// A limit of "unlimited" (RLIM_INFINITY) still makes a sane int.
	return int(min(nofile-reserve, 1<<30))
}

// NoFile returns the process's soft descriptor limit, or 1024 (the usual
// default) when it cannot be read.
func NoFile() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	return lim.Cur
}

// RaiseNoFile raises the soft descriptor limit to the hard one and returns
// the soft limit in force after it.
//
// The Go runtime has done this itself at start since Go 1.19: package
// syscall's init sets the soft limit to hard−1, and restores the original
// soft limit in every child it starts, so that old software that uses
// select(2) keeps working. A call to syscall.Setrlimit ends that restoring
// and every agent would inherit the raised limit; so RaiseNoFile only sets
// the limit when the runtime did not (the soft limit is below hard−1), and
// otherwise just reports it. raised says whether it set it.
func RaiseNoFile() (soft uint64, raised bool, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false, fmt.Errorf("read the descriptor limit: %w", err)
	}
	if lim.Max == 0 || lim.Cur+1 >= lim.Max {
		return lim.Cur, false, nil
	}
	want := lim
	want.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return lim.Cur, false, fmt.Errorf("raise the descriptor limit from %d to %d: %w", lim.Cur, lim.Max, err)
	}
	return want.Cur, true, nil
}
