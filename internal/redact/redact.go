package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Mark replaces every secret found. It is plain ASCII without a quote or
// a backslash, so that it is JSON-safe inside a string.
const Mark = "[REDACTED]"

// DefaultMinLiteral is the shortest literal treated as a secret when
// Options.MinLiteral is zero.
const DefaultMinLiteral = 8

// Options configure New.
type Options struct {
	// Literals are secret values, matched exactly and in their
	// JSON-escaped forms.
	Literals []string
	// Patterns are Go regular expressions (the operator's). A match is
	// a secret; when a pattern has a group named "secret", only that
	// group is, so that `password=(?P<secret>[^&\s"\\]+)` keeps the
	// name visible.
	Patterns []string
	// MinLiteral is the shortest literal treated as a secret, in bytes
	// (default DefaultMinLiteral). Shorter literals are ignored.
	MinLiteral int
	// NoBuiltin turns off the built-in patterns of common credential
	// shapes.
	NoBuiltin bool
}

// builtin is a credential shape: its pattern, literal strings of which
// one must occur for it to match (a cheap test before the regexp), and,
// for shapes that ordinary text can take too, a test that the secret
// found looks like one.
type builtin struct {
	name    string
	re      string
	anchors []string
	keep    func(secret []byte) bool
}

// The built-in credential shapes. Each secret stops at '"' and ” (none
// of its classes has them), so a match never eats a JSON string's closing
// quote or an escape. Prefixes are not anchored at word boundaries: in
// JSON a key after a newline follows "\n", whose 'n' is a word character.
// The table in docs/security.md lists them: keep the two in step.
var builtins = []builtin{
	{"anthropic/openai project key", `sk-(?:ant|proj|svcacct|admin)-[A-Za-z0-9_-]{20,}`, []string{"sk-"}, nil},
	{"openai key", `sk-[A-Za-z0-9]{20,}`, []string{"sk-"}, nil},
	{"github token", `gh[pousr]_[A-Za-z0-9]{30,}`, []string{"gh"}, nil},
	{"github fine-grained token", `github_pat_[A-Za-z0-9_]{22,}`, []string{"github_pat_"}, nil},
	{"gitlab token", `gl(?:pat|dt|rt|ptt|soat|cbt|ft|oas)-[A-Za-z0-9_-]{20,}`, []string{"gl"}, nil},
	{"google api key", `AIza[0-9A-Za-z_-]{35}`, []string{"AIza"}, nil},
	{"google oauth secret or token", `GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[A-Za-z0-9_-]{20,}`, []string{"GOCSPX-", "ya29."}, nil},
	{"aws access key id", `(?:AKIA|ASIA)[0-9A-Z]{16}`, []string{"AKIA", "ASIA"}, nil},
	{"aws secret access key by name", awsSecretByName, awsSecretAnchors, nil},
	{"aws secret access key after its key id", awsSecretAfterID, []string{"AKIA", "ASIA"}, looksRandom},
	{"aws secret access key before its key id", awsSecretBeforeID, []string{"AKIA", "ASIA"}, looksRandom},
	{"slack token", `xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[0-9]+-[A-Za-z0-9-]{10,}`, []string{"xox", "xapp-"}, nil},
	{"slack webhook", `hooks\.slack\.com/services/(?P<secret>[A-Za-z0-9/_-]{20,})`, []string{"hooks.slack.com"}, nil},
	{"stripe key", `(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}`, []string{"_live_", "_test_"}, nil},
	{"webhook signing secret", `whsec_[A-Za-z0-9+/=_-]{16,}`, []string{"whsec_"}, nil},
	{"npm token", `npm_[A-Za-z0-9]{36,}`, []string{"npm_"}, nil},
	{"hugging face token", `hf_[A-Za-z0-9]{30,}`, []string{"hf_"}, nil},
	{"sendgrid key", `SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`, []string{"SG."}, nil},
	{"twilio api key", `SK[0-9a-fA-F]{32}`, []string{"SK"}, hasDigitAndLetter},
	{"azure account or shared access key", `(?:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{20,}={0,2})`, []string{"AccountKey=", "SharedAccessKey="}, nil},
	{"json web token", `eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`, []string{"eyJ"}, nil},
	{"private key block", `-----BEGIN[A-Z ]{0,32}PRIVATE KEY(?: BLOCK)?-----(?P<secret>[A-Za-z0-9+/=\s\\:,.-]+?)(?:-----END|[^A-Za-z0-9+/=\s\\:,.-]|$)`, []string{"PRIVATE KEY"}, nil},
	{"password in a url", `://[^\s/:@"'\\]{1,256}:(?P<secret>[^\s/@"'\\]{1,256})@`, []string{"://"}, nil},
	{"agentgate api key", `agk_[A-Za-z0-9_-]{20,}`, []string{"agk_"}, nil},
	{"bearer token", `(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/=-]{8,})`, []string{"Bearer", "bearer", "BEARER"}, nil},
	{"basic credentials", `(?i:basic)[ \t]+(?P<secret>[A-Za-z0-9+/]{4,}={0,2})`, []string{"Basic", "basic", "BASIC"}, isBasicCredentials},
	{"credential assignment", credentialAssignment, credentialAnchors, looksLikeCredential},
}

