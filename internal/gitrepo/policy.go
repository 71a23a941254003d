package gitrepo

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhooks"
)

// The request fields this package checks, as a *runs.FieldError names them.
const (
	FieldGitURL        = runs.FieldWorkspace + ".git.url"
	FieldGitRef        = runs.FieldWorkspace + ".git.ref"
	FieldGitCredential = runs.FieldWorkspace + ".git.credential"
	FieldPushBranch    = runs.FieldPush + ".branch"
)

// CodeGitURLRefused is the API's code for a git URL whose host is an
// internal address the operator does not allow.
const CodeGitURLRefused = "git_url_refused"

// Bounds of what a client names. A repository URL is bounded like a
// webhook's; a ref, like the longest path component most file systems
// take, since git stores loose refs as files.
const (
	MaxURLBytes            = 2048
	MaxRefBytes            = 255
	MaxCredentialNameBytes = 64
)

// allowHostsVar is the setting that widens a Policy, named in its errors
// so that a client knows whom to ask.
const allowHostsVar = "AGENTGATE_GIT_ALLOW_HOSTS"

// Policy decides which repositories a workspace may be cloned from. An
// https URL to a public host is always allowed; plain http, and internal
// addresses (loopback, private and link-local networks, the clouds'
// metadata service…), only to the hosts the operator lists. It is the
// webhooks' policy (internal/webhooks), whose reading of hosts (an IPv4
// address in decimal, octal or hex, IPv6 forms of IPv4 addresses, names
// that are internal by definition) it reuses as is. The zero Policy
// refuses every internal address and plain http.
type Policy struct {
	hosts webhooks.Policy
}

// ParsePolicy reads the operator's AGENTGATE_GIT_ALLOW_HOSTS entries: each
// a host name (matched exactly, case-insensitively), an IP address or a
// CIDR. Blank entries are skipped.
func ParsePolicy(entries []string) (Policy, error) {
	p, err := webhooks.ParseAllowList(entries)
	if err != nil {
		return Policy{}, fmt.Errorf("git allow-list: %w", err)
	}
	return Policy{hosts: p}, nil
}

// CheckURL checks a workspace's repository URL and returns it parsed. The
// URL must be https (or http to a host the operator allows) with a host
// and a path, at most MaxURLBytes, without user info (credentials belong
// in the credentials file), query or fragment, spaces, control bytes or
// backslashes, and with no host label or path segment that begins with
// '-' (which git, or a program it runs, could take for an option) nor a
// "." or ".." segment (which would escape a credential's prefix). Every
// other scheme (file:, ssh:, git:, ext::), scp-like host:path and local
// paths are refused. A host the webhooks' policy reads as internal, and
// that the operator does not allow, is refused with the code
// CodeGitURLRefused. Every error is a *runs.FieldError naming FieldGitURL.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	if reason := urlSyntax(raw); reason != "" {
		return nil, runs.Invalid(FieldGitURL, reason)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The webhooks' check says what a host net/url cannot read (a
		// percent-encoded one) means; anything else is no URL at all.
		if herr := p.checkHost(raw); herr != nil {
			return nil, herr
		}
		return nil, runs.Invalid(FieldGitURL, "is not a URL")
	}
	if reason := urlParts(u, raw); reason != "" {
		return nil, runs.Invalid(FieldGitURL, reason)
	}
	if err := p.checkHost(raw); err != nil {
		return nil, err
	}
	return u, nil
}

