package gitrepo

import (
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

// messageTexts are the fixed texts of the credentials parser's errors: a
// field that happens to be one of their words is in an error without
// being quoted.
const messageTexts = "fields, want 4: <tenant> <name> <url-prefix> <token> " +
	"tenant is not * or [a-z0-9][a-z0-9_.-]{0,62} " +
	"name must be letters, digits, '-', '_' and '.', beginning with a letter or digit " +
	"URL prefix is not an https or http URL; is not an absolute URL with a host; has user info; the token goes in the fourth field " +
	"has a query or fragment; token is empty; token is longer than; token has control characters or a line break " +
	"token file must be an absolute path after '@'; token file is not a regular file; token file: " +
	"same tenant, name and URL prefix as line; more than credentials; longer than bytes"

func FuzzParseCredentials(f *testing.F) {
	tokenFile := filepath.Join(f.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("ghp_fromAFILEfromAFILEfromAFILE\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"",
		"# only a comment\n",
		credentialsFile,
		"acme gh https://github.com/acme @" + tokenFile,
		"acme gh https://github.com/acme @/nonexistent/ghp_SECRETsecretSECRETsecret",
		"acme gh https://github.com/acme ghp_SECRETsecretSECRETsecret\nacme gh https://github.com/acme/ ghp_SECRETsecretSECRETsecret",
		"acme gh https://u:ghp_SECRETsecretSECRETsecret@h/o ghp_SECRETsecretSECRETsecret",
		"ghp_SECRETsecretSECRETsecret gh https://h/o x",
		"acme ghp_SECRETsecretSECRETsecret https://h/o x",
		"acme gh ghp_SECRETsecretSECRETsecret x",
		"acme gh https://h/o ghp_SECRETsecretSECRETsecret extra",
		"* gh https://[::1]:443/o tok\n* gh http://h:80 tok",
		"acme gh https://h/o tok\x00",
		strings.Repeat("x", maxCredentialLineLen+10),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCredentials(strings.NewReader(string(data)))
		if err != nil {
			checkParseError(t, data, err)
			return
		}
		checkParsed(t, data, c)
	})
}

// credentialFields are the fields of each line of data, as the parser
// splits them.
func credentialFields(data []byte) [][]string {
	var out [][]string
	for i, l := range strings.Split(string(data), "\n") {
		if i == 0 {
			l = strings.TrimPrefix(l, "\ufeff")
		}
		out = append(out, strings.FieldsFunc(strings.TrimSuffix(l, "\r"), func(r rune) bool { return r == ' ' || r == '\t' }))
	}
	return out
}

// checkParseError checks that err names a line of data and quotes none of
// its fields, tokens or not.
func checkParseError(t *testing.T, data []byte, err error) {
	pe, ok := errors.AsType[*CredentialsParseError](err)
	if !ok || pe.Line < 1 || pe.Line > strings.Count(string(data), "\n")+1 {
		t.Fatalf("err = %v: want a *CredentialsParseError with a line in the file", err)
	}
	for _, fields := range credentialFields(data) {
		for _, field := range fields {
			secret := strings.TrimPrefix(field, "@")
			if len(secret) >= 12 && strings.Contains(err.Error(), secret) && !strings.Contains(messageTexts, secret) {
				t.Fatalf("err = %q quotes a field of the file", err)
			}
		}
	}
}

// checkParsed checks that each credential of data is found by a lookup
// of its own prefix, with its own token when written in the file.
func checkParsed(t *testing.T, data []byte, c *Credentials) {
	n := 0
	for _, f := range credentialFields(data) {
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		n++
		tok, err := c.Lookup(f[0], f[1], f[2])
		if f[0] == AnyTenant {
			tok, err = c.Lookup("", f[1], f[2])
		}
		if err != nil || tok == "" || (!strings.HasPrefix(f[3], "@") && tok != f[3]) {
			t.Fatalf("line %q: Lookup = %q, %v", f, tok, err)
		}
	}
	if c.Len() != n {
		t.Fatalf("Len = %d, want %d", c.Len(), n)
	}
}

func FuzzCheckURL(f *testing.F) {
	p := mustPolicy(f, "127.0.0.1", "git.internal")
	for _, s := range []string{
		"https://github.com/org/repo.git",
		"http://git.internal/o/r.git",
		"http://127.0.0.1:8080/o/r",
		"https://user@github.com/o/r",
		"https://github.com/-o/r",
		"file:///etc/passwd",
		"git@github.com:o/r.git",
		"ext::sh -c id",
		"https://0x7f.1/o/r",
		"https://[::ffff:127.0.0.1]/o/r",
		"https://%6c%6fcalhost/o/r",
		"https://github.com/o/r?x#y",
		"HtTpS://GitHub.COM:443/o/r",
		"https://github.com/o/r\\x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := p.CheckURL(raw)
		if err != nil {
			fieldErrorOf(t, err, raw)
			return
		}
		checkAccepted(t, raw, u)
	})
}

