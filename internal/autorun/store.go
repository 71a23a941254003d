package autorun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentgate/agentgate/internal/runs"
)

// Records is the store role of schedules, triggers and their States:
// values under keys, each with a revision that compare-and-set checks.
// Keys are "."-separated tokens of letters, digits, "-" and "_".
type Records interface {
	// Create stores data under key if the key is free; an error
	// wrapping runs.ErrConflict if not.
	Create(ctx context.Context, key string, data []byte) (rev uint64, err error)
	// Get returns the value of key and its revision; an error wrapping
	// runs.ErrNotFound when there is none.
	Get(ctx context.Context, key string) (data []byte, rev uint64, err error)
	// Update replaces the value of key if its revision is still rev (0:
	// if the key is free); an error wrapping runs.ErrConflict if not.
	Update(ctx context.Context, key string, data []byte, rev uint64) (uint64, error)
	// Delete removes key; removing a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Keys lists the keys that begin with prefix and a ".".
	Keys(ctx context.Context, prefix string) ([]string, error)
}

// Claims is the store role of claims: keys one replica in the cluster
// creates, kept long enough for no fire or delivery to come twice.
type Claims interface {
	// Claim creates key with data: fresh, and rev its revision. When the
	// key exists, fresh is false and held and rev are its value and
	// revision.
	Claim(ctx context.Context, key string, data []byte) (fresh bool, held []byte, rev uint64, err error)
	// Reclaim replaces the value of a claim whose revision is still
	// rev; an error wrapping runs.ErrConflict if it is not.
	Reclaim(ctx context.Context, key string, data []byte, rev uint64) error
}

// Runs is what a start needs of the gateway's runs: the supervisor. The
// tenant of a submission is the Actor of its context (runs.WithActor).
type Runs interface {
	Submit(ctx context.Context, spec runs.Spec) (runs.Run, error)
	Record(ctx context.Context, id string) (runs.Run, error)
	Cancel(ctx context.Context, id string) (runs.Run, error)
}

// Load reads the JSON value of key, the owner what ("schedule") of id.
// A missing key is an error wrapping runs.ErrNotFound that names it.
func Load[T any](ctx context.Context, recs Records, key, what, id string) (T, uint64, error) {
	var v T
	data, rev, err := recs.Get(ctx, key)
	if errors.Is(err, runs.ErrNotFound) {
		return v, 0, fmt.Errorf("no %s with id %q: %w", what, id, runs.ErrNotFound)
	}
	if err != nil {
		return v, 0, fmt.Errorf("read %s %s: %w", what, id, err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, 0, fmt.Errorf("decode %s %s: %w", what, id, err)
	}
	return v, rev, nil
}

// CheckCount refuses one more owner under prefix (a tenant's schedules or
// triggers) when it holds max already: a *LimitError with code, whose
// message names what ("schedules") and the setting that bounds it.
func CheckCount(ctx context.Context, recs Records, prefix string, max int, code, what, setting string) error {
	keys, err := recs.Keys(ctx, prefix)
	if err != nil {
		return fmt.Errorf("count %s: %w", what, err)
	}
	if len(keys) >= max {
		return &LimitError{Code: code,
			Message: fmt.Sprintf("this tenant keeps %d %s, its most (%s); delete one first", len(keys), what, setting)}
	}
	return nil
}
