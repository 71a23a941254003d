package adapterkit

import (
	"net"
	"net/url"
	"slices"
	"strings"
)

// defaultPorts are the ports a URL without one means, by scheme.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443"}

// Endpoint returns the "host:port" a base URL such as
// "https://api.example.com/v1" reaches, the port defaulting to the
// scheme's, and false when raw is no absolute http(s) or ws(s) URL: a CLI
// given such a base URL fails on its own, and no host is allowed for it.
func Endpoint(raw string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	port, ok := defaultPorts[strings.ToLower(u.Scheme)]
	if !ok {
		return "", false
	}
	if p := u.Port(); p != "" {
		port = p
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), true
}

// Endpoints collects host:port endpoints in order, without repeats.
type Endpoints []string

// Add appends host:port endpoints not already there.
func (e *Endpoints) Add(hostports ...string) {
	for _, hp := range hostports {
		if hp != "" && !slices.Contains(*e, hp) {
			*e = append(*e, hp)
		}
	}
}

// AddURL appends the endpoint of base URL raw, and reports whether raw
// had one.
func (e *Endpoints) AddURL(raw string) bool {
	hp, ok := Endpoint(raw)
	if ok {
		e.Add(hp)
	}
	return ok
}