// fieldErrorOf checks that a refusal is a FieldError of the URL field.
func fieldErrorOf(t *testing.T, err error, raw string) {
	if fe, ok := errors.AsType[*runs.FieldError](err); !ok || fe.Field != FieldGitURL || fe.Reason == "" {
		t.Fatalf("CheckURL(%q) = %v, want an error naming %s", raw, err, FieldGitURL)
	}
}

// checkAccepted checks what CheckURL promises of a URL it accepts.
func checkAccepted(t *testing.T, raw string, u *url.URL) {
	again, err := url.Parse(raw)
	switch {
	case err != nil:
		t.Fatalf("accepted %q, which does not re-parse: %v", raw, err)
	case again.Scheme != "https" && again.Scheme != "http", again.Host == "", again.Hostname() == "":
		t.Fatalf("accepted %q: scheme %q, host %q", raw, again.Scheme, again.Host)
	case again.User != nil, again.RawQuery != "", again.Fragment != "", again.Opaque != "":
		t.Fatalf("accepted %q with user info, query, fragment or opaque part", raw)
	case len(raw) > MaxURLBytes, !utf8.ValidString(raw), strings.ContainsAny(raw, " \t\r\n\x00\\"):
		t.Fatalf("accepted %q", raw)
	case u.String() != again.String():
		t.Fatalf("accepted %q as %q, which re-parses as %q", raw, u, again)
	}
	for _, part := range append(strings.Split(again.Hostname(), "."), strings.Split(again.Path, "/")...) {
		if strings.HasPrefix(part, "-") || part == "." || part == ".." {
			t.Fatalf("accepted %q, with a part that begins with '-' or is a dot segment", raw)
		}
	}
	host := strings.ToLower(strings.TrimSuffix(again.Hostname(), "."))
	if again.Scheme == "http" && host != "127.0.0.1" && host != "git.internal" {
		t.Fatalf("accepted %q over plain http to a host not allowed", raw)
	}
}

func FuzzCheckRef(f *testing.F) {
	for _, s := range []string{"main", "refs/heads/x", "-x", "a..b", "a@{1}", "x.lock", "a/.b", "ü", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		if CheckRef(FieldGitRef, ref) != nil {
			return
		}
		if ref == "" || len(ref) > MaxRefBytes || strings.HasPrefix(ref, "-") || !utf8.ValidString(ref) ||
			strings.ContainsAny(ref, " \t\r\n\x00~^:?*[\\") || strings.Contains(ref, "..") {
			t.Fatalf("CheckRef accepted %q", ref)
		}
	})
}

// TestCheckRefAgreesWithGit checks CheckRef against git check-ref-format
// itself, on refs that CheckRef's own additions (no leading '-', a bound)
// leave alone: they agree on each.
func TestCheckRefAgreesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is missing (scripts/install-git.sh installs it): %v", err)
	}
	refs := []string{
		"main", "v1.2.3", "feature/x-y_z", "refs/heads/main", "HEAD", "a@b", "x.y/z", "ünïcode",
		"a..b", "a@{1}", "@", "a~1", "a^", "a:b", "a?", "a*", "a[", `a\b`, "/main", "main/", "a//b",
		"main.", ".hidden", "a/.b", "a.lock", "a.lock/b", "a/b.lock", "ma in", "a\tb", "a\x7fb",
		"a/@", "@/a", "a.b.", "x/.", "lock", ".lock", "a/..b",
	}
	for _, ref := range refs {
		ours := CheckRef(FieldGitRef, ref) == nil
		gits := exec.Command(git, "check-ref-format", "--allow-onelevel", ref).Run() == nil
		if ours != gits {
			t.Errorf("ref %q: CheckRef takes it = %v, git check-ref-format = %v", ref, ours, gits)
		}
	}
}
