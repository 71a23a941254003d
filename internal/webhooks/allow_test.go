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
		"127.0.0.1":          true,
		"127.255.0.9":        true,
		"::1":                true,
		"10.0.0.1":           true,
		"172.16.0.1":         true,
		"172.31.255.255":     true,
		"192.168.1.1":        true,
		"fc00::1":            true,
		"fd12:3456::1":       true,
		"169.254.169.254":    true, // the metadata service
		"fe80::1":            true,
		"100.64.0.1":         true, // CGNAT
		"100.127.255.254":    true,
		"224.0.0.1":          true,
		"239.255.255.250":    true,
		"ff02::1":            true,
		"0.0.0.0":            true,
		"::":                 true,
		"255.255.255.255":    true,
		"::ffff:127.0.0.1":   true, // IPv4-mapped
		"::ffff:10.0.0.1":    true,
		"64:ff9b::a00:1":     true, // NAT64 of 10.0.0.1
		"2002:a00:1::":       true, // 6to4 of 10.0.0.1
		"192.0.2.1":          true,
		"8.8.8.8":            false,
		"93.184.215.14":      false,
		"172.32.0.1":         false,
		"100.128.0.1":        false,
		"169.255.0.1":        false,
		"2606:4700::1111":    false,
		"::ffff:8.8.8.8":     false,
		"64:ff9b::808:808":   false, // NAT64 of 8.8.8.8: what its IPv4 address is
		"64:ff9b::a9fe:a9fe": true,  // NAT64 of the metadata service
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
		"https://[fe80::1%25eth0]/":                   refused, // fe80::1, with a zone
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

// unusualHosts are hosts that mean an internal address or name, written
// as the plain form's readers would not, each with its plain form.
var unusualHosts = map[string]string{
	"2130706433":               "127.0.0.1", // decimal
	"0177.0.0.1":               "127.0.0.1", // octal
	"0x7f.0.0.1":               "127.0.0.1", // hex
	"0x7f.1":                   "127.0.0.1", // hex, short
	"0X7F.0X0.0X0.0X1":         "127.0.0.1", // hex, upper case
	"127.1":                    "127.0.0.1", // short
	"127.0.1":                  "127.0.0.1",
	"0x7f000001":               "127.0.0.1",
	"017700000001":             "127.0.0.1",
	"0xa.0.0.1":                "10.0.0.1",
	"10.0x00.0.01":             "10.0.0.1", // mixed
	"0":                        "0.0.0.0",
	"169.254.43518":            "169.254.169.254", // the metadata service, short
	"0xA9FEA9FE":               "169.254.169.254",
	"127.0.0.1.":               "127.0.0.1", // a trailing dot
	"[::ffff:127.0.0.1]":       "127.0.0.1", // IPv4-mapped
	"[::ffff:7f00:1]":          "127.0.0.1",
	"[::127.0.0.1]":            "127.0.0.1", // IPv4-compatible
	"[::ffff:0:7f00:1]":        "127.0.0.1", // IPv4-translated
	"[::1%25lo]":               "[::1]",     // a zone
	"[fe80::1%25eth0]":         "[fe80::1]",
	"127.0.0.1%25lo":           "127.0.0.1",
	"localhost.":               "localhost", // trailing dots
	"LOCALHOST":                "localhost", // upper case
	"Api.LocalHost.":           "localhost",
	"example.internal.":        "example.internal",
	"metadata.google.internal": "example.internal",
	"printer.local":            "example.internal",
	"nas.home.arpa":            "example.internal",
	"%31%32%37.0.0.1":          "127.0.0.1", // percent-encoded
	"loc%61lhost":              "localhost",
	"[%3A%3A1]":                "[::1]",
	"ｌｏｃａｌｈｏｓｔ":                "localhost", // full-width, which IDNA maps to ASCII
	"①②⑦.0.0.1":                "127.0.0.1",
	"127。0。0。1":                "127.0.0.1", // ideographic full stops
	"good.example@127.0.0.1":   "127.0.0.1", // user info: the host is after the @
}

// TestCheckURLUnusualHosts: a host in an unusual form of an internal
// address or name is refused as its plain form is, and never accepted.
func TestCheckURLUnusualHosts(t *testing.T) {
	var none Policy
	allow, err := ParseAllowList([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	kind := func(err error) string {
		switch {
		case err == nil:
			return "accepted"
		case errors.As(err, new(*InvalidURLError)):
			return "invalid"
		case errors.As(err, new(*RefusedError)):
			return "refused"
		}
		return "other: " + err.Error()
	}
	for host, plain := range unusualHosts {
		for _, scheme := range []string{"https", "http"} {
			_, err := none.CheckURL(scheme + "://" + host + "/hook")
			_, plainErr := none.CheckURL(scheme + "://" + plain + "/hook")
			if got, want := kind(err), kind(plainErr); got != want || got == "accepted" {
				t.Errorf("CheckURL(%s://%s) = %s (%v); the plain form is %s (%v)", scheme, host, got, err, want, plainErr)
			}
			// With the plain form allowed, the unusual one is still not
			// accepted: the check and the dialer could read two hosts.
			if _, err := allow.CheckURL(scheme + "://" + host + "/hook"); err == nil {
				t.Errorf("with 127.0.0.1 allowed, CheckURL(%s://%s) accepted it", scheme, host)
			}
		}
	}
	for raw, want := range map[string]string{
		"https://0x7f.1/":                       "0x7f.1 resolves to 127.0.0.1",
		"https://%31%32%37.0.0.1/":              "127.0.0.1 is an internal address",
		"https://8.8.8.8.8/":                    "neither a name nor an IPv4 address",
		"https://1.2.3.256/":                    "neither a name nor an IPv4 address",
		"https://example.123/":                  "neither a name nor an IPv4 address",
		"https://134744072/":                    "write it as 8.8.8.8", // public, but unusual
		"https://ｅｘａｍｐｌｅ.com/":                  "ASCII (xn--) form",
		"https://hooks.example.com:0/":          "invalid port",
		"https://hooks.example.com:65536/":      "invalid port",
		"https://:443/":                         "with a host",
		`https://127.0.0.1\@hooks.example.com/`: "backslash",
		"https://u@hooks.example.com/":          "user name",
	} {
		_, err := none.CheckURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURL(%s) = %v, want an error saying %q", raw, err, want)
		}
	}
	for _, raw := range []string{"https://hooks.example.com./x", "https://8.8.8.8/", "https://[2606:4700::1111]/", "https://xn--bcher-kva.example/", "http://127.0.0.1:8080/"} {
		if _, err := allow.CheckURL(raw); err != nil {
			t.Errorf("CheckURL(%s) = %v", raw, err)
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
