package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	secretA = []byte("0123456789abcdef0123456789abcdef-a")
	secretB = []byte("0123456789abcdef0123456789abcdef-b")
)

func signer(t testing.TB, secret []byte, previous ...[]byte) *Signer {
	t.Helper()
	s, err := NewSigner(secret, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func claims() StreamClaims {
	return StreamClaims{RunID: "run_01", Tenant: "acme", KeyID: "acme-ci", Expires: now.Add(DefaultStreamTokenTTL)}
}

func TestTokenRoundTrip(t *testing.T) {
	s := signer(t, secretA)
	c := claims()
	c.Expires = c.Expires.Add(700 * time.Millisecond) // rounded down to the second
	tok, err := s.Issue(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "v1.") || strings.Count(tok, ".") != 2 || !b64token(tok) {
		t.Fatalf("token %q: want v1.<payload>.<mac>, URL- and bearer-safe", tok)
	}
	got, err := s.Verify(tok, now)
	if err != nil {
		t.Fatal(err)
	}
	want := claims()
	if got.RunID != want.RunID || got.Tenant != want.Tenant || got.KeyID != want.KeyID || !got.Expires.Equal(want.Expires) {
		t.Errorf("Verify = %+v, want %+v", got, want)
	}
	if !got.Allows("run_01") || got.Allows("run_02") || got.Allows("") {
		t.Error("Allows must grant the token's run and no other")
	}
	if (StreamClaims{}).Allows("") {
		t.Error("zero claims allow the empty run")
	}
	// A token without a key id is fine.
	c = claims()
	c.KeyID = ""
	tok, _ = s.Issue(c)
	if got, err := s.Verify(tok, now); err != nil || got.KeyID != "" {
		t.Errorf("no key id: %+v, %v", got, err)
	}
}

func TestTokenExpired(t *testing.T) {
	s := signer(t, secretA)
	tok, _ := s.Issue(claims())
	exp := claims().Expires
	if _, err := s.Verify(tok, exp.Add(-time.Nanosecond)); err != nil {
		t.Errorf("a nanosecond before expiry: %v", err)
	}
	for _, at := range []time.Time{exp, exp.Add(time.Second), exp.Add(24 * time.Hour)} {
		if _, err := s.Verify(tok, at); !errors.Is(err, ErrTokenExpired) {
			t.Errorf("at %v: err = %v, want ErrTokenExpired", at, err)
		}
	}
}

func TestTokenBadSignature(t *testing.T) {
	a, b := signer(t, secretA), signer(t, secretB)
	tok, _ := a.Issue(claims())
	if _, err := b.Verify(tok, now); !errors.Is(err, ErrTokenSignature) {
		t.Errorf("another secret: err = %v, want ErrTokenSignature", err)
	}
	// Tampered payload: the same MAC over claims for another run.
	parts := strings.Split(tok, ".")
	other := claims()
	other.RunID = "run_02"
	tok2, _ := a.Issue(other)
	forged := parts[0] + "." + strings.Split(tok2, ".")[1] + "." + parts[2]
	if _, err := a.Verify(forged, now); !errors.Is(err, ErrTokenSignature) {
		t.Errorf("swapped payload: err = %v, want ErrTokenSignature", err)
	}
	// A hand-made payload with a later expiry.
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"run":"run_01","ten":"acme","kid":"acme-ci","exp":4102444800}`))
	if _, err := a.Verify("v1."+payload+"."+parts[2], now); !errors.Is(err, ErrTokenSignature) {
		t.Errorf("extended expiry: err = %v, want ErrTokenSignature", err)
	}
	// Every single-character change to the token fails.
	for i := range tok {
		for _, c := range []byte{'A', 'z', '0', '-', '_'} {
			if tok[i] == c || tok[i] == '.' {
				continue
			}
			mut := tok[:i] + string(c) + tok[i+1:]
			_, err := a.Verify(mut, now)
			if err == nil {
				// The last character of unpadded base64 carries spare
				// bits that the strict decoder refuses; anything that
				// still decodes must not verify.
				t.Fatalf("mutated token %q verified", mut)
			}
			if !errors.Is(err, ErrTokenSignature) && !errors.Is(err, ErrTokenMalformed) {
				t.Fatalf("mutated token: err = %v", err)
			}
		}
	}
}

func TestTokenRotation(t *testing.T) {
	old := signer(t, secretA)
	tokOld, _ := old.Issue(claims())
	rotated := signer(t, secretB, secretA)
	if _, err := rotated.Verify(tokOld, now); err != nil {
		t.Errorf("a token of the previous secret during rotation: %v", err)
	}
	tokNew, _ := rotated.Issue(claims())
	if tokNew == tokOld {
		t.Fatal("the rotated signer signs with the previous secret")
	}
	if _, err := signer(t, secretB).Verify(tokNew, now); err != nil {
		t.Errorf("a token of the new secret after rotation: %v", err)
	}
	if _, err := old.Verify(tokNew, now); !errors.Is(err, ErrTokenSignature) {
		t.Errorf("a token of the new secret on a replica not yet rotated: err = %v", err)
	}
	if _, err := signer(t, secretB).Verify(tokOld, now); !errors.Is(err, ErrTokenSignature) {
		t.Errorf("a token of a dropped secret: err = %v, want ErrTokenSignature", err)
	}
}

func TestTokenMalformed(t *testing.T) {
	s := signer(t, secretA)
	tok, _ := s.Issue(claims())
	parts := strings.Split(tok, ".")
	mac := func(payload string) string {
		signed := "v1." + base64.RawURLEncoding.EncodeToString([]byte(payload))
		return signed + "." + base64.RawURLEncoding.EncodeToString(sign(s.current, signed))
	}
	cases := map[string]string{
		"empty":            "",
		"one part":         "v1",
		"two parts":        parts[0] + "." + parts[1],
		"four parts":       tok + ".x",
		"v2":               "v2." + parts[1] + "." + parts[2],
		"no version":       "." + parts[1] + "." + parts[2],
		"padded mac":       tok + "=",
		"short mac":        parts[0] + "." + parts[1] + "." + parts[2][:10],
		"std base64 mac":   parts[0] + "." + parts[1] + "." + strings.NewReplacer("-", "+", "_", "/").Replace(parts[2]) + "+",
		"too long":         tok + strings.Repeat("A", MaxTokenLen),
		"signed not json":  mac("not json"),
		"signed extra":     mac(`{"run":"r","ten":"t","exp":4102444800,"admin":true}`),
		"signed no run":    mac(`{"ten":"t","exp":4102444800}`),
		"signed no tenant": mac(`{"run":"r","exp":4102444800}`),
		"signed no exp":    mac(`{"run":"r","ten":"t"}`),
		"signed two docs":  mac(`{"run":"r","ten":"t","exp":4102444800}{}`),
		"signed exp text":  mac(`{"run":"r","ten":"t","exp":"4102444800"}`),
	}
	for name, tok := range cases {
		if _, err := s.Verify(tok, now); !errors.Is(err, ErrTokenMalformed) {
			t.Errorf("%s: err = %v, want ErrTokenMalformed", name, err)
		}
	}
	if _, err := s.Verify(mac(`{"run":"r","ten":"t","exp":4102444800}`), now); err != nil {
		t.Errorf("the hand-signed control token: %v", err)
	}
}

func TestSignerAndIssueRefuse(t *testing.T) {
	if _, err := NewSigner(make([]byte, MinSecretLen-1)); err == nil {
		t.Error("NewSigner took a short secret")
	}
	if _, err := NewSigner(nil); err == nil {
		t.Error("NewSigner took no secret")
	}
	if _, err := NewSigner(secretA, secretB, []byte("short")); err == nil {
		t.Error("NewSigner took a short previous secret")
	}
	s := signer(t, secretA)
	for name, c := range map[string]StreamClaims{
		"no run":    {Tenant: "t", Expires: now},
		"no tenant": {RunID: "r", Expires: now},
		"no expiry": {RunID: "r", Tenant: "t"},
		"long run":  {RunID: strings.Repeat("r", MaxTokenLen), Tenant: "t", Expires: now},
	} {
		if tok, err := s.Issue(c); err == nil {
			t.Errorf("%s: Issue = %q", name, tok)
		}
	}
}
