package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func hashOf(secret string) string { return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(secret))) }

func TestRoleAllows(t *testing.T) {
	roles := []Role{RoleRead, RoleWrite, RoleAdmin}
	for i, have := range roles {
		for j, need := range roles {
			if got, want := have.Allows(need), i >= j; got != want {
				t.Errorf("%s.Allows(%s) = %v, want %v", have, need, got, want)
			}
		}
		if have.Allows("") || have.Allows("root") || Role("").Allows(have) || Role("Admin").Allows(have) {
			t.Errorf("a role that is not one of the three must allow nothing and be allowed by nothing")
		}
	}
	for _, s := range []string{"admin", "write", "read"} {
		if r, err := ParseRole(s); err != nil || string(r) != s {
			t.Errorf("ParseRole(%q) = %q, %v", s, r, err)
		}
	}
	for _, s := range []string{"", "Admin", "READ", "owner", " read"} {
		if _, err := ParseRole(s); err == nil {
			t.Errorf("ParseRole(%q) succeeded", s)
		}
	}
}

func TestParseKeys(t *testing.T) {
	in := "\ufeff# agentgate keys\n" +
		"\n" +
		"acme-ci acme write " + hashOf("s1") + "\n" +
		"   # indented comment\n" +
		"acme-dash\tacme\tread\t" + hashOf("s2") + "\r\n" +
		"  ops  ops.team_1   admin   " + hashOf("s3") + "  \n" +
		"\t\n" +
		"9 b-c read " + hashOf("s4") // no final newline
	kr, err := ParseKeys(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if kr.Len() != 4 {
		t.Errorf("Len = %d, want 4", kr.Len())
	}
	want := map[string]Key{
		"s1": {"acme-ci", "acme", RoleWrite},
		"s2": {"acme-dash", "acme", RoleRead},
		"s3": {"ops", "ops.team_1", RoleAdmin},
		"s4": {"9", "b-c", RoleRead},
	}
	for secret, k := range want {
		if got, ok := kr.Lookup(secret); !ok || got != k {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v", secret, got, ok, k)
		}
		if got, ok := kr.ByID(k.ID); !ok || got != k {
			t.Errorf("ByID(%q) = %+v, %v", k.ID, got, ok)
		}
	}
	for _, s := range []string{"", "s5", "S1", "s1 ", hashOf("s1"), strings.TrimPrefix(hashOf("s1"), "sha256:")} {
		if k, ok := kr.Lookup(s); ok {
			t.Errorf("Lookup(%q) found %+v", s, k)
		}
	}
	if _, ok := kr.ByID("nope"); ok {
		t.Error("ByID of an unknown id succeeded")
	}
	if got := kr.Tenants(); !slices.Equal(got, []string{"acme", "b-c", "ops.team_1"}) {
		t.Errorf("Tenants = %q", got)
	}
	kr.Tenants()[0] = "changed"
	if kr.Tenants()[0] != "acme" {
		t.Error("Tenants shares its slice with the caller")
	}

	empty, err := ParseKeys(strings.NewReader("# every key revoked\n\n"))
	if err != nil || empty.Len() != 0 || len(empty.Tenants()) != 0 {
		t.Errorf("a file of comments: %v, %d keys", err, empty.Len())
	}
	if _, ok := empty.Lookup("s1"); ok {
		t.Error("an empty keyring found a key")
	}
	var nilRing *Keyring
	if _, ok := nilRing.Lookup("s1"); ok || nilRing.Len() != 0 || nilRing.Tenants() != nil {
		t.Error("a nil keyring must hold nothing")
	}
}

func TestParseKeysErrors(t *testing.T) {
	h1, h2 := hashOf("secret-one"), hashOf("secret-two")
	good := "a t read " + h1 + "\n"
	cases := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"three fields", "# c\nk t read\n", 2, "3 fields, want 4"},
		{"five fields", "k t read " + h1 + " extra\n", 1, "5 fields"},
		{"trailing comment", "k t read " + h1 + " # note\n", 1, "6 fields"},
		{"upper id", good + "\nKey t read " + h2 + "\n", 3, "key id"},
		{"id starts with dash", "-k t read " + h1, 1, "key id"},
		{"id too long", strings.Repeat("k", 64) + " t read " + h1, 1, "key id"},
		{"id of 63", strings.Repeat("k", 63) + " " + strings.Repeat("t", 64) + " read " + h1, 1, "tenant"},
		{"tenant with slash", "k a/b read " + h1, 1, "tenant"},
		{"tenant unicode", "k tén read " + h1, 1, "tenant"},
		{"role", "k t Admin " + h1, 1, "role"},
		{"no prefix", "k t read " + strings.TrimPrefix(h1, "sha256:"), 1, "hash"},
		{"other algorithm", "k t read sha512:" + strings.TrimPrefix(h1, "sha256:"), 1, "hash"},
		{"upper hex", "k t read sha256:" + strings.ToUpper(strings.TrimPrefix(h1, "sha256:")), 1, "hash"},
		{"short hex", "k t read " + h1[:len(h1)-1], 1, "hash"},
		{"long hex", "k t read " + h1 + "0", 1, "hash"},
		{"not hex", "k t read " + h1[:len(h1)-1] + "g", 1, "hash"},
		{"duplicate id", good + "b t read " + h2 + "\na u write " + hashOf("3") + "\n", 3, `duplicate key id "a" (first on line 1)`},
		{"duplicate hash", "# x\n" + good + "b u write " + h1 + "\n", 3, `key "b" has the same hash as key "a" on line 2`},
		{"long line", good + strings.Repeat("x", 5000) + "\n", 2, "longer than"},
		{"secret pasted", "agk_SECRETsecretSECRET\n", 1, "1 fields"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseKeys(strings.NewReader(c.in))
			pe, ok := errors.AsType[*ParseError](err)
			if !ok {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if pe.Line != c.line || !strings.Contains(pe.Msg, c.msg) {
				t.Errorf("err = %q, want line %d and %q", err, c.line, c.msg)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("line %d: ", c.line)) {
				t.Errorf("err = %q does not start with its line", err)
			}
			if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "sha256:0") ||
				strings.Contains(err.Error(), strings.TrimPrefix(h1, "sha256:")[:16]) {
				t.Errorf("err = %q quotes the line", err)
			}
		})
	}
}

