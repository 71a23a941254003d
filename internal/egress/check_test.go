package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// fakeResolver answers names from a map it lets a test change, and counts
// lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	lookups map[string]int
	// afterLookup, if set, is called after each lookup, outside the lock.
	afterLookup func(host string)
}

func newFakeResolver(answers map[string]string) *fakeResolver {
	f := &fakeResolver{answers: map[string][]netip.Addr{}, lookups: map[string]int{}}
	for name, addrs := range answers {
		f.set(name, addrs)
	}
	return f
}

// set makes name resolve to addrs, a comma-separated list.
func (f *fakeResolver) set(name, addrs string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[name] = nil
	for _, a := range strings.Split(addrs, ",") {
		f.answers[name] = append(f.answers[name], netip.MustParseAddr(a))
	}
}

func (f *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	f.lookups[host]++
	a, ok := f.answers[host]
	after := f.afterLookup
	f.mu.Unlock()
	if after != nil {
		after(host)
	}
	if !ok || network != "ip" {
		return nil, errors.New("no such host")
	}
	return a, nil
}

func (f *fakeResolver) count(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups[host]
}

// testGuard guards port 8080 of the gateway and a NATS server at
// nats.internal:4222, on a host whose only interface address is 192.0.2.10.
func testGuard(t *testing.T, r Resolver) *Guard {
	t.Helper()
	g, err := NewGuard(context.Background(), r, []int{8080}, []string{"nats.internal:4222"})
	if err != nil {
		t.Fatal(err)
	}
	g.localAddrs = func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("192.0.2.10")} }
	return g
}

func TestCheck(t *testing.T) {
	res := newFakeResolver(map[string]string{
		"model.example":    "127.0.0.1",
		"sneaky.example":   "127.0.0.1",
		"public.example":   "93.184.216.34",
		"mixed.example":    "10.1.2.3,93.184.216.34",
		"db.corp.example":  "10.1.2.3",
		"meta.example":     "169.254.169.254",
		"nat64.example":    "64:ff9b::a9fe:a9fe",
		"v6.example":       "2606:4700::1111",
		"nats.internal":    "10.9.9.9",
		"api.wild.example": "93.184.216.35",
	})
	c := &Checker{Guard: testGuard(t, res), Resolver: res}
	model := Policy{Mode: Model, Trusted: mustRules(t, "model.example:4000")}
	allow := Policy{Mode: Allow, Trusted: model.Trusted, Allowed: mustRules(t,
		"sneaky.example", "public.example:443", "mixed.example", "db.corp.example:5432", "10.0.0.0/8:5432",
		"meta.example", "nat64.example", "*.wild.example", "[2606:4700::/32]:443", "127.0.0.1:8080", "nats.internal")}
	cases := []struct {
		name string
		pol  Policy
		host string
		port int
		want string // the address allowed, or a word of the refusal
	}{
		{"trusted name may resolve to loopback", model, "model.example", 4000, "127.0.0.1:4000"},
		{"trusted name on another port", model, "model.example", 4001, "no rule"},
		{"run's name resolving to loopback", allow, "sneaky.example", 443, "loopback address"},
		{"run's name, public", allow, "public.example", 443, "93.184.216.34:443"},
		{"run's name, port not allowed", allow, "public.example", 80, "no rule"},
		{"first public address of several", allow, "mixed.example", 443, "93.184.216.34:443"},
		{"private by name, allowed by its CIDR", allow, "db.corp.example", 5432, "10.1.2.3:5432"},
		{"metadata by name", allow, "meta.example", 80, "metadata"},
		{"metadata through NAT64", allow, "nat64.example", 80, "NAT64"},
		{"wildcard", allow, "API.wild.example.", 443, "93.184.216.35:443"},
		{"wildcard's own domain", allow, "wild.example", 444, "no rule"},
		{"name resolving into an IPv6 CIDR", allow, "v6.example", 443, "[2606:4700::1111]:443"},
		{"name resolving into no CIDR", allow, "v6.example", 5432, "no rule"},
		{"IPv6 literal under an IPv6 CIDR", allow, "[2606:4700::1111]", 443, "[2606:4700::1111]:443"},
		{"IPv6 literal, wrong port", allow, "2606:4700::1111", 80, "no rule"},
		{"CIDR literal", allow, "10.200.0.1", 5432, "10.200.0.1:5432"},
		{"CIDR literal, wrong port", allow, "10.200.0.1", 5433, "no rule"},
		{"gateway port allowed by a rule", allow, "127.0.0.1", 8080, "gateway's own port 8080"},
		{"gateway port on an interface address", allow, "192.0.2.10", 8080, "gateway's own port"},
		{"gateway port on the unspecified address", allow, "0.0.0.0", 8080, "unspecified"},
		{"NATS by name", allow, "nats.internal", 4222, "service the gateway itself uses"},
		{"NATS by address", allow, "10.9.9.9", 4222, "service the gateway itself uses"},
		{"link-local", allow, "fe80::1", 80, "link-local"},
		{"multicast", allow, "224.0.0.1", 80, "multicast"},
		{"broadcast", allow, "255.255.255.255", 80, "broadcast"},
		{"none refuses the trusted", Policy{Mode: None, Trusted: model.Trusted}, "model.example", 4000, "none"},
		{"open allows the guard", Policy{Mode: Open}, "169.254.169.254", 80, "169.254.169.254:80"},
		{"open resolves", Policy{Mode: Open}, "sneaky.example", 8080, "127.0.0.1:8080"},
		{"unknown mode", Policy{Mode: "closed"}, "public.example", 443, "not one the proxy knows"},
		{"bad port", allow, "public.example", 0, "port 0"},
		{"bad name", allow, "a b", 80, "not a host name"},
	}
	for _, tc := range cases {
		d := c.Check(context.Background(), tc.pol, tc.host, tc.port)
		if d.Allowed {
			if d.Addr.String() != tc.want {
				t.Errorf("%s: Check(%s, %d) allowed %s, want %s", tc.name, tc.host, tc.port, d.Addr, tc.want)
			}
		} else if !strings.Contains(d.Reason, tc.want) {
			t.Errorf("%s: Check(%s, %d) refused: %q, want %q", tc.name, tc.host, tc.port, d.Reason, tc.want)
		}
	}
}

