package auth

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{
		"",
		"# only a comment\n",
		lineA + lineB + lineC,
		"\ufeff" + lineA + "\r\n\t\n  # c\n" + strings.TrimSuffix(lineB, "\n"),
		lineA + lineA,
		"a t read " + hashOf("x") + "\nb t read " + hashOf("x") + "\n",
		"k t Admin sha256:" + strings.Repeat("0", 64),
		"k t read sha256:" + strings.Repeat("G", 64),
		strings.Repeat("k", 64) + " t read " + hashOf("x"),
		"k\tt\tread\t" + hashOf("x") + " # trailing",
		strings.Repeat("x", maxLineLen+10),
		"a\x00 t read " + hashOf("x"),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kr, err := ParseKeys(bytes.NewReader(data))
		if err != nil {
			pe, ok := errors.AsType[*ParseError](err)
			if !ok || pe.Line < 1 || pe.Line > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("err = %v: want a *ParseError with a line in the file", err)
			}
			return
		}
		// Every key found is valid, and the tenants are exactly theirs.
		tenants := map[string]bool{}
		for i, l := range strings.Split(string(data), "\n") {
			if i == 0 {
				l = strings.TrimPrefix(l, "\ufeff")
			}
			fields := strings.FieldsFunc(strings.TrimSuffix(l, "\r"), func(r rune) bool { return r == ' ' || r == '\t' })
			if len(fields) != 4 || strings.HasPrefix(fields[0], "#") {
				continue
			}
			k, ok := kr.ByID(fields[0])
			if !ok || !ValidName(k.ID) || !ValidName(k.Tenant) || !k.Role.Valid() {
				t.Fatalf("line %q: key %+v, %v", l, k, ok)
			}
			tenants[k.Tenant] = true
		}
		if len(kr.Tenants()) != len(tenants) {
			t.Fatalf("Tenants = %q, want %v", kr.Tenants(), tenants)
		}
	})
}

func FuzzVerifyToken(f *testing.F) {
	s := signer(f, secretA, secretB)
	good, _ := s.Issue(claims())
	old, _ := signer(f, secretB).Issue(claims())
	other, _ := signer(f, []byte(strings.Repeat("z", 40))).Issue(claims())
	for _, tok := range []string{
		good, old, other, "", "v1", "v1..", "v1.e30.", good + "=", good[:len(good)-2],
		strings.Replace(good, "v1.", "v2.", 1), strings.Repeat("a", MaxTokenLen+1),
		"v1.eyJhbGciOiJub25lIn0.", "v1." + strings.Split(good, ".")[1] + ".AAAA",
	} {
		f.Add(tok, int64(0))
		f.Add(tok, int64(DefaultStreamTokenTTL))
	}
	f.Fuzz(func(t *testing.T, tok string, offset int64) {
		at := now.Add(time.Duration(offset))
		c, err := s.Verify(tok, at)
		if err != nil {
			n := 0
			for _, e := range []error{ErrTokenMalformed, ErrTokenSignature, ErrTokenExpired} {
				if errors.Is(err, e) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("err = %v: want exactly one of the sentinel errors", err)
			}
			if c != (StreamClaims{}) {
				t.Fatalf("claims %+v with an error", c)
			}
			return
		}
		// A token that verifies was made by Issue: it round-trips.
		if len(tok) > MaxTokenLen || c.RunID == "" || c.Tenant == "" || !at.Before(c.Expires) {
			t.Fatalf("Verify accepted %q as %+v at %v", tok, c, at)
		}
		again, err := s.Issue(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := s.Verify(again, at)
		if err != nil || c2 != c {
			t.Fatalf("round trip: %+v, %v; want %+v", c2, err, c)
		}
	})
}

func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{
		"Bearer agk_abc", "bearer a==", "Bearer", "Bearer ", "Basic x", "Bearer a b",
		"Bearer =", " Bearer  a ", "Bearer \x00", "Bearer é", "Bearer " + strings.Repeat("a", MaxTokenLen+1),
	} {
		f.Add(s, "")
		f.Add(s, "Bearer a")
	}
	f.Fuzz(func(t *testing.T, v1, v2 string) {
		h := http.Header{"Authorization": {v1}}
		if v2 != "" {
			h["Authorization"] = append(h["Authorization"], v2)
		}
		tok, ok, err := ParseBearer(h)
		switch {
		case err != nil:
			if ok || tok != "" || !errors.Is(err, ErrInvalidAuthorization) {
				t.Fatalf("%q, %v, %v", tok, ok, err)
			}
		case !ok:
			t.Fatalf("a header present gave ok=false without an error")
		default:
			if v2 != "" || len(tok) == 0 || len(tok) > MaxTokenLen || !b64token(tok) || !strings.Contains(v1, tok) {
				t.Fatalf("ParseBearer(%q, %q) = %q", v1, v2, tok)
			}
		}
	})
}
