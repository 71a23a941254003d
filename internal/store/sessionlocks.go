package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgate/agentgate/internal/runs"
)

// Session locks: the KV bucket "agentgate_session_locks" holds, for each
// session a run holds, "<tenant>.<agent>.<session id>" (escapeToken, the
// empty tenant "_") → the run's id, with a TTL of its own on each write
// (per-message TTL, nats-server 2.11 and later), so that the lock of a
// replica that died ends by itself.
const (
	sessionLocksBucket = "agentgate_session_locks"
	// lockMarkerTTL is how long the marker left by a lock that expired or
	// was freed stays, so that the bucket does not keep one per session
	// ever locked.
	lockMarkerTTL = time.Minute
)

var _ runs.SessionLocks = (*Store)(nil)

func (s *Store) openSessionLocks(ctx context.Context, opts Options) error {
	cfg := jetstream.KeyValueConfig{
		Bucket:         sessionLocksBucket,
		Description:    "agentgate sessions held by a run",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       opts.Replicas,
		LimitMarkerTTL: lockMarkerTTL,
	}
	err := s.ensure(ctx, "create bucket "+sessionLocksBucket, func(ctx context.Context) error {
		var err error
		s.locks, err = s.js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("bucket %s: %w", sessionLocksBucket, err)
	}
	return nil
}

// lockKey is the key of a session's lock.
func lockKey(tenant, agent, sessionID string) (string, error) {
	if len(tenant) > maxSnapshotID {
		return "", runs.Invalid("tenant", fmt.Sprintf("longer than %d bytes", maxSnapshotID))
	}
	if err := checkPart("agent", agent); err != nil {
		return "", err
	}
	if err := checkPart("session_id", sessionID); err != nil {
		return "", err
	}
	return tenantToken(tenant) + "." + escapeToken(agent) + "." + escapeToken(sessionID), nil
}

// errLockMoved is a lock that changed between its read and a write that
// expected it unchanged: read it again.
var errLockMoved = errors.New("session lock changed under the write")

// LockSession gives the session to runID for ttl, rounded up to whole
// seconds (the server's unit), at least one: a lock that is free (never
// taken, freed or expired) is taken, one runID holds is renewed, and one
// another run holds is runs.ErrSessionBusy.
func (s *Store) LockSession(ctx context.Context, tenant, agent, sessionID, runID string, ttl time.Duration) error {
	key, err := lockKey(tenant, agent, sessionID)
	if err != nil {
		return err
	}
	if err := checkPart("run_id", runID); err != nil {
		return err
	}
	ttl = max(time.Second, (ttl + time.Second - 1).Truncate(time.Second))
	busy := false
	err = s.retry(ctx, "lock session", func(ctx context.Context) error {
		var err error
		busy, err = s.lockOnce(ctx, key, runID, ttl)
		return err
	})
	if err != nil {
		return fmt.Errorf("lock session %s: %w", key, err)
	}
	if busy {
		return fmt.Errorf("session %s: %w", sessionID, runs.ErrSessionBusy)
	}
	return nil
}

// lockOnce takes or renews key for runID, or reports that another run
// holds it.
func (s *Store) lockOnce(ctx context.Context, key, runID string, ttl time.Duration) (busy bool, err error) {
	_, err = s.locks.Create(ctx, key, []byte(runID), jetstream.KeyTTL(ttl))
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return false, err
	}
	e, err := s.locks.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, errLockMoved // expired or freed since the create
	case err != nil:
		return false, err
	case string(e.Value()) != runID:
		return true, nil
	}
	// KeyValue.Update cannot set a TTL, so the renewal is published as
	// the bucket would, expecting the revision read.
	m := &nats.Msg{Subject: "$KV." + sessionLocksBucket + "." + key, Data: []byte(runID)}
	_, err = s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(e.Revision()), jetstream.WithMsgTTL(ttl))
	return false, moved(err)
}

// UnlockSession frees the session if runID holds it; otherwise, or when
// no run does, it does nothing.
func (s *Store) UnlockSession(ctx context.Context, tenant, agent, sessionID, runID string) error {
	key, err := lockKey(tenant, agent, sessionID)
	if err != nil {
		return err
	}
	err = s.retry(ctx, "unlock session", func(ctx context.Context) error {
		e, err := s.locks.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return nil
		case err != nil:
			return err
		case string(e.Value()) != runID:
			return nil
		}
		return moved(s.locks.Purge(ctx, key, jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(lockMarkerTTL)))
	})
	if err != nil {
		return fmt.Errorf("unlock session %s: %w", key, err)
	}
	return nil
}

// moved makes a write refused for a revision that is no longer the last
// errLockMoved, which the retry reads again.
func moved(err error) error {
	var apiErr *jetstream.APIError
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
		errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return errLockMoved
	}
	return err
}
