package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go/jetstream"
)

// Idempotency keys: the KV bucket "agentgate_idempotency" maps the SHA-256
// of a client's Idempotency-Key to the run the first request with it made
// and the hash of that request, for idempotencyTTL. Hashing the key keeps
// any header value a valid KV key and keeps client keys out of the store.
const (
	idempotencyBucket = "agentgate_idempotency"
	idempotencyTTL    = 24 * time.Hour
)

func (s *Store) openIdempotency(ctx context.Context, opts Options) error {
	cfg := jetstream.KeyValueConfig{
		Bucket:      idempotencyBucket,
		Description: "agentgate Idempotency-Key → run",
		History:     1,
		TTL:         idempotencyTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
	}
	err := s.ensure(ctx, "create bucket "+idempotencyBucket, func(ctx context.Context) error {
		var err error
		s.idem, err = s.js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("bucket %s: %w", idempotencyBucket, err)
	}
	return nil
}

func idempotencyKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// ClaimIdempotencyKey records that key made rec's run, unless the key is
// already recorded: then it returns what was recorded and false. Two
// requests with one key at once record one run between them.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, key string, rec runs.IdempotencyRecord) (runs.IdempotencyRecord, bool, error) {
	if key == "" {
		return runs.IdempotencyRecord{}, false, runs.Invalid("idempotency_key", "empty")
	}
	k := idempotencyKey(key)
	data, err := json.Marshal(rec)
	if err != nil {
		return runs.IdempotencyRecord{}, false, fmt.Errorf("idempotency key: %w", err)
	}
	// A create retried after a lost ack finds the key taken by itself:
	// the record read back then names this request's run.
	recorded, fresh, err := s.createOrRead(ctx, "claim idempotency key", s.idem, k, data)
	switch {
	case err != nil:
		return runs.IdempotencyRecord{}, false, fmt.Errorf("idempotency key: %w", err)
	case fresh:
		return rec, true, nil
	}
	var got runs.IdempotencyRecord
	if err := json.Unmarshal(recorded, &got); err != nil {
		return runs.IdempotencyRecord{}, false, fmt.Errorf("idempotency key: decode: %w", err)
	}
	return got, false, nil
}
