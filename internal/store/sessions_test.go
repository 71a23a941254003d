package store

import (
	"errors"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestSessionCost(t *testing.T) {
	e := newEnv(t)
	if _, ok, err := e.s.SessionCost(ctx(t), "claude", "s-1"); err != nil || ok {
		t.Fatalf("unknown session: ok %v, %v", ok, err)
	}
	for _, usd := range []float64{0.0024, 0.0048} {
		if err := e.s.SetSessionCost(ctx(t), "claude", "s-1", usd); err != nil {
			t.Fatal(err)
		}
		got, ok, err := e.s.SessionCost(ctx(t), "claude", "s-1")
		if err != nil || !ok || got != usd {
			t.Fatalf("SessionCost = %v, %v, %v; want %v", got, ok, err, usd)
		}
	}
	// Sessions are per agent.
	if _, ok, _ := e.s.SessionCost(ctx(t), "codex", "s-1"); ok {
		t.Fatal("another agent's session of the same id has a cost")
	}
	for _, bad := range [][2]string{{"claude", "a.b"}, {"claude", "*"}, {"", "s"}, {"cl aude", "s"}} {
		if err := e.s.SetSessionCost(ctx(t), bad[0], bad[1], 1); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("SetSessionCost(%q, %q) = %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}