// urlSyntax is what CheckURL refuses before parsing: "" or why.
func urlSyntax(raw string) string {
	switch {
	case raw == "":
		return "is required for a git workspace"
	case len(raw) > MaxURLBytes:
		return fmt.Sprintf("is longer than %d bytes", MaxURLBytes)
	case strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return "has spaces or control characters"
	case !utf8.ValidString(raw):
		return "is not UTF-8"
	case strings.Contains(raw, `\`):
		return `has a backslash, which readers of URLs take for '/' or not`
	}
	lower := strings.ToLower(raw)
	if !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") {
		return "must be an https URL (no file:, ssh:, git: or local paths; scp-like host:path is ssh)"
	}
	return ""
}

// urlParts is what CheckURL refuses of a parsed URL, other than its host:
// "" or why.
func urlParts(u *url.URL, raw string) string {
	switch {
	case u.Opaque != "" || u.Host == "":
		return "must be an absolute URL with a host"
	case u.User != nil:
		return "must not carry a user name or password; name one of the operator's credentials in workspace.git.credential"
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "?"):
		return "must not have a query"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a fragment"
	case strings.Trim(u.Path, "/") == "":
		return "must have a path naming the repository"
	}
	for _, label := range strings.Split(u.Hostname(), ".") {
		if strings.HasPrefix(label, "-") {
			return "has a host label that begins with '-'"
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if strings.HasPrefix(seg, "-") {
			return "has a path segment that begins with '-', which could be read as an option"
		}
	}
	if hasDotSegment(u.Path) {
		return `has a "." or ".." path segment`
	}
	return ""
}

// hasDotSegment reports whether path has a "." or ".." segment, which
// an HTTP client removes before sending: https://h/org/../other is
// https://h/other, which a credential for https://h/org must not reach.
func hasDotSegment(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// checkHost checks raw's host and port with the webhooks' policy: as
// https, whose error says what is wrong with the host, then, for plain
// http, as http, which it allows only to hosts the operator lists.
func (p Policy) checkHost(raw string) error {
	scheme, rest, _ := strings.Cut(raw, "://")
	if _, err := p.hosts.CheckURL("https://" + rest); err != nil {
		return hostError(err)
	}
	if strings.EqualFold(scheme, "http") {
		if _, err := p.hosts.CheckURL("http://" + rest); err != nil {
			return runs.Invalid(FieldGitURL, "must be an https URL (plain http only to a host in "+allowHostsVar+")")
		}
	}
	return nil
}

// hostError turns the webhooks' verdict on a host into the git URL's.
func hostError(err error) error {
	if re, ok := errors.AsType[*webhooks.RefusedError](err); ok {
		return &runs.FieldError{Field: FieldGitURL, Kind: runs.ErrInvalid, Code: CodeGitURLRefused,
			Reason: refusedReason(re)}
	}
	if ie, ok := errors.AsType[*webhooks.InvalidURLError](err); ok {
		return runs.Invalid(FieldGitURL, ie.Reason)
	}
	return runs.Invalid(FieldGitURL, "has an invalid host")
}

func refusedReason(re *webhooks.RefusedError) string {
	what := re.Host
	if re.Addr != "" && re.Addr != re.Host {
		what += " (" + re.Addr + ")"
	}
	return what + " is an internal address, which a workspace may not be cloned from unless the operator allows it (" + allowHostsVar + ")"
}

// CheckResolved checks the addresses host resolved to, for a clone that
// resolves the host itself and pins what it dials: nil when the operator
// allows host by name, or none of addrs is internal unless allowed.
func (p Policy) CheckResolved(host string, addrs []netip.Addr) error {
	// The webhooks' policy allows plain http exactly to the hosts the
	// operator lists, so this asks whether it lists host by name.
	if _, err := p.hosts.CheckURL("http://" + host + "/"); err == nil {
		return nil
	}
	for _, ip := range addrs {
		if p.hosts.Refused(ip) {
			return &runs.FieldError{Field: FieldGitURL, Kind: runs.ErrInvalid, Code: CodeGitURLRefused,
				Reason: refusedReason(&webhooks.RefusedError{Host: host, Addr: ip.Unmap().WithZone("").String()})}
		}
	}
	return nil
}

// CheckSource checks a git workspace's URL, ref and credential name; every
// error is a *runs.FieldError naming the field.
func (p Policy) CheckSource(src runs.GitSource) error {
	if _, err := p.CheckURL(src.URL); err != nil {
		return err
	}
	if src.Ref != "" {
		if err := CheckRef(FieldGitRef, src.Ref); err != nil {
			return err
		}
	}
	if src.Credential != "" {
		if reason := credentialNameSyntax(src.Credential); reason != "" {
			return runs.Invalid(FieldGitCredential, reason)
		}
	}
	return nil
}

// CheckBranch checks a push's branch: a ref (see CheckRef) that is a
// plain branch name, not HEAD nor spelled as a full "refs/…" name.
func CheckBranch(branch string) error {
	switch {
	case branch == "":
		return runs.Invalid(FieldPushBranch, "is required to push")
	case branch == "HEAD":
		return runs.Invalid(FieldPushBranch, "must not be HEAD")
	case strings.HasPrefix(branch, "refs/"):
		return runs.Invalid(FieldPushBranch, `must be a branch name, without "refs/heads/"`)
	}
	return CheckRef(FieldPushBranch, branch)
}

// CheckRef checks a branch, tag or commit named in field: at most
// MaxRefBytes of UTF-8 that git check-ref-format would take as a one-level
// or longer ref name, not beginning with '-' (which git would take for an
// option) and without spaces or control characters.
func CheckRef(field, ref string) error {
	if reason := refSyntax(ref); reason != "" {
		return runs.Invalid(field, reason)
	}
	return nil
}

// refSyntax is what CheckRef refuses: "" or why. The rules are git
// check-ref-format's (git help check-ref-format), with --allow-onelevel.
func refSyntax(ref string) string {
	switch {
	case ref == "":
		return "is empty"
	case len(ref) > MaxRefBytes:
		return fmt.Sprintf("is longer than %d bytes", MaxRefBytes)
	case !utf8.ValidString(ref):
		return "is not UTF-8"
	case strings.HasPrefix(ref, "-"):
		return "must not begin with '-'"
	case strings.IndexFunc(ref, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0:
		return "has spaces or control characters"
	case strings.ContainsAny(ref, "~^:?*[\\"):
		return `has one of ~ ^ : ? * [ \, which git refs may not`
	case strings.Contains(ref, ".."), strings.Contains(ref, "@{"), ref == "@":
		return `has "..", "@{" or is "@", which git refs may not`
	case strings.HasPrefix(ref, "/"), strings.HasSuffix(ref, "/"), strings.Contains(ref, "//"):
		return "has an empty path component"
	case strings.HasSuffix(ref, "."):
		return "must not end with '.'"
	}
	for _, comp := range strings.Split(ref, "/") {
		if strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return `has a component that begins with '.' or ends with ".lock"`
		}
	}
	return ""
}

// credentialNameSyntax is what a credential's name may be, in a request
// and in the credentials file: "" or why.
func credentialNameSyntax(name string) string {
	if name == "" || len(name) > MaxCredentialNameBytes {
		return fmt.Sprintf("must be 1 to %d characters", MaxCredentialNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return "must be letters, digits, '-', '_' and '.', beginning with a letter or digit"
		}
	}
	return ""
}
