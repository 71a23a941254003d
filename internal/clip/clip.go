// Package clip shortens text quoted back in a message, an error or a
// record: at most n bytes, cut on a rune boundary so that the result stays
// valid UTF-8 where s was, and marked with "…" so that a reader sees it
// was cut.
package clip

import "unicode/utf8"

// Mark ends a clipped string.
const Mark = "…"

// Text returns s when it is at most n bytes, else its longest prefix of
// at most n bytes that ends on a rune boundary, followed by Mark. n below
// zero counts as zero.
func Text(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Mark
}
