package redact

import (
	"slices"
	"sort"
)

// jsonMap is where the strings of a valid JSON text are.
type jsonMap struct {
	strs []span // the content of each string, between its quotes
	escs []span // each escape sequence, inside a string
}

// scanJSON maps b, which must be valid JSON.
func scanJSON(b []byte) jsonMap {
	var m jsonMap
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		start := i + 1
		for i = start; i < len(b) && b[i] != '"'; i++ {
			if b[i] == '\\' {
				n := 2
				if i+1 < len(b) && b[i+1] == 'u' {
					n = 6
				}
				m.escs = append(m.escs, span{start: i, end: min(i+n, len(b))})
				i += n - 1
			}
		}
		m.strs = append(m.strs, span{start: start, end: min(i, len(b))})
	}
	return m
}

// stringAt returns the string whose content holds position i.
func (m *jsonMap) stringAt(i int) (span, bool) {
	k := sort.Search(len(m.strs), func(k int) bool { return m.strs[k].start > i }) - 1
	if k >= 0 && i < m.strs[k].end {
		return m.strs[k], true
	}
	return span{}, false
}

// escapeAround returns the escape sequence that position i is strictly
// inside of (after its first byte, before its end).
func (m *jsonMap) escapeAround(i int) (span, bool) {
	k := sort.Search(len(m.escs), func(k int) bool { return m.escs[k].start >= i }) - 1
	if k >= 0 && m.escs[k].start < i && i < m.escs[k].end {
		return m.escs[k], true
	}
	return span{}, false
}

// isScalar reports whether c, outside any string, belongs to a number,
// true, false or null.
func isScalar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '+' || c == '-' || c == '.'
}

// region is what replaceJSON replaces: string content, whole characters
// only, by Mark; or a whole scalar value (quoted) by the string Mark.
type region struct {
	span
	quoted bool
}

// replaceJSON replaces spans in the valid JSON b so that the result stays
// valid: the part of a span inside a string grows to whole characters
// (an escape is never cut), a closing quote is never replaced, and a span
// that touches a number or literal outside strings replaces that value by
// the string Mark. Every literal's span with a letter or digit in it is
// broken; a pattern's match is cut at the end of the value it begins in,
// so that an operator's `token=\S+` does not take the next field.
func replaceJSON(b []byte, spans []span) []byte {
	m := scanJSON(b)
	var regs []region
	for _, s := range spans {
		for i := s.start; i < s.end; {
			if str, ok := m.stringAt(i); ok {
				a, e := i, min(s.end, str.end)
				if esc, ok := m.escapeAround(a); ok {
					a = esc.start
				}
				if esc, ok := m.escapeAround(e); ok {
					e = esc.end
				}
				regs = append(regs, region{span{start: a, end: e}, false})
				if !s.lit {
					break // a pattern's match ends with its string
				}
				i = str.end // its closing quote
				continue
			}
			if isScalar(b[i]) {
				ts, te := i, i
				for ts > 0 && isScalar(b[ts-1]) {
					ts--
				}
				for te < len(b) && isScalar(b[te]) {
					te++
				}
				regs = append(regs, region{span{start: ts, end: te}, true})
				if !s.lit {
					break
				}
				i = te
				continue
			}
			i++
		}
	}
	if regs == nil {
		return b // only punctuation matched: nothing of a value to hide
	}
	slices.SortFunc(regs, func(a, b region) int { return a.start - b.start })
	merged := regs[:1]
	for _, r := range regs[1:] {
		last := &merged[len(merged)-1]
		// Regions of one string, or one scalar twice; a string and a
		// scalar are always apart, by a quote at least.
		if r.start <= last.end && r.quoted == last.quoted {
			last.end = max(last.end, r.end)
			continue
		}
		merged = append(merged, r)
	}
	out := make([]byte, 0, len(b))
	prev := 0
	for _, r := range merged {
		out = append(out, b[prev:r.start]...)
		if r.quoted {
			out = append(out, '"')
			out = append(out, Mark...)
			out = append(out, '"')
		} else {
			out = append(out, Mark...)
		}
		prev = r.end
	}
	return append(out, b[prev:]...)
}
