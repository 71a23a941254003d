package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
)

// Lookup resolves a host name to its addresses (net.Resolver's
// LookupNetIP, "ip").
type Lookup func(ctx context.Context, host string) ([]netip.Addr, error)

// Pinner returns a Config.Pin that resolves a URL's host with lookup,
// refuses it when it leads where the policy forbids (a public name of an
// internal address, unless the operator allows the name or the address),
// and pins git to the first address it checked: a name that resolves
// elsewhere by the time git dials (DNS rebinding) is never dialled. A
// literal address was judged with the URL, and needs no pin.
func (p Policy) Pinner(lookup Lookup) func(ctx context.Context, rawURL string) (string, error) {
	return func(ctx context.Context, rawURL string) (string, error) {
		u, err := url.Parse(rawURL)
		if err != nil {
			return "", fmt.Errorf("the repository's URL: %w", err)
		}
		host := u.Hostname()
		if _, err := netip.ParseAddr(host); err == nil {
			return "", nil
		}
		addrs, err := lookup(ctx, host)
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return "", errors.New("resolve " + host + ": no address")
		}
		if err := p.CheckResolved(host, addrs); err != nil {
			return "", err
		}
		return host + ":" + portOf(u) + ":" + curlAddr(addrs[0].Unmap()), nil
	}
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "http" {
		return "80"
	}
	return "443"
}

// curlAddr is an address as curl's resolve entries spell it: an IPv6 one
// in brackets.
func curlAddr(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.WithZone("").String() + "]"
	}
	return a.String()
}

// SystemLookup resolves with the system's resolver.
func SystemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
