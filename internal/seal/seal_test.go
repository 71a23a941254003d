package seal

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpens(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	b, err := New(key, "schedule run")
	if err != nil {
		t.Fatal(err)
	}
	sealed := b.Seal("s1", []byte(`{"prompt":"hi"}`))
	if bytes.Contains(sealed, []byte("prompt")) {
		t.Fatal("the sealed value holds the plain text")
	}
	if got, err := b.Open("s1", sealed); err != nil || string(got) != `{"prompt":"hi"}` {
		t.Fatalf("Open = %q, %v", got, err)
	}
	other, _ := New(key, "trigger secret")
	otherKey, _ := New(bytes.Repeat([]byte("j"), 32), "schedule run")
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	for name, open := range map[string]func() ([]byte, error){
		"another owner":   func() ([]byte, error) { return b.Open("s2", sealed) },
		"another purpose": func() ([]byte, error) { return other.Open("s1", sealed) },
		"another key":     func() ([]byte, error) { return otherKey.Open("s1", sealed) },
		"changed bytes":   func() ([]byte, error) { return b.Open("s1", tampered) },
		"too short":       func() ([]byte, error) { return b.Open("s1", sealed[:5]) },
	} {
		if _, err := open(); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: Open = %v, want ErrOpen", name, err)
		}
	}
	if _, err := New([]byte("short"), "x"); err == nil {
		t.Error("New took a 5-byte key")
	}
}
