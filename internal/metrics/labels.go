package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

// Label values that stand for a value outside a bounded set, or for none.
const (
	other     = "other"
	unknown   = "unknown"
	unmatched = "unmatched"
)

// longContext is the suffix Claude Code appends to a model to ask for its
// 1M-token context window ("sonnet[1m]"); a model with it is allowed when
// the model without it is, so the allow-list stays short and bounded.
const longContext = "[1m]"

// DefaultModels returns the model names allowed as label values when
// Options.Models is nil: the Claude Code aliases and the current Claude
// model ids, with and without their date. It returns a fresh slice, so a
// caller may append its own names.
func DefaultModels() []string {
	return []string{
		// Aliases the CLI accepts for --model; a run that fails before the
		// CLI names the resolved model reports the alias it was asked for.
		"default", "opus", "sonnet", "haiku", "opusplan",

		"claude-opus-5-5",
		"claude-opus-5",
		"claude-opus-4-8",
		"claude-opus-4-7",
		"claude-opus-4-6",
		"claude-opus-4-5", "claude-opus-4-5-20251101",
		"claude-opus-4-1", "claude-opus-4-1-20250805",
		"claude-opus-4-0", "claude-opus-4-20250514",

		"claude-sonnet-5-5",
		"claude-sonnet-5",
		"claude-sonnet-4-6",
		"claude-sonnet-4-5", "claude-sonnet-4-5-20250929",
		"claude-sonnet-4-0", "claude-sonnet-4-20250514",
		"claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219",

		"claude-haiku-5-5",
		"claude-haiku-4-5", "claude-haiku-4-5-20251001",
		"claude-3-5-haiku-latest", "claude-3-5-haiku-20241022",
	}
}

// allowed maps a name to itself when it is in the set, and to other
// otherwise.
type allowed map[string]struct{}

func newAllowed(names []string) allowed {
	a := make(allowed, len(names))
	for _, n := range names {
		a[n] = struct{}{}
	}
	return a
}

func (a allowed) label(name string) string {
	if _, ok := a[name]; ok {
		return name
	}
	return other
}

// validName reports whether name may be configured as an allowed label
// value: non-empty, valid UTF-8, and none of the values this package uses
// for "outside the set", which would make such series ambiguous.
func validName(name string) bool {
	return name != "" && utf8.ValidString(name) && name != other && name != unknown
}

// modelLabel maps a model to a label value: unknown when empty, the name
// when allowed (with or without the long-context suffix), other otherwise.
func (a allowed) modelLabel(model string) string {
	if model == "" {
		return unknown
	}
	if _, ok := a[model]; ok {
		return model
	}
	if base, ok := strings.CutSuffix(model, longContext); ok {
		if _, ok := a[base]; ok {
			return model
		}
	}
	return other
}

// statusLabel keeps terminal states only: a run cannot finish queued or
// running, so such a value is a caller's bug and counts as other.
func statusLabel(s runs.State) string {
	if s.Terminal() {
		return string(s)
	}
	return other
}

func classLabel(c runs.Class) string {
	for _, v := range runs.Classes {
		if c == v {
			return string(c)
		}
	}
	return other
}

func decisionLabel(d runs.Decision) string {
	if d == "" {
		return "none"
	}
	if d.Valid() {
		return string(d)
	}
	return other
}

func reasonLabel(r string) string {
	switch r {
	case runs.ResolvedByClient, runs.ResolvedByTimeout, runs.ResolvedWithdrawn, runs.ResolvedRunEnded:
		return r
	}
	return other
}

func eventTypeLabel(t runs.EventType) string {
	for _, v := range runs.EventTypes {
		if t == v {
			return string(t)
		}
	}
	return other
}

// methodLabel keeps the methods of RFC 9110 and PATCH; a client may send
// any token as a method, so the rest are other. Methods are case-sensitive.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodConnect,
		http.MethodOptions, http.MethodTrace:
		return m
	}
	return other
}

// maxRoute bounds a route pattern. The api passes the router's pattern,
// never the request path; the bound and the checks only keep a mistake
// there from turning client paths into series or panicking on bad UTF-8.
const maxRoute = 128

func routeLabel(r string) string {
	switch {
	case r == "" || r == unmatched:
		// The api spells "no route" either way.
		return unmatched
	case len(r) > maxRoute || r[0] != '/' || !utf8.ValidString(r):
		return other
	}
	return r
}

func codeLabel(status int) string {
	if status < 100 || status > 599 {
		return other
	}
	return strconv.Itoa(status)
}

func compatibilityLabel(c string) string {
	switch c {
	case runs.CompatVerified, runs.CompatNewer, runs.CompatOlder,
		runs.CompatUnrecognized, runs.CompatUnverified, runs.CompatMissing:
		return c
	}
	return other
}

// maxVersion bounds a CLI version label.
const maxVersion = 64

// versionLabel keeps a version that looks like one ("2.1.3", "1.0.0-beta+7"):
// it is parsed from a CLI's output, which this package does not trust to be
// short or valid UTF-8.
func versionLabel(v string) string {
	if v == "" {
		return unknown
	}
	if len(v) > maxVersion || !isAlnum(v[0]) {
		return other
	}
	for i := 1; i < len(v); i++ {
		if c := v[i]; !isAlnum(c) && c != '.' && c != '-' && c != '+' && c != '_' {
			return other
		}
	}
	return v
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