func TestNewKeyAndLine(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, err := NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, SecretPrefix) || len(s) != len(SecretPrefix)+43 {
			t.Fatalf("NewKey = %q: want %s and 43 base64url characters", s, SecretPrefix)
		}
		if seen[s] {
			t.Fatalf("NewKey repeated %q", s)
		}
		seen[s] = true
		if !b64token(s) {
			t.Fatalf("NewKey = %q is not a bearer token", s)
		}
	}
	s, _ := NewKey()
	line := Line("k1", "acme", RoleWrite, s)
	if strings.Contains(line, s) || strings.Contains(line, strings.TrimPrefix(s, SecretPrefix)) {
		t.Fatalf("Line holds the secret: %q", line)
	}
	kr, err := ParseKeys(strings.NewReader(line + "\n"))
	if err != nil {
		t.Fatalf("Line's output does not parse: %v", err)
	}
	if k, ok := kr.Lookup(s); !ok || k != (Key{"k1", "acme", RoleWrite}) {
		t.Errorf("Lookup = %+v, %v", k, ok)
	}
}

func TestValidName(t *testing.T) {
	for _, s := range []string{"a", "0", "a.b_c-d", "9z", strings.Repeat("a", 63)} {
		if !ValidName(s) {
			t.Errorf("ValidName(%q) = false", s)
		}
	}
	for _, s := range []string{"", "_a", ".a", "-a", "A", "a b", "a\n", "é", strings.Repeat("a", 64), "a/b", "a:b"} {
		if ValidName(s) {
			t.Errorf("ValidName(%q) = true", s)
		}
	}
}
