package tenants

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/runs"
)

// An interactive run counts as an open conversation from its admission
// until it is counted out, hibernated or not; a one-shot run does not.
func TestLedgerBoundsOpenConversations(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	l := NewLedger(Quotas{MaxOpen: 2}, st, nil, zaptest.NewLogger(t))
	for _, id := range []string{"c1", "c2"} {
		if err := l.Admit(ctx, "acme", id, true); err != nil {
			t.Fatalf("admit %s: %v", id, err)
		}
		st.runs[id] = runs.Run{ID: id, Status: runs.Running}
	}
	if err := l.Admit(ctx, "acme", "oneshot", false); err != nil {
		t.Fatalf("a one-shot run beside two conversations: %v", err)
	}
	l.Hibernate(ctx, "acme", "c1")
	var qe *QuotaError
	err := l.Admit(ctx, "acme", "c3", true)
	if !errors.As(err, &qe) || qe.Limit != LimitOpen || !errors.Is(err, ErrQuota) {
		t.Fatalf("a third conversation with one of two hibernated: %v, want the open limit", err)
	}
	l.CountOut(ctx, "acme", "c1", nil)
	if err := l.Admit(ctx, "acme", "c3", true); err != nil {
		t.Fatalf("a conversation once one ended: %v", err)
	}
	if u := st.get("acme"); len(u.Open) != 2 || !u.Open["c2"] || !u.Open["c3"] {
		t.Errorf("open conversations %v, want c2 and c3", u.Open)
	}
}

// A hibernated run is not running: it leaves its running slot to another
// run, and waking it takes one again, or is refused at the limit.
func TestLedgerHibernatedRunsDoNotCountAsRunning(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	l := NewLedger(Quotas{MaxRunning: 1}, st, nil, zaptest.NewLogger(t))
	if err := l.Admit(ctx, "acme", "c1", true); err != nil || !l.StartAllowed(ctx, "acme", "c1") {
		t.Fatalf("c1: admit %v", err)
	}
	st.runs["c1"] = runs.Run{ID: "c1", Status: runs.Running}
	if err := l.Admit(ctx, "acme", "r2", false); err == nil {
		t.Fatal("a second run while c1 runs at a limit of 1 was admitted")
	}
	l.Hibernate(ctx, "acme", "c1")
	if st.get("acme").Runs["c1"] != Hibernated {
		t.Fatalf("c1 is counted %q, want hibernated", st.get("acme").Runs["c1"])
	}
	if err := l.Admit(ctx, "acme", "r2", false); err != nil || !l.StartAllowed(ctx, "acme", "r2") {
		t.Fatalf("r2 beside hibernated c1: admit %v", err)
	}
	st.runs["r2"] = runs.Run{ID: "r2", Status: runs.Running}
	var qe *QuotaError
	if err := l.Wake(ctx, "acme", "c1"); !errors.As(err, &qe) || qe.Limit != LimitRunning {
		t.Fatalf("waking c1 while r2 runs at the limit: %v, want the running limit", err)
	}
	l.CountOut(ctx, "acme", "r2", nil)
	if err := l.Wake(ctx, "acme", "c1"); err != nil {
		t.Fatalf("waking c1 once r2 ended: %v", err)
	}
	if st.get("acme").Runs["c1"] != runs.Running {
		t.Errorf("woken c1 is counted %q, want running", st.get("acme").Runs["c1"])
	}
}
