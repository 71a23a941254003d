package triggers

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhooks"
)

// Verify is how a trigger's sender proves a delivery is theirs.
type Verify string

// The proofs a trigger accepts.
const (
	// VerifyToken: "Authorization: Bearer <secret>".
	VerifyToken Verify = "token"
	// VerifyGitHub: "X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>".
	VerifyGitHub Verify = "github"
	// VerifyStandardWebhooks: webhook-id, webhook-timestamp and
	// webhook-signature, per the Standard Webhooks specification.
	VerifyStandardWebhooks Verify = "standard_webhooks"
)

// Valid reports whether v is one of the proofs above.
func (v Verify) Valid() bool {
	switch v {
	case VerifyToken, VerifyGitHub, VerifyStandardWebhooks:
		return true
	}
	return false
}

// The headers Check and DeliveryID read.
const (
	HeaderAuthorization   = "Authorization"
	HeaderGitHubSignature = "X-Hub-Signature-256"
	HeaderGitHubDelivery  = "X-GitHub-Delivery"
	HeaderGitHubEvent     = "X-GitHub-Event"
	HeaderIdempotencyKey  = "Idempotency-Key"
)

// TokenPrefix begins every token secret, so that a leaked one is easy to
// recognise (and for scanners to find).
const TokenPrefix = "agt_trg_"

// secretBytes is the entropy of every new secret: 256 bits.
const secretBytes = 32

// MaxDeliveryIDBytes bounds a sender's delivery id and event name: they
// are stored and shown, and every sender's ids are far shorter.
const MaxDeliveryIDBytes = 200

// ErrBadProof is Check's one answer for a delivery it does not accept. It
// never says which part failed: a caller shows a client the same answer
// for every refusal (and for an unknown trigger), so nothing can be
// learned by probing.
var ErrBadProof = errors.New("the delivery's proof is missing or wrong")

// Secrets are what a trigger checks a delivery's proof with: the current
// secret and, while a rotation lets it, the previous one.
//
// For VerifyToken, Current and Previous are HashToken values, never the
// tokens themselves: a token is compared, not used as a key, so the store
// need not hold it. For VerifyGitHub and VerifyStandardWebhooks they are
// the plain secrets (an HMAC needs its key; the service keeps them sealed, internal/seal, at
// rest). An empty string is no secret, and never matches.
type Secrets struct {
	Current  string
	Previous string
	// PreviousUntil is when Previous stops being accepted: it is accepted
	// while now is before it.
	PreviousUntil time.Time
}

// accepted returns the non-empty secrets that may prove a delivery at now.
func (s Secrets) accepted(now time.Time) []string {
	var out []string
	if s.Current != "" {
		out = append(out, s.Current)
	}
	if s.Previous != "" && now.Before(s.PreviousUntil) {
		out = append(out, s.Previous)
	}
	return out
}

// NewSecret returns a new random secret for v: for VerifyToken,
// TokenPrefix and 32 bytes in unpadded base64url; for VerifyGitHub, 32
// bytes in hex (GitHub's settings take any string); for
// VerifyStandardWebhooks, "whsec_" and 32 bytes in standard base64, which
// webhooks.ParseSecret reads.
func NewSecret(v Verify) (string, error) {
	if !v.Valid() {
		return "", fmt.Errorf("no such verify as %q", v)
	}
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("new secret: %w", err)
	}
	switch v {
	case VerifyToken:
		return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
	case VerifyGitHub:
		return hex.EncodeToString(b), nil
	default:
		return webhooks.SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
	}
}

// HashToken returns what a trigger keeps of a token secret, and what
// Secrets hold for VerifyToken: the hex SHA-256 of the token. The token
// is 256 random bits, so a plain hash is enough: there is nothing to guess.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Check returns nil when the delivery (its headers and its body exactly as
// received) carries v's proof by one of s's secrets at now, else
// ErrBadProof. Every comparison takes constant time.
func Check(v Verify, s Secrets, h http.Header, body []byte, now time.Time) error {
	secrets := s.accepted(now)
	if len(secrets) == 0 {
		return ErrBadProof
	}
	var ok bool
	switch v {
	case VerifyToken:
		ok = checkToken(secrets, h)
	case VerifyGitHub:
		ok = checkGitHub(secrets, h, body)
	case VerifyStandardWebhooks:
		ok = checkStandardWebhooks(secrets, h, body, now)
	}
	if !ok {
		return ErrBadProof
	}
	return nil
}

