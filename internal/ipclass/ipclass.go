// Package ipclass says what kind of address an IP is, for each policy of
// the gateway's that decides where a connection may go: webhooks, git
// remotes and runs' egress. It is one table so that a range added to it
// reaches every policy.
package ipclass

import (
	"net/netip"
	"slices"
)

// Kind is how far from public an address is.
type Kind int

const (
	// Public: an address on the internet.
	Public Kind = iota
	// Internal: this host or a private network, reachable where a policy
	// lists the address or its network.
	Internal
	// Infrastructure: link-local and metadata addresses, unspecified,
	// multicast, broadcast and reserved ones: what a host and its
	// network answer for themselves (the clouds' metadata services hand
	// out the host's credentials). Runs never reach these; an operator
	// may still list one for a webhook.
	Infrastructure
)

type class struct {
	prefix netip.Prefix
	kind   Kind
	what   string
}

// metadata are the clouds' instance metadata services, whose addresses
// lie in ranges that are otherwise merely internal.
var metadata = []class{
	{netip.MustParsePrefix("169.254.169.254/32"), Infrastructure, "a cloud metadata address, which hands out the host's credentials"}, // AWS, GCP, Azure, OpenStack
	{netip.MustParsePrefix("fd00:ec2::254/128"), Infrastructure, "a cloud metadata address, which hands out the host's credentials"},  // AWS over IPv6
	{netip.MustParsePrefix("100.100.100.200/32"), Infrastructure, "a cloud metadata address, which hands out the host's credentials"}, // Alibaba Cloud
}

// classes are every range that is not public. Order matters only where
// ranges nest: metadata first.
var classes = slices.Concat(metadata, []class{
	{netip.MustParsePrefix("0.0.0.0/8"), Infrastructure, "an unspecified address, which reaches this host"},
	{netip.MustParsePrefix("::/128"), Infrastructure, "an unspecified address, which reaches this host"},
	{netip.MustParsePrefix("169.254.0.0/16"), Infrastructure, "a link-local address"},
	{netip.MustParsePrefix("fe80::/10"), Infrastructure, "a link-local address"},
	{netip.MustParsePrefix("224.0.0.0/4"), Infrastructure, "a multicast address"},
	{netip.MustParsePrefix("ff00::/8"), Infrastructure, "a multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), Infrastructure, "the broadcast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), Infrastructure, "a reserved address"},

	{netip.MustParsePrefix("127.0.0.0/8"), Internal, "a loopback address"},
	{netip.MustParsePrefix("::1/128"), Internal, "a loopback address"},
	{netip.MustParsePrefix("10.0.0.0/8"), Internal, "a private address"},
	{netip.MustParsePrefix("172.16.0.0/12"), Internal, "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), Internal, "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), Internal, "a carrier-grade NAT address"},
	{netip.MustParsePrefix("fc00::/7"), Internal, "a unique local address"},
	{netip.MustParsePrefix("fec0::/10"), Internal, "a site-local address"},
	{netip.MustParsePrefix("192.0.0.0/24"), Internal, "an IETF protocol address"},
	{netip.MustParsePrefix("192.0.2.0/24"), Internal, "a documentation address"},
	{netip.MustParsePrefix("198.51.100.0/24"), Internal, "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), Internal, "a documentation address"},
	{netip.MustParsePrefix("2001:db8::/32"), Internal, "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), Internal, "a benchmarking address"},
	{netip.MustParsePrefix("::/96"), Internal, "an IPv4-compatible address"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), Internal, "an IPv4-translated address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), Internal, "a local-use NAT64 address"},
	{netip.MustParsePrefix("100::/64"), Internal, "a discard address"},
	{netip.MustParsePrefix("2001::/32"), Internal, "a Teredo address, which tunnels to an IPv4 address"},
	{netip.MustParsePrefix("2002::/16"), Internal, "a 6to4 address, which embeds an IPv4 address"},
})

// nat64 is the well-known NAT64 prefix: an address in it reaches the IPv4
// address in its last 32 bits through the local translator.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Of says what kind ip is and, when it is not public, what it is, as a
// phrase ("a private address"). An IPv4-mapped address is its IPv4
// address, a NAT64 one what its embedded IPv4 address is, and an
// address's zone is ignored; an invalid address is Infrastructure.
func Of(ip netip.Addr) (Kind, string) {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return Infrastructure, "not an address"
	}
	if embedded, ok := NAT64(ip); ok {
		if kind, what := Of(embedded); kind != Public {
			return kind, "a NAT64 address of " + embedded.String() + ", " + what
		}
		return Public, ""
	}
	for _, c := range classes {
		if c.prefix.Contains(ip) {
			return c.kind, c.what
		}
	}
	return Public, ""
}

// NAT64 returns the IPv4 address a NAT64 address (64:ff9b::/96) reaches
// through the local translator.
func NAT64(ip netip.Addr) (netip.Addr, bool) {
	ip = ip.WithZone("")
	if !nat64.Contains(ip) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(ip.AsSlice()[12:])), true
}
