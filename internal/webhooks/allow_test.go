package webhooks

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestRefusedAddresses(t *testing.T) {
	var p Policy
	for addr, refused := range map[string]bool{
		"127.0.0.1":        true,
		"127.255.0.9":      true,
		"::1":              true,
		"10.0.0.1":         true,
		"172.16.0.1":       true,
		"172.31.255.255":   true,
		"192.168.1.1":      true,
		"fc00::1":          true,
		"fd12:3456::1":     true,
		"169.254.169.254":  true, // the metadata service
		"fe80::1":          true,
		"100.64.0.1":       true, // CGNAT
		"100.127.255.254":  true,
		"224.0.0.1":        true,
		"239.255.255.250":  true,
		"ff02::1":          true,
		"0.0.0.0":          true,
		"::":               true,
		"255.255.255.255":  true,
		"::ffff:127.0.0.1": true, // IPv4-mapped
		"::ffff:10.0.0.1":  true,
		"64:ff9b::a00:1":   true, // NAT64 of 10.0.0.1
		"2002:a00:1::":     true, // 6to4 of 10.0.0.1
		"192.0.2.1":        true,
		"8.8.8.8":          false,
		"93.184.215.14":    false,
		"172.32.0.1":       false,
		"100.128.0.1":      false,
		"169.255.0.1":      false,
		"2606:4700::1111":  false,
		"::ffff:8.8.8.8":   false,
	} {
		if got := p.Refused(netip.MustParseAddr(addr)); got != refused {
			t.Errorf("Refused(%s) = %v, want %v", addr, got, refused)
		}
	}
	allow, err := ParseAllowList([]string{"127.0.0.1", "10.1.0.0/16", " hooks.internal. ", "", "[fd00::5]"})
	if err != nil {
		t.Fatal(err)
	}
	for addr, refused := range map[string]bool{
		"127.0.0.1": false, "::ffff:127.0.0.1": false, "127.0.0.2": true,
		"10.1.200.3": false, "10.2.0.1": true, "fd00::5": false, "fd00::6": true,
	} {
		if got := allow.Refused(netip.MustParseAddr(addr)); got != refused {
			t.Errorf("with the allow-list, Refused(%s) = %v, want %v", addr, got, refused)
		}
	}
	if !allow.hostAllowed("HOOKS.internal") || allow.hostAllowed("other.internal") {
		t.Error("host names not matched exactly and case-insensitively")
	}
	for _, bad := range []string{"http://x", "10.0.0.0/33", "a b", "-x.example"} {
		if _, err := ParseAllowList([]string{bad}); err == nil {
			t.Errorf("ParseAllowList(%q) accepted", bad)
		}
	}
}

func TestCheckURL(t *testing.T) {
	allow, err := ParseAllowList([]string{"127.0.0.1", "hooks.internal"})
	if err != nil {
		t.Fatal(err)
	}
	const (
		ok      = ""
		invalid = "invalid"
		refused = "refused"
	)
	for raw, want := range map[string]string{
		"https://hooks.example.com/agentgate":         ok,
		"https://hooks.example.com:8443/a?token=x":    ok,
		"https://93.184.215.14/hook":                  ok,
		"https://[2606:4700::1111]/hook":              ok,
		"http://127.0.0.1:8080/hook":                  ok, // allowed, so plain http too
		"http://hooks.internal/hook":                  ok,
		"https://HOOKS.internal/hook":                 ok,
		"http://hooks.example.com/hook":               invalid,
		"ftp://hooks.example.com/":                    invalid,
		"hooks.example.com/hook":                      invalid,
		"/relative":                                   invalid,
		"https://":                                    invalid,
		"https://user:pw@hooks.example.com/":          invalid,
		"https://hooks.example.com/#frag":             invalid,
		"https://hooks.example.com:0/":                invalid,
		"https://hooks.example.com:99999/":            invalid,
		"https://hooks.example.com:/":                 invalid,
		"https://hooks example.com/":                  invalid,
		"https://hooks.example.com/\n":                invalid,
		"https://[fe80::1%25eth0]/":                   invalid,
		"https://bad_label-.example/":                 invalid,
		"https://" + strings.Repeat("a", MaxURLBytes): invalid,
		"https://10.0.0.1/":                           refused,
		"https://127.0.0.2/":                          refused,
		"https://[::1]/":                              refused,
		"https://[::ffff:a00:1]/":                     refused, // 10.0.0.1, mapped
		"https://169.254.169.254/latest/meta-data/":   refused,
		"https://100.64.0.1/":                         refused,
		"https://0.0.0.0/":                            refused,
		"https://localhost/":                          refused,
		"https://api.localhost./":                     refused,
	} {
		_, err := allow.CheckURL(raw)
		var inv *InvalidURLError
		var ref *RefusedError
		got := ok
		switch {
		case errors.As(err, &inv):
			got = invalid
		case errors.As(err, &ref):
			got = refused
		case err != nil:
			got = "other: " + err.Error()
		}
		if got != want {
			t.Errorf("CheckURL(%.60q) = %s (%v), want %s", raw, got, err, want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.example.com/a/b?token=s3cr3t": "https://hooks.example.com/a/b?…",
		"https://hooks.example.com:8443/a":           "https://hooks.example.com:8443/a",
		"https://u:p@hooks.example.com/a#f":          "https://hooks.example.com/a",
	} {
		u, _ := url.Parse(raw)
		if got := RedactURL(u); got != want {
			t.Errorf("RedactURL(%s) = %s, want %s", raw, got, want)
		}
	}
}
