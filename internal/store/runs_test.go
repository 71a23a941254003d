package store

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

func sampleRun(id string) runs.Run {
	started := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cost := 0.25
	return runs.Run{
		ID:               id,
		Agent:            "claude",
		Model:            "sonnet",
		Status:           runs.Running,
		CreatedAt:        started.Add(-time.Second),
		StartedAt:        &started,
		Usage:            runs.Usage{InputTokens: 10, OutputTokens: 5},
		CostUSD:          &cost,
		StructuredOutput: json.RawMessage(`{"ok":true}`),
		Metadata:         map[string]string{"k": "v"},
		Spec: runs.Spec{
			Agent:      "claude",
			Prompt:     "fix the bug",
			MaxTurns:   3,
			Metadata:   map[string]string{"k": "v"},
			Permission: runs.ReadOnly,
		},
		Owner: "replica-1",
	}
}

func TestRunLifecycle(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	id := newID(t)
	want := sampleRun(id)
	if err := e.s.CreateRun(c, want); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.GetRun(c, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}

	finished := want.StartedAt.Add(time.Minute)
	want.Status = runs.Failed
	want.FinishedAt = &finished
	want.Error = runs.NewRunError(runs.RateLimited, "429", "")
	want.Exit = &runs.Exit{Code: 1}
	want.Owner = "replica-2"
	if err := e.s.UpdateRun(c, want); err != nil {
		t.Fatal(err)
	}
	got, err = e.s.GetRun(c, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after update got  %+v\nwant %+v", got, want)
	}

	if err := e.s.CreateRun(c, sampleRun(id)); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate create: %v, want ErrExists", err)
	}
	// The duplicate changed nothing.
	if got, _ := e.s.GetRun(c, id); got.Status != runs.Failed {
		t.Errorf("status after duplicate create = %s", got.Status)
	}
}

func TestRunNotFound(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	id := newID(t)
	if _, err := e.s.GetRun(c, id); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("get: %v, want ErrNotFound", err)
	}
	if err := e.s.UpdateRun(c, sampleRun(id)); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("update: %v, want ErrNotFound", err)
	}
	if _, err := e.s.GetRun(c, id); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("update created the run: %v", err)
	}
}

