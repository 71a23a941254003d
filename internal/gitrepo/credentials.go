package gitrepo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/filewatch"
	"github.com/agentgate/agentgate/internal/runs"
)

// The API's codes of a credential a run names that it may not use.
const (
	// CodeUnknownCredential: the tenant has no credential of that name.
	CodeUnknownCredential = "unknown_credential"
	// CodeCredentialNotForURL: the tenant has credentials of that name,
	// but none for the repository's URL.
	CodeCredentialNotForURL = "credential_not_for_url"
)

// AnyTenant in a credential's tenant field gives it to every tenant.
const AnyTenant = "*"

// Limits of the credentials file, so that a wrong path (a log, a device)
// fails fast instead of being read whole.
const (
	maxCredentialsFileLen = 4 << 20
	maxCredentialLineLen  = 16 << 10
	maxCredentials        = 10_000
	// maxTokenLen bounds a token, inline or in a file: the tokens of git
	// hosts are tens to hundreds of bytes, a JWT a few thousand.
	maxTokenLen = 8 << 10
)

// CredentialsParseError is a credentials file that is not valid: Line
// (from 1) says where. Its message never quotes the file, whose tokens
// could be pasted into any field.
type CredentialsParseError struct {
	Line int
	Msg  string
}

func (e *CredentialsParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// credential is one line of the credentials file.
type credential struct {
	tenant, name string
	prefix       urlPrefix
	token        string
	// file is the token's file ("@/path"), or "" for a token given inline.
	file string
	line int
}

// urlPrefix is a credential's URL prefix as URLs are matched against it:
// the scheme and host in lower case with the scheme's default port
// dropped, and the escaped path without a trailing '/'.
type urlPrefix struct {
	origin, path string
}

// Credentials is a parsed credentials file: immutable, safe for concurrent
// use. It holds tokens, and prints (with fmt, zap or encoding/json) only
// how many credentials it has.
type Credentials struct {
	// byName maps a tenant (or AnyTenant) and a name to its credentials.
	byName map[tenantName][]credential
	count  int
}

type tenantName struct{ tenant, name string }

// ParseCredentials reads a credentials file: one credential a line,
//
//	<tenant> <name> <url-prefix> <token>
//
// fields separated by spaces or tabs; blank lines and lines whose first
// field begins with # are ignored. <tenant> is a tenant (auth.ValidName)
// or "*" for every tenant; <name> is what a run's workspace.git.credential
// names (letters, digits, '-', '_', '.'); <url-prefix> an absolute https
// or http URL with a host and no user info, query or fragment; <token> the
// secret, or "@" and the absolute path of a regular file holding it (one
// trailing newline is dropped).
//
// A token file is read here, when the credentials file is read: a change
// of the token file alone is seen when the credentials file next changes
// (touch it). That keeps a lookup free of I/O, and a token file that is
// unreadable or empty fails the load with its line, so that the last good
// version stays in force, as for any other bad edit.
//
// A duplicate (tenant, name, prefix) is an error. Any error is a
// *CredentialsParseError naming the line and never quoting it, except a
// read error of r.
func ParseCredentials(r io.Reader) (*Credentials, error) {
	c := &Credentials{byName: map[tenantName][]credential{}}
	br := bufio.NewReaderSize(r, maxCredentialLineLen)
	for n := 1; ; n++ {
		line, err := readCredentialLine(br)
		if errors.Is(err, errCredentialLineTooLong) {
			return nil, &CredentialsParseError{n, fmt.Sprintf("longer than %d bytes", maxCredentialLineLen)}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read credentials: %w", err)
		}
		if errors.Is(err, io.EOF) && line == "" {
			break
		}
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if perr := c.addLine(n, line); perr != nil {
			return nil, perr
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return c, nil
}

// addLine parses line n and adds its credential, if it has one.
func (c *Credentials) addLine(n int, line string) error {
	cr, msg := parseCredentialLine(line)
	if msg != "" {
		return &CredentialsParseError{n, msg}
	}
	if cr.name == "" {
		return nil
	}
	key := tenantName{cr.tenant, cr.name}
	for _, other := range c.byName[key] {
		if other.prefix == cr.prefix {
			return &CredentialsParseError{n, fmt.Sprintf("same tenant, name and URL prefix as line %d", other.line)}
		}
	}
	if c.count >= maxCredentials {
		return &CredentialsParseError{n, fmt.Sprintf("more than %d credentials", maxCredentials)}
	}
	cr.line = n
	c.byName[key] = append(c.byName[key], cr)
	c.count++
	return nil
}

var errCredentialLineTooLong = errors.New("line too long")

// readCredentialLine returns the next line without its \n or \r\n,
// bounded by maxCredentialLineLen; io.EOF comes with the last line when it
// has no newline.
func readCredentialLine(br *bufio.Reader) (string, error) {
	b, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errCredentialLineTooLong
	}
	s := strings.TrimSuffix(string(b), "\n")
	return strings.TrimSuffix(s, "\r"), err
}

// parseCredentialLine parses one line; a blank or comment line is a zero
// credential. The message, when not "", says what is wrong without
// quoting the line.
func parseCredentialLine(line string) (credential, string) {
	f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(f) == 0 || strings.HasPrefix(f[0], "#") {
		return credential{}, ""
	}
	if len(f) != 4 {
		return credential{}, fmt.Sprintf("%d fields, want 4: <tenant> <name> <url-prefix> <token>", len(f))
	}
	if f[0] != AnyTenant && !auth.ValidName(f[0]) {
		return credential{}, "tenant is not * or [a-z0-9][a-z0-9_.-]{0,62}"
	}
	if reason := credentialNameSyntax(f[1]); reason != "" {
		return credential{}, "name " + reason
	}
	prefix, msg := parsePrefix(f[2])
	if msg != "" {
		return credential{}, "URL prefix " + msg
	}
	token, msg := readToken(f[3])
	if msg != "" {
		return credential{}, msg
	}
	file, _ := strings.CutPrefix(f[3], "@")
	if file == f[3] {
		file = ""
	}
	return credential{tenant: f[0], name: f[1], prefix: prefix, token: token, file: file}, ""
}

// parsePrefix reads a credential's URL prefix: "" or why it is not one.
func parsePrefix(raw string) (urlPrefix, string) {
	lower := strings.ToLower(raw)
	if !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") {
		return urlPrefix{}, "is not an https or http URL"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Hostname() == "":
		return urlPrefix{}, "is not an absolute URL with a host"
	case u.User != nil:
		return urlPrefix{}, "has user info; the token goes in the fourth field"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#"):
		return urlPrefix{}, "has a query or fragment"
	}
	return prefixOf(u), ""
}

// prefixOf is u in the form URLs and prefixes are compared in.
func prefixOf(u *url.URL) urlPrefix {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return urlPrefix{origin: scheme + "://" + host, path: strings.TrimRight(u.EscapedPath(), "/")}
}

// matches reports whether u is at or under p, on a path-segment boundary.
func (p urlPrefix) matches(u urlPrefix) bool {
	if p.origin != u.origin {
		return false
	}
	rest, ok := strings.CutPrefix(u.path, p.path)
	return ok && (rest == "" || rest[0] == '/')
}

// readToken reads a token field: the token, or "" and why it is not one.
// The message never quotes the field.
func readToken(field string) (string, string) {
	token := field
	if path, ok := strings.CutPrefix(field, "@"); ok {
		var msg string
		if token, msg = readTokenFile(path); msg != "" {
			return "", msg
		}
	}
	switch {
	case token == "":
		return "", "token is empty"
	case len(token) > maxTokenLen:
		return "", fmt.Sprintf("token is longer than %d bytes", maxTokenLen)
	case strings.IndexFunc(token, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0:
		// The askpass helper answers git with the token on one line.
		return "", "token has control characters or a line break"
	}
	return token, ""
}

// readTokenFile reads the token in the file at path, which must be
// absolute and regular (a FIFO or a device would block or never end):
// the token, or why not.
func readTokenFile(path string) (string, string) {
	if !filepath.IsAbs(path) {
		return "", "token file must be an absolute path after '@'"
	}
	// O_NONBLOCK so that opening a FIFO does not wait for a writer.
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", "token file: " + pathErrorReason(err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return "", "token file: " + pathErrorReason(err)
	}
	if !fi.Mode().IsRegular() {
		return "", "token file is not a regular file"
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxTokenLen+3))
	if err != nil {
		return "", "token file: " + pathErrorReason(err)
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	return string(data), ""
}

// pathErrorReason is why a file operation failed, without the path (the
// line number says which file).
func pathErrorReason(err error) string {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err.Error()
	}
	return "unreadable"
}

