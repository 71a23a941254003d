package redact

import (
	"strings"
	"unicode/utf8"
	"unsafe"
)

// StreamHold bounds how much of a stream's end a Stream holds back for
// the patterns: a credential-looking word longer than this, split across
// pieces, can escape them (a literal never does).
const StreamHold = 512

// Stream redacts text that arrives in pieces, such as the deltas of one
// streamed message, where a secret split across two pieces is in neither
// whole. Write returns what can be shown now and holds back the end that
// could begin a secret the next piece completes: the last
// longest-literal-minus-one bytes, and, when there are patterns, the last
// word (with a "Bearer" before it). Flush returns what is held. The
// concatenation of everything returned is the redacted whole. A Stream is
// not safe for concurrent use.
type Stream struct {
	r    *Redactor
	held string
}

// Stream returns a new Stream of r's secrets.
func (r *Redactor) Stream() *Stream { return &Stream{r: r} }

// Held reports whether the stream holds text back.
func (s *Stream) Held() bool { return s != nil && s.held != "" }

// Write adds piece to the stream and returns the redacted text that no
// later piece can change; it may be empty.
func (s *Stream) Write(piece string) string {
	if s == nil || s.r == nil || len(s.r.lits) == 0 && len(s.r.patterns) == 0 {
		return piece
	}
	// What is held is the raw text: a pattern can match the start of a
	// key that the next piece makes longer, so the head alone is
	// redacted, with what was found in the whole text.
	text := s.held + piece
	spans := s.r.find(unsafe.Slice(unsafe.StringData(text), len(text)))
	c := s.r.cut(text)
	for moved := true; moved; {
		moved = false
		for c > 0 && c < len(text) && !utf8.RuneStart(text[c]) {
			c--
		}
		for _, sp := range spans {
			if sp.from < c && c < sp.end {
				c, moved = sp.from, true
			}
		}
	}
	head := spans[:0:0]
	for _, sp := range spans {
		if sp.end <= c {
			head = append(head, sp)
		}
	}
	s.held = text[c:]
	if len(head) == 0 {
		return text[:c]
	}
	return string(replace([]byte(text[:c]), head))
}

// Flush returns what the stream holds, redacted, and empties it: the
// stream's text ended.
func (s *Stream) Flush() string {
	if s == nil {
		return ""
	}
	out := s.r.String(s.held)
	s.held = ""
	return out
}

// cut returns where text, the stream's unshown text, may be cut: every
// secret that begins before the cut ends inside text, so it is found.
func (r *Redactor) cut(text string) int {
	c := len(text)
	if r.longest > 1 {
		c = len(text) - (r.longest - 1)
	}
	if len(r.patterns) > 0 {
		t := len(text)
		for t > 0 && len(text)-t < StreamHold && isToken(text[t-1]) {
			t--
		}
		// "Bearer <token>": the word goes with its token.
		u := t
		for u > 0 && t-u < 8 && (text[u-1] == ' ' || text[u-1] == '\t') {
			u--
		}
		if u >= 6 && strings.EqualFold(text[u-6:u], "bearer") {
			t = u - 6
		}
		c = min(c, t)
	}
	return max(c, 0)
}

// isToken reports whether c can be part of a credential that a built-in
// pattern matches.
func isToken(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
		c == '_' || c == '-' || c == '.' || c == '/' || c == '+' || c == '=' || c == '~'
}
