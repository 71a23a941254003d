package claude

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

// A streamed text or thinking delta is most of what the CLI prints: one
// line for every few tokens. encoding/json reads such a line twice (it
// validates the whole line, then decodes it through reflection), which
// made decoding the part of a run's pipeline that capped one run's rate.
// decodeDelta reads that one shape in a single pass without reflection.
//
// It is only a shortcut: it accepts a line only when it can tell that
// encoding/json would decode it into the same events, and answers false
// for anything else (another line type, another event, a key it does not
// know that encoding/json would match case-insensitively to a field, a
// duplicate key, null where a value is expected, an escaped key, invalid
// JSON), which then takes the general path. FuzzDecodeDelta holds the two
// paths to the same events.
func decodeDelta(line []byte) (runs.Event, bool) {
	var (
		f      deltaFields
		parent *string
	)
	s := jsonScanner{b: line}
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return s.once(&f.seen, seenType) && s.bytesInto(&f.lineType)
		case "session_id":
			return s.once(&f.seen, seenSession) && s.stringInto(&f.sessionID)
		case "api_message_id":
			return s.once(&f.seen, seenMessageID) && s.stringInto(&f.messageID)
		case "parent_tool_use_id":
			if !s.once(&f.seen, seenParent) {
				return false
			}
			if s.null() {
				return true
			}
			var p string
			if !s.stringInto(&p) {
				return false
			}
			parent = &p
			return true
		case "event":
			return s.once(&f.seen, seenEvent) && s.streamEvent(&f)
		}
		return !foldsTo(key, lineKeys) && s.skip()
	})
	if !ok || !s.end() || f.seen&seenEvent == 0 || string(f.lineType) != "stream_event" ||
		string(f.eventType) != "content_block_delta" || f.seen&seenDelta == 0 {
		return runs.Event{}, false
	}
	var ev runs.Event
	switch string(f.deltaType) {
	case "text_delta":
		ev = runs.NewEvent(runs.EventMessageDelta, runs.MessageData{MessageID: f.messageID, Text: f.text})
	case "thinking_delta":
		id := f.messageID + ":" + strconv.FormatInt(f.index, 10)
		ev = runs.NewEvent(runs.EventReasoningDelta, runs.DeltaData{ID: id, Text: f.thinking})
	default:
		return runs.Event{}, false
	}
	ev.SessionID = f.sessionID
	if parent != nil {
		ev.ParentToolCallID = *parent
	}
	return ev, true
}

// deltaFields is what decodeDelta reads, and which keys it has seen.
type deltaFields struct {
	seen                           uint16
	sessionID, messageID           string
	text, thinking                 string
	lineType, eventType, deltaType []byte // compared, never kept
	index                          int64
}

const (
	seenType uint16 = 1 << iota
	seenSession
	seenMessageID
	seenParent
	seenEvent
	seenEventType
	seenIndex
	seenDelta
	seenDeltaType
	seenText
	seenThinking
)

// The JSON names of the fields that encoding/json would fill in each of
// the structs a delta line decodes into: a key decodeDelta skips must not
// fold to one of these, or the general path would read it as that field.
var (
	lineKeys  = newFieldNames(reflect.TypeOf(wireLine{}))
	eventKeys = newFieldNames(reflect.TypeOf(wireStreamEvent{}))
	deltaKeys = newFieldNames(reflect.TypeOf(wireStreamEvent{}.Delta).Elem())
)

// fieldNames is a struct's JSON names, as they are and in lower case.
type fieldNames struct {
	names []string
	lower map[string]bool
}

func newFieldNames(t reflect.Type) fieldNames {
	f := fieldNames{lower: map[string]bool{}}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = t.Field(i).Name
		}
		f.names = append(f.names, name)
		f.lower[strings.ToLower(name)] = true
	}
	return f
}

// foldsTo reports whether encoding/json would take key for one of the
// names, which it matches ignoring case, with Unicode's simple folding.
func foldsTo(key []byte, f fieldNames) bool {
	var buf [64]byte
	if len(key) <= len(buf) {
		ascii := true
		for i, c := range key {
			if c >= utf8.RuneSelf {
				ascii = false
				break
			}
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			buf[i] = c
		}
		if ascii {
			return f.lower[string(buf[:len(key)])]
		}
	}
	// Non-ASCII: K (the Kelvin sign) and ſ fold to ASCII letters.
	for _, n := range f.names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// streamEvent reads a stream_event's "event" object: its type, index and
// delta.
func (s *jsonScanner) streamEvent(f *deltaFields) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return s.once(&f.seen, seenEventType) && s.bytesInto(&f.eventType)
		case "index":
			return s.once(&f.seen, seenIndex) && s.int(&f.index)
		case "delta":
			return s.once(&f.seen, seenDelta) && s.object(func(key []byte) bool {
				switch string(key) {
				case "type":
					return s.once(&f.seen, seenDeltaType) && s.bytesInto(&f.deltaType)
				case "text":
					return s.once(&f.seen, seenText) && s.stringInto(&f.text)
				case "thinking":
					return s.once(&f.seen, seenThinking) && s.stringInto(&f.thinking)
				}
				return !foldsTo(key, deltaKeys) && s.skip()
			})
		}
		return !foldsTo(key, eventKeys) && s.skip()
	})
}

// jsonScanner reads one JSON value strictly, as encoding/json's own
// scanner would accept it, and gives up (false) on anything else.
type jsonScanner struct {
	b     []byte
	i     int
	depth int
}

