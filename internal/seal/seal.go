// Package seal keeps a secret the gateway must read again (a schedule's
// run request, a trigger's signing secret) encrypted in the store, with a
// key the operator gives (AGENTGATE_SECRETS_KEY) or one derived for every
// replica alike. A sealed value is bound to its purpose and its owner's
// id: copied into another record, it does not open.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// Box seals and opens values of one purpose.
type Box struct {
	aead    cipher.AEAD
	purpose string
}

// New returns the Box of purpose (such as "schedule run") under a key of
// its own derived from key, which must be at least 32 bytes.
func New(key []byte, purpose string) (*Box, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("seal: the key is %d bytes; it must be at least 32", len(key))
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("agentgate seal v1\x00" + purpose))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: g, purpose: purpose}, nil
}

// ErrOpen: a sealed value does not open: another key, another owner, or
// changed bytes.
var ErrOpen = errors.New("seal: the value does not open with this key for this owner")

func (b *Box) aad(id string) []byte { return []byte(b.purpose + "\x00" + id) }

// Seal returns plain encrypted for owner id: nonce, then ciphertext.
func (b *Box) Seal(id string, plain []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("crypto/rand failed: " + err.Error()) // the runtime's own guarantee
	}
	return b.aead.Seal(nonce, nonce, plain, b.aad(id))
}

// Open returns the plain value Seal sealed for owner id, or ErrOpen.
func (b *Box) Open(id string, sealed []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrOpen
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], b.aad(id))
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}