type pattern struct {
	re      *regexp.Regexp
	anchors [][]byte // one of them occurs in every match; nil: always try
	secret  int      // the submatch that is the secret; 0 is the whole match
	keep    func([]byte) bool
}

type literal struct {
	form []byte
}

// Redactor finds secrets: literal values and patterns. It is immutable
// and safe for concurrent use. The nil *Redactor redacts nothing, so that
// callers need not check.
type Redactor struct {
	patterns []*pattern   // shared by every Redactor derived by With
	anchors  *anchorIndex // of patterns; nil: search each pattern's anchors
	min      int
	lits     []literal
	longest  int // the longest form of a literal, in bytes
}

// New compiles opts. It fails on a pattern that does not compile or
// matches the empty string (which would mark every position).
func New(opts Options) (*Redactor, error) {
	r := &Redactor{min: opts.MinLiteral}
	if r.min <= 0 {
		r.min = DefaultMinLiteral
	}
	if !opts.NoBuiltin {
		for _, b := range builtins {
			p, err := compile(b.re)
			if err != nil {
				return nil, fmt.Errorf("built-in pattern %s: %w", b.name, err)
			}
			p.anchors, p.keep = nil, b.keep
			for _, a := range b.anchors {
				p.anchors = append(p.anchors, []byte(a))
			}
			r.patterns = append(r.patterns, p)
		}
	}
	for i, s := range opts.Patterns {
		p, err := compile(s)
		if err != nil {
			return nil, fmt.Errorf("pattern %d: %w", i+1, err)
		}
		if p.re.MatchString("") {
			return nil, fmt.Errorf("pattern %d (%q) matches empty text", i+1, s)
		}
		r.patterns = append(r.patterns, p)
	}
	r.anchors = newAnchorIndex(r.patterns)
	r.add(opts.Literals)
	return r, nil
}

func compile(s string) (*pattern, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, err
	}
	p := &pattern{re: re}
	if prefix, _ := re.LiteralPrefix(); prefix != "" {
		p.anchors = [][]byte{[]byte(prefix)}
	}
	if i := re.SubexpIndex("secret"); i > 0 {
		p.secret = i
	}
	return p, nil
}

// With returns a Redactor that also hides the given literal values. It
// shares r's compiled patterns, so deriving one per run is cheap. On the
// nil Redactor it returns one that hides only these values.
func (r *Redactor) With(secrets ...string) *Redactor {
	base := r
	if base == nil {
		base = &Redactor{min: DefaultMinLiteral}
	}
	d := &Redactor{patterns: base.patterns, anchors: base.anchors, min: base.min, lits: slices.Clip(base.lits), longest: base.longest}
	d.add(secrets)
	if len(d.lits) == len(base.lits) {
		return r // nothing new: r itself, nil included
	}
	return d
}

// add adds the literals that count as secrets, with their escaped forms.
func (r *Redactor) add(secrets []string) {
	for _, s := range secrets {
		if len(s) < r.min || !hasAlnum(s) {
			continue
		}
		for _, f := range forms(s) {
			r.longest = max(r.longest, len(f))
			if !slices.ContainsFunc(r.lits, func(l literal) bool { return string(l.form) == f }) {
				r.lits = append(r.lits, literal{form: []byte(f)})
			}
		}
	}
}

func hasAlnum(s string) bool {
	return strings.ContainsFunc(s, func(c rune) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf
	})
}

// forms returns s as it may appear in text: as it is, JSON-escaped the
// ways common encoders do it (with and without HTML escapes, non-ASCII as
// \u escapes, '/' as "\/"), and escaped twice, as in a line of a CLI's
// JSON quoted inside an event.
func forms(s string) []string {
	out := []string{s}
	addf := func(f string) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, once := range []string{goJSON(s, false), goJSON(s, true), asciiJSON(s, false), asciiJSON(s, true)} {
		addf(once)
		addf(strings.ReplaceAll(once, "/", `\/`))
		addf(goJSON(once, false))
		addf(goJSON(once, true))
	}
	return out
}