// checkToken: exactly one Authorization header, "Bearer <token>" (the
// scheme in any case, as RFC 9110 has it), whose hash is one of hashes.
func checkToken(hashes []string, h http.Header) bool {
	values := h.Values(HeaderAuthorization)
	if len(values) != 1 {
		return false
	}
	scheme, token, found := strings.Cut(values[0], " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false
	}
	got := []byte(HashToken(token))
	matched := 0
	for _, want := range hashes {
		matched |= subtle.ConstantTimeCompare(got, []byte(want))
	}
	return matched == 1
}

// checkGitHub: exactly one X-Hub-Signature-256 header, "sha256=" and the
// hex (either case) of HMAC-SHA256 over the body by one of secrets.
func checkGitHub(secrets []string, h http.Header, body []byte) bool {
	values := h.Values(HeaderGitHubSignature)
	if len(values) != 1 {
		return false
	}
	enc, found := strings.CutPrefix(values[0], "sha256=")
	if !found {
		return false
	}
	got, err := hex.DecodeString(enc)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	ok := false
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		ok = hmac.Equal(got, mac.Sum(nil)) || ok
	}
	return ok
}

// checkStandardWebhooks verifies as the specification's libraries do
// (package webhooks), within webhooks.DefaultTolerance of now. A secret
// that does not parse is skipped: it can prove nothing.
func checkStandardWebhooks(secrets []string, h http.Header, body []byte, now time.Time) bool {
	var keys []webhooks.Secret
	for _, s := range secrets {
		if key, err := webhooks.ParseSecret(s); err == nil {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return false
	}
	verifier, err := webhooks.NewVerifier(keys...)
	if err != nil {
		return false
	}
	verifier.Now = func() time.Time { return now }
	return verifier.Verify(h, body) == nil
}

// DeliveryID returns the sender's id of a delivery, which a trigger
// dedupes by: X-GitHub-Delivery for VerifyGitHub, webhook-id for
// VerifyStandardWebhooks, Idempotency-Key for VerifyToken; "" when the
// header is absent. A header given more than once, longer than
// MaxDeliveryIDBytes, not UTF-8 or holding control characters is an
// error (a *runs.FieldError naming the header): the caller refuses the
// delivery rather than dedupe by a mangled id.
func DeliveryID(v Verify, h http.Header) (string, error) {
	var name string
	switch v {
	case VerifyGitHub:
		name = HeaderGitHubDelivery
	case VerifyStandardWebhooks:
		name = webhooks.HeaderID
	case VerifyToken:
		name = HeaderIdempotencyKey
	default:
		return "", nil
	}
	return boundedHeader(h, name)
}

// Event returns the delivery's X-GitHub-Event, or "" when it is absent or
// is not one value within DeliveryID's bounds.
func Event(h http.Header) string {
	event, err := boundedHeader(h, HeaderGitHubEvent)
	if err != nil {
		return ""
	}
	return event
}

// boundedHeader returns the one value of header name, "" when absent, or
// an error when it is not a short line of printable text.
func boundedHeader(h http.Header, name string) (string, error) {
	values := h.Values(name)
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", runs.Invalid(name, "is given more than once")
	}
	v := values[0]
	switch {
	case len(v) > MaxDeliveryIDBytes:
		return "", runs.Invalid(name, fmt.Sprintf("is %d bytes; the limit is %d", len(v), MaxDeliveryIDBytes))
	case !utf8.ValidString(v):
		return "", runs.Invalid(name, "is not UTF-8")
	case strings.ContainsFunc(v, isControl):
		return "", runs.Invalid(name, "holds control characters")
	}
	return v, nil
}

// isControl reports the C0 and C1 controls and DEL.
func isControl(r rune) bool {
	return r < 0x20 || r >= 0x7f && r < 0xa0
}
