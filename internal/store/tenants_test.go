package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/tenants"
)

// A tenant without a record has none yet: that is an answer, at once,
// not an outage to wait out.
func TestTenantUsageOfUnknownTenantIsZero(t *testing.T) {
	e := newEnv(t)
	read := func(tenant string) {
		t.Helper()
		start := time.Now()
		c := ctx(t)
		u, rev, err := e.s.TenantUsage(c, tenant)
		took := time.Since(start)
		if err != nil || rev != 0 || !reflect.DeepEqual(u, tenants.Usage{}) {
			t.Errorf("TenantUsage of unknown tenant %q = %+v, rev %d, %v", tenant, u, rev, err)
		}
		if took > 5*time.Second {
			t.Errorf("TenantUsage of unknown tenant %q took %s: a missing key is retried as if the store were down", tenant, took.Round(time.Millisecond))
		}
	}
	read("acme")
	if err := e.s.SetTenantUsage(ctx(t), "globex", tenants.Usage{CostUSD: 1}, 0); err != nil {
		t.Fatal(err)
	}
	read("acme")
}

func TestSetTenantUsageComparesAndSets(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	first := tenants.Usage{Runs: map[string]runs.State{"r1": runs.Queued}, Day: "2030-03-04", CostUSD: 0.25}
	if err := e.s.SetTenantUsage(c, "acme", first, 0); err != nil {
		t.Fatalf("create with rev 0: %v", err)
	}
	got, rev, err := e.s.TenantUsage(c, "acme")
	if err != nil || rev == 0 || !reflect.DeepEqual(got, first) {
		t.Fatalf("after create: %+v, rev %d, %v; want %+v", got, rev, err, first)
	}
	// Another create loses: the record exists.
	if err := e.s.SetTenantUsage(c, "acme", tenants.Usage{}, 0); !errors.Is(err, tenants.ErrStale) {
		t.Fatalf("second create with rev 0: %v, want ErrStale", err)
	}
	second := tenants.Usage{Runs: map[string]runs.State{"r1": runs.Running, "r2": runs.Queued}, Day: "2030-03-04", CostUSD: 0.25}
	if err := e.s.SetTenantUsage(c, "acme", second, rev); err != nil {
		t.Fatalf("set at the current rev: %v", err)
	}
	// The revision read before that set is stale now.
	if err := e.s.SetTenantUsage(c, "acme", tenants.Usage{}, rev); !errors.Is(err, tenants.ErrStale) {
		t.Fatalf("set at a stale rev: %v, want ErrStale", err)
	}
	if err := e.s.SetTenantUsage(c, "acme", tenants.Usage{}, rev+100); !errors.Is(err, tenants.ErrStale) {
		t.Fatalf("set at a rev from the future: %v, want ErrStale", err)
	}
	got, rev2, err := e.s.TenantUsage(c, "acme")
	if err != nil || rev2 <= rev || !reflect.DeepEqual(got, second) {
		t.Fatalf("after the update: %+v, rev %d (was %d), %v; want %+v", got, rev2, rev, err, second)
	}
	// Tenants are apart, whatever their names: a name is hashed into
	// the key.
	for _, other := range []string{"globex", "", "a.b", "with space", "acme*"} {
		u := tenants.Usage{Runs: map[string]runs.State{"x-" + other: runs.Queued}}
		if err := e.s.SetTenantUsage(c, other, u, 0); err != nil {
			t.Errorf("create tenant %q: %v", other, err)
			continue
		}
		if got, _, err := e.s.TenantUsage(c, other); err != nil || !reflect.DeepEqual(got, u) {
			t.Errorf("tenant %q: %+v, %v", other, got, err)
		}
	}
	if got, _, _ := e.s.TenantUsage(c, "acme"); !reflect.DeepEqual(got, second) {
		t.Errorf("acme changed by other tenants' sets: %+v", got)
	}
}

// Replicas counting one tenant at once each retry a lost compare-and-set:
// every change lands, none twice.
func TestTenantUsageConcurrentIncrements(t *testing.T) {
	e := newEnv(t)
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const workers, each = 8, 10
	// The record exists: the race is of updates (its creation is
	// TestSetTenantUsageComparesAndSets's).
	if err := e.s.SetTenantUsage(c, "acme", tenants.Usage{}, 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				for {
					u, rev, err := e.s.TenantUsage(c, "acme")
					if err != nil {
						errs <- err
						return
					}
					if u.Runs == nil {
						u.Runs = map[string]runs.State{}
					}
					u.Runs[id] = runs.Queued
					u.CostUSD++
					err = e.s.SetTenantUsage(c, "acme", u, rev)
					if err == nil {
						break
					}
					if !errors.Is(err, tenants.ErrStale) {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	u, _, err := e.s.TenantUsage(c, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Runs) != workers*each || u.CostUSD != workers*each {
		t.Fatalf("after %d increments: %d runs counted, count %v", workers*each, len(u.Runs), u.CostUSD)
	}
}

// A listing is of one tenant's runs: the empty tenant's are those of a
// gateway without keys, not everyone's.
func TestListRunsByTenant(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	want := map[string][]string{}
	for i, tenant := range []string{"acme", "globex", "", "acme", "acme", "globex", "", "acme"} {
		r := runs.Run{ID: newID(t), Agent: "claude", Status: runs.Succeeded, Tenant: tenant, Spec: runs.Spec{Prompt: "p", Tenant: tenant}}
		if i%3 == 0 {
			r.Status = runs.Failed
		}
		if err := e.s.CreateRun(c, r); err != nil {
			t.Fatal(err)
		}
		want[tenant] = append(want[tenant], r.ID)
	}
	for tenant, ids := range want {
		slices.Reverse(ids) // newest first
		// Pages of one, so that each page is cut among other tenants' runs.
		got, _ := listAll(t, e.s, runs.Filter{Tenant: tenant, Limit: 1})
		if !slices.Equal(got, ids) {
			t.Errorf("tenant %q lists %v, want %v", tenant, got, ids)
		}
		got, _ = listAll(t, e.s, runs.Filter{Tenant: tenant})
		if !slices.Equal(got, ids) {
			t.Errorf("tenant %q in one page lists %v, want %v", tenant, got, ids)
		}
	}
	p, err := e.s.ListRuns(c, runs.Filter{Tenant: "acme", Status: runs.Failed})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Runs {
		if r.Tenant != "acme" || r.Status != runs.Failed {
			t.Errorf("acme's failed runs hold %s of %q, %s", r.ID, r.Tenant, r.Status)
		}
	}
	if len(p.Runs) != 2 {
		t.Errorf("acme has %d failed runs, want 2", len(p.Runs))
	}
	if p, err := e.s.ListRuns(c, runs.Filter{Tenant: "nobody"}); err != nil || len(p.Runs) != 0 || p.NextCursor != "" {
		t.Errorf("a tenant without runs: %+v, %v", p, err)
	}
}
