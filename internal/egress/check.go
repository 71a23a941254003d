package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Policy is what one run's agent may reach.
type Policy struct {
	Mode    Mode
	Trusted []Rule // the operator's: the agent's model endpoints
	Allowed []Rule // the run's: allow_hosts and its MCP servers' URLs
}

// Decision is a Checker's answer for one host and port.
type Decision struct {
	Allowed bool
	Addr    netip.AddrPort // the address to dial, when Allowed
	Reason  string         // why refused, for the log and the 403 body
	// Unresolved says the refusal is not the policy's: the name, which a
	// rule allows, did not resolve (or the resolver failed). A proxy
	// answers it 502, not 403.
	Unresolved bool
}

// Checker decides what a run may reach. A nil Guard guards only the fixed
// addresses; a nil Resolver is net.DefaultResolver.
type Checker struct {
	Guard    *Guard
	Resolver Resolver
}

// Check decides whether the agent under p may connect to host (a name or
// an IP address, IPv6 with or without brackets) on port, and if so which
// address to dial: the caller dials Decision.Addr and never resolves host
// again. Under None everything is refused; under Open everything is
// allowed, unguarded. Otherwise:
//   - the guard refuses its addresses whatever the rules;
//   - a Trusted rule naming host allows any address host resolves to;
//   - an Allowed rule naming host allows the public addresses it resolves to;
//   - an address rule, Trusted or Allowed, allows the addresses in it.
//
// A name is resolved only when a rule could allow it: a name no rule
// allows is refused without a lookup, so that lookups cannot carry data
// out of the namespace.
func (c *Checker) Check(ctx context.Context, p Policy, host string, port int) Decision {
	if port < 1 || port > 65535 {
		return refused(fmt.Sprintf("port %d is not from 1 to 65535", port))
	}
	if ip, ok := literalAddr(host); ok {
		return c.checkAddr(p, netip.AddrPortFrom(ip, uint16(port)))
	}
	name, err := normalName(host)
	if err != nil {
		return refused(fmt.Sprintf("%q %v", truncate(host, 80), err))
	}
	return c.checkName(ctx, p, name, port)
}

// checkAddr decides for an address the agent named itself.
func (c *Checker) checkAddr(p Policy, a netip.AddrPort) Decision {
	switch p.Mode {
	case Open:
		return allowed(a)
	case Model, Allow:
	default:
		return refusedByMode(p.Mode)
	}
	if why, no := c.Guard.Refuses(a); no {
		return refused(fmt.Sprintf("%s is %s, which no run may reach", a.Addr(), why))
	}
	if anyRuleMatchesAddr(p, a) {
		return allowed(a)
	}
	return refused(fmt.Sprintf("no rule of this run's network policy (%s) allows %s", p.Mode, a))
}

// checkName decides for a name, resolving it if a rule could allow it.
func (c *Checker) checkName(ctx context.Context, p Policy, name string, port int) Decision {
	target := net.JoinHostPort(name, strconv.Itoa(port))
	var trusted, named bool
	switch p.Mode {
	case Open:
		trusted = true
	case Model, Allow:
		trusted = anyRuleMatchesName(p.Trusted, name, port)
		named = anyRuleMatchesName(p.Allowed, name, port)
		if !trusted && !named && !anyAddrRuleOnPort(p, port) {
			return refused(fmt.Sprintf("no rule of this run's network policy (%s) allows %s", p.Mode, target))
		}
	default:
		return refusedByMode(p.Mode)
	}
	addrs, err := resolve(ctx, c.resolver(), name)
	if err != nil {
		return Decision{Reason: fmt.Sprintf("cannot resolve %s: %v", name, err), Unresolved: true}
	}
	if p.Mode == Open {
		return allowed(netip.AddrPortFrom(addrs[0], uint16(port)))
	}
	var first string
	for _, ip := range addrs {
		a := netip.AddrPortFrom(ip, uint16(port))
		why, ok := c.nameMayReach(p, a, trusted, named)
		if ok {
			return allowed(a)
		}
		if first == "" {
			first = fmt.Sprintf("%s resolves to %s, %s", name, ip, why)
		}
	}
	return refused(first)
}

// nameMayReach decides for one address a name resolved to: trusted and
// named say which kinds of rule allow the name.
func (c *Checker) nameMayReach(p Policy, a netip.AddrPort, trusted, named bool) (why string, ok bool) {
	if why, no := c.Guard.Refuses(a); no {
		return why + ", which no run may reach", false
	}
	if trusted || anyRuleMatchesAddr(p, a) {
		return "", true
	}
	if !named {
		return "which no rule of this run's network policy (" + string(p.Mode) + ") allows", false
	}
	if what, public := publicAddr(a.Addr()); !public {
		return what + ": a name allows only public addresses; allow this one with an IP or CIDR rule", false
	}
	return "", true
}

func (c *Checker) resolver() Resolver {
	if c.Resolver == nil {
		return net.DefaultResolver
	}
	return c.Resolver
}

func allowed(a netip.AddrPort) Decision { return Decision{Allowed: true, Addr: a} }

func refused(reason string) Decision { return Decision{Reason: reason} }

func refusedByMode(m Mode) Decision {
	if m == None {
		return refused("this run's network policy is none: nothing may be reached")
	}
	return refused(fmt.Sprintf("this run's network policy %q is not one the proxy knows", truncate(string(m), 40)))
}

// literalAddr reads host as an IP address, IPv6 in brackets or not, an
// IPv4-mapped one as its IPv4 address. A zone is kept: the guard refuses it.
func literalAddr(host string) (netip.Addr, bool) {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	ip, err := netip.ParseAddr(host)
	return ip.Unmap(), err == nil
}

func anyRuleMatchesName(rules []Rule, name string, port int) bool {
	for _, r := range rules {
		if r.matchesName(name, port) {
			return true
		}
	}
	return false
}

func anyRuleMatchesAddr(p Policy, a netip.AddrPort) bool {
	for _, rules := range [][]Rule{p.Trusted, p.Allowed} {
		for _, r := range rules {
			if r.matchesAddr(a) {
				return true
			}
		}
	}
	return false
}

// anyAddrRuleOnPort reports whether some address rule allows port, so
// that a name could resolve into it.
func anyAddrRuleOnPort(p Policy, port int) bool {
	for _, rules := range [][]Rule{p.Trusted, p.Allowed} {
		for _, r := range rules {
			if r.isAddr() && r.portMatches(port) {
				return true
			}
		}
	}
	return false
}

// resolve looks name up and returns its addresses, IPv4-mapped ones as
// IPv4, without duplicates, in the resolver's order; an answer with no
// address is an error.
func resolve(ctx context.Context, r Resolver, name string) ([]netip.Addr, error) {
	if ip, ok := literalAddr(name); ok {
		return []netip.Addr{ip}, nil
	}
	found, err := r.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, ip := range found {
		ip = ip.Unmap()
		if ip.IsValid() && !seen[ip] {
			seen[ip] = true
			out = append(out, ip)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no address")
	}
	return out, nil
}
