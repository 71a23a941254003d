package store

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/autorun/autoruntest"
	"github.com/agentgate/agentgate/internal/runs"
)

var (
	_ autorun.Records = (*Autoruns)(nil)
	_ autorun.Claims  = (*Autoruns)(nil)
)

// The store's records behave as the in-memory ones the schedules' clock
// tests run on: the same calls give the same answers.
func TestAutorunRecordsBehaveAsTheMemoryOnes(t *testing.T) {
	e := newEnv(t)
	for name, recs := range map[string]autorun.Records{"store": e.s.Autoruns(), "memory": autoruntest.NewMem()} {
		t.Run(name, func(t *testing.T) {
			c := ctx(t)
			if _, _, err := recs.Get(c, "schedule.t1.a"); !errors.Is(err, runs.ErrNotFound) {
				t.Fatalf("Get of a missing key: %v", err)
			}
			rev, err := recs.Create(c, "schedule.t1.a", []byte("one"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := recs.Create(c, "schedule.t1.a", []byte("two")); !errors.Is(err, runs.ErrConflict) {
				t.Fatalf("Create of a taken key: %v", err)
			}
			if _, err := recs.Update(c, "schedule.t1.a", []byte("two"), rev+100); !errors.Is(err, runs.ErrConflict) {
				t.Fatalf("Update at a stale revision: %v", err)
			}
			if _, err := recs.Update(c, "schedule.t1.a", []byte("two"), 0); !errors.Is(err, runs.ErrConflict) {
				t.Fatalf("Update at revision 0 of a taken key: %v", err)
			}
			rev2, err := recs.Update(c, "schedule.t1.a", []byte("two"), rev)
			if err != nil || rev2 <= rev {
				t.Fatalf("Update = %d, %v", rev2, err)
			}
			if data, got, err := recs.Get(c, "schedule.t1.a"); err != nil || string(data) != "two" || got != rev2 {
				t.Fatalf("Get = %q, %d, %v", data, got, err)
			}
			for _, k := range []string{"schedule.t1.b", "schedule.t2.c", "state.schedule.a"} {
				if _, err := recs.Create(c, k, []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			keys, err := recs.Keys(c, "schedule.t1")
			slices.Sort(keys)
			if err != nil || !slices.Equal(keys, []string{"schedule.t1.a", "schedule.t1.b"}) {
				t.Fatalf("Keys(schedule.t1) = %v, %v", keys, err)
			}
			if keys, err := recs.Keys(c, "trigger"); err != nil || len(keys) != 0 {
				t.Fatalf("Keys of none = %v, %v", keys, err)
			}
			if err := recs.Delete(c, "schedule.t1.a"); err != nil {
				t.Fatal(err)
			}
			if err := recs.Delete(c, "schedule.t1.a"); err != nil {
				t.Fatalf("Delete of a deleted key: %v", err)
			}
			if _, err := recs.Create(c, "schedule.t1.a", []byte("again")); err != nil {
				t.Fatalf("Create after Delete: %v", err)
			}
		})
	}
}

// Replicas claiming one fire at once: one of them gets it, and a
// reclaim at the revision they read goes to one of them too.
func TestOneClaimOfManyAtOnce(t *testing.T) {
	e := newEnv(t)
	claims := e.s.AutorunClaims()
	c := ctx(t)
	var fresh, reclaimed atomic.Int32
	var wg sync.WaitGroup
	revs := make(chan uint64, 16)
	for i := range 16 {
		wg.Go(func() {
			ok, held, rev, err := claims.Claim(c, "fire.s1.1700000000", []byte{byte(i)})
			switch {
			case err != nil:
				t.Error(err)
			case ok:
				fresh.Add(1)
			case len(held) != 1:
				t.Errorf("held %q", held)
			default:
				revs <- rev
			}
		})
	}
	wg.Wait()
	close(revs)
	if fresh.Load() != 1 {
		t.Fatalf("%d replicas claimed one fire", fresh.Load())
	}
	for rev := range revs {
		wg.Go(func() {
			if err := claims.Reclaim(c, "fire.s1.1700000000", []byte("taker"), rev); err == nil {
				reclaimed.Add(1)
			} else if !errors.Is(err, runs.ErrConflict) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if reclaimed.Load() != 1 {
		t.Fatalf("%d replicas took the claim over", reclaimed.Load())
	}
}
