package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The ways a stream token fails to verify. Verify wraps exactly one of
// them, so that the API can answer 401 with a stable code.
var (
	// ErrTokenMalformed is a token that is not one this package makes:
	// too long, not three parts, an unknown version, bad base64, or a
	// signed payload that is not valid claims.
	ErrTokenMalformed = errors.New("malformed stream token")
	// ErrTokenSignature is a well-formed token whose signature matches
	// neither secret: forged, tampered with, or signed with a secret
	// rotated out.
	ErrTokenSignature = errors.New("stream token has a bad signature")
	// ErrTokenExpired is a genuine token past its expiry.
	ErrTokenExpired = errors.New("stream token expired")
)

// MaxTokenLen bounds a stream token (and a bearer token): a longer one is
// refused before any decoding.
const MaxTokenLen = 1024

// DefaultStreamTokenTTL is the lifetime the API should give a stream token:
// long enough for a page to open its EventSource and ride out a few
// reconnects, short enough that a token leaked from a URL (a log, a
// Referer) is soon useless.
const DefaultStreamTokenTTL = 10 * time.Minute

// MinSecretLen is the shortest signing secret NewSigner accepts.
const MinSecretLen = 32

const tokenVersion = "v1"

// macLabel derives the MAC key from the operator's secret, so that the
// same secret used for something else can never produce a MAC that this
// package accepts, nor the other way round.
const macLabel = "agentgate stream token v1"

// StreamClaims is what a stream token says: who may read which run, until
// when. It grants read of that one run and nothing else.
type StreamClaims struct {
	// RunID is the one run the token may stream.
	RunID string
	// Tenant owns the run.
	Tenant string
	// KeyID is the API key that asked for the token, so that the API can
	// refuse the token once that key is revoked.
	KeyID string
	// Expires is when the token stops verifying; whole seconds (Issue
	// rounds it down).
	Expires time.Time
}

// Allows reports whether the claims grant reading run runID.
func (c StreamClaims) Allows(runID string) bool { return runID != "" && c.RunID == runID }

// wireClaims is StreamClaims on the wire: short names keep URLs short.
type wireClaims struct {
	Run string `json:"run"`
	Ten string `json:"ten"`
	Kid string `json:"kid,omitempty"`
	Exp int64  `json:"exp"`
}

// Signer issues and verifies stream tokens with HMAC-SHA256. Every replica
// that verifies must hold the same secret. Safe for concurrent use.
type Signer struct {
	current  []byte   // MAC key that signs and verifies
	previous [][]byte // MAC keys that only verify
}

// NewSigner returns a Signer that signs with secret and verifies tokens
// signed with secret or with any of previous. To rotate: deploy the new
// secret with the old one as previous, wait DefaultStreamTokenTTL (tokens
// signed with the old secret expire), then drop the old one. Each secret
// must be at least MinSecretLen bytes; it is used as given (its bytes, not
// a decoding of them).
func NewSigner(secret []byte, previous ...[]byte) (*Signer, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("stream token secret: %d bytes, want at least %d", len(secret), MinSecretLen)
	}
	s := &Signer{current: macKey(secret)}
	for i, p := range previous {
		if len(p) < MinSecretLen {
			return nil, fmt.Errorf("previous stream token secret %d: %d bytes, want at least %d", i+1, len(p), MinSecretLen)
		}
		s.previous = append(s.previous, macKey(p))
	}
	return s, nil
}

func macKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(macLabel))
	return m.Sum(nil)
}

func sign(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding.Strict()

// Issue returns a token for c:
//
//	v1.<base64url(JSON claims)>.<base64url(HMAC-SHA256 of "v1.<payload>")>
//
// RunID and Tenant must be set and Expires not zero; a token longer than
// MaxTokenLen (very long ids) is an error.
func (s *Signer) Issue(c StreamClaims) (string, error) {
	if c.RunID == "" || c.Tenant == "" || c.Expires.IsZero() || c.Expires.Unix() <= 0 {
		return "", errors.New("issue stream token: run id, tenant and expiry are required")
	}
	payload, err := json.Marshal(wireClaims{Run: c.RunID, Ten: c.Tenant, Kid: c.KeyID, Exp: c.Expires.Unix()})
	if err != nil {
		return "", fmt.Errorf("issue stream token: %w", err)
	}
	signed := tokenVersion + "." + b64.EncodeToString(payload)
	tok := signed + "." + b64.EncodeToString(sign(s.current, signed))
	if len(tok) > MaxTokenLen {
		return "", fmt.Errorf("issue stream token: %d bytes, more than %d", len(tok), MaxTokenLen)
	}
	return tok, nil
}

// Verify checks token's signature (against the current and previous
// secrets) and its expiry at now, and returns its claims. The error wraps
// ErrTokenMalformed, ErrTokenSignature or ErrTokenExpired. The payload is
// decoded only after its signature checks out. Verify does not know which
// run is asked for: the caller checks StreamClaims.Allows.
func (s *Signer) Verify(token string, now time.Time) (StreamClaims, error) {
	if len(token) > MaxTokenLen {
		return StreamClaims{}, fmt.Errorf("%w: longer than %d bytes", ErrTokenMalformed, MaxTokenLen)
	}
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return StreamClaims{}, fmt.Errorf("%w: no signature", ErrTokenMalformed)
	}
	signed, macText := token[:i], token[i+1:]
	version, payloadText, ok := strings.Cut(signed, ".")
	if !ok || strings.Contains(payloadText, ".") {
		return StreamClaims{}, fmt.Errorf("%w: want three parts", ErrTokenMalformed)
	}
	if version != tokenVersion {
		return StreamClaims{}, fmt.Errorf("%w: unknown version", ErrTokenMalformed)
	}
	mac, err := b64.DecodeString(macText)
	if err != nil || len(mac) != sha256.Size {
		return StreamClaims{}, fmt.Errorf("%w: bad signature encoding", ErrTokenMalformed)
	}
	good := hmac.Equal(mac, sign(s.current, signed))
	for _, k := range s.previous {
		// No early exit: every secret is tried, so the time taken does
		// not say which secret signed.
		good = hmac.Equal(mac, sign(k, signed)) || good
	}
	if !good {
		return StreamClaims{}, ErrTokenSignature
	}
	payload, err := b64.DecodeString(payloadText)
	if err != nil {
		return StreamClaims{}, fmt.Errorf("%w: bad payload encoding", ErrTokenMalformed)
	}
	var w wireClaims
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || dec.More() {
		return StreamClaims{}, fmt.Errorf("%w: bad claims", ErrTokenMalformed)
	}
	if w.Run == "" || w.Ten == "" || w.Exp <= 0 {
		return StreamClaims{}, fmt.Errorf("%w: missing claims", ErrTokenMalformed)
	}
	c := StreamClaims{RunID: w.Run, Tenant: w.Ten, KeyID: w.Kid, Expires: time.Unix(w.Exp, 0)}
	if !now.Before(c.Expires) {
		return StreamClaims{}, ErrTokenExpired
	}
	return c, nil
}
