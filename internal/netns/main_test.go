package netns

import (
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/testproc"
)

// fdsEnv makes the test binary the command the shim execs: it lists its
// open descriptors, then writes fdsGreeting to ProxyAddr.
const fdsEnv = "NETNS_TEST_LIST_FDS"

const fdsGreeting = "hello from inside"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ShimArg {
		testproc.Exit(RunShim(os.Args[2:]))
	}
	if os.Getenv(fdsEnv) != "" {
		testproc.Exit(listFdsAndGreet())
	}
	goleak.VerifyTestMain(m)
}

// listFdsAndGreet prints "fd N TARGET" for each open descriptor, then
// connects to ProxyAddr and writes fdsGreeting.
func listFdsAndGreet() int {
	fds, err := openFds()
	if err != nil {
		fmt.Println("list fds:", err)
		return 1
	}
	for _, fd := range fds {
		fmt.Printf("fd %d %s\n", fd.num, fd.target)
	}
	conn, err := net.Dial("tcp", ProxyAddr)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, fdsGreeting); err != nil {
		fmt.Println("write:", err)
		return 1
	}
	return 0
}

type openFd struct {
	num    int
	target string // what /proc/self/fd/N links to: "socket:[123]", a path...
}

// openFds lists this process's descriptors, but the one ReadDir holds.
func openFds() ([]openFd, error) {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var fds []openFd
	for _, n := range names {
		num, err := strconv.Atoi(n)
		if err != nil || uintptr(num) == dir.Fd() {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + n)
		if err != nil {
			continue // closed meanwhile by another goroutine
		}
		fds = append(fds, openFd{num, target})
	}
	sort.Slice(fds, func(i, j int) bool { return fds[i].num < fds[j].num })
	return fds, nil
}
