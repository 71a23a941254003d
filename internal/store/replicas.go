package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Heartbeat records that replica is alive; the record expires after the
// store's ReplicaTTL without another.
func (s *Store) Heartbeat(ctx context.Context, replica string) error {
	if replica == "" || len(replica) > 256 {
		return fmt.Errorf("heartbeat: replica id %q is empty or too long", replica)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if _, err := s.alive.Put(ctx, replicaKey(replica), []byte(replica)); err != nil {
		return fmt.Errorf("heartbeat of %s: %w", replica, err)
	}
	return nil
}

// LiveReplicas returns the replicas whose heartbeat has not expired.
func (s *Store) LiveReplicas(ctx context.Context) (map[string]bool, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	keys, err := s.alive.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("live replicas: %w", err)
	}
	live := make(map[string]bool, len(keys))
	for _, k := range keys {
		e, err := s.alive.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("live replicas: %w", err)
		}
		live[string(e.Value())] = true
	}
	return live, nil
}

// replicaKey makes a replica id (a hostname, say) a valid key: characters
// a key cannot hold become '_'. The id itself is kept as the value.
func replicaKey(replica string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, replica)
}
