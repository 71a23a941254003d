package store

import (
	"errors"
	"reflect"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestSession(t *testing.T) {
	e := newEnv(t)
	if _, ok, err := e.s.Session(ctx(t), "claude", "s-1"); err != nil || ok {
		t.Fatalf("unknown session: ok %v, %v", ok, err)
	}
	for _, rec := range []runs.SessionRecord{
		{CostUSD: ptr(0.0024), Cwd: "repo"},
		{CostUSD: ptr(0.0048), Cwd: "0196-run", Usage: &runs.Usage{InputTokens: 2000, CacheReadTokens: 1200, OutputTokens: 40}},
		{Cwd: "."},
	} {
		if err := e.s.SetSession(ctx(t), "claude", "s-1", rec); err != nil {
			t.Fatal(err)
		}
		got, ok, err := e.s.Session(ctx(t), "claude", "s-1")
		if err != nil || !ok || !reflect.DeepEqual(got, rec) {
			t.Fatalf("Session = %+v, %v, %v; want %+v", got, ok, err, rec)
		}
	}
	// Sessions are per agent.
	if _, ok, _ := e.s.Session(ctx(t), "codex", "s-1"); ok {
		t.Fatal("another agent's session of the same id has a record")
	}
	for _, bad := range [][2]string{{"claude", "a.b"}, {"claude", "*"}, {"", "s"}, {"cl aude", "s"}} {
		if err := e.s.SetSession(ctx(t), bad[0], bad[1], runs.SessionRecord{}); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("SetSession(%q, %q) = %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}

// A record stored by an earlier version, the bare cost, still reads.
func TestSessionReadsBareCost(t *testing.T) {
	e := newEnv(t)
	if _, err := e.s.costs.Put(ctx(t), "claude.s-2", []byte("0.5")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := e.s.Session(ctx(t), "claude", "s-2")
	if err != nil || !ok || got.CostUSD == nil || *got.CostUSD != 0.5 || got.Cwd != "" {
		t.Fatalf("Session = %+v, %v, %v", got, ok, err)
	}
	if _, err := e.s.costs.Put(ctx(t), "claude.s-3", []byte("junk")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.s.Session(ctx(t), "claude", "s-3"); err == nil {
		t.Fatal("a malformed record was accepted")
	}
}

func ptr(f float64) *float64 { return &f }
