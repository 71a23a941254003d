package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxRules bounds a run's allow_hosts.
const MaxRules = 64

// MaxRuleBytes bounds one allow_hosts entry: a DNS name's 253 bytes, a
// wildcard and a port.
const MaxRuleBytes = 260

// Rule is one allow_hosts entry: a host name, a wildcard over a domain's
// subdomains, an IP address or a network, each on one port or on any. A
// Rule is comparable: two rules that allow the same are ==.
type Rule struct {
	name     string       // lower-case, no trailing dot; a wildcard's domain without "*."
	wildcard bool         // name matches the subdomains of name, at any depth, not name itself
	prefix   netip.Prefix // an address (full length) or a network, when name is ""
	port     uint16       // 0: any port
}

// ParseRule reads one entry: host, host:port, *.example.com[:port],
// 1.2.3.4[:port], ::1, [::1]:port, 10.0.0.0/8[:port], fd00::/8 or
// [fd00::/8]:443. No port means any port. The error quotes the entry and
// says what is wrong with it.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, fmt.Errorf("allow_hosts entry %q %w", truncate(s, 80), err)
	}
	return r, nil
}

// ParseRules reads a run's allow_hosts: at most MaxRules entries of at
// most MaxRuleBytes each. The error names the first bad entry.
func ParseRules(ss []string) ([]Rule, error) {
	if len(ss) > MaxRules {
		return nil, fmt.Errorf("allow_hosts has %d entries, more than %d", len(ss), MaxRules)
	}
	out := make([]Rule, 0, len(ss))
	for i, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("allow_hosts[%d]: %w", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// RuleForURL is the rule allowing a URL's host and port, http and https
// URLs giving 80 and 443 when the URL names no port: the rule for a model
// API's base URL or an MCP server's URL.
func RuleForURL(raw string) (Rule, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return Rule{}, fmt.Errorf("%q is not an absolute http or https URL", truncate(raw, 80))
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	host := u.Hostname()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return ParseRule(host + ":" + port)
}

// String is the rule in the form ParseRule reads back to an equal rule.
func (r Rule) String() string {
	var host string
	switch {
	case r.name != "" && r.wildcard:
		host = "*." + r.name
	case r.name != "":
		host = r.name
	case r.prefix.Bits() == r.prefix.Addr().BitLen():
		host = r.prefix.Addr().String()
	default:
		host = r.prefix.String()
	}
	if r.port == 0 {
		return host
	}
	if r.name == "" && r.prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(int(r.port))
}

// isAddr reports whether r allows addresses (an IP or a network) rather
// than names.
func (r Rule) isAddr() bool { return r.name == "" }

// portMatches reports whether r allows port.
func (r Rule) portMatches(port int) bool { return r.port == 0 || int(r.port) == port }

// matchesName reports whether r allows the normalised name host on port.
func (r Rule) matchesName(host string, port int) bool {
	if r.isAddr() || !r.portMatches(port) {
		return false
	}
	if r.wildcard {
		return len(host) > len(r.name)+1 && strings.HasSuffix(host, "."+r.name)
	}
	return host == r.name
}

// matchesAddr reports whether r allows a, an address rule by address.
func (r Rule) matchesAddr(a netip.AddrPort) bool {
	return r.isAddr() && r.portMatches(int(a.Port())) && r.prefix.Contains(a.Addr())
}

// parseRule reads s; its error completes the sentence "entry %q ...".
func parseRule(s string) (Rule, error) {
	if s == "" {
		return Rule{}, errors.New("is empty")
	}
	if len(s) > MaxRuleBytes {
		return Rule{}, fmt.Errorf("is longer than %d bytes", MaxRuleBytes)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return Rule{}, errors.New("has spaces, control characters or letters that are not ASCII (write a name in its xn-- form)")
		}
	}
	if strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "[") {
		// An unbracketed IPv6 address or network, with no port.
		r, err := parseAddrRule(s)
		if err == errNotAddr || err == errNotNetwork {
			return Rule{}, errors.New("is not an address: write an IPv6 address or network with a port in brackets, as [fd00::/8]:443")
		}
		return r, err
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return Rule{}, err
	}
	r, err := parseRuleHost(host, strings.HasPrefix(s, "["))
	if err != nil {
		return Rule{}, err
	}
	r.port = port
	return r, nil
}

