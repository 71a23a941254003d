package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentgate/agentgate/internal/ipclass"
	"github.com/agentgate/agentgate/internal/runs"
)

// MaxURLBytes bounds a webhook URL: the bound of a run's webhook_url, for
// the operator's URLs too.
const MaxURLBytes = runs.MaxWebhookURLBytes

// Policy decides where webhooks may go. By default a webhook URL must be
// https and reach a public address; the operator's entries (AllowHosts)
// allow named hosts, addresses or networks however internal, and over
// plain http. The zero Policy refuses every internal address.
type Policy struct {
	hosts    map[string]bool // lower-case host names
	prefixes []netip.Prefix
}

// ParseAllowList reads the operator's entries: each a host name (matched
// exactly, case-insensitively), an IP address or a CIDR. Blank entries are
// skipped.
func ParseAllowList(entries []string) (Policy, error) {
	p := Policy{hosts: map[string]bool{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if pfx, err := netip.ParsePrefix(e); err == nil {
			p.prefixes = append(p.prefixes, pfx.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
			ip = ip.Unmap()
			p.prefixes = append(p.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		if !validHostName(e) {
			return Policy{}, fmt.Errorf("%q is not a host name, an IP address or a CIDR", e)
		}
		p.hosts[strings.ToLower(strings.TrimSuffix(e, "."))] = true
	}
	return p, nil
}

// validHostName reports whether s is a DNS name: labels of letters, digits,
// '-' and '_', at most 253 bytes.
func validHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// hostAllowed reports whether the operator allows host by name.
func (p Policy) hostAllowed(host string) bool {
	return p.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]
}

// ipAllowed reports whether the operator allows ip by address or network.
func (p Policy) ipAllowed(ip netip.Addr) bool {
	for _, pfx := range p.prefixes {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}

// Refused reports whether ip is an internal address the policy does not
// allow.
func (p Policy) Refused(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if p.ipAllowed(ip) {
		return false
	}
	return internal(ip)
}

// internal reports whether ip is not a public address (ipclass's table,
// which runs' egress shares): this machine, private networks and what is
// only reachable from inside one, and addresses no host has.
func internal(ip netip.Addr) bool {
	kind, _ := ipclass.Of(ip)
	return kind != ipclass.Public
}

// allowedHost reports whether host (a name or a literal address) is one
// the operator allows, by name or by address.
func (p Policy) allowedHost(host string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.ipAllowed(ip.Unmap().WithZone(""))
	}
	return p.hostAllowed(host)
}

// RefusedError is a webhook destination the policy refuses: a URL
// whose host is a refused address, or a name that resolved to one.
type RefusedError struct {
	// Host is the URL's host; Addr, for a name, the address it
	// resolved to.
	Host, Addr string
	Reason     string
}

func (e *RefusedError) Error() string {
	if e.Addr != "" && e.Addr != e.Host {
		return fmt.Sprintf("%s resolves to %s, %s", e.Host, e.Addr, e.Reason)
	}
	return fmt.Sprintf("%s is %s", e.Host, e.Reason)
}

const reasonInternal = "an internal address, which webhooks may not reach unless the operator allows it (AGENTGATE_WEBHOOK_ALLOW_HOSTS)"

// CheckURL parses a webhook URL and checks what can be checked without
// resolving it: an absolute http or https URL of at most MaxURLBytes,
// with a host and no user info; https unless the operator allows the
// host; and, for a literal address in any form (or a name that is
// internal by definition, such as "localhost"), one the policy does not
// refuse. A host written so that readers could take it for two different
// hosts (an address in decimal, octal or hex, a zone, percent escapes,
// letters that are not ASCII) is refused as its plain form would be, or
// else is invalid. It returns an *InvalidURLError, or a *RefusedError for
// a refused destination.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLBytes {
		return nil, invalidURL(fmt.Sprintf("is longer than %d bytes", MaxURLBytes))
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] <= ' ' || raw[i] == 0x7f {
			return nil, invalidURL("has spaces or control characters")
		}
	}
	if strings.Contains(raw, `\`) {
		return nil, invalidURL(`has a backslash, which readers of URLs take for '/' or not`)
	}
	u, err := url.Parse(raw)
	if err != nil {
		if scheme, host, ok := encodedHost(raw); ok {
			return nil, p.encodedHostError(scheme, host)
		}
		return nil, invalidURL("is not a URL")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, invalidURL("must be an https URL")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, invalidURL("must be an absolute URL with a host")
	}
	if err := checkPort(u); err != nil {
		return nil, err
	}
	host := u.Hostname()
	f, err := readHost(host)
	if err != nil {
		return nil, invalidURL(err.Error())
	}
	allowed := p.formAllowed(f)
	if u.Scheme == "http" && !allowed {
		return nil, invalidURL("must be an https URL (plain http only to a host in AGENTGATE_WEBHOOK_ALLOW_HOSTS)")
	}
	if !allowed && p.formRefused(f) {
		return nil, refusedHost(host, f)
	}
	switch {
	case f.odd != "":
		return nil, invalidURL(f.odd)
	case u.User != nil:
		return nil, invalidURL("must not carry a user name or password; put a token in the path or query")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, invalidURL("must not have a fragment")
	}
	return u, nil
}

func checkPort(u *url.URL) error {
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return invalidURL("has an invalid port")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return invalidURL("has an invalid port")
	}
	return nil
}

// formAllowed reports whether the operator allows the host f reads as.
func (p Policy) formAllowed(f hostForm) bool {
	if f.ip.IsValid() {
		return p.ipAllowed(f.ip.Unmap().WithZone(""))
	}
	return p.hostAllowed(f.name)
}

// formRefused reports whether f is an internal address, or a name that
// is internal by definition.
func (p Policy) formRefused(f hostForm) bool {
	if f.ip.IsValid() {
		return p.Refused(f.ip)
	}
	return isInternalName(f.name)
}

func refusedHost(host string, f hostForm) error {
	e := &RefusedError{Host: host, Reason: reasonInternal}
	if f.ip.IsValid() && f.ip.Unmap().WithZone("").String() != host {
		e.Addr = f.ip.Unmap().WithZone("").String()
	}
	return e
}

// encodedHostError is the error of a URL whose host has percent escapes,
// which net/url does not read: the plain form's error when the host
// means a destination refused by the scheme or the address, else invalid.
func (p Policy) encodedHostError(scheme, host string) error {
	f, err := readHost(host)
	switch {
	case err != nil || p.formAllowed(f):
	case scheme == "http":
		return invalidURL("must be an https URL (plain http only to a host in AGENTGATE_WEBHOOK_ALLOW_HOSTS)")
	case p.formRefused(f):
		return refusedHost(host, f)
	}
	return invalidURL("has a percent-encoded host")
}

// InvalidURLError is a webhook URL that is not one.
type InvalidURLError struct{ Reason string }

func (e *InvalidURLError) Error() string { return "webhook URL " + e.Reason }

func invalidURL(reason string) error { return &InvalidURLError{Reason: reason} }

// RedactURL returns u as a record may show it: scheme, host and path,
// without user info, query or fragment, which may hold tokens.
func RedactURL(u *url.URL) string {
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	s := c.String()
	if u.RawQuery != "" {
		s += "?…"
	}
	return s
}

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// allowedByName marks a dial whose host the operator allows by name: any
// address it resolves to may be dialed.
type allowedByName struct{}

// dialer returns the DialContext of the webhooks' transport. It resolves
// the host itself and dials the addresses it checked, one after another;
// the dialer's Control checks each socket's address again as it connects,
// so neither a second resolution (DNS rebinding) nor anything between the
// check and the connect can reach a refused address.
func (p Policy) dialer(res Resolver, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, ControlContext: p.control}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		byName := false
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip}
		} else {
			byName = p.hostAllowed(host)
			if ips, err = res.LookupNetIP(ctx, "ip", host); err != nil {
				return nil, err
			}
		}
		if byName {
			ctx = context.WithValue(ctx, allowedByName{}, true)
		}
		var firstErr error
		for _, ip := range ips {
			ip = ip.Unmap()
			if !byName && p.Refused(ip) {
				if firstErr == nil {
					firstErr = &RefusedError{Host: host, Addr: ip.String(), Reason: reasonInternal}
				}
				continue
			}
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.WithZone("").String(), port))
			if err == nil {
				return conn, nil
			}
			if firstErr == nil || isRefused(firstErr) {
				firstErr = err
			}
			if ctx.Err() != nil {
				break
			}
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("%s has no address", host)
		}
		return nil, firstErr
	}
}

// control is the dialer's check of the address a socket is about to
// connect to.
func (p Policy) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Host: address, Reason: "not an address the webhooks' dialer can check"}
	}
	if ctx.Value(allowedByName{}) == nil && p.Refused(ap.Addr()) {
		return &RefusedError{Host: address, Addr: ap.Addr().String(), Reason: reasonInternal}
	}
	return nil
}

// isRefused reports whether err is, or wraps, a *RefusedError.
func isRefused(err error) bool {
	_, ok := errors.AsType[*RefusedError](err)
	return ok
}
