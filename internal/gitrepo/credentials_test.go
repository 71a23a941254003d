package gitrepo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentgate/agentgate/internal/runs"
)

// Tokens of the tests: distinct, and long enough that finding one in an
// error means the error quotes it.
const (
	tokOrg    = "ghp_orgTOKENorgTOKENorgTOKEN"
	tokRepo   = "ghp_repoTOKENrepoTOKENrepoTOKEN"
	tokShared = "ghp_sharedTOKENsharedTOKEN"
	tokOther  = "ghp_otherTOKENotherTOKENother"
	tokPort   = "ghp_portTOKENportTOKENport"
)

func parse(t *testing.T, data string) *Credentials {
	t.Helper()
	c, err := ParseCredentials(strings.NewReader(data))
	if err != nil {
		t.Fatalf("ParseCredentials: %v", err)
	}
	return c
}

const credentialsFile = "\ufeff# git credentials\r\n" +
	"acme  gh  https://github.com/acme  " + tokOrg + "\n" +
	"acme\tgh\thttps://github.com/acme/special.git/\t" + tokRepo + "\r\n" +
	"\n   \t\n" +
	"*     gh  https://github.com " + tokShared + "\n" +
	"other gh  https://GitHub.com:443/acme " + tokOther + "\n" +
	"*     lab http://git.corp.example:80/ " + tokPort + "\n" +
	"   # indented comment " + tokOther + "\n" +
	"*     lab https://git.corp.example:8443/team " + tokRepo

func TestLookupChoosesTheTenantsLongestPrefix(t *testing.T) {
	c := parse(t, credentialsFile)
	if c.Len() != 6 {
		t.Fatalf("Len = %d, want 6", c.Len())
	}
	for _, tc := range []struct{ tenant, name, url, want string }{
		{"acme", "gh", "https://github.com/acme/repo.git", tokOrg},
		{"acme", "gh", "https://github.com/acme", tokOrg},
		{"acme", "gh", "https://GITHUB.COM:443/acme/repo", tokOrg},
		{"acme", "gh", "https://github.com/acme/special.git", tokRepo},
		{"acme", "gh", "https://github.com/acme/special.git/", tokRepo},
		{"acme", "gh", "https://github.com/acme/special.gitx", tokOrg},
		// Not on a segment boundary: the shared credential covers it.
		{"acme", "gh", "https://github.com/acmecorp/x.git", tokShared},
		{"acme", "gh", "https://github.com/else/x.git", tokShared},
		{"other", "gh", "https://github.com/acme/x.git", tokOther},
		{"nobody", "gh", "https://github.com/acme/x.git", tokShared},
		{"", "gh", "https://github.com/acme/x.git", tokShared},
		{"acme", "lab", "http://git.corp.example/a/b.git", tokPort},
		{"acme", "lab", "http://GIT.corp.example:80/a/b.git", tokPort},
		{"acme", "lab", "https://git.corp.example:8443/team/x.git", tokRepo},
	} {
		got, err := c.Lookup(tc.tenant, tc.name, tc.url)
		if err != nil || got != tc.want {
			t.Errorf("Lookup(%q, %q, %q) = %q, %v; want %q", tc.tenant, tc.name, tc.url, got, err, tc.want)
		}
	}
}

func TestLookupRefusesWhatNoCredentialCovers(t *testing.T) {
	c := parse(t, credentialsFile)
	for _, tc := range []struct{ tenant, name, url, code string }{
		{"acme", "nope", "https://github.com/acme/x", CodeUnknownCredential},
		{"acme", "GH", "https://github.com/acme/x", CodeUnknownCredential},
		{"acme", "gh", "https://gitlab.com/acme/x", CodeCredentialNotForURL},
		{"acme", "gh", "http://github.com/acme/x", CodeCredentialNotForURL},
		{"acme", "gh", "https://github.com:444/acme/x", CodeCredentialNotForURL},
		{"acme", "gh", "https://evilgithub.com/acme/x", CodeCredentialNotForURL},
		{"acme", "gh", "https://github.com.evil.example/acme/x", CodeCredentialNotForURL},
		{"acme", "gh", "not a url", CodeCredentialNotForURL},
		{"acme", "lab", "https://git.corp.example:8443/team/../other/x", CodeCredentialNotForURL},
		{"acme", "lab", "https://git.corp.example:8443/team/%2E%2E/other/x", CodeCredentialNotForURL},
		{"acme", "lab", "https://git.corp.example/team/x", CodeCredentialNotForURL},
		{"acme", "lab", "https://git.corp.example:8443/teams/x", CodeCredentialNotForURL},
	} {
		got, err := c.Lookup(tc.tenant, tc.name, tc.url)
		if got != "" {
			t.Errorf("Lookup(%q, %q, %q) = %q, want no token", tc.tenant, tc.name, tc.url, got)
		}
		fe := fieldError(t, err, FieldGitCredential, tc.code)
		for _, tok := range []string{tokOrg, tokRepo, tokShared, tokOther, tokPort} {
			if strings.Contains(err.Error(), tok) || strings.Contains(fe.Reason, tok) {
				t.Errorf("Lookup error %q holds a token", err)
			}
		}
	}
	var none *Credentials
	if _, err := none.Lookup("acme", "gh", "https://github.com/acme/x"); err == nil {
		t.Error("Lookup on nil Credentials = nil error")
	}
	fieldError(t, func() error { _, err := c.Lookup("acme", "-gh", "https://github.com/acme/x"); return err }(), FieldGitCredential, "")
}