// maxScanDepth bounds nesting in skipped values; deeper lines take the
// general path, which has its own bound.
const maxScanDepth = 64

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end reports whether only whitespace is left.
func (s *jsonScanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// once marks bit seen in *seen, and is false if it already was: a key
// given twice takes the general path.
func (s *jsonScanner) once(seen *uint16, bit uint16) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// object reads an object, calling member for each key with the scanner
// at the key's value, which member must consume. Keys with escapes are
// refused: encoding/json would match them after unescaping.
func (s *jsonScanner) object(member func(key []byte) bool) bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	if s.closes('}') {
		return true
	}
	for {
		s.space()
		raw, escaped, ok := s.str()
		if !ok || escaped {
			return false
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !member(raw) {
			return false
		}
		if more, ok := s.afterItem('}'); !more {
			return ok
		}
	}
}

// afterItem reads what follows an object's member or an array's element:
// a comma, when more follow, or the closing bracket.
func (s *jsonScanner) afterItem(closing byte) (more, ok bool) {
	s.space()
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ',':
			s.i++
			return true, true
		case closing:
			s.i++
			return false, true
		}
	}
	return false, false
}

// closes reads closing if it is next, after whitespace: an empty object
// or array.
func (s *jsonScanner) closes(closing byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == closing {
		s.i++
		return true
	}
	return false
}

// str reads a string and returns its raw contents, whether it has
// escapes, and whether it is valid.
func (s *jsonScanner) str() (raw []byte, escaped, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		c := s.b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return s.b[start:i], escaped, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			escaped = true
			i++
			if i >= len(s.b) {
				return nil, false, false
			}
			switch s.b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.b) {
					return nil, false, false
				}
				for _, h := range s.b[i+1 : i+5] {
					if !isHex(h) {
						return nil, false, false
					}
				}
				i += 4
			default:
				return nil, false, false
			}
		}
	}
	return nil, false, false
}

// stringInto reads a string value into *dst, decoded as encoding/json
// decodes it. null is refused: the general path keeps the field's value
// then, which decodeDelta does not track.
func (s *jsonScanner) stringInto(dst *string) bool {
	var b []byte
	if !s.bytesInto(&b) {
		return false
	}
	*dst = string(b)
	return true
}

// bytesInto is stringInto into bytes: an unescaped string is not copied,
// so a value that is only compared costs nothing.
func (s *jsonScanner) bytesInto(dst *[]byte) bool {
	raw, escaped, ok := s.str()
	if !ok {
		return false
	}
	if !escaped && utf8.Valid(raw) {
		*dst = raw
		return true
	}
	*dst = unquote(raw)
	return true
}

// unquote decodes a valid string's raw contents, replacing invalid UTF-8
// and unpaired surrogates with U+FFFD, as encoding/json does.
func unquote(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			e := raw[i+1]
			i += 2
			switch e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(raw[i:])
				i += 4
				if utf16.IsSurrogate(r) {
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(raw[i+2:])); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							break
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default: // '"', '\\', '/'
				out = append(out, e)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, raw[i:i+size]...)
			}
			i += size
		}
	}
	return out
}

// hex4 is the value of four hex digits that str has checked.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// null reads a null if one is next.
func (s *jsonScanner) null() bool { return s.literal("null") }

// literal reads lit if it is next.
func (s *jsonScanner) literal(lit string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// int reads an integer into *dst, as encoding/json decodes a number into
// an int: a fraction or an exponent would be an error there.
func (s *jsonScanner) int(dst *int64) bool {
	start := s.i
	if !s.number() {
		return false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

// number reads a number as JSON's grammar has it: an integer part, then
// an optional fraction and an optional exponent. Each part is a function
// small enough to be inlined: this runs for every number of every delta.
func (s *jsonScanner) number() bool {
	b := s.b
	i, ok := integerPart(b, s.i)
	if ok && i < len(b) && b[i] == '.' {
		i, ok = someDigits(b, i+1)
	}
	if ok && i < len(b) && b[i]|0x20 == 'e' { // 'e' or 'E'
		i, ok = someDigits(b, optionalSign(b, i+1))
	}
	if ok {
		s.i = i
	}
	return ok
}

// integerPart reads an optional minus, then 0 or digits not starting
// with 0, from b[i:]; it returns where they end.
func integerPart(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) || !isDigit(b[i]) {
		return i, false
	}
	if b[i] == '0' {
		return i + 1, true
	}
	return digits(b, i), true
}

// someDigits reads one or more digits from b[i:]; it returns where they
// end.
func someDigits(b []byte, i int) (int, bool) {
	if i >= len(b) || !isDigit(b[i]) {
		return i, false
	}
	return digits(b, i), true
}

// optionalSign skips a '+' or '-' at b[i].
func optionalSign(b []byte, i int) int {
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		return i + 1
	}
	return i
}

// digits returns where the run of decimal digits at b[i:] ends.
func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skip reads and checks any value.
func (s *jsonScanner) skip() bool {
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == '{':
		if s.depth++; s.depth > maxScanDepth {
			return false
		}
		ok := s.object(func([]byte) bool { return s.skip() })
		s.depth--
		return ok
	case c == '[':
		return s.array()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return s.literal("true") || s.literal("false") || s.literal("null")
}

func (s *jsonScanner) array() bool {
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	defer func() { s.depth-- }()
	s.i++ // '['
	if s.closes(']') {
		return true
	}
	for {
		if !s.skip() {
			return false
		}
		if more, ok := s.afterItem(']'); !more {
			return ok
		}
	}
}
