package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgate/agentgate/internal/runs"
)

// Session returns what was recorded of an agent session; ok is false when
// nothing is.
func (s *Store) Session(ctx context.Context, agent, sessionID string) (runs.SessionRecord, bool, error) {
	key, err := sessionKey(agent, sessionID)
	if err != nil {
		return runs.SessionRecord{}, false, err
	}
	var e jetstream.KeyValueEntry
	err = s.retry(ctx, "get session", func(ctx context.Context) error {
		var err error
		e, err = s.costs.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return runs.SessionRecord{}, false, nil
	}
	if err != nil {
		return runs.SessionRecord{}, false, fmt.Errorf("session %s: %w", key, err)
	}
	rec, err := decodeSession(e.Value())
	if err != nil {
		return runs.SessionRecord{}, false, fmt.Errorf("session %s: %w", key, err)
	}
	return rec, true, nil
}

// decodeSession reads a session record: JSON, or the bare cost that
// earlier versions stored.
func decodeSession(b []byte) (runs.SessionRecord, error) {
	var rec runs.SessionRecord
	if err := json.Unmarshal(b, &rec); err == nil {
		return rec, nil
	}
	usd, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return rec, fmt.Errorf("malformed record %q", b)
	}
	rec.CostUSD = &usd
	return rec, nil
}

// SetSession records an agent session.
func (s *Store) SetSession(ctx context.Context, agent, sessionID string, rec runs.SessionRecord) error {
	key, err := sessionKey(agent, sessionID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("set session %s: %w", key, err)
	}
	err = s.retry(ctx, "set session", func(ctx context.Context) error {
		_, err := s.costs.Put(ctx, key, b)
		return err
	})
	if err != nil {
		return fmt.Errorf("set session %s: %w", key, err)
	}
	return nil
}

// sessionKey is the key of an agent session: both parts are checked like
// run ids, so that neither can form another key.
func sessionKey(agent, sessionID string) (string, error) {
	if err := checkID(agent); err != nil {
		return "", fmt.Errorf("session key: agent: %w", err)
	}
	if err := checkID(sessionID); err != nil {
		return "", fmt.Errorf("session key: %w", err)
	}
	return agent + "." + sessionID, nil
}
