package egress

import "net/netip"

// nonPublic are the addresses a name rule does not allow: this host, the
// networks only reachable from inside one, tunnels that embed an IPv4
// address, and addresses no host has. The guard's addresses come first.
var nonPublic = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "an IPv4-translated address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address, which tunnels to an IPv4 address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address, which embeds an IPv4 address"},
}

// publicAddr reports whether ip is a public address; if not, what it is.
// A NAT64 address is what its embedded IPv4 address is.
func publicAddr(ip netip.Addr) (what string, public bool) {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		return publicAddr(netip.AddrFrom4([4]byte(ip.AsSlice()[12:])))
	}
	if why, refused := (*Guard)(nil).Refuses(netip.AddrPortFrom(ip, 0)); refused {
		return why, false
	}
	for _, np := range nonPublic {
		if np.prefix.Contains(ip) {
			return np.what, false
		}
	}
	return "", true
}
