package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// The exit codes; exitCodesHelp, the package doc and docs/client.md list them.
const (
	exitOK          = 0   // done; for run and watch: the run succeeded
	exitFailed      = 1   // the run failed (or ended in a status this client does not know)
	exitUsage       = 2   // a bad command line
	exitCancelled   = 3   // the run was cancelled
	exitTimedOut    = 4   // the run timed out
	exitAPIError    = 5   // the gateway answered with an error
	exitUnreachable = 6   // the gateway could not be reached, or the connection failed
	exitError       = 7   // anything else: a file that cannot be written, an answer not understood
	exitInterrupted = 130 // interrupted (Ctrl-C): stopped waiting; the run goes on
)

// exitCodesHelp is the table of exit codes, for help.
const exitCodesHelp = `Exit codes:
  0    done; for run and watch: the run succeeded
  1    the run failed
  2    usage error
  3    the run was cancelled
  4    the run timed out
  5    the gateway answered with an error (printed as "error: <code>: <message>")
  6    cannot connect to the gateway (or the connection failed)
  7    any other error
  130  interrupted (Ctrl-C): stopped watching, the run goes on
`

// statusExit is the exit code of run and watch for a run's final status
// (the statuses of internal/runs: succeeded, failed, cancelled,
// timed_out).
func statusExit(status string) int {
	switch status {
	case "succeeded":
		return exitOK
	case "cancelled":
		return exitCancelled
	case "timed_out":
		return exitTimedOut
	}
	return exitFailed
}

// usageError is a command line that cannot be run.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errorExit prints err on stderr and returns its exit code: a gateway's
// error answer as "error: <code>: <message>", a gateway out of reach as
// "error: cannot_connect: …".
func errorExit(stderr io.Writer, err error) int {
	var ue *usageError
	var ae *apiError
	var ce *connectError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "agentgate: %s\n", oneLine(ue.msg, 2000))
		return exitUsage
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "agentgate: interrupted")
		return exitInterrupted
	case errors.As(err, &ae):
		fmt.Fprintf(stderr, "error: %s: %s\n", oneLine(ae.Code, 100), oneLine(ae.Message, 2000))
		return exitAPIError
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "error: cannot_connect: %s\n", oneLine(err.Error(), 2000))
		return exitUnreachable
	}
	fmt.Fprintf(stderr, "error: %s\n", oneLine(err.Error(), 2000))
	return exitError
}
