package tenants

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"acme": true, "a": true, "0rg": true, "acme-eu.prod_2": true, strings.Repeat("a", 63): true,
		"": false, ".": false, "..": false, "-acme": false, ".acme": false, "_acme": false,
		"Acme": false, "ac/me": false, `ac\me`: false, "ac me": false, "acmé": false,
		strings.Repeat("a", 64): false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzValidName: a valid name is one path element of its own, however it
// is joined.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"acme", "..", "a/b", "a..b", "a/../b", "\x00", strings.Repeat("z", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !ValidName(name) {
			return
		}
		if joined := filepath.Join("/root", "tenants", name); filepath.Dir(joined) != "/root/tenants" || filepath.Base(joined) != name {
			t.Fatalf("valid name %q joins to %s, not a directory of its own", name, joined)
		}
		if len(name) > 63 || strings.ContainsAny(name, "/\\\x00") {
			t.Fatalf("valid name %q", name)
		}
	})
}
