package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgate/agentgate/internal/runs"
)

// Schedules, triggers and their states live in the KV bucket
// "agentgate_autoruns"; the claims of their fire times and deliveries in
// "agentgate_autorun_claims", whose keys expire after claimsTTL: a claim
// matters only until its fire or delivery could not come again.
const (
	autorunsBucket = "agentgate_autoruns"
	claimsBucket   = "agentgate_autorun_claims"
	claimsTTL      = 7 * 24 * time.Hour
)

func (s *Store) openAutoruns(ctx context.Context, opts Options) error {
	for _, b := range []struct {
		kv  *jetstream.KeyValue
		cfg jetstream.KeyValueConfig
	}{
		{&s.autoruns, jetstream.KeyValueConfig{Bucket: autorunsBucket, Description: "agentgate schedules, triggers and their states",
			History: 1, Storage: jetstream.FileStorage, Replicas: opts.Replicas}},
		{&s.claims, jetstream.KeyValueConfig{Bucket: claimsBucket, Description: "agentgate claims of fire times and deliveries",
			History: 1, TTL: claimsTTL, Storage: jetstream.FileStorage, Replicas: opts.Replicas}},
	} {
		err := s.ensure(ctx, "create bucket "+b.cfg.Bucket, func(ctx context.Context) error {
			var err error
			*b.kv, err = s.js.CreateOrUpdateKeyValue(ctx, b.cfg)
			return err
		})
		if err != nil {
			return fmt.Errorf("bucket %s: %w", b.cfg.Bucket, err)
		}
	}
	return nil
}

// Autoruns is the store of schedules and triggers: autorun.Records over
// one bucket, autorun.Claims over the other.
type Autoruns struct {
	s  *Store
	kv jetstream.KeyValue
}

// Autoruns returns the records of schedules, triggers and their states.
func (s *Store) Autoruns() *Autoruns { return &Autoruns{s: s, kv: s.autoruns} }

// AutorunClaims returns the claims of fire times and deliveries.
func (s *Store) AutorunClaims() *Autoruns { return &Autoruns{s: s, kv: s.claims} }

// autorunErr gives a KV error the runs sentinel a caller tests for.
func autorunErr(what, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%s %s: %w", what, key, runs.ErrNotFound)
	case errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err):
		return fmt.Errorf("%s %s: changed meanwhile: %w", what, key, runs.ErrConflict)
	}
	return fmt.Errorf("%s %s: %w", what, key, err)
}

// Create stores data under key if it is free.
func (a *Autoruns) Create(ctx context.Context, key string, data []byte) (uint64, error) {
	var rev uint64
	err := a.s.retry(ctx, "create "+key, func(ctx context.Context) error {
		var err error
		rev, err = a.kv.Create(ctx, key, data)
		return err
	})
	return rev, autorunErr("create", key, err)
}

// Get returns the value of key and its revision.
func (a *Autoruns) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	var e jetstream.KeyValueEntry
	err := a.s.retry(ctx, "read "+key, func(ctx context.Context) error {
		var err error
		e, err = a.kv.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, 0, autorunErr("read", key, err)
	}
	return e.Value(), e.Revision(), nil
}

// Update replaces the value of key if its revision is still rev (0: if
// the key is free).
func (a *Autoruns) Update(ctx context.Context, key string, data []byte, rev uint64) (uint64, error) {
	if rev == 0 {
		return a.Create(ctx, key, data)
	}
	var next uint64
	err := a.s.retry(ctx, "update "+key, func(ctx context.Context) error {
		var err error
		next, err = a.kv.Update(ctx, key, data, rev)
		return err
	})
	return next, autorunErr("update", key, err)
}

// Delete removes key.
func (a *Autoruns) Delete(ctx context.Context, key string) error {
	err := a.s.retry(ctx, "delete "+key, func(ctx context.Context) error {
		return a.kv.Delete(ctx, key)
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return autorunErr("delete", key, err)
}

// Keys lists the keys under prefix.
func (a *Autoruns) Keys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := a.s.retry(ctx, "list "+prefix, func(ctx context.Context) error {
		keys = keys[:0]
		l, err := a.kv.ListKeysFiltered(ctx, prefix+".>")
		if err != nil {
			return err
		}
		for k := range l.Keys() {
			keys = append(keys, k)
		}
		return nil
	})
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	return keys, autorunErr("list", prefix, err)
}

// Claim creates key with data; when it exists, its value and revision.
func (a *Autoruns) Claim(ctx context.Context, key string, data []byte) (bool, []byte, uint64, error) {
	rev, err := a.Create(ctx, key, data)
	if err == nil {
		return true, nil, rev, nil
	}
	if !errors.Is(err, runs.ErrConflict) {
		return false, nil, 0, err
	}
	held, rev, err := a.Get(ctx, key)
	if errors.Is(err, runs.ErrNotFound) {
		// Expired or deleted between the two calls: claim it again.
		return a.Claim(ctx, key, data)
	}
	return false, held, rev, err
}

// Reclaim replaces a claim still at rev.
func (a *Autoruns) Reclaim(ctx context.Context, key string, data []byte, rev uint64) error {
	_, err := a.Update(ctx, key, data, rev)
	return err
}
