package netns

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
)

// bwrapPath is where the Debian package installs bwrap (scripts/test.sh
// installs it): it makes the namespace the shim listens in, as a run's
// sandbox does.
const bwrapPath = "/usr/bin/bwrap"

// shims returns the two shims a gateway may start its confined CLIs
// under: its own binary without cgo (this test binary, whose TestMain runs
// RunShim) and one built with cgo, where lightshim's C does the work before
// the Go runtime starts (agentgate-reaper, as it ships).
func shims(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{"go": executable(t), "c": proctreetest.BuildReaper(t)}
}

// TestShimHandsOverListener runs each shim in a network namespace of its
// own: the gateway's end receives the listener, accepts on it what the
// exec'd command writes to ProxyAddr inside the namespace, and the command
// holds neither the listener nor the Unix socket, but keeps what it was
// given (fd 3). A handoff socket too deep for a Unix socket's name is
// reached through its directory.
func TestShimHandsOverListener(t *testing.T) {
	self := executable(t)
	for name, shim := range shims(t) {
		t.Run(name, func(t *testing.T) {
			handOverOnce(t, shim, self, t.TempDir())
		})
		t.Run(name+"/deep", func(t *testing.T) {
			deep := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
			if err := os.Mkdir(deep, 0o700); err != nil {
				t.Fatal(err)
			}
			handOverOnce(t, shim, self, deep)
		})
	}
}

// handOverOnce runs shim in bwrap with a handoff in dir and the test
// binary as its command, and checks what TestShimHandsOverListener says.
func handOverOnce(t *testing.T, shim, self, dir string) {
	h, err := NewHandoff(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	given, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer given.Close()
	args := append([]string{"--dev-bind", "/", "/", "--unshare-net", "--die-with-parent", "--", shim},
		ShimArgs(h.Path(), []string{self})...)
	cmd := exec.Command(bwrapPath, args...)
	cmd.Env = []string{fdsEnv + "=1"}
	cmd.ExtraFiles = []*os.File{given}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln, err := h.Receive(ctx)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("receive: %v; the shim said: %s", err, stderr.String())
	}
	defer ln.Close()
	if got := ln.Addr().String(); got != ProxyAddr {
		t.Errorf("the listener is on %s, want %s", got, ProxyAddr)
	}
	if got := readOneConn(t, ln); got != fdsGreeting {
		t.Errorf("read %q from the namespace's %s, want %q", got, ProxyAddr, fdsGreeting)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the command under the shim: %v; stdout: %s; stderr: %s", err, out.String(), stderr.String())
	}
	if _, err := os.Stat(h.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the handoff socket is still there after Receive: %v", err)
	}
	listener := "socket:[" + strconv.FormatUint(inode(t, ln.(*net.TCPListener)), 10) + "]"
	fds := out.String()
	if strings.Contains(fds, listener) || strings.Contains(fds, "socket:") {
		t.Errorf("the exec'd command holds a socket (the listener is %s):\n%s", listener, fds)
	}
	if held := holding(t, listener); held != 1 {
		t.Errorf("this process holds %d descriptors of the listener, want the net.Listener's one", held)
	}
	if !strings.Contains(fds, "fd 3 /dev/null") {
		t.Errorf("the exec'd command lost the descriptor it was given as fd 3:\n%s", fds)
	}
	if strings.Contains(fds, " "+dir+"\n") {
		t.Errorf("the exec'd command holds the handoff's directory, which the shim opened to reach a deep socket:\n%s", fds)
	}
}

// holding counts this process's descriptors that are target.
func holding(t *testing.T, target string) int {
	t.Helper()
	fds, err := openFds()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if fd.target == target {
			n++
		}
	}
	return n
}

// executable returns the test binary's path, and fails the test when
// bwrap, which makes the namespaces the shim runs in, is not installed.
func executable(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(bwrapPath); err != nil {
		t.Fatalf("bubblewrap is not installed (apt-get install bubblewrap): %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// readOneConn accepts one connection on ln and reads it to its end.
func readOneConn(t *testing.T, ln net.Listener) string {
	t.Helper()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	defer conn.Close()
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(b)
}

func inode(t *testing.T, l *net.TCPListener) uint64 {
	t.Helper()
	raw, err := l.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.Fstat(int(fd), &st) }); err != nil || serr != nil {
		t.Fatalf("fstat the listener: %v, %v", err, serr)
	}
	return st.Ino
}

// TestShimFailures: every way either shim cannot start its command exits
// 125 with one line on stderr, and execs nothing. It runs in a namespace
// of its own, where listening on ProxyAddr takes nothing of the host's.
// GODEBUG=inittrace=1 makes a Go runtime that starts say so on stderr: the
// C shim fails before it does.
func TestShimFailures(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-gateway.sock")
	for shimName, shim := range shims(t) {
		for name, args := range map[string][]string{
			"no args":          {ShimArg},
			"no separator":     {ShimArg, "-socket=" + missing, "/bin/true"},
			"no command":       {ShimArg, "-socket=" + missing, "--"},
			"no socket":        {ShimArg, "-socket=", "--", "/bin/true"},
			"relative command": {ShimArg, "-socket=" + missing, "--", "true"},
			"no gateway":       ShimArgs(missing, []string{"/bin/echo", "RAN"}),
			"no such command":  ShimArgs(missing+"-too", []string{"/nonexistent/agent"}),
		} {
			t.Run(shimName+"/"+name, func(t *testing.T) {
				cmd := exec.Command(bwrapPath, append([]string{"--dev-bind", "/", "/", "--unshare-net", "--", shim}, args...)...)
				if shimName == "c" {
					cmd.Env = []string{"GODEBUG=inittrace=1"}
				}
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != shimFailed {
					t.Errorf("exit = %v, want code %d; stderr: %s", err, shimFailed, stderr.String())
				}
				if lines := strings.Count(stderr.String(), "\n"); lines != 1 || !strings.HasPrefix(stderr.String(), "agentgate netshim: ") {
					t.Errorf("stderr is not one line of the shim's: %q", stderr.String())
				}
				if stdout.Len() != 0 {
					t.Errorf("the command ran: %q", stdout.String())
				}
			})
		}
	}
}

// TestShimConstants: the light shim's C (lightshim/shim.c) speaks the
// same protocol as RunShim: the same argument, flag, port, exit code and
// socket-name bound. A constant changed on one side only would make the
// gateway start shims that do not understand it, or listen where the CLI
// is not told to connect.
func TestShimConstants(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(file), "lightshim", "shim.c"))
	if err != nil {
		t.Fatal(err)
	}
	defines := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define ([A-Z_]+) (.+)$`).FindAllSubmatch(src, -1) {
		defines[string(m[1])] = string(m[2])
	}
	for name, want := range map[string]string{
		"SHIM_ARG":        strconv.Quote(ShimArg),
		"SOCKET_FLAG":     strconv.Quote(socketFlag),
		"PROXY_PORT":      strconv.Itoa(proxyPort),
		"SHIM_FAILED":     strconv.Itoa(shimFailed),
		"MAX_SOCKET_PATH": strconv.Itoa(maxSocketPath),
	} {
		if got := defines[name]; got != want {
			t.Errorf("shim.c: #define %s %s, want %s", name, got, want)
		}
	}
	if ProxyAddr != "127.0.0.1:"+strconv.Itoa(proxyPort) {
		t.Errorf("ProxyAddr %s is not on proxyPort %d, where shim.c listens", ProxyAddr, proxyPort)
	}
}