// Lookup returns the token of tenant's credential called name for the
// repository at rawURL. The tenant's own credentials of that name are
// looked at first, then those given to every tenant ("*"); among either,
// the one with the longest URL prefix that rawURL is at or under, on a
// path-segment boundary (https://h/org covers https://h/org/repo.git, not
// https://h/organisation), with scheme and host compared
// case-insensitively and default ports dropped; a URL with a "." or ".."
// path segment is covered by none. An empty tenant (a
// gateway without keys) has only "*" credentials; a nil c has none.
//
// It fails with a *runs.FieldError naming FieldGitCredential, coded
// CodeUnknownCredential when the tenant has no credential of that name,
// else CodeCredentialNotForURL when none of them covers rawURL. The error
// never holds a token.
func (c *Credentials) Lookup(tenant, name, rawURL string) (string, error) {
	if reason := credentialNameSyntax(name); reason != "" {
		return "", runs.Invalid(FieldGitCredential, reason)
	}
	var own, shared []credential
	if c != nil {
		own, shared = c.byName[tenantName{tenant, name}], c.byName[tenantName{AnyTenant, name}]
	}
	if tenant == AnyTenant || tenant == "" {
		own = nil
	}
	if len(own) == 0 && len(shared) == 0 {
		return "", &runs.FieldError{Field: FieldGitCredential, Kind: runs.ErrInvalid, Code: CodeUnknownCredential,
			Reason: fmt.Sprintf("the tenant has no git credential called %q", name)}
	}
	u, err := url.Parse(rawURL)
	if err == nil && u.Host != "" && !hasDotSegment(u.Path) {
		want := prefixOf(u)
		for _, set := range [][]credential{own, shared} {
			if cr, ok := longestMatch(set, want); ok {
				return cr.token, nil
			}
		}
	}
	return "", &runs.FieldError{Field: FieldGitCredential, Kind: runs.ErrInvalid, Code: CodeCredentialNotForURL,
		Reason: fmt.Sprintf("the git credential %q is not for this repository's URL", name)}
}

