package store

import (
	"context"
)

// openIdempotency creates the bucket of idempotency keys. Filled in by the
// idempotency work.
func (s *Store) openIdempotency(ctx context.Context, opts Options) error { return nil }
