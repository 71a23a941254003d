package store

import (
	"bytes"
	"sync"
	"testing"
)

// Replicas that start at once on one store agree on one stream token
// secret, made by whichever asked first, so that a token one issues
// verifies on every other; a restart reads the same secret back.
func TestStreamTokenSecretIsShared(t *testing.T) {
	e := newEnv(t)
	stores := []*Store{e.s}
	for range 3 {
		s, err := Open(ctx(t), e.connect(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	secrets := make([][]byte, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := s.StreamTokenSecret(ctx(t))
			if err != nil {
				t.Error(err)
			}
			secrets[i] = b
		}()
	}
	wg.Wait()
	for i, b := range secrets {
		if len(b) < 32 || !bytes.Equal(b, secrets[0]) {
			t.Fatalf("replica %d has secret %x, replica 0 %x", i, b, secrets[0])
		}
	}
	again, err := e.s.StreamTokenSecret(ctx(t))
	if err != nil || !bytes.Equal(again, secrets[0]) {
		t.Fatalf("the secret read again is %x (%v), want %x", again, err, secrets[0])
	}
}
