package netguard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor polls cond until it holds, failing the test after a deadline far
// above what a loaded machine needs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdServer accepts from a guarded listener and keeps every connection
// open, greeting it with "ok\n" so that its client knows it was accepted.
type holdServer struct {
	ln    *Listener
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

func startHold(t *testing.T, opts Options) *holdServer {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &holdServer{ln: Listen(inner, opts), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			_, _ = c.Write([]byte("ok\n"))
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *holdServer) stop() {
	_ = s.ln.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}

func (s *holdServer) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// closeOne closes the first connection held.
func (s *holdServer) closeOne() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.conns[0].Close()
	s.conns = s.conns[1:]
}

// dialFrom connects to addr from the loopback address src (all of
// 127.0.0.0/8 is loopback on Linux, so each is a client of its own).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	return c
}

// outcome reads what the server said first: "ok" for an accepted
// connection, the status of a refusal, or "closed" for one closed without a
// word (a refusal when the refuser is busy).
func outcome(c net.Conn) string {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	switch {
	case line == "ok\n":
		return "ok"
	case strings.HasPrefix(line, "HTTP/1.1 "):
		return strings.Fields(line)[1]
	case err != nil:
		return "closed"
	}
	return "unexpected " + line
}

// dialAll dials n connections at once from src and returns each outcome.
func dialAll(t *testing.T, n int, src, addr string) (map[string]int, []net.Conn) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	conns := make([]net.Conn, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
			c, err := d.Dial("tcp", addr)
			o := "dial failed"
			if err == nil {
				o = outcome(c)
				conns[i] = c
			}
			mu.Lock()
			got[o]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	return got, conns
}

func TestPerClientBoundHoldsUnderConcurrentDials(t *testing.T) {
	s := startHold(t, Options{PerClient: 5, Total: -1})
	got, _ := dialAll(t, 60, "127.0.0.1", s.ln.Addr().String())
	if got["ok"] != 5 {
		t.Fatalf("accepted %d of 60 concurrent dials from one client, want 5 (outcomes %v)", got["ok"], got)
	}
	if got["429"]+got["closed"] != 55 {
		t.Fatalf("outcomes %v: want the 55 others refused", got)
	}
	if got["429"] == 0 {
		t.Fatalf("outcomes %v: no refusal had its 429", got)
	}
	if n := s.ln.Open(); n != 5 {
		t.Fatalf("Open() = %d, want 5", n)
	}
	perClient, total := s.ln.Refused()
	if perClient != 55 || total != 0 {
		t.Fatalf("Refused() = %d, %d, want 55, 0", perClient, total)
	}

	// Another client is not counted against the first.
	if o := outcome(dialFrom(t, "127.0.0.2", s.ln.Addr().String())); o != "ok" {
		t.Fatalf("a second client's first connection: %s, want ok", o)
	}
}

func TestTotalBoundHoldsAcrossClients(t *testing.T) {
	s := startHold(t, Options{PerClient: -1, Total: 4})
	addr := s.ln.Addr().String()
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, _ := dialAll(t, 1, fmt.Sprintf("127.0.0.%d", 2+i), addr)
			mu.Lock()
			defer mu.Unlock()
			for k, v := range o {
				got[k] += v
			}
		}()
	}
	wg.Wait()
	if got["ok"] != 4 || got["503"]+got["closed"] != 16 {
		t.Fatalf("20 clients dialling a listener bounded to 4: %v, want 4 ok and 16 refused", got)
	}
	if _, total := s.ln.Refused(); total != 16 {
		t.Fatalf("refused for the total: %d, want 16", total)
	}
}

func TestClosedConnectionFreesItsSlot(t *testing.T) {
	s := startHold(t, Options{PerClient: 2, Total: -1})
	addr := s.ln.Addr().String()
	for range 2 {
		if o := outcome(dialFrom(t, "127.0.0.1", addr)); o != "ok" {
			t.Fatalf("connection within the bound: %s", o)
		}
	}
	if o := outcome(dialFrom(t, "127.0.0.1", addr)); o != "429" {
		t.Fatalf("third connection: %s, want 429", o)
	}
	s.closeOne()
	waitFor(t, "the slot to be freed", func() bool { return s.ln.Open() == 1 })
	if o := outcome(dialFrom(t, "127.0.0.1", addr)); o != "ok" {
		t.Fatalf("connection after one closed: %s, want ok", o)
	}
	// A second Close frees nothing more.
	s.mu.Lock()
	c := s.conns[0]
	s.mu.Unlock()
	_ = c.Close()
	_ = c.Close()
	if n := s.ln.Open(); n != 1 {
		t.Fatalf("Open() after closing one connection twice = %d, want 1", n)
	}
}

