package webhooks

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzCheckURL: whatever a client sends as webhook_url, CheckURL does not
// panic, and what it accepts is an http(s) URL with a host, within the
// bound, https unless allowed, never a literal refused address, and its
// redacted form keeps no query. The host it accepts is one that the
// dialer reads as net/url does: an address in its plain form, public or
// allowed, or an ASCII name that no reader takes for an address and that
// is not internal by definition.
func FuzzCheckURL(f *testing.F) {
	for host := range unusualHosts {
		f.Add("https://" + host + "/x")
	}
	for _, s := range []string{
		"https://hooks.example.com/agentgate", "https://hooks.example.com:8443/a?token=x", "http://127.0.0.1:8080/x",
		"https://10.0.0.1/", "https://[::ffff:127.0.0.1]/", "https://169.254.169.254/latest", "https://localhost/",
		"https://[fe80::1%25eth0]/", "https://u:p@h.example/", "https://h.example/#x", "ftp://h/", "//h.example/x",
		"https://0x7f.0.0.1/", "https://2130706433/", "https://[::]/", "https://h.example:65536/", "https:///x",
		"https://xn--bcher-kva.example/", "https://h.example/%zz",
	} {
		f.Add(s)
	}
	p, err := ParseAllowList([]string{"127.0.0.1"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := p.CheckURL(raw)
		if err != nil {
			var inv *InvalidURLError
			var ref *RefusedError
			if !errors.As(err, &inv) && !errors.As(err, &ref) {
				t.Fatalf("CheckURL(%q) = %T %v", raw, err, err)
			}
			return
		}
		if len(raw) > MaxURLBytes || u.Host == "" || u.User != nil || (u.Scheme != "https" && u.Scheme != "http") {
			t.Fatalf("CheckURL(%q) accepted %#v", raw, u)
		}
		host := u.Hostname()
		if ip, err := netip.ParseAddr(host); err == nil && p.Refused(ip) {
			t.Fatalf("CheckURL(%q) accepted the refused address %s", raw, ip)
		}
		if u.Scheme == "http" && !p.allowedHost(host) {
			t.Fatalf("CheckURL(%q) accepted plain http to %s", raw, host)
		}
		if red := RedactURL(u); u.RawQuery != "" && strings.Contains(red, u.RawQuery) {
			t.Fatalf("RedactURL(%q) = %q keeps the query", raw, red)
		}
		checkDialedHost(t, p, raw, u)
	})
}

// checkDialedHost fails unless the host of u, which CheckURL accepted,
// is what the webhooks' dialer would be handed and check: the host of the
// address the transport dials (net.SplitHostPort of host:port), the same
// when u is written out and read again, and either a plain address the
// policy does not refuse or a name that is not an address to any reader.
func checkDialedHost(t *testing.T, p Policy, raw string, u *url.URL) {
	host := u.Hostname()
	dialHost, _, err := net.SplitHostPort(net.JoinHostPort(host, "443"))
	if err != nil || dialHost != host {
		t.Fatalf("CheckURL(%q): the dialer would get %q (%v), not %q", raw, dialHost, err, host)
	}
	again, err := url.Parse(u.String())
	if err != nil || again.Hostname() != host {
		t.Fatalf("CheckURL(%q): %q reads back as %v (%v)", raw, u.String(), again, err)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.String() != host || ip.Is4In6() || ip.Zone() != "" || p.Refused(ip) {
			t.Fatalf("CheckURL(%q) accepted the address %q", raw, host)
		}
		return
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	last := name[strings.LastIndexByte(name, '.')+1:]
	switch {
	case strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != "":
		t.Fatalf("CheckURL(%q) accepted the name %q, with bytes a resolver may read otherwise", raw, host)
	case strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "":
		t.Fatalf("CheckURL(%q) accepted %q, which inet_aton or a browser reads as an address", raw, host)
	case (name == "localhost" || strings.HasSuffix(name, ".localhost") || strings.HasSuffix(name, ".internal")) && !p.hostAllowed(name):
		t.Fatalf("CheckURL(%q) accepted the internal name %q", raw, host)
	}
}

// FuzzParseTenants: a tenants file never panics the parser, an error
// names a line of the file and never quotes a secret, and every hook it
// accepts has a URL the policy accepts.
func FuzzParseTenants(f *testing.F) {
	sec := specVectors[0].secret
	for _, s := range []string{
		"acme https://a.example/ " + sec + "\n", "- http://127.0.0.1:9/x\n", "# c\n\nglobex\thttps://g.example/x\r\n",
		"acme https://a.example/\nacme https://b.example/\n", "acme https://10.0.0.1/ " + sec + "," + sec,
		"\ufeffacme https://a.example/ whsec_\n", "a b c d\n", strings.Repeat("x", 9000),
	} {
		f.Add([]byte(s), true)
	}
	p, _ := ParseAllowList([]string{"127.0.0.1"})
	check := func(u string) error { _, err := p.CheckURL(u); return err }
	f.Fuzz(func(t *testing.T, data []byte, haveDefault bool) {
		tn, err := ParseTenants(bytes.NewReader(data), check, haveDefault)
		if err != nil {
			te, ok := errors.AsType[*TenantsError](err)
			if !ok {
				t.Fatalf("error %T %v", err, err)
			}
			if te.Line < 1 || te.Line > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("error on line %d of a file of %d lines", te.Line, bytes.Count(data, []byte("\n"))+1)
			}
			for _, tok := range strings.Fields(string(data)) {
				for _, part := range strings.Split(tok, ",") {
					if strings.HasPrefix(part, SecretPrefix) && len(part) > len(SecretPrefix)+2 && strings.Contains(err.Error(), part) {
						t.Fatalf("error quotes a secret: %v", err)
					}
				}
			}
			return
		}
		for tenant, h := range tn.hooks {
			if check(h.URL) != nil {
				t.Fatalf("tenant %q has an unchecked URL %q", tenant, h.URL)
			}
			if len(h.Secrets) == 0 && !haveDefault {
				t.Fatalf("tenant %q has no secret", tenant)
			}
		}
	})
}

// FuzzVerify: the verifier never panics on what a sender may put in the
// headers, and accepts only the signature its secret makes.
func FuzzVerify(f *testing.F) {
	f.Add("msg_1", "1700000000", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte(`{"test": 2432232314}`))
	f.Add("msg_1", "-1", "v1,", []byte{})
	f.Add("m", "99999999999999999999", "v1a,x v1,,, v1", []byte("x"))
	s, _ := ParseSecret(specVectors[0].secret)
	ver, _ := NewVerifier(s)
	now := time.Unix(1_700_000_000, 0)
	ver.Now = func() time.Time { return now }
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sig)
		if ver.Verify(h, body) != nil {
			return
		}
		unix, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || now.Sub(time.Unix(unix, 0)).Abs() > DefaultTolerance {
			t.Fatalf("verified a timestamp %q out of tolerance", ts)
		}
		want := s.mac(id, unix, body)
		for _, part := range strings.Split(sig, " ") {
			if enc, ok := strings.CutPrefix(part, "v1,"); ok {
				if got, err := base64.StdEncoding.DecodeString(enc); err == nil && bytes.Equal(got, want) {
					return
				}
			}
		}
		t.Fatalf("verified a signature the secret did not make: %q", sig)
	})
}

// FuzzParseRetryAfter: any Retry-After gives a delay from 0 to a year.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "Fri, 02 Jan 2026 03:05:05 GMT", "1e9", " 5"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := parseRetryAfter(v, now); d < 0 || d > 366*24*time.Hour {
			t.Fatalf("parseRetryAfter(%q) = %s", v, d)
		}
	})
}
