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
// words of the last line (a value and the name before it) and the rest of
// a line that begins a credential found later on it (an AWS key id, a
// private key block), within StreamHold bytes. A pattern's match that
// has begun, such as a private key block without its end yet, is held
// whole. Flush returns what is held. The
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
		c = min(c, lastWords(text), lineAnchor(text), openPrivateKey(text))
	}
	return max(c, 0)
}

// heldWords is how many of its last words a stream holds for the
// patterns: a value with the name before it ("Bearer <token>",
// "aws_secret_access_key = <key>", "Authorization: Basic <credentials>").
const heldWords = 3

// lastWords returns where the last heldWords words of text's last line
// begin, at most StreamHold bytes from its end. A word is a run of
// anything but blanks.
func lastWords(text string) int {
	t := len(text)
	floor := max(len(text)-StreamHold, 0)
	for w := 0; w < heldWords; w++ {
		for t > floor && isBlank(text[t-1]) {
			t--
		}
		for t > floor && !isBlank(text[t-1]) && text[t-1] != '\n' {
			t--
		}
		if t == floor || text[t-1] == '\n' {
			break
		}
	}
	return t
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// lineAnchors begin a credential that a pattern finds later on the same
// line: an AWS key id and its secret, a private key's block.
var lineAnchors = []string{"AKIA", "ASIA", "-----BEGIN"}

// lineAnchor returns where the earliest line anchor on text's last line
// begins, at most StreamHold bytes from its end; len(text) if none.
func lineAnchor(text string) int {
	line := max(strings.LastIndexByte(text, '\n')+1, len(text)-StreamHold)
	c := len(text)
	for _, a := range lineAnchors {
		if i := strings.Index(text[line:], a); i >= 0 {
			c = min(c, line+i)
		}
	}
	return c
}

// openPrivateKey returns where the last private key block of text
// begins when its end is not in text yet; len(text) otherwise. The block
// is held whole, however long, until its end comes or the stream is
// flushed.
func openPrivateKey(text string) int {
	i := strings.LastIndex(text, "-----BEGIN")
	if i < 0 {
		return len(text)
	}
	header, _, _ := strings.Cut(text[i:], "\n")
	if !strings.Contains(header, "PRIVATE KEY") || strings.Contains(text[i:], "-----END") {
		return len(text)
	}
	return i
}
