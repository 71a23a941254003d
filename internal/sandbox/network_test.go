package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/netns"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// netScript is the confined shell of the network tests: it lists the
// sandbox's interfaces and network namespace, its capabilities, tries a
// DNS lookup when $LOOKUP is set (only where it must fail: a test sends
// nothing beyond the loopback) and then execs netProbe.
const netScript = `echo "netns $(readlink /proc/self/ns/net)"
tail -n +3 /proc/net/dev | while IFS=: read -r name rest; do echo "iface $name"; done
grep CapEff /proc/self/status
if [ -n "$LOOKUP" ]; then getent hosts example.com; echo "getent $?"; fi
exec "$PROBE"`

// hostNet is what a network test holds on the host's loopback: a TCP
// listener and a UDP socket the confined process tries to reach.
type hostNet struct {
	tcp net.Listener
	udp net.PacketConn
}

func newHostNet(t *testing.T) hostNet {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	return hostNet{tcp, udp}
}

// firstTCP returns what the first connection the host's listener accepts
// carries, after connecting to it itself with "from the host": it is
// that unless the confined process got through first.
func (h hostNet) firstTCP(t *testing.T) string {
	t.Helper()
	conn, err := net.Dial("tcp", h.tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "from the host"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	return readOne(t, h.tcp)
}

// firstUDP sends "from the host" to the host's UDP socket, and returns
// the first datagram it reads: that one, unless the confined process's
// arrived before.
func (h hostNet) firstUDP(t *testing.T) string {
	t.Helper()
	conn, err := net.Dial("udp", h.udp.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "from the host"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, _, err := h.udp.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func readOne(t *testing.T, ln net.Listener) string {
	t.Helper()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// confinedRun is the output of netScript run confined.
type confinedRun struct {
	out   string
	proxy string // what reached the listener the shim handed over
}

// runNetScript runs netScript confined as c, with a Handoff and the test
// binary as the shim when withShim, and returns what it printed.
func runNetScript(t *testing.T, b *Bubblewrap, c supervisor.Confinement, host hostNet, withShim bool) confinedRun {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var h *netns.Handoff
	if withShim {
		if h, err = netns.NewHandoff(c.TempDir); err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		c.Network.Shim, c.Network.Socket = self, h.Path()
	}
	argv, err := b.Wrap(c, []string{"/bin/sh", "-c", netScript})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + c.TempDir, "HOME=" + c.Home, "PROBE=" + self,
		netProbeEnv + "=1", "HOST_TCP=" + host.tcp.Addr().String(), "HOST_UDP=" + host.udp.LocalAddr().String()}
	if c.Network != nil {
		cmd.Env = append(cmd.Env, "LOOKUP=1")
	}
	cmd.Dir = c.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var run confinedRun
	if h != nil {
		ln, err := h.Receive(ctx)
		if err != nil {
			_ = cmd.Wait()
			t.Fatalf("receive the shim's listener: %v; the sandbox said: %s", err, out.String())
		}
		defer ln.Close()
		run.proxy = readOne(t, ln)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %v; output: %s", argv, err, out.String())
	}
	run.out = out.String()
	return run
}

// field returns the rest of the first line of out whose first word is
// key, or "" if there is none.
func field(out, key string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == key {
			return strings.Join(f[1:], " ")
		}
	}
	return ""
}

func interfaces(out string) []string {
	var names []string
	for l := range strings.SplitSeq(out, "\n") {
		if name, ok := strings.CutPrefix(l, "iface "); ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}

func ownNetns(t *testing.T) string {
	t.Helper()
	ns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestNetworkConfined: under Network the sandbox has only lo, a namespace
// of its own, no way to the host's loopback (TCP or UDP) nor to a DNS
// server, and its 127.0.0.1:3128 is the listener the gateway received from
// the shim. The same under full, which keeps no capability as root.
func TestNetworkConfined(t *testing.T) {
	for _, perm := range []runs.Permission{runs.WorkspaceWrite, runs.Full} {
		t.Run(string(perm), func(t *testing.T) {
			b := newBwrap(t)
			c := confinement(t, perm)
			c.Network = &supervisor.NetConfinement{}
			host := newHostNet(t)
			run := runNetScript(t, b, c, host, true)
			if got := interfaces(run.out); !slices.Equal(got, []string{"lo"}) {
				t.Errorf("the sandbox's interfaces are %v, want [lo]:\n%s", got, run.out)
			}
			if ns := field(run.out, "netns"); ns == "" || ns == ownNetns(t) {
				t.Errorf("the sandbox's network namespace is %q, the host's is %s", ns, ownNetns(t))
			}
			if got := field(run.out, "host-tcp:"); !strings.HasPrefix(got, "failed") {
				t.Errorf("connecting to the host's 127.0.0.1 listener: %q, want a failure:\n%s", got, run.out)
			}
			if got := host.firstTCP(t); got != "from the host" {
				t.Errorf("the host's TCP listener first got %q", got)
			}
			if got := host.firstUDP(t); got != "from the host" {
				t.Errorf("the host's UDP socket first got %q", got)
			}
			if got := field(run.out, "getent"); got == "0" || got == "" {
				t.Errorf("a DNS lookup in the sandbox: getent exited %q:\n%s", got, run.out)
			}
			if got := field(run.out, "proxy:"); got != "sent" || run.proxy != proxyGreeting {
				t.Errorf("127.0.0.1:3128 in the sandbox: %q; the handed-over listener read %q, want %q", got, run.proxy, proxyGreeting)
			}
			if caps := field(run.out, "CapEff:"); perm == runs.Full && (caps == "" || strings.Trim(caps, "0") != "") {
				t.Errorf("a full run with a network namespace keeps capabilities %q", caps)
			}
		})
	}
}

// TestNetworkNone: with a network namespace and no shim, nothing listens
// on 127.0.0.1:3128 and there is no way out at all.
func TestNetworkNone(t *testing.T) {
	b := newBwrap(t)
	c := confinement(t, runs.ReadOnly)
	c.Network = &supervisor.NetConfinement{}
	host := newHostNet(t)
	run := runNetScript(t, b, c, host, false)
	if got := field(run.out, "proxy:"); !strings.HasPrefix(got, "failed") {
		t.Errorf("127.0.0.1:3128 in a sandbox without a shim: %q, want a failure:\n%s", got, run.out)
	}
	if got := field(run.out, "host-tcp:"); !strings.HasPrefix(got, "failed") {
		t.Errorf("connecting to the host's 127.0.0.1 listener: %q, want a failure:\n%s", got, run.out)
	}
	if got := interfaces(run.out); !slices.Equal(got, []string{"lo"}) {
		t.Errorf("the sandbox's interfaces are %v, want [lo]", got)
	}
}

// TestNetworkShared: without Network the sandbox is on the host's network,
// as before: the same probe reaches the host's listener and socket.
func TestNetworkShared(t *testing.T) {
	b := newBwrap(t)
	c := confinement(t, runs.WorkspaceWrite)
	host := newHostNet(t)
	run := runNetScript(t, b, c, host, false)
	if ns := field(run.out, "netns"); ns != ownNetns(t) {
		t.Errorf("the sandbox's network namespace is %q, want the host's %s", ns, ownNetns(t))
	}
	if got := field(run.out, "host-tcp:"); got != "sent" {
		t.Errorf("connecting to the host's listener: %q:\n%s", got, run.out)
	}
	if got := readOne(t, host.tcp); got != probeTCPGreeting {
		t.Errorf("the host's TCP listener got %q, want %q", got, probeTCPGreeting)
	}
	if got := host.firstUDP(t); got != probeUDPGreeting {
		t.Errorf("the host's UDP socket first got %q, want %q", got, probeUDPGreeting)
	}
}

func TestWrapNetworkArgv(t *testing.T) {
	hidden := t.TempDir()
	b := newBwrap(t, hidden)
	argv := []string{"/usr/bin/claude", "-p", "hi"}
	cli := " -- " + b.env + " --default-signal=INT,TERM /usr/bin/claude -p hi"
	for _, perm := range []runs.Permission{runs.ReadOnly, runs.WorkspaceWrite, runs.Full} {
		c := confinement(t, perm)
		c.Network = &supervisor.NetConfinement{Shim: "/opt/agentgate/gateway", Socket: c.TempDir + "/handoff.sock"}
		got, err := b.Wrap(c, argv)
		if err != nil {
			t.Fatal(err)
		}
		line := strings.Join(got, " ")
		shim := " -- /opt/agentgate/gateway " + netns.ShimArg + " -socket=" + resolve(c.TempDir) + "/handoff.sock"
		if !strings.HasSuffix(line, shim+cli) || !strings.Contains(line, " --unshare-net ") {
			t.Errorf("%s: argv does not unshare the network and start the CLI under the shim: %s", perm, line)
		}
		c.Network.Shim = ""
		got, err = b.Wrap(c, argv)
		if line := strings.Join(got, " "); err != nil || !strings.HasSuffix(line, " --chdir "+resolve(c.Dir)+cli) || !strings.Contains(line, " --unshare-net ") {
			t.Errorf("%s without a shim: %s, %v", perm, line, err)
		}
	}
	c := confinement(t, runs.Full)
	c.Network = &supervisor.NetConfinement{}
	got, err := b.Wrap(c, argv)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(got, " ")
	for _, want := range []string{"--die-with-parent", "--dev-bind / /", "--unshare-net", "--unshare-pid --proc /proc"} {
		if !strings.Contains(line, want) {
			t.Errorf("full: no %q in %s", want, line)
		}
	}
	if root := os.Geteuid() == 0; root != strings.Contains(line, "--cap-drop ALL") || strings.Contains(line, "--cap-add") {
		t.Errorf("full: running as root is %v, but the capabilities flags are: %s", root, line)
	}
	if strings.Contains(line, "--ro-bind") || strings.Contains(line, hidden) {
		t.Errorf("full: the file system is confined: %s", line)
	}
	for name, n := range map[string]supervisor.NetConfinement{
		"socket outside the temp dir": {Shim: "/opt/agentgate/gateway", Socket: t.TempDir() + "/handoff.sock"},
		"socket is the temp dir":      {Shim: "/opt/agentgate/gateway", Socket: c.TempDir},
		"relative socket":             {Shim: "/opt/agentgate/gateway", Socket: "handoff.sock"},
		"relative shim":               {Shim: "gateway", Socket: c.TempDir + "/handoff.sock"},
	} {
		c.Network = &n
		if got, err := b.Wrap(c, argv); err == nil {
			t.Errorf("%s: accepted: %v", name, got)
		}
	}
}

// TestProbeNetwork: a bwrap that can sandbox but not unshare the network
// passes Probe and fails ProbeNetwork, saying why.
func TestProbeNetwork(t *testing.T) {
	if err := newBwrap(t).ProbeNetwork(context.Background()); err != nil {
		t.Fatalf("probe the network namespace: %v", err)
	}
	fake := t.TempDir() + "/bwrap"
	script := "#!/bin/sh\ncase \" $* \" in *' --unshare-net '*) echo 'bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted' >&2; exit 1;; esac\nexec " + bwrapPath + " \"$@\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Bwrap: fake})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Probe(context.Background()); err != nil {
		t.Errorf("probe without a network namespace: %v", err)
	}
	err = b.ProbeNetwork(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "RTM_NEWADDR") {
		t.Errorf("probe of a bwrap that cannot unshare the network = %v", err)
	}
}

// TestNetworkHidesTheHostsSockets: a Unix socket in the host's /run,
// which a read-only mount leaves open to connect(), is out of sight of a
// run confined to its network namespace, and reached without one.
func TestNetworkHidesTheHostsSockets(t *testing.T) {
	path := filepath.Join("/run", "agentgate-sandbox-test-"+strconv.Itoa(os.Getpid())+".sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("a socket in /run (the suite runs as root): %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "reached-host") })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	b := newBwrap(t)
	script := "curl -sS -m 30 --unix-socket " + path + " http://host/ 2>&1; echo; echo exit=$?"
	for _, confined := range []bool{true, false} {
		c := confinement(t, runs.WorkspaceWrite)
		if confined {
			c.Network = &supervisor.NetConfinement{}
		}
		out, _ := shell(t, b, c, script)
		if reached := strings.Contains(out, "reached-host"); reached == confined {
			t.Errorf("network confined %v: the host's socket in /run reached %v: %q", confined, reached, out)
		}
	}
}
