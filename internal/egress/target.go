package egress

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// target is where a proxy request asks to go: a normalised name (lower
// case, no trailing dot) or an IP address, and a port.
type target struct {
	host string
	port int
}

func (t target) String() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// parseTarget reads a request's target as it came on the request line: an
// authority (host:port) for CONNECT, an absolute http URL for any other
// method. The error is a sentence for the 400 body.
func parseTarget(method, requestURI string) (target, error) {
	if method == "CONNECT" {
		return parseAuthority(requestURI, 0)
	}
	scheme, rest, ok := strings.Cut(requestURI, "://")
	switch {
	case !ok && strings.HasPrefix(requestURI, "/"):
		return target{}, errors.New("this is a proxy: send an absolute http:// URL, or CONNECT host:port")
	case !ok:
		return target{}, errors.New("the request target is not an absolute http:// URL")
	case strings.EqualFold(scheme, "https"):
		return target{}, errors.New("an https:// URL goes through CONNECT host:443, not as a plain request")
	case !strings.EqualFold(scheme, "http"):
		return target{}, errors.New("the proxy forwards only http:// URLs (and CONNECT)")
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	return parseAuthority(authority, 80)
}

// parseAuthority reads "host:port", "[v6]:port", and "host" or "[v6]" when
// defaultPort is not 0. User info, zones and names that are not DNS names
// are refused.
func parseAuthority(s string, defaultPort int) (target, error) {
	if strings.ContainsAny(s, "@%") {
		return target{}, errors.New("the target carries user info or escapes: give host:port only")
	}
	host, port, hasPort := s, "", false
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return target{}, errors.New("the target opens a [ it does not close")
		}
		host, port = s[1:end], s[end+1:]
		if port != "" && port[0] != ':' {
			return target{}, errors.New("the target has something other than :port after ]")
		}
		port, hasPort = strings.CutPrefix(port, ":")
		if ip, err := netip.ParseAddr(host); err != nil || !ip.Is6() || ip.Is4In6() {
			return target{}, errors.New("the target's brackets hold no IPv6 address")
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port, hasPort = s[:i], s[i+1:], true
	}
	t, err := targetHost(host)
	if err != nil {
		return target{}, err
	}
	switch {
	case hasPort:
		if t.port, err = parsePort(port); err != nil {
			return target{}, errors.New("the target's port is not a number from 1 to 65535")
		}
	case defaultPort == 0:
		return target{}, errors.New("CONNECT needs host:port")
	default:
		t.port = defaultPort
	}
	return t, nil
}

// targetHost normalises a target's host: an IP address or a DNS name.
func targetHost(host string) (target, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return target{host: ip.Unmap().String()}, nil
	}
	if strings.Contains(host, ":") {
		return target{}, errors.New("the target's IPv6 address must be in brackets")
	}
	name, err := normalName(host)
	if err != nil {
		return target{}, errors.New("the target's host is not a DNS name or an IP address")
	}
	return target{host: name}, nil
}
