package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentgate/agentgate/internal/ipclass"
)

// Resolver looks names up; *net.Resolver is one. network is "ip".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard is what no run but an open one may reach, whatever its rules say:
// the gateway itself and what only a host may talk to. A nil *Guard
// refuses only the fixed addresses (link-local, metadata, unspecified,
// multicast, broadcast).
type Guard struct {
	localPorts map[uint16]bool           // the gateway's ports, on any local address
	endpoints  map[netip.AddrPort]string // other services, by address: the name they were given as
	// localAddrs lists this host's interface addresses. It is called when
	// a checked port is one of localPorts, so that an address added since
	// NewGuard is guarded too.
	localAddrs func() []netip.Addr
}

// NewGuard builds the guard. ports are the gateway's listening ports (API,
// metrics...), refused on every local address: loopback, unspecified and
// this host's interface addresses. endpoints are "host:port" (or a URL
// with a port, as nats://host:4222) of services to refuse wherever they
// are; a name among them is resolved once, here, with r, and an endpoint
// on a local address guards its port on every local address, as a server
// listening on 0.0.0.0 is reached through all of them.
func NewGuard(ctx context.Context, r Resolver, ports []int, endpoints []string) (*Guard, error) {
	g := &Guard{localPorts: map[uint16]bool{}, endpoints: map[netip.AddrPort]string{}, localAddrs: interfaceAddrs}
	for _, p := range ports {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("guard: port %d is not from 1 to 65535", p)
		}
		g.localPorts[uint16(p)] = true
	}
	for _, e := range endpoints {
		if err := g.addEndpoint(ctx, r, e); err != nil {
			return nil, fmt.Errorf("guard: endpoint %q: %w", truncate(e, 80), err)
		}
	}
	return g, nil
}

// addEndpoint resolves e and guards its addresses.
func (g *Guard) addEndpoint(ctx context.Context, r Resolver, e string) error {
	host, port, err := splitEndpoint(e)
	if err != nil {
		return err
	}
	addrs, err := resolve(ctx, r, host)
	if err != nil {
		return err
	}
	local := g.localAddrs()
	for _, a := range addrs {
		g.endpoints[netip.AddrPortFrom(a, port)] = e
		if isLocal(a, local) {
			g.localPorts[port] = true
		}
	}
	return nil
}

// splitEndpoint reads "host:port", "[v6]:port" or "scheme://host:port/...".
func splitEndpoint(e string) (string, uint16, error) {
	if strings.Contains(e, "://") {
		u, err := url.Parse(e)
		if err != nil {
			return "", 0, errors.New("is not a URL")
		}
		e = u.Host
	}
	host, port, err := net.SplitHostPort(e)
	if err != nil {
		return "", 0, errors.New("is not host:port")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || host == "" {
		return "", 0, errors.New("is not host:port with a port from 1 to 65535")
	}
	return host, uint16(n), nil
}

// Refuses reports whether no run but an open one may reach a, and why.
func (g *Guard) Refuses(a netip.AddrPort) (reason string, refused bool) {
	ip := a.Addr().Unmap()
	switch {
	case !ip.IsValid():
		return "not an address", true
	case ip.Zone() != "":
		return "an address with a zone, which only reaches a link", true
	}
	if embedded, ok := ipclass.NAT64(ip); ok {
		// The translator reaches the embedded address on the same port:
		// the gateway's, or a service of its, as well as what ipclass
		// knows.
		if why, refused := g.Refuses(netip.AddrPortFrom(embedded, a.Port())); refused {
			return "a NAT64 address of " + embedded.String() + ", " + why, true
		}
	}
	if kind, what := ipclass.Of(ip); kind == ipclass.Infrastructure {
		return what, true
	}
	if g == nil {
		return "", false
	}
	a = netip.AddrPortFrom(ip, a.Port())
	if e, ok := g.endpoints[a]; ok {
		return "a service the gateway itself uses (" + e + ")", true
	}
	if g.localPorts[a.Port()] && isLocal(ip, g.localAddrs()) {
		return "the gateway's own port " + strconv.Itoa(int(a.Port())) + " on this host", true
	}
	return "", false
}

// isLocal reports whether ip reaches this host: loopback, unspecified or
// one of its interface addresses.
func isLocal(ip netip.Addr, interfaces []netip.Addr) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	for _, l := range interfaces {
		if l == ip {
			return true
		}
	}
	return false
}

// interfaceAddrs lists this host's interface addresses; none if the
// system will not say, the loopback and unspecified addresses being
// guarded without it.
func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap().WithZone(""))
		}
	}
	return out
}
