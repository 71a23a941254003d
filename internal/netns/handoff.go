package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// socketName is the Handoff's file in the run's temporary directory.
const socketName = "agentgate-egress.sock"

// maxSocketPath is the longest path a Unix socket can be bound to (the
// size of sockaddr_un's sun_path, less its terminating NUL).
const maxSocketPath = 107

// maxPayload bounds what Receive reads besides the descriptor: the shim
// sends one byte.
const maxPayload = 16

// Handoff is the gateway's end of the descriptor handoff: a Unix socket
// on which one shim sends the listener it made in the run's namespace.
type Handoff struct {
	path      string
	dir       *os.File // held while ln is bound through it (socketAddr)
	ln        *net.UnixListener
	closeOnce sync.Once
	closeErr  error
}

// NewHandoff listens on a Unix socket in dir, the run's temporary
// directory, readable and writable by the gateway's user alone. The socket
// is chmod-ed after it is made: dir, which only that user can enter,
// covers the moment between.
func NewHandoff(dir string) (*Handoff, error) {
	path := filepath.Join(dir, socketName)
	addr, d, err := socketAddr(path)
	if err != nil {
		return nil, fmt.Errorf("handoff socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err == nil {
		err = os.Chmod(path, 0o600)
		if err != nil {
			ln.Close()
		}
	}
	if err != nil {
		if d != nil {
			d.Close()
		}
		return nil, fmt.Errorf("handoff socket: %w", err)
	}
	return &Handoff{path: path, dir: d, ln: ln}, nil
}

// socketAddr is the name to bind or connect to for the socket at path:
// path itself when it fits in sun_path, else the same file reached
// through an open descriptor of its directory (/proc/self/fd/N/name),
// whose descriptor the caller holds until it is done with the name. A
// run's temporary directory lies deep under the data directory: its
// path alone can pass the 107 bytes a socket's name may have.
func socketAddr(path string) (string, *os.File, error) {
	if len(path) <= maxSocketPath {
		return path, nil, nil
	}
	d, err := os.OpenFile(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	short := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path))
	if len(short) > maxSocketPath {
		d.Close()
		return "", nil, fmt.Errorf("%s: the name %s is longer than the %d bytes a Unix socket's may be", path, filepath.Base(path), maxSocketPath)
	}
	return short, d, nil
}

// Path is the socket's path, for ShimArgs.
func (h *Handoff) Path() string { return h.path }

// Close closes and removes the socket. It may be called more than once,
// and after Receive.
func (h *Handoff) Close() error {
	h.closeOnce.Do(func() {
		h.closeErr = h.ln.Close()
		if h.dir != nil {
			h.dir.Close()
		}
	})
	return h.closeErr
}

// Receive accepts one connection and reads from it, up to its end,
// exactly one descriptor: a TCP socket in the listening state, which it
// returns as a net.Listener. Anything else (no descriptor, more than one,
// a socket that is not listening, not TCP, or not a socket) is an error,
// and every descriptor received is closed. The Unix socket is closed and
// removed whatever the outcome. If ctx ends first, Receive returns ctx's
// error.
func (h *Handoff) Receive(ctx context.Context) (net.Listener, error) {
	defer h.Close()
	stop := context.AfterFunc(ctx, func() { h.ln.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	conn, err := h.ln.AcceptUnix()
	if err != nil {
		return nil, orContext(ctx, fmt.Errorf("accept the shim: %w", err))
	}
	defer conn.Close()
	stopConn := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stopConn()
	fds, err := readRights(conn)
	if err == nil && len(fds) != 1 {
		err = fmt.Errorf("the shim sent %d descriptors, want 1", len(fds))
	}
	if err != nil {
		closeAll(fds)
		return nil, orContext(ctx, err)
	}
	return listenerOf(fds[0])
}

// orContext returns ctx's error once ctx has ended, err otherwise: a
// deadline set because ctx ended is not the failure to report.
func orContext(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readRights reads conn to its end and returns every descriptor it
// carried, also when it fails.
func readRights(conn *net.UnixConn) ([]int, error) {
	var fds []int
	buf := make([]byte, maxPayload)
	oob := make([]byte, unix.CmsgSpace(4*4)) // room to see a second descriptor
	payload := 0
	for {
		n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
		got, perr := rightsIn(oob[:oobn])
		fds = append(fds, got...)
		payload += n
		switch {
		case perr != nil:
			return fds, perr
		case flags&unix.MSG_CTRUNC != 0:
			return fds, errors.New("the shim sent more descriptors than one")
		case errors.Is(err, io.EOF), err == nil && n == 0:
			return fds, nil
		case err != nil:
			return fds, fmt.Errorf("read from the shim: %w", err)
		case payload > maxPayload:
			return fds, errors.New("the shim sent more than a descriptor")
		}
	}
}

// rightsIn returns the descriptors in a control message buffer.
func rightsIn(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message from the shim: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_RIGHTS {
			continue
		}
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			return fds, fmt.Errorf("control message from the shim: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// listenerOf checks that fd is a listening TCP socket and returns a
// net.Listener on it. It owns fd: it closes it whatever the outcome (the
// listener holds a copy).
func listenerOf(fd int) (net.Listener, error) {
	if err := checkListening(fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "egress-listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("the shim's listener: %w", err)
	}
	return ln, nil
}

// checkListening tells why fd is not a TCP socket in the listening state.
func checkListening(fd int) error {
	opt := func(name int) int {
		v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, name)
		if err != nil {
			return -1 // not a socket: ENOTSOCK
		}
		return v
	}
	switch {
	case opt(unix.SO_TYPE) != unix.SOCK_STREAM:
		return errors.New("the shim's descriptor is not a stream socket")
	case opt(unix.SO_DOMAIN) != unix.AF_INET && opt(unix.SO_DOMAIN) != unix.AF_INET6:
		return errors.New("the shim's descriptor is not a TCP socket")
	case opt(unix.SO_ACCEPTCONN) != 1:
		return errors.New("the shim's socket is not listening")
	}
	return nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
