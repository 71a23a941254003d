// Package testproc ends the helper processes a test binary is started as:
// a fake agent, the reaper under it, an MCP server, a version probe.
package testproc

import "syscall"

// Exit ends the process with code at once.
//
// A test binary built with -race that exits 0 through os.Exit, or by
// returning from main, first sleeps a second (the race runtime's
// atexit_sleep_ms), so that other threads may still report races. A run
// of a supervisor's test starts the binary two or three times (the
// version probe, the reaper, the agent) and waits for each, so that
// second, paid at every exit, was most of the time of such a test and
// left the CPU idle. A race a helper meets is still printed on its stderr
// as it happens; only the exit status 66 that would follow it is lost,
// and the helpers are the tests' stand-ins, not the code under test.
func Exit(code int) {
	syscall.Exit(code)
}
