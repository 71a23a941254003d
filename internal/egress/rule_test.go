package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseRuleForms(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"Example.COM", "example.com"},
		{"example.com.", "example.com"},
		{"example.com:443", "example.com:443"},
		{"*.Example.com", "*.example.com"},
		{"*.example.com:8443", "*.example.com:8443"},
		{"1.2.3.4", "1.2.3.4"},
		{"1.2.3.4:80", "1.2.3.4:80"},
		{"1.2.3.4/32", "1.2.3.4"},
		{"::1", "::1"},
		{"[::1]", "::1"},
		{"[::1]:8080", "[::1]:8080"},
		{"::ffff:1.2.3.4", "1.2.3.4"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"10.0.0.0/8:5432", "10.0.0.0/8:5432"},
		{"fd00::/8", "fd00::/8"},
		{"[fd00::/8]:443", "[fd00::/8]:443"},
		{"2001:db8::1:80", "2001:db8::1:80"}, // an address, not a port
	}
	for _, c := range cases {
		r, err := ParseRule(c.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", c.in, err)
			continue
		}
		if got := r.String(); got != c.want {
			t.Errorf("ParseRule(%q).String() = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseRuleRefuses(t *testing.T) {
	cases := map[string]string{
		"":                       "empty",
		"exa mple.com":           "spaces",
		"ex\u00e4mple.com":       "ASCII",
		"*":                      "host name",
		"*.":                     "host name",
		"a.*.example.com":        "host name",
		"example.com:0":          "port",
		"example.com:65536":      "port",
		"example.com:":           "port",
		"example.com:+80":        "port",
		"10.0.0.1/8":             "did you mean 10.0.0.0/8",
		"fd00::/8:443":           "brackets",
		"[1.2.3.4]:80":           "brackets",
		"[::1":                   "[",
		"[::1]x":                 ":port",
		"fe80::1%eth0":           "zone",
		"1.2.3":                  "four decimal",
		"0x7f000001":             "four decimal",
		"10.0.0.0/33":            "network",
		"::ffff:10.0.0.0/104":    "IPv4 form",
		"-bad.example.com":       "label",
		strings.Repeat("a", 261): "longer",
	}
	for in, want := range cases {
		_, err := ParseRule(in)
		if err == nil {
			t.Errorf("ParseRule(%q) accepted it", in)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRule(%q) = %q, want it to say %q", in, err, want)
		}
	}
}

func TestParseRulesBounds(t *testing.T) {
	many := make([]string, MaxRules+1)
	for i := range many {
		many[i] = "example.com"
	}
	if _, err := ParseRules(many); err == nil || !strings.Contains(err.Error(), "more than 64") {
		t.Errorf("ParseRules(%d entries) = %v, want a bound error", len(many), err)
	}
	if rs, err := ParseRules(many[:MaxRules]); err != nil || len(rs) != MaxRules {
		t.Errorf("ParseRules(%d entries) = %d rules, %v", MaxRules, len(rs), err)
	}
	_, err := ParseRules([]string{"ok.example.com", "bad entry"})
	if err == nil || !strings.Contains(err.Error(), `allow_hosts[1]`) || !strings.Contains(err.Error(), `"bad entry"`) {
		t.Errorf("ParseRules with a bad second entry = %v, want it named", err)
	}
}

func TestRuleMatching(t *testing.T) {
	wild := mustRule(t, "*.example.com:443")
	for name, want := range map[string]bool{"api.example.com": true, "a.b.example.com": true, "example.com": false, "badexample.com": false} {
		if got := wild.matchesName(name, 443); got != want {
			t.Errorf("*.example.com:443 matches %s: %v, want %v", name, got, want)
		}
	}
	if wild.matchesName("api.example.com", 80) {
		t.Error("*.example.com:443 matches port 80")
	}
	cidr := mustRule(t, "[fd00::/8]:443")
	if !cidr.matchesAddr(netip.MustParseAddrPort("[fd12::5]:443")) || cidr.matchesAddr(netip.MustParseAddrPort("[fe00::5]:443")) ||
		cidr.matchesAddr(netip.MustParseAddrPort("[fd12::5]:80")) {
		t.Error("[fd00::/8]:443 matches the wrong addresses")
	}
}

func TestRuleForURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.anthropic.com":        "api.anthropic.com:443",
		"http://127.0.0.1:4000/v1":         "127.0.0.1:4000",
		"http://[::1]/mcp":                 "[::1]:80",
		"https://Mcp.Example.com:8443/sse": "mcp.example.com:8443",
	} {
		r, err := RuleForURL(in)
		if err != nil || r.String() != want {
			t.Errorf("RuleForURL(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	if _, err := RuleForURL("ftp://example.com"); err == nil {
		t.Error("RuleForURL accepted an ftp URL")
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Open, Model, Allow, None} {
		if got, err := ParseMode(string(m)); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := ParseMode("closed"); err == nil || !strings.Contains(err.Error(), "model, allow, open or none") {
		t.Errorf("ParseMode(closed) = %v, want the names listed", err)
	}
}

func mustRule(t testing.TB, s string) Rule {
	t.Helper()
	r, err := ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustRules(t testing.TB, ss ...string) []Rule {
	t.Helper()
	rs, err := ParseRules(ss)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
