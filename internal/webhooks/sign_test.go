package webhooks

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The Standard Webhooks test vectors: the reference libraries' sign tests
// (libraries/go/webhook_test.go and every other library's for the first,
// libraries/rust/src/lib.rs for the second).
var specVectors = []struct {
	secret, id string
	unix       int64
	body, want string
}{
	{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
		`{"test": 2432232314}`, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	{"whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553,
		`{"email":"test@example.com","username":"test_user"}`, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="},
}

func TestSignMatchesSpecVectors(t *testing.T) {
	for _, v := range specVectors {
		s, err := ParseSecret(v.secret)
		if err != nil {
			t.Fatalf("ParseSecret(%s): %v", v.id, err)
		}
		if got := s.Sign(v.id, time.Unix(v.unix, 0), []byte(v.body)); got != v.want {
			t.Errorf("Sign(%s) = %s, want %s", v.id, got, v.want)
		}
		// And the verifier accepts the vector at its own time.
		h := http.Header{}
		h.Set(HeaderID, v.id)
		h.Set(HeaderTimestamp, strconv.FormatInt(v.unix, 10))
		h.Set(HeaderSignature, v.want)
		ver, _ := NewVerifier(s)
		ver.Now = func() time.Time { return time.Unix(v.unix+30, 0) }
		if err := ver.Verify(h, []byte(v.body)); err != nil {
			t.Errorf("Verify(%s vector) = %v", v.id, err)
		}
	}
}

func TestParseSecret(t *testing.T) {
	for _, bad := range []string{
		"", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", // no prefix
		"whsec_not*base64", "whsec_c2hvcnQ=", // 5 bytes
		"whsec_" + strings.Repeat("QUFB", 22), // 66 bytes
	} {
		if _, err := ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q) accepted", bad)
		} else if len(bad) > 8 && strings.Contains(err.Error(), bad[6:]) {
			t.Errorf("ParseSecret's error quotes the secret: %v", err)
		}
	}
	s, err := ParseSecret(" whsec_" + strings.Repeat("QUFB", 8) + "\n")
	if err != nil || len(s.key) != 24 {
		t.Fatalf("ParseSecret of 24 bytes = %v, %v", s.key, err)
	}
	if s.String() == "" || strings.Contains(s.String(), "QUFB") {
		t.Errorf("String() shows the secret: %q", s.String())
	}
	list, err := ParseSecrets(specVectors[0].secret + "," + specVectors[1].secret)
	if err != nil || len(list) != 2 {
		t.Fatalf("ParseSecrets = %v, %v", list, err)
	}
	if _, err := ParseSecrets(specVectors[0].secret + ",whsec_"); err == nil || !strings.Contains(err.Error(), "secret 2") {
		t.Errorf("ParseSecrets with a bad second = %v", err)
	}
}

func TestVerifier(t *testing.T) {
	cur, _ := ParseSecret(specVectors[0].secret)
	prev, _ := ParseSecret(specVectors[1].secret)
	other, _ := ParseSecret("whsec_" + strings.Repeat("QUFB", 8))
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"type":"run.completed"}`)
	signed := func(at time.Time, secrets ...Secret) http.Header {
		h := http.Header{}
		SetHeaders(h, secrets, "msg_1", at, body)
		return h
	}
	ver, err := NewVerifier(cur)
	if err != nil {
		t.Fatal(err)
	}
	ver.Now = func() time.Time { return now }
	cases := []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"valid", signed(now, cur), body, nil},
		{"signed by the current and the previous secret", signed(now, prev, cur), body, nil},
		{"at the edge of the tolerance", signed(now.Add(-DefaultTolerance), cur), body, nil},
		{"too old", signed(now.Add(-DefaultTolerance-time.Second), cur), body, ErrTooOld},
		{"too new", signed(now.Add(DefaultTolerance+time.Second), cur), body, ErrTooNew},
		{"another secret", signed(now, other), body, ErrNoSignature},
		{"body changed", signed(now, cur), []byte(`{"type":"run.completed" }`), ErrNoSignature},
		{"missing id", func() http.Header { h := signed(now, cur); h.Del(HeaderID); return h }(), body, ErrMissingHeaders},
		{"missing timestamp", func() http.Header { h := signed(now, cur); h.Del(HeaderTimestamp); return h }(), body, ErrMissingHeaders},
		{"missing signature", func() http.Header { h := signed(now, cur); h.Del(HeaderSignature); return h }(), body, ErrMissingHeaders},
		{"timestamp not a number", func() http.Header { h := signed(now, cur); h.Set(HeaderTimestamp, "1700000000.5"); return h }(), body, ErrBadTimestamp},
		{"timestamp moved", func() http.Header {
			h := signed(now, cur)
			h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix()-1, 10))
			return h
		}(), body, ErrNoSignature},
		{"id changed", func() http.Header { h := signed(now, cur); h.Set(HeaderID, "msg_2"); return h }(), body, ErrNoSignature},
		{"partial signature", func() http.Header { h := signed(now, cur); h.Set(HeaderSignature, "v1,"); return h }(), body, ErrNoSignature},
		{"truncated signature", func() http.Header {
			h := signed(now, cur)
			h.Set(HeaderSignature, h.Get(HeaderSignature)[:20])
			return h
		}(), body, ErrNoSignature},
		{"right bytes, wrong version", func() http.Header {
			h := signed(now, cur)
			h.Set(HeaderSignature, "v1a,"+strings.TrimPrefix(h.Get(HeaderSignature), "v1,"))
			return h
		}(), body, ErrNoSignature},
		{"one good among bad ones", func() http.Header {
			h := signed(now, cur)
			h.Set(HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,x "+h.Get(HeaderSignature)+" v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
			return h
		}(), body, nil},
	}
	for _, c := range cases {
		if err := ver.Verify(c.h, c.body); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
	// A verifier given both secrets takes a message signed by either.
	both, _ := NewVerifier(cur, prev)
	both.Now = ver.Now
	if err := both.Verify(signed(now, prev), body); err != nil {
		t.Errorf("verifier of both secrets refused the previous one's: %v", err)
	}
	if _, err := NewVerifier(); err == nil {
		t.Error("NewVerifier() with no secret accepted")
	}
	if _, err := NewVerifier(Secret{}); err == nil {
		t.Error("NewVerifier of an empty secret accepted")
	}
}