// goJSON is s inside a JSON string as encoding/json writes it.
func goJSON(s string, html bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s) // a string always encodes
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return string(b[1 : len(b)-1])
}

// asciiJSON is s inside a JSON string with everything outside printable
// ASCII as a \u escape, as Python's json.dumps writes it (lower-case hex)
// or Java's encoders (upper).
func asciiJSON(s string, upper bool) string {
	hex := "%04x"
	if upper {
		hex = "%04X"
	}
	var b strings.Builder
	for _, c := range goJSON(s, false) {
		switch {
		case c < utf8.RuneSelf:
			b.WriteRune(c)
		case c > 0xFFFF:
			c -= 0x10000
			fmt.Fprintf(&b, `\u`+hex+`\u`+hex, 0xD800+(c>>10), 0xDC00+(c&0x3FF))
		default:
			fmt.Fprintf(&b, `\u`+hex, c)
		}
	}
	return b.String()
}

// String returns s with every secret replaced by Mark. It allocates
// nothing when s holds no secret.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	// A read-only view of s: find never writes to it.
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	spans := r.find(b)
	if spans == nil {
		return s
	}
	return string(replace(b, spans))
}

// Bytes returns b with every secret replaced by Mark; b itself when it
// holds none (nothing is allocated then). When b is valid JSON the result
// is valid JSON: see the package doc.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || len(b) == 0 {
		return b
	}
	spans := r.find(b)
	if spans == nil {
		return b
	}
	if json.Valid(b) {
		return replaceJSON(b, spans)
	}
	return replace(b, spans)
}

// Contains reports whether s holds a secret.
func (r *Redactor) Contains(s string) bool {
	if r == nil || s == "" {
		return false
	}
	return r.find(unsafe.Slice(unsafe.StringData(s), len(s))) != nil
}

// span is a secret found in text: [start, end). lit says a literal is
// in it, not only a pattern's match. from is where the match that found
// it begins: before start for a pattern's secret group ("Bearer ").
type span struct {
	start, end int
	lit        bool
	from       int
}

// find returns the secrets in b, sorted by start, overlapping ones
// merged; nil when there are none.
func (r *Redactor) find(b []byte) []span {
	var spans []span
	for _, l := range r.lits {
		for off := 0; off < len(b); {
			i := bytes.Index(b[off:], l.form)
			if i < 0 {
				break
			}
			i += off
			spans = append(spans, span{i, i + len(l.form), true, i})
			off = i + len(l.form)
		}
	}
	var found anchorSet
	if r.anchors != nil {
		found = r.anchors.scan(b)
	}
	for i, p := range r.patterns {
		if !r.mayMatch(i, p, b, &found) {
			continue
		}
		if !p.re.Match(b) { // allocates nothing, unlike FindAll
			continue
		}
		for _, m := range p.re.FindAllSubmatchIndex(b, -1) {
			s, e := m[2*p.secret], m[2*p.secret+1]
			if s >= 0 && e > s && (p.keep == nil || p.keep(b[s:e])) {
				spans = append(spans, span{s, e, false, m[0]})
			}
		}
	}
	if spans == nil {
		return nil
	}
	return merge(spans)
}

// mayMatch reports whether p, the i-th pattern, has one of its anchors in
// b (found, when the index covers p) or has none.
func (r *Redactor) mayMatch(i int, p *pattern, b []byte, found *anchorSet) bool {
	switch {
	case p.anchors == nil:
		return true
	case r.anchors != nil && i < maxIndexed:
		return found.has(i)
	}
	return containsAny(b, p.anchors)
}

func containsAny(b []byte, anchors [][]byte) bool {
	for _, a := range anchors {
		if bytes.Contains(b, a) {
			return true
		}
	}
	return false
}

// merge sorts spans and joins those that overlap or touch.
func merge(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	out := spans[:1]
	for _, s := range spans[1:] {
		last := &out[len(out)-1]
		if s.start <= last.end {
			last.end = max(last.end, s.end)
			last.lit = last.lit || s.lit
			last.from = min(last.from, s.from)
			continue
		}
		out = append(out, s)
	}
	return out
}

// replace writes b with each span replaced by Mark.
func replace(b []byte, spans []span) []byte {
	out := make([]byte, 0, len(b))
	prev := 0
	for _, s := range spans {
		out = append(out, b[prev:s.start]...)
		out = append(out, Mark...)
		prev = s.end
	}
	return append(out, b[prev:]...)
}
