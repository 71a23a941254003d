package auth

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzValidNameIsOnePathElement: a valid tenant name is one path element
// of its own, however it is joined: the supervisor names a tenant's
// workspace directory by it.
func FuzzValidNameIsOnePathElement(f *testing.F) {
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
