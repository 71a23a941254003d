package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// SessionCost returns the cumulative cost recorded for an agent session;
// ok is false when none is.
func (s *Store) SessionCost(ctx context.Context, agent, sessionID string) (float64, bool, error) {
	key, err := sessionKey(agent, sessionID)
	if err != nil {
		return 0, false, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	e, err := s.costs.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("session cost %s: %w", key, err)
	}
	usd, err := strconv.ParseFloat(string(e.Value()), 64)
	if err != nil {
		return 0, false, fmt.Errorf("session cost %s: malformed %q", key, e.Value())
	}
	return usd, true, nil
}

// SetSessionCost records an agent session's cumulative cost.
func (s *Store) SetSessionCost(ctx context.Context, agent, sessionID string, usd float64) error {
	key, err := sessionKey(agent, sessionID)
	if err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if _, err := s.costs.Put(ctx, key, []byte(strconv.FormatFloat(usd, 'g', -1, 64))); err != nil {
		return fmt.Errorf("set session cost %s: %w", key, err)
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
