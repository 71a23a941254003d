package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgate/agentgate/internal/tenants"
)

// Tenants' quota usage: the KV bucket "agentgate_tenants" holds one record
// per tenant (tenants.Usage), changed only by compare-and-set on its
// revision, so that replicas counting one tenant's runs at once never lose
// a count. The key is the tenant's name hashed, as any name must make a
// valid key.
const tenantsBucket = "agentgate_tenants"

func (s *Store) openTenants(ctx context.Context, opts Options) error {
	cfg := jetstream.KeyValueConfig{
		Bucket:      tenantsBucket,
		Description: "agentgate tenant → quota usage",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
	}
	err := s.ensure(ctx, "create bucket "+tenantsBucket, func(ctx context.Context) error {
		var err error
		s.tenants, err = s.js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("bucket %s: %w", tenantsBucket, err)
	}
	return nil
}

// The store keeps the tenants' usage records a tenants.Ledger counts in.
var _ tenants.Store = (*Store)(nil)

// TenantUsage returns the tenant's record and its revision (0: none).
func (s *Store) TenantUsage(ctx context.Context, tenant string) (tenants.Usage, uint64, error) {
	var e jetstream.KeyValueEntry
	err := s.retry(ctx, "read tenant usage", func(ctx context.Context) error {
		var err error
		e, err = s.tenants.Get(ctx, idempotencyKey("tenant:"+tenant))
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return tenants.Usage{}, 0, nil
	}
	if err != nil {
		return tenants.Usage{}, 0, fmt.Errorf("tenant usage: %w", err)
	}
	var u tenants.Usage
	if err := json.Unmarshal(e.Value(), &u); err != nil {
		return tenants.Usage{}, 0, fmt.Errorf("tenant usage: decode: %w", err)
	}
	return u, e.Revision(), nil
}

// SetTenantUsage stores u if the record is still at rev.
func (s *Store) SetTenantUsage(ctx context.Context, tenant string, u tenants.Usage, rev uint64) error {
	data, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("tenant usage: %w", err)
	}
	k := idempotencyKey("tenant:" + tenant)
	err = s.retry(ctx, "store tenant usage", func(ctx context.Context) error {
		if rev == 0 {
			_, err := s.tenants.Create(ctx, k, data)
			return err
		}
		_, err := s.tenants.Update(ctx, k, data, rev)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err) {
		return fmt.Errorf("tenant usage: %w", tenants.ErrStale)
	}
	if err != nil {
		return fmt.Errorf("tenant usage: %w", err)
	}
	return nil
}

// isWrongSequence reports a KV update whose expected revision is not the
// last one (JetStream error 10071).
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// streamTokenSecretKey holds the secret that signs stream tokens when the
// operator configures none: made once by the first replica to ask, then
// read by every other, so that a token verifies on any replica. It shares
// the tenants' bucket; its key is no tenant's (theirs are hashes).
const streamTokenSecretKey = "secret.stream-token"

// StreamTokenSecret returns the gateway's stream token secret, making it
// the first time.
func (s *Store) StreamTokenSecret(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("stream token secret: %w", err)
	}
	// The first replica's create wins; the others read what it made.
	secret, _, err := s.createOrRead(ctx, "stream token secret", s.tenants, streamTokenSecretKey, fresh)
	if err != nil {
		return nil, fmt.Errorf("stream token secret: %w", err)
	}
	return secret, nil
}
