package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ShimArg, as the first argument, makes the gateway's binary (or
// agentgate-reaper) run as a run's shim (RunShim).
const ShimArg = "__agentgate_netshim"

// ProxyAddr is where the shim listens, inside the run's namespace, for the
// CLI's proxy connections.
const ProxyAddr = "127.0.0.1:3128"

// proxyPort is ProxyAddr's port.
const proxyPort = 3128

// ProxyURL is what a confined CLI is given as its HTTP(S) proxy.
func ProxyURL() string { return "http://" + ProxyAddr }

const socketFlag = "-socket="

// shimFailed is the shim's exit code when it cannot start the CLI: 125,
// as env(1) and the reaper use for their own failures.
const shimFailed = 125

// ShimArgs returns the arguments that make the shim hand its listener to
// the Handoff at socket and then exec argv.
func ShimArgs(socket string, argv []string) []string {
	return append([]string{ShimArg, socketFlag + socket, "--"}, argv...)
}

// RunShim is the shim's main, given the arguments after ShimArg: it
// listens on ProxyAddr, sends the listening socket to the Handoff at
// -socket, closes both sockets and execs argv, whose first word must be an
// absolute path. It returns only on failure: 125, having written one line
// to stderr.
func RunShim(args []string) int {
	socket, argv, err := parseShimArgs(args)
	if err == nil {
		err = handOver(socket)
	}
	if err == nil {
		err = syscall.Exec(argv[0], argv, os.Environ())
		err = fmt.Errorf("exec %s: %w", argv[0], err)
	}
	fmt.Fprintf(os.Stderr, "agentgate netshim: %v\n", err)
	return shimFailed
}

func parseShimArgs(args []string) (socket string, argv []string, err error) {
	if len(args) < 3 || !strings.HasPrefix(args[0], socketFlag) || args[1] != "--" {
		return "", nil, errors.New("usage: " + ShimArg + " -socket=PATH -- ARGV...")
	}
	socket, argv = strings.TrimPrefix(args[0], socketFlag), args[2:]
	if socket == "" {
		return "", nil, errors.New("no -socket path")
	}
	if !filepath.IsAbs(argv[0]) {
		return "", nil, fmt.Errorf("the command %q is not an absolute path", argv[0])
	}
	return socket, argv, nil
}

// handOver makes the listener and sends it to the Handoff at socket. Both
// descriptors are closed when it returns, so the CLI holds neither: the
// gateway's copy keeps the listener open.
func handOver(socket string) error {
	ln, err := listenProxy()
	if err != nil {
		return err
	}
	defer unix.Close(ln)
	conn, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("unix socket: %w", err)
	}
	defer unix.Close(conn)
	addr, dir, err := socketAddr(socket)
	if err != nil {
		return fmt.Errorf("the gateway's socket: %w", err)
	}
	if dir != nil {
		defer dir.Close()
	}
	if err := unix.Connect(conn, &unix.SockaddrUnix{Name: addr}); err != nil {
		return fmt.Errorf("connect to the gateway at %s: %w", socket, err)
	}
	if err := unix.Sendmsg(conn, []byte{'L'}, unix.UnixRights(ln), nil, 0); err != nil {
		return fmt.Errorf("send the listener to the gateway: %w", err)
	}
	return nil
}

// listenProxy returns a TCP socket listening on ProxyAddr. It is made
// with system calls, not net.Listen: the shim execs next, and has no use
// for the runtime's poller.
func listenProxy() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("tcp socket: %w", err)
	}
	addr := &unix.SockaddrInet4{Port: proxyPort, Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, addr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("listen on %s: %w", ProxyAddr, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("listen on %s: %w", ProxyAddr, err)
	}
	return fd, nil
}

// Main runs the shim and exits when the process was started as one
// (os.Args[1] is ShimArg), and returns otherwise: for the main of a
// binary, a test binary's among them, that the gateway uses as the shim.
func Main() {
	if len(os.Args) > 1 && os.Args[1] == ShimArg {
		os.Exit(RunShim(os.Args[2:]))
	}
}
