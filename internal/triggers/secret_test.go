package triggers

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

func newSealer(t *testing.T, fill byte) *Sealer {
	t.Helper()
	s, err := NewSealer(bytes.Repeat([]byte{fill}, SealKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewSealerWantsA32ByteKey(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33} {
		if _, err := NewSealer(make([]byte, n)); err == nil {
			t.Errorf("NewSealer accepted a key of %d bytes", n)
		}
	}
}

func TestSealRoundTrip(t *testing.T) {
	s := newSealer(t, 1)
	for _, plain := range []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "It's a Secret to Everybody", ""} {
		sealed, err := s.Seal("trigger-1", plain)
		if err != nil {
			t.Fatal(err)
		}
		if plain != "" && strings.Contains(sealed, plain) {
			t.Errorf("Seal(%q) = %q holds the secret", plain, sealed)
		}
		got, err := s.Open("trigger-1", sealed)
		if err != nil || got != plain {
			t.Errorf("Open(Seal(%q)) = %q, %v", plain, got, err)
		}
	}
}

func TestSealUsesAFreshNonce(t *testing.T) {
	s := newSealer(t, 1)
	a, _ := s.Seal("trigger-1", "secret")
	b, _ := s.Seal("trigger-1", "secret")
	if a == b {
		t.Errorf("two seals of one secret are the same: %q", a)
	}
}

func TestOpenRefuses(t *testing.T) {
	s := newSealer(t, 1)
	sealed, err := s.Seal("trigger-1", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(sealed)
	tampered := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 0x01
		return base64.StdEncoding.EncodeToString(b)
	}
	for _, tc := range []struct {
		name, id, sealed string
		sealer           *Sealer
	}{
		{"another trigger's id", "trigger-2", sealed, s},
		{"an id that extends it", "trigger-10", sealed, s},
		{"a wrong key", "trigger-1", sealed, newSealer(t, 2)},
		{"a flipped nonce bit", "trigger-1", tampered(0), s},
		{"a flipped ciphertext bit", "trigger-1", tampered(len(raw) / 2), s},
		{"a flipped tag bit", "trigger-1", tampered(len(raw) - 1), s},
		{"cut short", "trigger-1", base64.StdEncoding.EncodeToString(raw[:len(raw)-1]), s},
		{"shorter than a nonce", "trigger-1", base64.StdEncoding.EncodeToString(raw[:5]), s},
		{"not base64", "trigger-1", "%%%", s},
		{"empty", "trigger-1", "", s},
	} {
		got, err := tc.sealer.Open(tc.id, tc.sealed)
		if err != ErrCannotOpen || got != "" {
			t.Errorf("Open with %s = %q, %v; want ErrCannotOpen", tc.name, got, err)
		}
	}
}