// longestMatch is the credential of set whose prefix covers u and is the
// longest.
func longestMatch(set []credential, u urlPrefix) (credential, bool) {
	var best credential
	found := false
	for _, cr := range set {
		if cr.prefix.matches(u) && (!found || len(cr.prefix.path) > len(best.prefix.path)) {
			best, found = cr, true
		}
	}
	return best, found
}

// TokenFiles lists the files ("@/path") the tokens were read from, once
// each and sorted, so that the gateway can hide them from agents as it
// hides the credentials file.
func (c *Credentials) TokenFiles() []string {
	if c == nil {
		return nil
	}
	var files []string
	for _, creds := range c.byName {
		for _, cr := range creds {
			if cr.file != "" {
				files = append(files, cr.file)
			}
		}
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// Len is how many credentials the file has.
func (c *Credentials) Len() int {
	if c == nil {
		return 0
	}
	return c.count
}

// The methods that print a Credentials have value receivers, so that a
// Credentials value prints as its pointer does.

// String says how many credentials c has, never a token.
func (c Credentials) String() string {
	return fmt.Sprintf("gitrepo.Credentials{%d credentials}", c.count)
}

// GoString is String: %#v would print the tokens.
func (c Credentials) GoString() string { return c.String() }

// Format prints String for every verb: fmt prints a value's fields for
// verbs String does not serve (%d), tokens included.
func (c Credentials) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// MarshalLogObject logs how many credentials c has, never a token.
func (c Credentials) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddInt("credentials", c.count)
	return nil
}

// MarshalJSON encodes how many credentials c has, never a token.
func (c Credentials) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"credentials":%d}`, c.count), nil
}

// credentialsFormat is how LoadCredentials and WatchCredentials read a
// credentials file.
var credentialsFormat = filewatch.Format[*Credentials]{
	Name:    "git credentials file",
	MaxLen:  maxCredentialsFileLen,
	Empty:   errors.New("empty (a file of no credentials needs at least a comment)"),
	Parse:   func(data []byte) (*Credentials, error) { return ParseCredentials(bytes.NewReader(data)) },
	Invalid: filewatch.InvalidAs(func(e *CredentialsParseError) int { return e.Line }),
}

// LoadCredentials reads the credentials file at path once. It fails if
// the file is missing, empty (0 bytes) or invalid; the error names the
// line, never a token.
func LoadCredentials(path string) (*Credentials, error) {
	_, c, err := filewatch.Load(path, credentialsFormat)
	return c, err
}

// CredentialsFile is a credentials file kept current: Lookup answers from
// the last valid version of the file. Safe for concurrent use.
type CredentialsFile struct {
	creds atomic.Pointer[Credentials]
	done  chan struct{} // closed when the watching goroutine returns
}

// DefaultWatchInterval is how often WatchCredentials looks at the file
// when given no interval.
const DefaultWatchInterval = time.Second

// WatchCredentials loads the credentials file at path and keeps it
// loaded until ctx is done, as internal/filewatch keeps a file: an edit
// takes effect within an interval (DefaultWatchInterval if interval <= 0)
// and a version that is missing or invalid is logged, with its line, and
// the last valid one kept. A change of a token file ("@/path") alone is
// seen when the credentials file changes (see ParseCredentials). It fails
// if the file is missing, empty or invalid now. A nil log logs nothing.
func WatchCredentials(ctx context.Context, path string, log *zap.Logger, interval time.Duration) (*CredentialsFile, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	w, c, err := filewatch.Load(path, credentialsFormat)
	if err != nil {
		return nil, err
	}
	log = log.With(zap.String("path", path))
	f := &CredentialsFile{done: make(chan struct{})}
	f.creds.Store(c)
	log.Info("git credentials file loaded", zap.Int("credentials", c.Len()))
	go func() {
		defer close(f.done)
		w.Watch(ctx, interval, log, func(c *Credentials) {
			f.creds.Store(c)
			log.Info("git credentials file reloaded", zap.Int("credentials", c.Len()))
		})
	}()
	return f, nil
}

// Lookup answers from the current version of the file (see
// Credentials.Lookup).
func (f *CredentialsFile) Lookup(tenant, name, rawURL string) (string, error) {
	return f.creds.Load().Lookup(tenant, name, rawURL)
}

// Credentials returns the current version of the file.
func (f *CredentialsFile) Credentials() *Credentials { return f.creds.Load() }

// Done is closed when the watching goroutine has returned, after ctx is
// done.
func (f *CredentialsFile) Done() <-chan struct{} { return f.done }
