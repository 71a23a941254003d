package egress

import (
	"net/netip"

	"github.com/agentgate/agentgate/internal/ipclass"
)

// publicAddr reports whether ip is a public address; if not, what it is
// (ipclass's table, which webhooks and git remotes share). An address with
// a zone reaches only a link, and is not public.
func publicAddr(ip netip.Addr) (what string, public bool) {
	if ip.Zone() != "" {
		return "an address with a zone, which only reaches a link", false
	}
	kind, what := ipclass.Of(ip)
	return what, kind == ipclass.Public
}
