package triggers

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// SealKeyBytes is the length of a Sealer's key: AES-256.
const SealKeyBytes = 32

// sealContext begins the additional data of every sealed secret; the
// trigger's id follows, so a sealed value copied to another trigger (or
// anything else this key seals) does not open there.
const sealContext = "agentgate trigger secret\x00"

// ErrCannotOpen is Open's answer for a sealed secret it cannot open: a
// key other than the one that sealed it, another trigger's value, or a
// damaged one. It never tells which.
var ErrCannotOpen = errors.New("the trigger's sealed secret does not open with this key")

// Sealer keeps the signing secrets of triggers encrypted at rest with the
// operator's key: AES-256-GCM, a random nonce per secret, the trigger's id
// bound in as additional data. A token secret needs none of this: only its
// hash is kept (HashToken). A Sealer is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer returns a Sealer with key, which must be SealKeyBytes long.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != SealKeyBytes {
		return nil, fmt.Errorf("a trigger secret key must be %d bytes, this one is %d", SealKeyBytes, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("trigger secret key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("trigger secret key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal returns plain encrypted for the trigger triggerID: standard base64
// of the nonce followed by the ciphertext and its tag.
func (s *Sealer) Seal(triggerID, plain string) (string, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal trigger secret: %w", err)
	}
	out := s.aead.Seal(nonce, nonce, []byte(plain), sealData(triggerID))
	return base64.StdEncoding.EncodeToString(out), nil
}

// Open returns the secret Seal sealed for triggerID, or ErrCannotOpen.
func (s *Sealer) Open(triggerID, sealed string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	n := s.aead.NonceSize()
	if err != nil || len(raw) < n+s.aead.Overhead() {
		return "", ErrCannotOpen
	}
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], sealData(triggerID))
	if err != nil {
		return "", ErrCannotOpen
	}
	return string(plain), nil
}

func sealData(triggerID string) []byte {
	return []byte(sealContext + triggerID)
}
