package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a signed webhook, as the Standard Webhooks specification
// names them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix begins a signing secret written out: "whsec_" and the
// secret's bytes in standard base64.
const SecretPrefix = "whsec_"

// The bounds the specification sets on a symmetric secret.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// DefaultTolerance is how far a verified webhook's timestamp may be from
// the verifier's clock, either way: the specification's libraries use five
// minutes.
const DefaultTolerance = 5 * time.Minute

// Secret is a symmetric signing secret: its bytes, never printed.
type Secret struct{ key []byte }

// ParseSecret reads a secret written as "whsec_<base64>", of 24 to 64
// bytes. The error never quotes the value.
func ParseSecret(s string) (Secret, error) {
	enc, ok := strings.CutPrefix(strings.TrimSpace(s), SecretPrefix)
	if !ok {
		return Secret{}, errors.New("a webhook secret must begin with " + SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return Secret{}, errors.New("a webhook secret must be " + SecretPrefix + " and standard base64")
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("a webhook secret must hold %d to %d bytes, this one holds %d", MinSecretBytes, MaxSecretBytes, len(key))
	}
	return Secret{key: key}, nil
}

// ParseSecrets reads a comma-separated list of secrets, the current one
// first: every one signs, so that a receiver moving to a new secret
// verifies either.
func ParseSecrets(list string) ([]Secret, error) {
	var out []Secret
	for i, part := range strings.Split(list, ",") {
		s, err := ParseSecret(part)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// String hides the secret.
func (Secret) String() string { return SecretPrefix + "…" }

// Valid reports whether s holds a key.
func (s Secret) Valid() bool { return len(s.key) > 0 }

// Sign returns the "v1,<base64>" signature of one message: HMAC-SHA256,
// keyed with the secret's bytes, of id, ".", the timestamp in Unix
// seconds, ".", and the body exactly as sent.
func (s Secret) Sign(id string, timestamp time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(s.mac(id, timestamp.Unix(), body))
}

func (s Secret) mac(id string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, unix, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// SignatureHeader is the webhook-signature value for a message: the
// signature of each secret, space-separated, in the order given.
func SignatureHeader(secrets []Secret, id string, timestamp time.Time, body []byte) string {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sigs = append(sigs, s.Sign(id, timestamp, body))
	}
	return strings.Join(sigs, " ")
}

// SetHeaders sets the three headers of a signed message on h.
func SetHeaders(h http.Header, secrets []Secret, id string, timestamp time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(timestamp.Unix(), 10))
	h.Set(HeaderSignature, SignatureHeader(secrets, id, timestamp, body))
}

// Why Verify refuses a message.
var (
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrBadTimestamp   = errors.New("webhook: webhook-timestamp is not Unix seconds")
	ErrTooOld         = errors.New("webhook: timestamp too old")
	ErrTooNew         = errors.New("webhook: timestamp too far in the future")
	ErrNoSignature    = errors.New("webhook: no signature matches")
)

// Verifier checks the webhooks a receiver gets, as the specification's
// libraries do: the tests receive webhooks with it.
type Verifier struct {
	secrets []Secret
	// Tolerance bounds the distance between a message's timestamp and
	// Now, either way (DefaultTolerance when zero). A replayed message
	// older than it is refused.
	Tolerance time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// NewVerifier returns a verifier that accepts a signature by any of
// secrets.
func NewVerifier(secrets ...Secret) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("webhook: no secret to verify with")
	}
	for _, s := range secrets {
		if !s.Valid() {
			return nil, errors.New("webhook: empty secret")
		}
	}
	return &Verifier{secrets: secrets}, nil
}

// Verify checks a received message: its headers are there, its timestamp
// is within Tolerance of now, and one of its v1 signatures is that of one
// of the verifier's secrets over its id, timestamp and body, compared in
// constant time. body must be the bytes received, not re-encoded.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || unix < 0 {
		return ErrBadTimestamp
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tol := v.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	at := time.Unix(unix, 0)
	switch n := now(); {
	case n.Sub(at) > tol:
		return ErrTooOld
	case at.Sub(n) > tol:
		return ErrTooNew
	}
	for _, sig := range strings.Split(sigs, " ") {
		version, enc, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(got) != sha256.Size {
			continue
		}
		for _, s := range v.secrets {
			if hmac.Equal(got, s.mac(id, unix, body)) {
				return nil
			}
		}
	}
	return ErrNoSignature
}