// A client that sent its request before the refusal still reads the whole
// response: the refusal does not reset the connection under it.
func TestRefusalIsAnHTTPResponse(t *testing.T) {
	s := startHold(t, Options{PerClient: 1, Total: -1})
	addr := s.ln.Addr().String()
	if o := outcome(dialFrom(t, "127.0.0.1", addr)); o != "ok" {
		t.Fatalf("first connection: %s", o)
	}
	c := dialFrom(t, "127.0.0.1", addr)
	defer c.Close()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: probe\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the refusal: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the refusal's body: %v", err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || !resp.Close || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("refusal %d close=%v %v", resp.StatusCode, resp.Close, resp.Header)
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "too_many_connections" || e.Error.Message == "" {
		t.Fatalf("refusal body %s: %v", body, err)
	}
	// The server closed its side.
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("after the refusal read %d, %v; want EOF", n, err)
	}
}

// The listener's goroutines, its refusals', end with Close, under a flood
// of refusals too.
func TestNoGoroutineOutlivesClose(t *testing.T) {
	base := runtime.NumGoroutine()
	s := startHold(t, Options{PerClient: 1, Total: -1})
	addr := s.ln.Addr().String()
	// Refusals that stall: these clients never read nor close.
	var stalled []net.Conn
	for range 200 {
		stalled = append(stalled, dialFrom(t, "127.0.0.1", addr))
	}
	waitFor(t, "every connection refused", func() bool {
		pc, _ := s.ln.Refused()
		return pc == 199 && s.held() == 1
	})
	s.stop()
	for _, c := range stalled {
		c.Close()
	}
	waitFor(t, fmt.Sprintf("the goroutine count to return to %d", base), func() bool {
		return runtime.NumGoroutine() <= base
	})
}

func TestClientKey(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want string
	}{
		{"127.0.0.1:80", "127.0.0.1"},
		{"[::ffff:10.1.2.3]:443", "10.1.2.3"},
		{"[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", "2001:db8:1:2::"},
		{"[2001:db8:1:2::1%eth0]:443", "2001:db8:1:2::"},
		{"[::1]:8080", "::"},
	} {
		ap := netip.MustParseAddrPort(tc.addr)
		got, ok := clientKey(net.TCPAddrFromAddrPort(ap))
		if !ok || got.String() != tc.want {
			t.Errorf("clientKey(%s) = %v, %v; want %s", tc.addr, got, ok, tc.want)
		}
	}
	// Two addresses of one IPv6 /64 are one client; of two /64s, two.
	a, _ := clientKey(net.TCPAddrFromAddrPort(netip.MustParseAddrPort("[2001:db8::1]:1")))
	b, _ := clientKey(net.TCPAddrFromAddrPort(netip.MustParseAddrPort("[2001:db8::ffff:1]:2")))
	c, _ := clientKey(net.TCPAddrFromAddrPort(netip.MustParseAddrPort("[2001:db8:0:1::1]:2")))
	if a != b || a == c {
		t.Errorf("IPv6 keys: %v %v %v", a, b, c)
	}
	if _, ok := clientKey(&net.UnixAddr{Name: "/run/gw.sock", Net: "unix"}); ok {
		t.Error("a unix socket address has a client key")
	}
	if _, ok := clientKey(nil); ok {
		t.Error("a nil address has a client key")
	}
}

// strAddr is a net.Addr of any text, as a listener other than TCP may give.
type strAddr string

func (a strAddr) Network() string { return "x" }
func (a strAddr) String() string  { return string(a) }

func FuzzClientKey(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "[::1]:1", "[fe80::1%eth0]:22", "[::ffff:1.2.3.4]:5", "", "@", "/tmp/s", "[::]:0", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, ok := clientKey(strAddr(s))
		if !ok {
			return
		}
		if !k.IsValid() || k.Zone() != "" || k.Is4In6() {
			t.Fatalf("clientKey(%q) = %v: not a plain address", s, k)
		}
		if k.Is6() {
			if p, _ := k.Prefix(64); p.Addr() != k {
				t.Fatalf("clientKey(%q) = %v: not a /64", s, k)
			}
		}
	})
}

func TestDefaultTotal(t *testing.T) {
	for _, tc := range []struct {
		nofile  uint64
		maxRuns int
		want    int
	}{
		{1024, 4, 848},
		{1024, 0, 912},
		{65536, 16, 65536 - 64 - 256 - 48},
		{100, 4, minTotal},
		{0, 0, minTotal},
		{^uint64(0), 4, 1 << 30},
	} {
		if got := DefaultTotal(tc.nofile, tc.maxRuns); got != tc.want {
			t.Errorf("DefaultTotal(%d, %d) = %d, want %d", tc.nofile, tc.maxRuns, got, tc.want)
		}
	}
}

// The runtime raises the soft limit itself (to hard−1); RaiseNoFile then
// leaves it, so that the agents the gateway starts keep the original limit.
func TestRaiseNoFile(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	soft, raised, err := RaiseNoFile()
	if err != nil {
		t.Fatal(err)
	}
	if soft+1 < lim.Max {
		t.Fatalf("soft limit %d after RaiseNoFile, hard %d", soft, lim.Max)
	}
	if raised {
		t.Fatalf("RaiseNoFile set the limit that the runtime had raised (soft %d, hard %d)", lim.Cur, lim.Max)
	}
	if NoFile() != soft {
		t.Fatalf("NoFile() = %d, RaiseNoFile said %d", NoFile(), soft)
	}
}
