package gitrepo

import (
	"context"
	"errors"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// Error is a git operation's failure: a class from runs' closed enum and a
// message for a person that holds no credential.
type Error struct {
	Class runs.Class
	// Op is what the gateway was doing: "fetch", "push", "commit"...
	Op string
	// Msg says why, from git's own words with secrets scrubbed.
	Msg string
	// Err is the cause (a context's error, an exit status), for errors.Is.
	Err error
	// stderr is git's whole (scrubbed, bounded) complaint, for a caller
	// that classifies it further.
	stderr string
}

func (e *Error) Error() string { return "git " + e.Op + ": " + e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// ClassOf is err's class: an *Error's own, GitFailed for any other error.
func ClassOf(err error) runs.Class {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Class
	}
	return runs.GitFailed
}

// ErrNoChange is returned by Change.Push when the run changed nothing, so
// there is no commit to push.
var ErrNoChange = errors.New("the workspace has no change to push")

// stderrPatterns map git's words (lowercased) to a class; the first match
// wins, so authentication is checked before "not found", which some
// servers answer for a private repository.
var stderrPatterns = []struct {
	class runs.Class
	words []string
}{
	{runs.GitAuthFailed, []string{"authentication failed", "could not read username",
		"could not read password", "terminal prompts disabled", "returned error: 401",
		"returned error: 403", "invalid username or password", "invalid credentials"}},
	{runs.GitNotFound, []string{"repository not found", "not found", "returned error: 404",
		"couldn't find remote ref", "does not appear to be a git repository", "no such ref"}},
	{runs.GitUnreachable, []string{"could not resolve host", "connection refused", "timed out",
		"failed to connect", "couldn't connect to server", "network is unreachable",
		"connection reset", "empty reply from server", "no route to host"}},
}

// classify names the class of a git failure from its stderr.
func classify(stderr string) runs.Class {
	lower := strings.ToLower(stderr)
	for _, p := range stderrPatterns {
		for _, w := range p.words {
			if strings.Contains(lower, w) {
				return p.class
			}
		}
	}
	return runs.GitFailed
}

// failure makes the Error of a git process that failed with err and wrote
// stderr (already scrubbed).
func failure(op string, err error, stderr string) *Error {
	if ctxErr := contextError(err); ctxErr != nil {
		class := runs.GitFailed
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			class = runs.GitUnreachable
		}
		return &Error{Class: class, Op: op, Msg: "git did not finish: " + ctxErr.Error(), Err: ctxErr}
	}
	msg := lastLines(stderr, 4)
	if msg == "" {
		msg = err.Error()
	}
	return &Error{Class: classify(stderr), Op: op, Msg: msg, Err: err, stderr: stderr}
}

func contextError(err error) error {
	for _, target := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, target) {
			return target
		}
	}
	return nil
}

// lastLines is the last n non-empty lines of s that are not hints, joined by "; ": git says
// why it failed at the end.
func lastLines(s string, n int) string {
	var kept []string
	for _, line := range strings.Split(s, "\n") {
		// git's hints say how to use git, not what went wrong.
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "hint:") {
			kept = append(kept, line)
		}
	}
	if len(kept) > n {
		kept = kept[len(kept)-n:]
	}
	return strings.Join(kept, "; ")
}
