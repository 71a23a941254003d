package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"héllo", 2, "h…"}, // é is two bytes: a cut inside it moves back
		{"héllo", 3, "hé…"},
		{"日本語", 4, "日…"},
		{"€€", 4, "€…"}, // € is three bytes
		{"abc", 0, "…"},
		{"abc", -1, "…"},
		{"", 0, ""},
	} {
		if got := Text(tc.s, tc.n); got != tc.want {
			t.Errorf("Text(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func FuzzText(f *testing.F) {
	for _, s := range []string{"", "abc", "héllo wörld", "日本語のテキスト", "\xff\xfe"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := Text(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("Text(%q, %d) = %q, want s unchanged", s, n, got)
			}
			return
		}
		body, ok := strings.CutSuffix(got, Mark)
		if !ok || len(body) > max(n, 0) || !strings.HasPrefix(s, body) {
			t.Fatalf("Text(%q, %d) = %q: not a marked prefix of at most n bytes", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Text(%q, %d) = %q: cut inside a rune", s, n, got)
		}
	})
}