func TestParseCredentialsErrorsNameTheLineNotTheToken(t *testing.T) {
	const secret = "ghp_SECRETsecretSECRETsecret"
	dir := t.TempDir()
	for _, tc := range []struct{ data, want string }{
		{"acme gh https://h/o\n", "3 fields"},
		{"acme gh https://h/o " + secret + " extra\n", "5 fields"},
		{"# c\nACME gh https://h/o " + secret, "line 2: tenant"},
		{"acme -gh https://h/o " + secret, "name"},
		{"acme g/h https://h/o " + secret, "name"},
		{"acme gh ssh://h/o " + secret, "URL prefix"},
		{"acme gh h/o " + secret, "URL prefix"},
		{"acme gh https:///o " + secret, "URL prefix"},
		{"acme gh https://u:" + secret + "@h/o " + secret, "user info"},
		{"acme gh https://h/o?x=" + secret + " " + secret, "query"},
		{"acme gh https://h/o#x " + secret, "fragment"},
		{"acme gh https://h/o " + secret + "\x01", "control"},
		{"acme gh https://h/o " + secret + "\r\r", "control"},
		{"acme gh https://h/o " + strings.Repeat("x", maxTokenLen+1), "longer"},
		{"acme gh https://h/o " + secret + "\nacme gh https://H:443/o/ " + secret, "line 2: same tenant, name and URL prefix as line 1"},
		{"acme gh https://h/o @relative/" + secret, "absolute"},
		{"acme gh https://h/o @" + filepath.Join(dir, secret), "line 1: token file: no such file or directory"},
		{"acme gh https://h/o @" + dir, "not a regular file"},
		{strings.Repeat("#", maxCredentialLineLen+1), "longer"},
	} {
		_, err := ParseCredentials(strings.NewReader(tc.data))
		pe, ok := errors.AsType[*CredentialsParseError](err)
		if !ok {
			t.Errorf("ParseCredentials(%.60q) = %v, want a *CredentialsParseError", tc.data, err)
			continue
		}
		if !strings.Contains(pe.Error(), tc.want) {
			t.Errorf("ParseCredentials(%.60q) = %q, want it to say %q", tc.data, pe, tc.want)
		}
		if strings.Contains(pe.Error(), secret) {
			t.Errorf("ParseCredentials(%.60q) = %q, which holds the token", tc.data, pe)
		}
	}
}

func TestParseCredentialsAllowsDuplicatesAcrossTenantsAndPrefixes(t *testing.T) {
	c := parse(t, "a gh https://h/o t1\nb gh https://h/o t2\n* gh https://h/o t3\na gh https://h/o/r t4\na gl https://h/o t5")
	if c.Len() != 5 {
		t.Fatalf("Len = %d, want 5", c.Len())
	}
	if c := parse(t, "# no credentials yet\n"); c.Len() != 0 {
		t.Fatalf("Len of a comment = %d", c.Len())
	}
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for content, want := range map[string]string{
		tokOrg + "\n":   tokOrg,
		tokOrg + "\r\n": tokOrg,
		tokOrg:          tokOrg,
	} {
		path := write("tok", content)
		c := parse(t, "acme gh https://github.com/acme @"+path)
		if got, err := c.Lookup("acme", "gh", "https://github.com/acme/x"); err != nil || got != want {
			t.Errorf("token file %q: Lookup = %q, %v; want %q", content, got, err, want)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(write("target", tokRepo+"\n"), link); err != nil {
		t.Fatal(err)
	}
	if got, _ := parse(t, "acme gh https://github.com/acme @"+link).Lookup("acme", "gh", "https://github.com/acme/x"); got != tokRepo {
		t.Errorf("token file behind a symlink: Lookup = %q, want %q", got, tokRepo)
	}
	for content, want := range map[string]string{
		"":                                  "empty",
		"\n":                                "empty",
		tokOrg + "\n\n":                     "line break",
		"a\nb":                              "line break",
		strings.Repeat("x", maxTokenLen+1):  "longer",
		strings.Repeat("x", 10*maxTokenLen): "longer",
		strings.Repeat("x", maxTokenLen-1) + "\x00": "control",
	} {
		path := write("bad", content)
		_, err := ParseCredentials(strings.NewReader("# c\nacme gh https://github.com/acme @" + path))
		if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), want) {
			t.Errorf("token file %.40q: err = %v, want line 2 and %q", content, err, want)
		}
	}
}

func TestTokenFileThatIsAFIFODoesNotBlock(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	_, err := ParseCredentials(strings.NewReader("acme gh https://h/o @" + fifo))
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("err = %v, want a token file that is not a regular file", err)
	}
}

