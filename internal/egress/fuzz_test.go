package egress

import (
	"context"
	"testing"
)

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"example.com", "Example.COM.:443", "*.example.com", "*.example.com:8443", "1.2.3.4", "1.2.3.4:80",
		"::1", "[::1]:8080", "10.0.0.0/8", "10.0.0.0/8:5432", "fd00::/8", "[fd00::/8]:443", "::ffff:1.2.3.4",
		"fe80::1%eth0", "[1.2.3.4]:80", "0x7f000001", "10.0.0.1/8", "a:b:c", "[", "*.", ":80",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		again, err := ParseRule(r.String())
		if err != nil {
			t.Fatalf("ParseRule(%q).String() = %q, which does not parse: %v", s, r.String(), err)
		}
		if again != r {
			t.Fatalf("ParseRule(%q) = %#v, its String %q reads back as %#v", s, r, r.String(), again)
		}
	})
}

func FuzzTarget(f *testing.F) {
	for _, seed := range []struct{ method, uri string }{
		{"CONNECT", "example.com:443"}, {"CONNECT", "[::1]:443"}, {"CONNECT", "example.com"},
		{"CONNECT", "[::ffff:127.0.0.1]:80"}, {"CONNECT", "1.2.3.4:0"},
		{"GET", "http://example.com/x?y"}, {"GET", "HTTP://Example.com:8080"}, {"GET", "http://[::1]/"},
		{"GET", "https://example.com/"}, {"GET", "/"}, {"POST", "http://u@example.com/"}, {"GET", "http://a%2eb/"},
	} {
		f.Add(seed.method, seed.uri)
	}
	checker := &Checker{Resolver: newFakeResolver(nil)}
	f.Fuzz(func(t *testing.T, method, uri string) {
		tg, err := parseTarget(method, uri)
		if err != nil {
			return
		}
		if tg.host == "" || tg.port < 1 || tg.port > 65535 {
			t.Fatalf("parseTarget(%q, %q) = %+v", method, uri, tg)
		}
		again, err := parseAuthority(tg.String(), 0)
		if err != nil || again != tg {
			t.Fatalf("parseTarget(%q, %q) = %+v, whose String %q reads back as %+v, %v", method, uri, tg, tg.String(), again, err)
		}
		for _, pol := range []Policy{{Mode: None}, {Mode: Allow, Allowed: mustRules(t, "10.0.0.0/8")}} {
			if d := checker.Check(context.Background(), pol, tg.host, tg.port); d.Allowed && pol.Mode == None {
				t.Fatalf("Check under none allowed %s", tg)
			}
		}
	})
}
