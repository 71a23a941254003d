package auth

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestParseBearer(t *testing.T) {
	key := "agk_" + strings.Repeat("Ab-_9", 8)
	good := []struct{ in, want string }{
		{"Bearer " + key, key},
		{"bearer " + key, key},
		{"BEARER " + key, key},
		{"Bearer   " + key, key},
		{" Bearer " + key + " ", key},
		{"Bearer abc==", "abc=="},
		{"Bearer a+b/c~d.e", "a+b/c~d.e"},
		{"Bearer " + strings.Repeat("a", MaxTokenLen), strings.Repeat("a", MaxTokenLen)},
	}
	for _, c := range good {
		h := http.Header{"Authorization": {c.in}}
		got, ok, err := ParseBearer(h)
		if err != nil || !ok || got != c.want {
			t.Errorf("ParseBearer(%q) = %q, %v, %v; want %q", c.in, got, ok, err, c.want)
		}
	}
	bad := []string{
		"",
		"Bearer",
		"Bearer ",
		"Bearer\t" + key,
		"Basic dXNlcjpwYXNz",
		"Token " + key,
		"Bearer " + key + " extra",
		"Bearer =abc",
		"Bearer ab=c",
		"Bearer a,b",
		"Bearer a\"b",
		"Bearer é",
		"Bearer a\x00b",
		"Bearer " + strings.Repeat("a", MaxTokenLen+1),
		key,
	}
	for _, in := range bad {
		got, ok, err := ParseBearer(http.Header{"Authorization": {in}})
		if !errors.Is(err, ErrInvalidAuthorization) || ok || got != "" {
			t.Errorf("ParseBearer(%q) = %q, %v, %v; want ErrInvalidAuthorization", in, got, ok, err)
		}
		if err != nil && len(in) > 8 && strings.Contains(err.Error(), in[7:]) {
			t.Errorf("the error %q quotes the header", err)
		}
	}
	if _, ok, err := ParseBearer(http.Header{"Authorization": {"Bearer a", "Bearer a"}}); ok || !errors.Is(err, ErrInvalidAuthorization) {
		t.Errorf("two headers: %v, %v", ok, err)
	}
	h := http.Header{}
	h.Add("authorization", "Bearer a")
	if got, ok, err := ParseBearer(h); !ok || err != nil || got != "a" {
		t.Errorf("header added in lowercase: %q, %v, %v", got, ok, err)
	}
	for _, h := range []http.Header{nil, {}, {"X-Authorization": {"Bearer a"}}} {
		if got, ok, err := ParseBearer(h); ok || err != nil || got != "" {
			t.Errorf("no header: %q, %v, %v", got, ok, err)
		}
	}
}