func TestCheckDoesNotResolveNamesNoRuleAllows(t *testing.T) {
	res := newFakeResolver(map[string]string{"secret-data.evil.example": "93.184.216.34"})
	c := &Checker{Resolver: res}
	pol := Policy{Mode: Allow, Allowed: mustRules(t, "public.example", "10.0.0.0/8:5432")}
	if d := c.Check(context.Background(), pol, "secret-data.evil.example", 443); d.Allowed {
		t.Fatalf("allowed %s", d.Addr)
	}
	if n := res.count("secret-data.evil.example"); n != 0 {
		t.Errorf("a name no rule allows was looked up %d times", n)
	}
	// An address rule on the port could allow it: then it is resolved.
	c.Check(context.Background(), pol, "secret-data.evil.example", 5432)
	if n := res.count("secret-data.evil.example"); n != 1 {
		t.Errorf("a name an address rule could allow was looked up %d times, want 1", n)
	}
}

func TestCheckUnresolved(t *testing.T) {
	c := &Checker{Resolver: newFakeResolver(nil)}
	d := c.Check(context.Background(), Policy{Mode: Allow, Allowed: mustRules(t, "gone.example")}, "gone.example", 443)
	if d.Allowed || !d.Unresolved || !strings.Contains(d.Reason, "cannot resolve gone.example") {
		t.Errorf("Check of a name that does not resolve = %+v", d)
	}
}

func TestNewGuardRefusesBadInput(t *testing.T) {
	res := newFakeResolver(nil)
	for _, tc := range []struct {
		ports     []int
		endpoints []string
		want      string
	}{
		{[]int{0}, nil, "port 0"},
		{nil, []string{"nats.internal"}, "host:port"},
		{nil, []string{"unknown.example:4222"}, "no such host"},
	} {
		if _, err := NewGuard(context.Background(), res, tc.ports, tc.endpoints); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewGuard(%v, %v) = %v, want %q", tc.ports, tc.endpoints, err, tc.want)
		}
	}
}

func TestGuardLocalEndpointGuardsItsPortEverywhere(t *testing.T) {
	g, err := NewGuard(context.Background(), newFakeResolver(nil), nil, []string{"nats://0.0.0.0:4222"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"127.0.0.1:4222", "[::1]:4222"} {
		if _, refused := g.Refuses(netip.MustParseAddrPort(a)); !refused {
			t.Errorf("a NATS server on 0.0.0.0:4222 is reachable at %s", a)
		}
	}
	if why, refused := g.Refuses(netip.MustParseAddrPort("127.0.0.1:4223")); refused {
		t.Errorf("127.0.0.1:4223 refused: %s", why)
	}
}
