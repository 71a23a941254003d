package autorun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/runs"
)

// Claim is the value of a fire's or a delivery's claim: when it was
// taken, by which attempt (Nonce, so that an attempt retried after a
// lost acknowledgement knows its own claim), and, once the start is
// recorded, its Record: a claim outlives the owner's Recent, so it is
// what tells a delivery id seen days ago.
type Claim struct {
	At     time.Time `json:"at"`
	Nonce  string    `json:"nonce"`
	Record *Record   `json:"record,omitempty"`
}

// ErrInFlight: another attempt holds the claim within its lease, and has
// not recorded its start yet.
var ErrInFlight = errors.New("claimed by another attempt, still starting")

// Held is a claim this attempt holds.
type Held struct {
	key    string
	rev    uint64
	claim  Claim
	claims Claims
	// TakenOver: the claim was another attempt's, whose lease ran out
	// before it recorded its start (its replica died).
	TakenOver bool
}

// TakeClaim takes the claim of key at now: a free one; this attempt's
// own, after a lost acknowledgement; or one whose holder's lease
// (PendingLease) ran out unrecorded. done is the Record of a claim
// already recorded; ErrInFlight is a claim held within its lease.
func TakeClaim(ctx context.Context, claims Claims, key string, now time.Time) (held *Held, done *Record, err error) {
	mine := Claim{At: now, Nonce: uuid.NewString()}
	data, err := json.Marshal(mine)
	if err != nil {
		return nil, nil, err
	}
	fresh, got, rev, err := claims.Claim(ctx, key, data)
	switch {
	case err != nil:
		return nil, nil, err
	case fresh || bytes.Equal(got, data):
		return &Held{key: key, rev: rev, claim: mine, claims: claims}, nil, nil
	}
	var theirs Claim
	if err := json.Unmarshal(got, &theirs); err == nil {
		if theirs.Record != nil {
			return nil, theirs.Record, nil
		}
		if now.Sub(theirs.At) < PendingLease {
			return nil, nil, ErrInFlight
		}
	}
	if err := claims.Reclaim(ctx, key, data, rev); errors.Is(err, runs.ErrConflict) {
		return nil, nil, ErrInFlight
	} else if err != nil {
		return nil, nil, err
	}
	// The revision after a reclaim is not known: Done reads it again.
	return &Held{key: key, claim: mine, claims: claims, TakenOver: true}, nil, nil
}

// Done records rec in the claim. It is best effort: the owner's Recent
// holds rec too, and a claim left without it is only taken over and
// started again, which the run's idempotency key makes harmless.
func (h *Held) Done(ctx context.Context, rec Record) error {
	if !rec.Final() {
		return nil
	}
	h.claim.Record = &rec
	data, err := json.Marshal(h.claim)
	if err != nil {
		return err
	}
	rev := h.rev
	if rev == 0 {
		_, held, r, err := h.claims.Claim(ctx, h.key, data)
		if err != nil {
			return err
		}
		var c Claim
		if json.Unmarshal(held, &c) != nil || c.Nonce != h.claim.Nonce {
			return fmt.Errorf("claim %s: taken by another attempt meanwhile", h.key)
		}
		rev = r
	}
	return h.claims.Reclaim(ctx, h.key, data, rev)
}