// splitHostPort splits "host", "host:port", "[v6]" and "[v6]:port".
func splitHostPort(s string) (host string, port uint16, err error) {
	rest := ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, errors.New("opens a [ it does not close")
		}
		host, rest = s[1:end], s[end+1:]
		if rest != "" && rest[0] != ':' {
			return "", 0, errors.New("has something other than :port after ]")
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, rest = s[:i], s[i:]
		if strings.Contains(host, ":") {
			return "", 0, errors.New("is not an address: write an IPv6 address or network with a port in brackets, as [fd00::/8]:443")
		}
	} else {
		return s, 0, nil
	}
	if rest == "" {
		return host, 0, nil
	}
	n, err := parsePort(rest[1:])
	if err != nil {
		return "", 0, err
	}
	return host, uint16(n), nil
}

// parsePort reads a decimal port, 1 to 65535.
func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("has port %q, not a number from 1 to 65535", s)
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("has port %s, not a number from 1 to 65535", s)
	}
	return n, nil
}

// parseRuleHost reads the host part of an entry; bracketed says it was
// written in brackets, which only IPv6 may be.
func parseRuleHost(host string, bracketed bool) (Rule, error) {
	if r, err := parseAddrRule(host); err == nil {
		if bracketed != r.prefix.Addr().Is6() {
			return Rule{}, errors.New("puts brackets around something other than an IPv6 address or network")
		}
		return r, nil
	} else if bracketed || strings.ContainsAny(host, ":/%") {
		return Rule{}, err
	}
	name, wildcard := strings.CutPrefix(host, "*.")
	name, err := normalName(name)
	if err != nil {
		return Rule{}, err
	}
	return Rule{name: name, wildcard: wildcard}, nil
}

var (
	errNotAddr    = errors.New("is not an IP address")
	errNotNetwork = errors.New("is not a network: write it as 10.0.0.0/8 or fd00::/8")
)

// parseAddrRule reads an IP address or a network in CIDR form.
func parseAddrRule(s string) (Rule, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			return Rule{}, errNotNetwork
		case p.Addr().Is4In6():
			return Rule{}, errors.New("is an IPv4-mapped IPv6 network: write its IPv4 form")
		case p != p.Masked():
			return Rule{}, fmt.Errorf("has address bits set beyond its length: did you mean %s?", p.Masked())
		}
		return Rule{prefix: p}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return Rule{}, errNotAddr
	}
	if a.Zone() != "" {
		return Rule{}, errors.New("has an IPv6 zone, which a rule may not name")
	}
	a = a.Unmap()
	return Rule{prefix: netip.PrefixFrom(a, a.BitLen())}, nil
}

// normalName checks a DNS name (labels of letters, digits, '-' and '_',
// at most 253 bytes) and returns it in lower case without a trailing dot.
// A name whose last label is a number (1.2.3, 0x7f) is refused: resolvers
// read such names as addresses in forms this package does not.
func normalName(s string) (string, error) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" || len(s) > 253 {
		return "", errors.New("is not a host name")
	}
	labels := strings.Split(s, ".")
	for _, label := range labels {
		if !validLabel(label) {
			return "", fmt.Errorf("is not a host name: label %q is not letters, digits, '-' and '_'", truncate(label, 63))
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" || (strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "") {
		return "", errors.New("looks like an IP address but is not one: write IPv4 addresses as four decimal numbers")
	}
	return s, nil
}

// validLabel reports whether label is a DNS label of letters, digits, '-'
// and '_', not starting or ending with '-'.
func validLabel(label string) bool {
	if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
		return false
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
