package webhooks

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// hostForm is what a URL's host means to whoever dials it.
type hostForm struct {
	// ip is the host's address, when it is one in any form; name, when
	// it is a name, lower-case ASCII without a trailing dot.
	ip   netip.Addr
	name string
	// odd says why the host is not written as every reader reads it
	// ("" when it is): a URL with such a host is never accepted, since
	// the gateway's check and a resolver could see two hosts.
	odd string
}

// readHost reads a URL's host (without brackets or port) as the most
// permissive reader would: the C library's inet_aton takes 2130706433,
// 0177.0.0.1 and 0x7f.1 for 127.0.0.1, and IDNA maps full-width letters
// to ASCII. It fails on a host that is neither a name nor an address.
func readHost(host string) (hostForm, error) {
	if host == "" {
		return hostForm{}, fmt.Errorf("has no host")
	}
	if !isASCII(host) {
		return readUnicodeHost(host)
	}
	if addr, zone, ok := strings.Cut(host, "%"); ok {
		f, err := readHost(addr)
		if err != nil || !f.ip.IsValid() || zone == "" {
			return hostForm{}, fmt.Errorf("has an invalid host")
		}
		f.odd = "names a network zone"
		return f, nil
	}
	if strings.Contains(host, ":") {
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return hostForm{}, fmt.Errorf("has an invalid IPv6 address")
		}
		return readIPv6(ip), nil
	}
	return readNameOrIPv4(host)
}

func readNameOrIPv4(host string) (hostForm, error) {
	trimmed := strings.TrimSuffix(host, ".")
	labels := strings.Split(trimmed, ".")
	if isNumericLabel(labels[len(labels)-1]) {
		ip, ok := parseInetAton(labels)
		if !ok {
			return hostForm{}, fmt.Errorf("has a host that is neither a name nor an IPv4 address")
		}
		f := hostForm{ip: ip}
		if host != ip.String() {
			f.odd = "writes the address " + ip.String() + " in a form that readers of URLs disagree on; write it as " + ip.String()
		}
		return f, nil
	}
	if !validHostName(host) {
		return hostForm{}, fmt.Errorf("has an invalid host name")
	}
	return hostForm{name: strings.ToLower(trimmed)}, nil
}

// embeddingIPv4 are the IPv6 forms of an IPv4 address: mapped,
// compatible (deprecated) and translated (SIIT).
var embeddingIPv4 = []netip.Prefix{
	netip.MustParsePrefix("::ffff:0:0/96"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("::ffff:0:0:0/96"),
}

// readIPv6 reads an IPv6 address that embeds an IPv4 one as that
// address: the dialer may reach it, and an allow-list names it, as IPv4.
func readIPv6(ip netip.Addr) hostForm {
	if ip.Zone() != "" || ip == netip.IPv6Unspecified() || ip == netip.IPv6Loopback() {
		return hostForm{ip: ip}
	}
	for _, pfx := range embeddingIPv4 {
		if pfx.Contains(ip) {
			b := ip.As16()
			v4 := netip.AddrFrom4([4]byte(b[12:]))
			return hostForm{ip: v4, odd: "writes the IPv4 address " + v4.String() + " as IPv6; write it as " + v4.String()}
		}
	}
	return hostForm{ip: ip}
}

// readUnicodeHost maps a host that is not ASCII as IDNA would (NFKC,
// full stops of other scripts as '.', lower case), to say what it names;
// it is odd whatever it names, since the dialer sends it to the resolver
// as it is.
func readUnicodeHost(host string) (hostForm, error) {
	mapped := strings.ToLower(norm.NFKC.String(host))
	mapped = strings.NewReplacer("\u3002", ".", "\uff0e", ".", "\uff61", ".").Replace(mapped)
	if !isASCII(mapped) {
		return hostForm{}, fmt.Errorf("has a host name that is not ASCII; write it in its ASCII (xn--) form")
	}
	f, err := readHost(mapped)
	if err != nil {
		return hostForm{}, err
	}
	f.odd = "has a host name that is not ASCII; write it in its ASCII (xn--) form"
	return f, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// isNumericLabel reports whether a host's last label makes it an IPv4
// address to a URL reader (the WHATWG URL standard's "ends in a number"):
// decimal digits, or 0x and hex digits.
func isNumericLabel(l string) bool {
	if h, ok := strings.CutPrefix(strings.ToLower(l), "0x"); ok {
		return strings.Trim(h, "0123456789abcdef") == ""
	}
	return l != "" && strings.Trim(l, "0123456789") == ""
}

// parseInetAton reads labels as inet_aton does: one to four numbers,
// each decimal, octal (a leading 0) or hex (0x), the last filling the
// bytes the others leave.
func parseInetAton(labels []string) (netip.Addr, bool) {
	if len(labels) > 4 {
		return netip.Addr{}, false
	}
	var parts []uint64
	for _, l := range labels {
		n, ok := parseInetNumber(l)
		if !ok {
			return netip.Addr{}, false
		}
		parts = append(parts, n)
	}
	last := parts[len(parts)-1]
	if last >= 1<<(8*(5-len(parts))) {
		return netip.Addr{}, false
	}
	v := last
	for i, n := range parts[:len(parts)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseInetNumber(l string) (uint64, bool) {
	base := 10
	switch lower := strings.ToLower(l); {
	case strings.HasPrefix(lower, "0x"):
		base, l = 16, lower[2:]
		if l == "" {
			return 0, true // "0x" is 0 to inet_aton
		}
	case len(l) > 1 && l[0] == '0':
		base, l = 8, l[1:]
	}
	n, err := strconv.ParseUint(l, base, 32)
	return n, err == nil
}

// internalNames are the names that mean this machine or a private
// network by definition (RFC 6761, RFC 8375, ICANN's .internal, mDNS's
// .local): refused without resolving them.
var internalNames = []string{"localhost", "localdomain", "internal", "local", "home.arpa"}

func isInternalName(name string) bool {
	for _, n := range internalNames {
		if name == n || strings.HasSuffix(name, "."+n) {
			return true
		}
	}
	return false
}

// encodedHost returns the scheme and host of a URL that net/url refused,
// with the host's percent escapes undone, to say what the client meant to
// reach.
func encodedHost(raw string) (scheme, host string, ok bool) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", false
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if !strings.Contains(rest, "%") {
		return "", "", false
	}
	if strings.HasPrefix(rest, "[") {
		rest, _, _ = strings.Cut(rest[1:], "]")
	} else if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		rest = rest[:i]
	}
	host, err := url.PathUnescape(rest)
	return strings.ToLower(scheme), host, err == nil
}
