package netns

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// send connects to the handoff at path and sends, in one message per
// element of msgs, one byte with the descriptors of that element.
func send(t *testing.T, path string, msgs ...[]int) {
	t.Helper()
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, fds := range msgs {
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		if _, _, err := conn.WriteMsgUnix([]byte{'L'}, oob, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// sendable makes a descriptor of each kind a shim could send, as the
// /proc/self/fd target that names it, and a func closing the test's copy.
type sendable func(t *testing.T) (fd int, target string, closeFd func())

func tcpListener(t *testing.T) (int, string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return fdOf(t, ln.(*net.TCPListener), func() { ln.Close() })
}

func unixListener(t *testing.T) (int, string, func()) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "other.sock"))
	if err != nil {
		t.Fatal(err)
	}
	return fdOf(t, ln.(*net.UnixListener), func() { ln.Close() })
}

func unboundTCP(t *testing.T) (int, string, func()) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fd, target(t, fd), func() { unix.Close(fd) }
}

func regularFile(t *testing.T) (int, string, func()) {
	f, err := os.CreateTemp(t.TempDir(), "file")
	if err != nil {
		t.Fatal(err)
	}
	return int(f.Fd()), target(t, int(f.Fd())), func() { f.Close() }
}

func fdOf(t *testing.T, c interface {
	SyscallConn() (syscall.RawConn, error)
}, closeFd func()) (int, string, func()) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	if err := raw.Control(func(f uintptr) { fd = int(f) }); err != nil {
		t.Fatal(err)
	}
	return fd, target(t, fd), closeFd
}

func target(t *testing.T, fd int) string {
	t.Helper()
	s, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReceiveRefuses: whatever arrives that is not one listening TCP
// socket is an error, the socket file is gone, and once the sender has
// closed its copies no descriptor of what was sent is left open here.
func TestReceiveRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		msgs  [][]sendable
		error string
	}{
		{"no descriptor", [][]sendable{{}}, "sent 0 descriptors"},
		{"nothing at all", nil, "sent 0 descriptors"},
		{"two in one message", [][]sendable{{tcpListener, tcpListener}}, "sent 2 descriptors"},
		{"two messages", [][]sendable{{tcpListener}, {tcpListener}}, "sent 2 descriptors"},
		{"many", [][]sendable{{tcpListener, tcpListener, tcpListener, tcpListener, tcpListener, tcpListener}}, "more descriptors than one"},
		{"not listening", [][]sendable{{unboundTCP}}, "not listening"},
		{"not tcp", [][]sendable{{unixListener}}, "not a TCP socket"},
		{"not a socket", [][]sendable{{regularFile}}, "not a stream socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewHandoff(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			var msgs [][]int
			var targets []string
			var closers []func()
			for _, m := range tc.msgs {
				var fds []int
				for _, make := range m {
					fd, target, closeFd := make(t)
					fds, targets, closers = append(fds, fd), append(targets, target), append(closers, closeFd)
				}
				msgs = append(msgs, fds)
			}
			done := make(chan error, 1)
			go func() {
				ln, err := h.Receive(context.Background())
				if ln != nil {
					ln.Close()
				}
				done <- err
			}()
			send(t, h.Path(), msgs...)
			err = <-done
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Errorf("Receive = %v, want an error saying %q", err, tc.error)
			}
			if _, err := os.Stat(h.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the handoff socket is still there: %v", err)
			}
			for _, c := range closers {
				c()
			}
			assertNotOpen(t, targets)
		})
	}
}

// assertNotOpen fails the test if this process holds any of targets.
func assertNotOpen(t *testing.T, targets []string) {
	t.Helper()
	fds, err := openFds()
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		for _, target := range targets {
			if fd.target == target {
				t.Errorf("fd %d still holds %s, which was sent and refused", fd.num, target)
			}
		}
	}
}

// TestReceiveContext: a Receive nobody answers, or answers with nothing
// but an open connection, ends with ctx and returns ctx's error.
func TestReceiveContext(t *testing.T) {
	t.Run("nobody connects", func(t *testing.T) {
		h, err := NewHandoff(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if ln, err := h.Receive(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Receive = %v, %v; want context.Canceled", ln, err)
		}
		if _, err := os.Stat(h.Path()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the handoff socket is still there: %v", err)
		}
	})
	t.Run("connected, silent", func(t *testing.T) {
		h, err := NewHandoff(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: h.Path(), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := h.Receive(ctx)
			done <- err
		}()
		// Receive is still accepting or already reading the silent
		// connection: either way it ends with ctx.
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Receive = %v; want context.Canceled", err)
		}
	})
}

func TestNewHandoff(t *testing.T) {
	h, err := NewHandoff(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(h.Path())
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("the handoff socket: %v, %v; want a socket of mode 0600", fi.Mode(), err)
	}
	if err := h.Close(); err != nil {
		t.Error(err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := os.Stat(h.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the handoff socket is still there after Close: %v", err)
	}
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	// A directory too deep for a socket's name: bound through the
	// directory's descriptor, and reached the same way.
	deep, err := NewHandoff(long)
	if err != nil {
		t.Fatalf("NewHandoff in a directory too deep for a Unix socket's name: %v", err)
	}
	if len(deep.Path()) <= maxSocketPath {
		t.Fatalf("the path %s is not too long for the test", deep.Path())
	}
	if fi, err := os.Stat(deep.Path()); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("the deep socket: %v, %v", fi, err)
	}
	addr, dir, err := socketAddr(deep.Path())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("unix", addr)
	dir.Close()
	if err != nil {
		t.Fatalf("dial the deep socket through its directory: %v", err)
	}
	conn.Close()
	if err := deep.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(deep.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deep socket is still there after Close: %v", err)
	}
}
