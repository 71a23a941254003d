package runs

import (
	"context"
)

// Actor is who asked for something: the API key's id and its tenant. The
// zero Actor is the anonymous caller of a gateway without API keys, whose
// tenant is the empty one.
type Actor struct {
	KeyID  string `json:"key_id,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}

// IsZero reports whether a is the anonymous caller.
func (a Actor) IsZero() bool { return a == Actor{} }

type actorKey struct{}

// WithActor returns ctx carrying the actor a request acts as. The API sets
// it; the supervisor reads it for the run's tenant and its audit trail.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor ctx carries, or the zero Actor.
func ActorFrom(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	return a
}
