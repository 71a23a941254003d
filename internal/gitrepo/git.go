package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Remote is a repository and the token that opens it, if any.
type Remote struct {
	// URL is https, or http; it must carry no credentials.
	URL string
	// Token is sent as the HTTP Basic password; empty sends none.
	Token string
}

const (
	// stderrCap bounds the git stderr kept: enough for git's reason,
	// never a whole transfer's progress.
	stderrCap = 8 << 10
	// killGrace is how long git has to exit after its context ends
	// before its process group is killed.
	killGrace = 2 * time.Second
	// tokenVar carries the token to the askpass helper of one git
	// process; nothing else reads it.
	tokenVar = "AGENTGATE_GIT_TOKEN"
	// askpassUser is the user name sent with a token: servers that take
	// tokens ignore it.
	askpassUser = "agentgate"
)

// askpassScript answers git's username prompt with a fixed name and its
// password prompt with the token in the process's own environment.
const askpassScript = `#!/bin/sh
case "$1" in
[Uu]sername*) printf '%s\n' '` + askpassUser + `' ;;
*) printf '%s\n' "$` + tokenVar + `" ;;
esac
`

// safeConfig is given to every git the gateway runs: whatever a repository
// or a remote says, git speaks only http(s), follows no redirect, runs no
// hook, asks no credential helper and touches no submodule.
var safeConfig = []string{
	"-c", "protocol.allow=never",
	"-c", "protocol.https.allow=always",
	"-c", "protocol.http.allow=always",
	"-c", "http.followRedirects=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "credential.helper=",
	"-c", "core.fsmonitor=false",
	"-c", "core.askPass=",
	"-c", "submodule.recurse=false",
	"-c", "fetch.recurseSubmodules=false",
	"-c", "push.recurseSubmodules=no",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "advice.detachedHead=false",
}

// localConfig lets git read the cache's own mirrors by path, which
// safeConfig forbids; it is given only to commands whose source the gateway
// names itself.
var localConfig = []string{"-c", "protocol.file.allow=always"}

// runner starts git processes in the gateway's safe environment.
type runner struct {
	git     string
	home    string
	askpass string
	timeout time.Duration
}

// newRunner writes the askpass helper into a private directory under dir.
func newRunner(gitPath, dir string, timeout time.Duration) (*runner, error) {
	bin := filepath.Join(dir, "bin")
	home := filepath.Join(dir, "home")
	for _, d := range []string{bin, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("make git directory: %w", err)
		}
	}
	askpass := filepath.Join(bin, "askpass")
	if err := os.WriteFile(askpass, []byte(askpassScript), 0o700); err != nil {
		return nil, fmt.Errorf("write askpass helper: %w", err)
	}
	if err := os.Chmod(askpass, 0o700); err != nil {
		return nil, fmt.Errorf("write askpass helper: %w", err)
	}
	return &runner{git: gitPath, home: home, askpass: askpass, timeout: timeout}, nil
}

// call is one git invocation.
type call struct {
	op    string
	dir   string
	args  []string
	local bool // reads a mirror by path
	token string
	// pin is the curl resolve entry of a remote's host (Config.Pin).
	pin   string
	env   []string // more variables, e.g. the author
	stdin io.Reader
	// stdoutMax bounds what is kept of stdout; 0 means 1 MiB.
	stdoutMax int64
}

// run starts git, waits for it and returns its stdout. A failure is an
// *Error whose message has the token scrubbed from it.
func (r *runner) run(ctx context.Context, c call) ([]byte, error) {
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	cmd := r.command(ctx, c)
	stdout := &cappedBuffer{max: c.stdoutMax}
	if stdout.max == 0 {
		stdout.max = 1 << 20
	}
	stderr := &tailBuffer{max: stderrCap}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	if stdout.over {
		return nil, &Error{Class: runs.GitFailed, Op: c.op, Msg: fmt.Sprintf("output passed %d bytes", stdout.max), Err: ErrTooLarge}
	}
	return nil, failure(c.op, err, scrub(stderr.String(), c.token))
}

// ErrTooLarge is wrapped by the error of a git whose output passed its
// bound, such as a patch larger than Patch was allowed.
var ErrTooLarge = errors.New("git output too large")

func (r *runner) command(ctx context.Context, c call) *exec.Cmd {
	args := append([]string{}, safeConfig...)
	if c.local {
		args = append(args, localConfig...)
	}
	if c.pin != "" {
		args = append(args, "-c", "http.curloptResolve="+c.pin)
	}
	cmd := exec.CommandContext(ctx, r.git, append(args, c.args...)...)
	cmd.Dir = c.dir
	cmd.Env = append(r.env(c.token), c.env...)
	cmd.Stdin = c.stdin
	// git starts helpers (git-remote-https); a process group takes them
	// all when the context ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = killGrace
	return cmd
}

// env is the whole environment of a git process: nothing of the gateway's.
func (r *runner) env(token string) []string {
	env := []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + r.home,
		"XDG_CONFIG_HOME=" + r.home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=" + r.askpass,
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C",
	}
	if token != "" {
		env = append(env, tokenVar+"="+token)
	}
	return env
}

// scrub removes token, in any spelling git might print, and any
// credentials in a URL from s.
func scrub(s, token string) string {
	if token != "" {
		for _, form := range []string{token, url.QueryEscape(token), url.PathEscape(token)} {
			s = strings.ReplaceAll(s, form, "[redacted]")
		}
	}
	return stripUserinfo(s)
}

// stripUserinfo removes "user:password@" after every "://" in s.
func stripUserinfo(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexAny(s, "/ \t\n'\"")
		if end < 0 {
			end = len(s)
		}
		if at := strings.LastIndex(s[:end], "@"); at >= 0 {
			s = s[at+1:]
		}
	}
}

// cappedBuffer keeps up to max bytes and fails the write past them, which
// ends the git writing to it.
// It holds its buffer rather than embedding it, so io.Copy cannot go round
// Write through the buffer's ReadFrom.
type cappedBuffer struct {
	buf  bytes.Buffer
	max  int64
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if int64(b.buf.Len()+len(p)) > b.max {
		b.over = true
		return 0, ErrTooLarge
	}
	return b.buf.Write(p)
}

func (b *cappedBuffer) Bytes() []byte { return b.buf.Bytes() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }
