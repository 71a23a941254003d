package gitrepo

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func mustPolicy(t testing.TB, entries ...string) Policy {
	t.Helper()
	p, err := ParsePolicy(entries)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fieldError asserts err is a *runs.FieldError of field wrapping
// ErrInvalid, with code (empty: none), and returns it.
func fieldError(t *testing.T, err error, field, code string) *runs.FieldError {
	t.Helper()
	fe, ok := errors.AsType[*runs.FieldError](err)
	if !ok || fe.Field != field || fe.Code != code || !errors.Is(err, runs.ErrInvalid) {
		t.Fatalf("err = %#v (%v), want an invalid %s with code %q", fe, err, field, code)
	}
	return fe
}

func TestCheckURLAcceptsHTTPSToPublicHosts(t *testing.T) {
	p := mustPolicy(t)
	for _, raw := range []string{
		"https://github.com/org/repo.git",
		"https://github.com/org/repo",
		"HTTPS://GitHub.com/org/repo.git",
		"https://git.example.com:8443/group/sub/repo.git",
		"https://[2606:4700::1111]/org/repo.git",
		"https://8.8.8.8/r.git",
		"https://h.example/org/re-po.git",
	} {
		u, err := p.CheckURL(raw)
		if err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", raw, err)
			continue
		}
		if u.Scheme != "https" || u.Host == "" {
			t.Errorf("CheckURL(%q) = %v", raw, u)
		}
	}
}

func TestCheckURLRefuses(t *testing.T) {
	p := mustPolicy(t)
	for raw, want := range map[string]string{
		"":                                                       "required",
		"file:///etc/passwd":                                     "must be an https URL",
		"/srv/repo.git":                                          "must be an https URL",
		"../repo":                                                "must be an https URL",
		"ssh://git@github.com/org/repo.git":                      "must be an https URL",
		"git://github.com/org/repo.git":                          "must be an https URL",
		"ext::sh -c touch% /tmp/pwned":                           "spaces",
		"ext::sh":                                                "must be an https URL",
		"git@github.com:org/repo.git":                            "must be an https URL",
		"-uhttps://github.com/org/repo":                          "must be an https URL",
		"--upload-pack=touch":                                    "must be an https URL",
		"ftp://h.example/r":                                      "must be an https URL",
		"https://user:pw@github.com/o/r.git":                     "user name or password",
		"https://tok@github.com/o/r.git":                         "user name or password",
		"https://github.com/o/r.git?x=1":                         "query",
		"https://github.com/o/r.git?":                            "query",
		"https://github.com/o/r.git#frag":                        "fragment",
		"https://github.com/o/r.git#":                            "fragment",
		"https://github.com":                                     "path",
		"https://github.com/":                                    "path",
		"https://github.com//":                                   "path",
		"https://github.com/-o/r":                                "begins with '-'",
		"https://github.com/o/--upload-pack":                     "begins with '-'",
		"https://-h.example/o/r":                                 "'-'",
		"https://github.com/o r":                                 "spaces",
		"https://github.com/o/../other/r":                        `".."`,
		"https://github.com/o/%2e%2e/x/r":                        `".."`,
		"https://github.com/./o/r":                               `"."`,
		"https://github.com/o\tr":                                "spaces",
		"https://github.com/o\x00r":                              "control",
		"https://github.com/o\x7fr":                              "control",
		"https://github.com/o\nr":                                "control",
		"https://github.com\\@evil/o/r":                          "backslash",
		"https://github.com/" + strings.Repeat("a", MaxURLBytes): "longer",
		"https:///o/r":                                           "host",
		"https:github.com/o/r":                                   "host",
		"https://github.com:0/o/r":                               "port",
		"https://github.com:99999/o/r":                           "port",
		"https://github.com:/o/r":                                "port",
		"http://github.com/o/r.git":                              "plain http only to a host in AGENTGATE_GIT_ALLOW_HOSTS",
		"https://0x7f.1/o/r":                                     "127.0.0.1",
		"https://ｇｉｔｈｕｂ.com/o/r":                                 "ASCII",
		"https://github.com/o/r\xff":                             "UTF-8",
		"https://%67ithub.com/o/r":                               "percent-encoded",
		"https://[fe80::1%25eth0]/o/r":                           "internal address",
		"https://[2606:4700::1%25eth0]/o/r":                      "zone",
		"https://[::ffff:8.8.8.8]/o/r":                           "IPv6",
		"https://exa mple.com/o/r":                               "spaces",
		"https://github.com/o/r.git?#x":                          "query",
	} {
		_, err := p.CheckURL(raw)
		if err == nil {
			t.Errorf("CheckURL(%q) = nil, want an error saying %q", raw, want)
			continue
		}
		fe, ok := errors.AsType[*runs.FieldError](err)
		if !ok || fe.Field != FieldGitURL || !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("CheckURL(%q) = %#v, want an invalid %s", raw, err, FieldGitURL)
			continue
		}
		if !strings.Contains(fe.Reason, want) {
			t.Errorf("CheckURL(%q) says %q, want it to say %q", raw, fe.Reason, want)
		}
		if strings.Contains(fe.Reason, "webhook") || strings.Contains(fe.Reason, "WEBHOOK") {
			t.Errorf("CheckURL(%q) says %q, which speaks of webhooks", raw, fe.Reason)
		}
	}
}

func TestCheckURLRefusesInternalHostsUnlessAllowed(t *testing.T) {
	internal := []string{
		"https://127.0.0.1/o/r.git",
		"https://2130706433/o/r.git",
		"https://localhost/o/r.git",
		"https://git.internal/o/r.git",
		"https://169.254.169.254/latest/meta-data",
		"https://10.1.2.3:8443/o/r.git",
		"https://[::1]/o/r.git",
		"https://[fd00::1]/o/r.git",
		"https://192.168.1.1/o/r.git",
	}
	p := mustPolicy(t)
	for _, raw := range internal {
		_, err := p.CheckURL(raw)
		fe := fieldError(t, err, FieldGitURL, CodeGitURLRefused)
		if !strings.Contains(fe.Reason, "AGENTGATE_GIT_ALLOW_HOSTS") {
			t.Errorf("CheckURL(%q) says %q, want it to name AGENTGATE_GIT_ALLOW_HOSTS", raw, fe.Reason)
		}
	}
	allowing := mustPolicy(t, "127.0.0.0/8", "localhost", "git.internal", "169.254.169.254", "10.0.0.0/8", "::1", "fd00::/8", "192.168.1.1")
	for _, raw := range internal {
		if _, err := allowing.CheckURL(raw); err != nil && !strings.Contains(raw, "2130706433") {
			t.Errorf("allowed: CheckURL(%q) = %v, want nil", raw, err)
		}
	}
	// An address written in a form readers disagree on stays refused
	// even when allowed: the clone's reader might see another host.
	if _, err := allowing.CheckURL("https://2130706433/o/r.git"); err == nil {
		t.Error("allowed: CheckURL of 127.0.0.1 written in decimal = nil, want an error")
	}
}

func TestCheckURLHTTPOnlyToAllowedHosts(t *testing.T) {
	p := mustPolicy(t, "git.example.com", "127.0.0.1")
	for raw, ok := range map[string]bool{
		"http://git.example.com/o/r.git":      true,
		"HTTP://GIT.EXAMPLE.COM:8080/o/r.git": true,
		"http://127.0.0.1:9418/o/r.git":       true,
		"http://other.example.com/o/r.git":    false,
		"http://127.0.0.2/o/r.git":            false,
		"https://127.0.0.2/o/r.git":           false,
	} {
		_, err := p.CheckURL(raw)
		if ok != (err == nil) {
			t.Errorf("CheckURL(%q) = %v, want ok = %v", raw, err, ok)
		}
	}
}

func TestParsePolicyRefusesWhatIsNotAHost(t *testing.T) {
	for _, entries := range [][]string{{"http://x/"}, {"a b"}, {"10.0.0.0/33"}} {
		if _, err := ParsePolicy(entries); err == nil {
			t.Errorf("ParsePolicy(%q) = nil error", entries)
		}
	}
	if _, err := ParsePolicy([]string{"", " git.example.com ", "10.0.0.0/8", "::1"}); err != nil {
		t.Errorf("ParsePolicy of valid entries = %v", err)
	}
}

