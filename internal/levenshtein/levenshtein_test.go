package levenshtein

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"prompt", "prompt", 0},
		{"promt", "prompt", 1},   // insertion
		{"prompts", "prompt", 1}, // deletion
		{"prampt", "prompt", 1},  // substitution
		{"kitten", "sitting", 3},
		{"MAX_RUNS", "MAX_RUN_S", 1},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
