package store

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// checkSessionLock: a held session is busy for another run, renewed by its
// holder, not freed by another run's unlock, freed by its holder's, and
// free again once its TTL passes without a renewal.
func checkSessionLock(t *testing.T, s *Store) {
	c := ctx(t)
	session := newID(t)
	if err := s.LockSession(c, "acme", "claude", session, "run-a", time.Minute); err != nil {
		t.Fatalf("first lock: %v", err)
	}
	if err := s.LockSession(c, "acme", "claude", session, "run-b", time.Minute); !errors.Is(err, runs.ErrSessionBusy) {
		t.Fatalf("lock by another run = %v, want ErrSessionBusy", err)
	}
	if err := s.LockSession(c, "acme", "claude", session, "run-a", time.Minute); err != nil {
		t.Fatalf("renewal by the holder: %v", err)
	}
	for _, other := range [][2]string{{"globex", "claude"}, {"acme", "codex"}, {"", "claude"}} {
		if err := s.LockSession(c, other[0], other[1], session, "run-c", time.Minute); err != nil {
			t.Errorf("lock of tenant %q agent %q's session of the same id: %v", other[0], other[1], err)
		}
	}
	if err := s.UnlockSession(c, "acme", "claude", session, "run-b"); err != nil {
		t.Fatalf("unlock by another run: %v", err)
	}
	if err := s.LockSession(c, "acme", "claude", session, "run-b", time.Minute); !errors.Is(err, runs.ErrSessionBusy) {
		t.Fatalf("after another run's unlock, lock = %v, want ErrSessionBusy still", err)
	}
	if err := s.UnlockSession(c, "acme", "claude", session, "run-a"); err != nil {
		t.Fatalf("unlock by the holder: %v", err)
	}
	if err := s.UnlockSession(c, "acme", "claude", session, "run-a"); err != nil {
		t.Fatalf("second unlock: %v", err)
	}
	if err := s.LockSession(c, "acme", "claude", session, "run-b", time.Second); err != nil {
		t.Fatalf("lock after the holder's unlock: %v", err)
	}
	// run-b renews no more: its lock ends with its TTL.
	waitFor(t, 30*time.Second, "the lock's TTL to free the session", func() bool {
		err := s.LockSession(c, "acme", "claude", session, "run-c", time.Minute)
		if err != nil && !errors.Is(err, runs.ErrSessionBusy) {
			t.Fatalf("lock while waiting for the TTL: %v", err)
		}
		return err == nil
	})
}

func TestSessionLock(t *testing.T) {
	checkSessionLock(t, newEnv(t).s)
}

func TestSessionLockOnCluster(t *testing.T) {
	_, s := openCluster(t, nil)
	st, err := s.js.Stream(ctx(t), "KV_"+sessionLocksBucket)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().Config.Replicas; n != 3 {
		t.Errorf("session locks bucket has %d replicas, want 3", n)
	}
	checkSessionLock(t, s)
	checkLockRace(t, s)
}

// A renewal keeps a lock past the TTL it was taken with.
func TestSessionLockRenewalExtends(t *testing.T) {
	s := newEnv(t).s
	c := ctx(t)
	session := newID(t)
	if err := s.LockSession(c, "acme", "claude", session, "run-a", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.LockSession(c, "acme", "claude", session, "run-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	// Wait, without a sleep, for a write from after the first TTL: a
	// second lock of its own, taken with a TTL, that expires.
	marker := newID(t)
	if err := s.LockSession(c, "acme", "claude", marker, "run-m", time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a lock taken for one second to expire", func() bool {
		return s.LockSession(c, "acme", "claude", marker, "run-n", time.Minute) == nil
	})
	if err := s.LockSession(c, "acme", "claude", session, "run-b", time.Minute); !errors.Is(err, runs.ErrSessionBusy) {
		t.Fatalf("lock after the first TTL of a renewed lock = %v, want ErrSessionBusy", err)
	}
}

func TestSessionLockRace(t *testing.T) {
	checkLockRace(t, newEnv(t).s)
}

// checkLockRace: of runs locking one session at once, exactly one wins.
func checkLockRace(t *testing.T, s *Store) {
	c := ctx(t)
	for range 5 {
		session := newID(t)
		const n = 2
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = s.LockSession(c, "acme", "claude", session, "run-"+string(rune('a'+i)), time.Minute)
			})
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, runs.ErrSessionBusy):
				t.Fatalf("lock %d: %v", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d concurrent locks won (%v), want exactly 1", won, n, errs)
		}
	}
}

func TestSessionLockInvalid(t *testing.T) {
	s := newEnv(t).s
	c := ctx(t)
	for _, args := range [][3]string{{"", "s", "r"}, {"claude", "", "r"}, {"claude", "s", ""}, {"claude", strings.Repeat("s", maxSnapshotID+1), "r"}} {
		if err := s.LockSession(c, "acme", args[0], args[1], args[2], time.Minute); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("LockSession(%q, %q, %q) = %v, want ErrInvalid", args[0], args[1], args[2], err)
		}
	}
}