func TestCheckResolved(t *testing.T) {
	p := mustPolicy(t, "git.corp.example", "10.9.0.0/16")
	public, private, allowedNet := netip.MustParseAddr("140.82.112.3"), netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.9.1.1")
	for _, c := range []struct {
		host  string
		addrs []netip.Addr
		ok    bool
	}{
		{"github.com", []netip.Addr{public}, true},
		{"github.com", []netip.Addr{public, private}, false},
		{"rebind.example", []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, false},
		{"git.corp.example", []netip.Addr{private}, true},
		{"other.example", []netip.Addr{allowedNet}, true},
	} {
		err := p.CheckResolved(c.host, c.addrs)
		if c.ok != (err == nil) {
			t.Errorf("CheckResolved(%q, %v) = %v, want ok = %v", c.host, c.addrs, err, c.ok)
		}
		if err != nil {
			fieldError(t, err, FieldGitURL, CodeGitURLRefused)
		}
	}
}

func TestCheckRef(t *testing.T) {
	for _, ref := range []string{
		"main", "v1.2.3", "feature/x-y_z", "refs/heads/main", "refs/tags/v1", "HEAD",
		"0123456789abcdef0123456789abcdef01234567", "release-2024.01", "ünïcode", "a@b", "x.y/z",
	} {
		if err := CheckRef(FieldGitRef, ref); err != nil {
			t.Errorf("CheckRef(%q) = %v, want nil", ref, err)
		}
	}
	for ref, want := range map[string]string{
		"":                              "empty",
		"-main":                         "'-'",
		"--upload-pack=x":               "'-'",
		"ma in":                         "spaces",
		"ma\x00in":                      "control",
		"ma\u0085in":                    "control",
		"main\n":                        "control",
		"a..b":                          "..",
		"a@{1}":                         "@{",
		"@":                             "@",
		"a~1":                           "~",
		"a^":                            "^",
		"a:b":                           ":",
		"a?":                            "?",
		"a*":                            "*",
		"a[":                            "[",
		`a\b`:                           `\`,
		"/main":                         "empty path component",
		"main/":                         "empty path component",
		"a//b":                          "empty path component",
		"main.":                         "'.'",
		".hidden":                       "'.'",
		"a/.b":                          "'.'",
		"a.lock":                        ".lock",
		"a.lock/b":                      ".lock",
		"\xff":                          "UTF-8",
		strings.Repeat("a", 256):        "longer",
		strings.Repeat("a/", 127) + "b": "",
	} {
		err := CheckRef(FieldGitRef, ref)
		if want == "" {
			if err != nil {
				t.Errorf("CheckRef(%q) = %v, want nil", ref, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("CheckRef(%q) = nil, want an error saying %q", ref, want)
			continue
		}
		if fe := fieldError(t, err, FieldGitRef, ""); !strings.Contains(fe.Reason, want) {
			t.Errorf("CheckRef(%q) says %q, want %q", ref, fe.Reason, want)
		}
	}
}

func TestCheckBranch(t *testing.T) {
	for _, b := range []string{"agentgate/run-1", "fix", "a.b-c_d"} {
		if err := CheckBranch(b); err != nil {
			t.Errorf("CheckBranch(%q) = %v, want nil", b, err)
		}
	}
	for _, b := range []string{"", "HEAD", "refs/heads/x", "-x", "a..b", "x.lock", "a b"} {
		fieldError(t, CheckBranch(b), FieldPushBranch, "")
	}
}

func TestCheckSourceNamesTheField(t *testing.T) {
	p := mustPolicy(t)
	good := runs.GitSource{URL: "https://github.com/o/r.git", Ref: "main", Credential: "gh-ro"}
	if err := p.CheckSource(good); err != nil {
		t.Fatalf("CheckSource(%+v) = %v", good, err)
	}
	if err := p.CheckSource(runs.GitSource{URL: good.URL}); err != nil {
		t.Fatalf("CheckSource without ref and credential = %v", err)
	}
	for field, src := range map[string]runs.GitSource{
		FieldGitURL:        {URL: "file:///x"},
		FieldGitRef:        {URL: good.URL, Ref: "-x"},
		FieldGitCredential: {URL: good.URL, Credential: "-x"},
	} {
		fieldError(t, p.CheckSource(src), field, "")
	}
	for _, name := range []string{"-x", ".x", "a b", "a/b", "a:b", strings.Repeat("a", MaxCredentialNameBytes+1), "é"} {
		fieldError(t, p.CheckSource(runs.GitSource{URL: good.URL, Credential: name}), FieldGitCredential, "")
	}
}
