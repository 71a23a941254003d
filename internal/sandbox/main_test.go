package sandbox

import (
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/netns"
	"github.com/agentgate/agentgate/internal/testproc"
)

// netProbeEnv makes the test binary a confined process that tries the
// network (netProbe) instead of running tests.
const netProbeEnv = "SANDBOX_TEST_NET_PROBE"

// What netProbe writes to each TCP peer it reaches, and sends over UDP.
const (
	probeTCPGreeting = "tcp from the sandbox"
	probeUDPGreeting = "udp from the sandbox"
	proxyGreeting    = "hello, proxy"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == netns.ShimArg {
		testproc.Exit(netns.RunShim(os.Args[2:])) // the sandbox's network shim
	}
	if os.Getenv(netProbeEnv) != "" {
		netProbe(os.Getenv("HOST_TCP"), os.Getenv("HOST_UDP"))
		testproc.Exit(0)
	}
	os.Exit(m.Run())
}

// netProbe connects to the test's TCP listener at hostTCP, sends a
// datagram to its UDP socket at hostUDP, and connects to the shim's
// netns.ProxyAddr, writing a greeting to each; it prints one line for
// each, saying what happened.
func netProbe(hostTCP, hostUDP string) {
	fmt.Println("host-tcp:", greet("tcp", hostTCP, probeTCPGreeting))
	fmt.Println("host-udp:", greet("udp", hostUDP, probeUDPGreeting))
	fmt.Println("proxy:", greet("tcp", netns.ProxyAddr, proxyGreeting))
}

func greet(network, addr, msg string) string {
	// The deadline bounds a connection that would hang: inside a
	// namespace with only lo, a refusal comes at once.
	conn, err := net.DialTimeout(network, addr, 30*time.Second)
	if err != nil {
		return "failed: " + err.Error()
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, msg); err != nil {
		return "write failed: " + err.Error()
	}
	return "sent"
}
