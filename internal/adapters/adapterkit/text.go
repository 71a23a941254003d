package adapterkit

// Clip shortens s to at most n bytes for a message, on a rune boundary,
// and marks the cut with "…". A string of n bytes or fewer is returned
// as it is.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 { // a continuation byte: not a rune's start
		n--
	}
	return s[:n] + "…"
}