// listAll pages through f and returns the ids and the page sizes.
func listAll(t *testing.T, s *Store, f runs.Filter) (ids []string, sizes []int) {
	t.Helper()
	for range 100 {
		p, err := s.ListRuns(ctx(t), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Runs {
			ids = append(ids, r.ID)
		}
		sizes = append(sizes, len(p.Runs))
		if p.NextCursor == "" {
			return ids, sizes
		}
		if p.NextCursor != p.Runs[len(p.Runs)-1].ID {
			t.Fatalf("cursor %q is not the page's last id", p.NextCursor)
		}
		f.Cursor = p.NextCursor
	}
	t.Fatal("listing does not end")
	return nil, nil
}

func TestListRuns(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)

	p, err := e.s.ListRuns(c, runs.Filter{})
	if err != nil || len(p.Runs) != 0 || p.NextCursor != "" {
		t.Fatalf("empty store: %+v, %v", p, err)
	}

	// Seven runs, oldest first: agents alternate, every third failed.
	var all []runs.Run
	for i := range 7 {
		r := runs.Run{ID: newID(t), Agent: "claude", Status: runs.Succeeded, Spec: runs.Spec{Prompt: "p"}}
		if i%2 == 1 {
			r.Agent = "codex"
		}
		if i%3 == 0 {
			r.Status = runs.Failed
		}
		if err := e.s.CreateRun(c, r); err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	newest := func(keep func(runs.Run) bool) []string {
		var ids []string
		for i := len(all) - 1; i >= 0; i-- {
			if keep(all[i]) {
				ids = append(ids, all[i].ID)
			}
		}
		return ids
	}

	for _, tc := range []struct {
		name  string
		f     runs.Filter
		keep  func(runs.Run) bool
		sizes []int
	}{
		{"all default limit", runs.Filter{}, func(runs.Run) bool { return true }, []int{7}},
		{"all by 3", runs.Filter{Limit: 3}, func(runs.Run) bool { return true }, []int{3, 3, 1}},
		{"exact pages", runs.Filter{Limit: 7}, func(runs.Run) bool { return true }, []int{7}},
		{"status", runs.Filter{Status: runs.Failed, Limit: 2}, func(r runs.Run) bool { return r.Status == runs.Failed }, []int{2, 1}},
		{"agent", runs.Filter{Agent: "codex", Limit: 2}, func(r runs.Run) bool { return r.Agent == "codex" }, []int{2, 1}},
		{"both", runs.Filter{Agent: "codex", Status: runs.Failed}, func(r runs.Run) bool { return r.Agent == "codex" && r.Status == runs.Failed }, []int{1}},
		{"none", runs.Filter{Agent: "gemini"}, func(runs.Run) bool { return false }, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, sizes := listAll(t, e.s, tc.f)
			if want := newest(tc.keep); !reflect.DeepEqual(ids, want) {
				t.Errorf("ids = %v\nwant  %v", ids, want)
			}
			if !reflect.DeepEqual(sizes, tc.sizes) {
				t.Errorf("page sizes = %v, want %v", sizes, tc.sizes)
			}
		})
	}

	// A listing carries Spec and Owner like GetRun.
	p, err = e.s.ListRuns(c, runs.Filter{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Runs[0].Spec.Prompt != "p" {
		t.Errorf("listed run lost its spec: %+v", p.Runs[0])
	}

	// A cursor past every id gives an empty last page.
	p, err = e.s.ListRuns(c, runs.Filter{Cursor: all[0].ID})
	if err != nil || len(p.Runs) != 0 || p.NextCursor != "" {
		t.Errorf("after the oldest: %+v, %v", p, err)
	}
}

// A listing of all tenants finds every tenant's runs, the empty tenant's
// included, whatever Tenant says: the supervisor's walks (recovery, the
// sweep of dead replicas) must find every run. TestListRunsByTenant holds
// the isolation of a one-tenant listing.
func TestListRunsOfAllTenants(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	var every []string
	// Tenants interleaved, so that pages cross them; newest first.
	for i := range 6 {
		r := runs.Run{ID: newID(t), Agent: "claude", Status: runs.Running, Tenant: []string{"", "acme", "globex"}[i%3]}
		if err := e.s.CreateRun(c, r); err != nil {
			t.Fatal(err)
		}
		every = append([]string{r.ID}, every...)
	}
	for _, tenant := range []string{"", "acme"} {
		ids, sizes := listAll(t, e.s, runs.Filter{AllTenants: true, Tenant: tenant, Status: runs.Running, Limit: 4})
		if !reflect.DeepEqual(ids, every) || !reflect.DeepEqual(sizes, []int{4, 2}) {
			t.Errorf("all tenants (Tenant %q) lists %v in pages %v, want %v in pages [4 2]", tenant, ids, sizes, every)
		}
	}
}

func TestListRunsRejectsBadFilters(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		f     runs.Filter
		field string
	}{
		{runs.Filter{Limit: 501}, "limit"},
		{runs.Filter{Limit: -1}, "limit"},
		{runs.Filter{Status: "done"}, "status"},
		{runs.Filter{Cursor: "a.b"}, "cursor"},
		{runs.Filter{Cursor: "x y"}, "cursor"},
	} {
		_, err := e.s.ListRuns(ctx(t), tc.f)
		var fe *runs.FieldError
		if !errors.Is(err, runs.ErrInvalid) || !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("ListRuns(%+v) = %v, want invalid %s", tc.f, err, tc.field)
		}
	}
	if _, err := e.s.ListRuns(ctx(t), runs.Filter{Limit: 500}); err != nil {
		t.Errorf("limit 500: %v", err)
	}
}

// The owner's updates of a run it wrote last need no read of the record
// first; an update after another writer's still lands (it reads, then
// writes on the record it read), and the record is always the last
// update's.
func TestUpdateRunWithoutReading(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	id := newID(t)
	r := sampleRun(id)
	r.Status = runs.Queued
	if err := e.s.CreateRun(c, r); err != nil {
		t.Fatal(err)
	}
	// The gets of the runs bucket's leader, as the store's reads ask them.
	gets, err := e.nc.SubscribeSync("$JS.API.STREAM.MSG.GET.KV_" + runsBucket)
	if err != nil {
		t.Fatal(err)
	}
	defer gets.Unsubscribe()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	countGets := func() int {
		t.Helper()
		if err := e.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		n, _, err := gets.Pending()
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := gets.NextMsg(time.Second); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	want := func(status runs.State) {
		t.Helper()
		got, err := e.s.GetRun(c, id)
		if err != nil || got.Status != status {
			t.Fatalf("record %s (%v), want %s", got.Status, err, status)
		}
	}

	r.Status = runs.Running
	if err := e.s.UpdateRun(c, r); err != nil {
		t.Fatal(err)
	}
	if n := countGets(); n != 0 {
		t.Errorf("an update after this store's create read the record %d times", n)
	}
	want(runs.Running)
	countGets()

	// Another store writes the record: this one's next update reads it
	// and still lands, as an owner's update did before.
	other, err := Open(c, e.connect(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r2 := r
	r2.Owner = "another"
	if err := other.UpdateRun(c, r2); err != nil {
		t.Fatal(err)
	}
	countGets()
	r.Status = runs.Succeeded
	if err := e.s.UpdateRun(c, r); err != nil {
		t.Fatalf("an update after another writer's: %v", err)
	}
	if n := countGets(); n == 0 {
		t.Error("an update after another writer's did not read the record")
	}
	want(runs.Succeeded)
	if _, ok := e.s.wroteRev(id); ok {
		t.Error("the revision of an ended run is kept")
	}
}