func TestCredentialsPrintNoToken(t *testing.T) {
	c := parse(t, credentialsFile)
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q", "%T %p"} {
		out = append(out, fmt.Sprintf(verb, c), fmt.Sprintf(verb, *c), fmt.Sprintf(verb, []any{c, *c}))
	}
	b, err := json.Marshal(map[string]any{"p": c, "v": *c})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(b))
	var logged bytes.Buffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logged), zap.DebugLevel))
	log.Info("creds", zap.Any("any", c), zap.Object("obj", c), zap.Stringer("str", c), zap.Reflect("refl", c), zap.Any("value", *c))
	out = append(out, logged.String())
	all := strings.Join(out, "\n")
	for _, tok := range []string{tokOrg, tokRepo, tokShared, tokOther, tokPort} {
		if strings.Contains(all, tok) {
			t.Fatalf("a token is printed:\n%s", all)
		}
	}
	if !strings.Contains(all, "6 credentials") || !strings.Contains(logged.String(), `"credentials":6`) {
		t.Fatalf("printed without the count:\n%s", all)
	}
}

// deadline bounds every wait for the watcher: generous, because a loaded
// machine may starve its goroutine, and never reached when it works.
const deadline = 30 * time.Second

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up after %v waiting for %s", deadline, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replace writes data to path atomically, as an operator's tooling should.
func replace(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatchCredentialsKeepsTheLastGoodVersion(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "git-credentials")
	replace(t, path, "acme gh https://github.com/acme "+tokOrg+"\n")
	core, logs := observer.New(zapcore.InfoLevel)
	ctx, cancel := context.WithCancel(t.Context())
	f, err := WatchCredentials(ctx, path, zap.New(core), 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-f.Done() }()
	lookup := func() string {
		tok, _ := f.Lookup("acme", "gh", "https://github.com/acme/r.git")
		return tok
	}
	if got := lookup(); got != tokOrg {
		t.Fatalf("Lookup = %q, want %q", got, tokOrg)
	}

	replace(t, path, "acme gh https://github.com/acme "+tokRepo+"\n")
	waitFor(t, "the edit to take effect", func() bool { return lookup() == tokRepo })

	replace(t, path, "acme gh https://github.com/acme "+tokOther+"\nacme gh https://github.com/acme "+tokOther+"\n")
	waitFor(t, "the bad edit to be logged", func() bool {
		return logs.FilterMessageSnippet("not reloaded").Len() > 0
	})
	if got := lookup(); got != tokRepo {
		t.Fatalf("after a bad edit, Lookup = %q, want the last good %q", got, tokRepo)
	}
	for _, e := range logs.All() {
		if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, tokOther) {
			t.Fatalf("the log holds a token: %s", line)
		}
	}
	bad := logs.FilterMessageSnippet("not reloaded").All()[0].ContextMap()
	if bad["line"] != int64(2) {
		t.Fatalf("the bad edit is logged with %v, want line 2", bad)
	}

	replace(t, path, "# every credential revoked\n")
	waitFor(t, "the revocation to take effect", func() bool {
		_, err := f.Lookup("acme", "gh", "https://github.com/acme/r.git")
		fe, ok := errors.AsType[*runs.FieldError](err)
		return ok && fe.Code == CodeUnknownCredential
	})
}

func TestLoadCredentialsFailsOnABadFile(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"empty": "", "bad": "# c\nacme gh https://h/o\n"} {
		path := filepath.Join(dir, name)
		replace(t, path, data)
		if _, err := LoadCredentials(path); err == nil {
			t.Errorf("LoadCredentials(%s) = nil error", name)
		}
		if _, err := WatchCredentials(t.Context(), path, nil, 0); err == nil {
			t.Errorf("WatchCredentials(%s) = nil error", name)
		}
	}
	if _, err := LoadCredentials(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadCredentials of a missing file = nil error")
	}
	path := filepath.Join(dir, "good")
	replace(t, path, "* gh https://github.com "+tokShared+"\n")
	c, err := LoadCredentials(path)
	if err != nil || c.Len() != 1 {
		t.Fatalf("LoadCredentials = %v, %v", c, err)
	}
}

func TestTokenFilesListsEachFileATokenCameFrom(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(tokOrg+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := parse(t, "acme gh https://github.com/acme @"+b+"\n"+
		"* gh https://github.com/ @"+a+"\n"+
		"beta gh https://github.com/beta @"+b+"\n"+
		"acme gl https://gitlab.com/acme "+tokRepo+"\n")
	if got, want := c.TokenFiles(), []string{a, b}; !slices.Equal(got, want) {
		t.Errorf("TokenFiles = %q, want %q", got, want)
	}
	if got := parse(t, "acme gl https://gitlab.com/acme "+tokRepo+"\n").TokenFiles(); len(got) != 0 {
		t.Errorf("TokenFiles of inline tokens = %q, want none", got)
	}
	if got := (*Credentials)(nil).TokenFiles(); got != nil {
		t.Errorf("TokenFiles of no credentials = %q", got)
	}
}
