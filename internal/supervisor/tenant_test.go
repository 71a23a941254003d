package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/tenants"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// holdAdapter is the fake agent with one more mode: a prompt
// "hold:<gate>" plays the gated fake, which says "first" and then waits
// until the test opens the gate (a file of that name), so that a test
// decides how long a run runs. It remembers the directory each run was
// given.
type holdAdapter struct {
	fakeAdapter
	gates string

	mu    sync.Mutex
	dirs  map[string]string // by run id, as the last Command saw it
	names []string          // gates asked for
}

func (a *holdAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	a.mu.Lock()
	a.dirs[inv.RunID] = inv.Dir
	a.mu.Unlock()
	gate, ok := strings.CutPrefix(inv.Spec.Prompt, "hold:")
	if !ok {
		return a.fakeAdapter.Command(inv)
	}
	a.mu.Lock()
	a.names = append(a.names, gate)
	a.mu.Unlock()
	return runs.Command{Env: []string{fakeAgentEnv + "=gated", fakeGateEnv + "=" + filepath.Join(a.gates, gate)},
		InterruptSignal: int(syscall.SIGINT)}, nil
}

func (a *holdAdapter) dir(id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dirs[id]
}

// open lets the runs held at gate go on.
func (a *holdAdapter) open(t *testing.T, gate string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(a.gates, gate), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tenantHarness is a harness with the hold agent (as "fake") and the
// session agent ("sess"), whose log lines at info and above are kept for
// the audit trail's assertions.
type tenantHarness struct {
	*harness
	agent *holdAdapter
	logs  *observer.ObservedLogs
}

// newTenantHarness starts a supervisor over a new memStore, or over what
// wrap makes of it.
func newTenantHarness(t *testing.T, cfg Config, wrap ...func(*memStore) runs.Store) *tenantHarness {
	t.Helper()
	return newQuotaHarness(t, cfg, tenants.Quotas{}, wrap...)
}

// newQuotaHarness is newTenantHarness whose supervisor counts tenants'
// runs against q, in the memStore, on cfg's clock.
func newQuotaHarness(t *testing.T, cfg Config, q tenants.Quotas, wrap ...func(*memStore) runs.Store) *tenantHarness {
	t.Helper()
	ms := newMemStore()
	var st runs.Store = ms
	for _, w := range wrap {
		st = w(ms)
	}
	root := t.TempDir()
	cfg.WorkspaceRoot, cfg.Path, cfg.Reaper = root, os.Getenv("PATH"), os.Args[0]
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 2 * time.Second
	}
	if cfg.StoreRetry == 0 {
		cfg.StoreRetry = 500 * time.Millisecond
	}
	ad := &holdAdapter{gates: t.TempDir(), dirs: map[string]string{}}
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()))
	cfg.Quotas = tenants.NewLedger(q, ms, cfg.Now, log)
	agents := []*Agent{
		{Adapter: ad, Bin: os.Args[0], Home: t.TempDir()},
		{Adapter: sessAdapter{}, Bin: os.Args[0], Home: t.TempDir()},
	}
	sup := New(cfg, st, agents, nopObserver{}, log)
	startSupervisor(t, sup)
	// Registered after the shutdown, so run before it: held runs end on
	// their own rather than by being stopped.
	t.Cleanup(func() {
		ad.mu.Lock()
		names := slices.Clone(ad.names)
		ad.mu.Unlock()
		for _, n := range names {
			_ = os.WriteFile(filepath.Join(ad.gates, n), nil, 0o644)
		}
	})
	return &tenantHarness{harness: &harness{sup: sup, store: ms, root: root}, agent: ad, logs: logs}
}

// as is a request context of key of tenant.
func as(tenant, key string) context.Context {
	return runs.WithActor(context.Background(), runs.Actor{KeyID: key, Tenant: tenant})
}

func (h *tenantHarness) submitAs(t *testing.T, ctx context.Context, spec runs.Spec) runs.Run {
	t.Helper()
	if spec.Agent == "" {
		spec.Agent = "fake"
	}
	r, err := h.sup.Submit(ctx, spec)
	if err != nil {
		t.Fatalf("submit %+v as %+v: %v", spec, runs.ActorFrom(ctx), err)
	}
	return r
}

// running waits until a held run said "first": its process runs.
func (h *tenantHarness) running(t *testing.T, id string) {
	t.Helper()
	h.waitFor(t, id, runs.EventMessageCompleted, `"first"`)
}

func (h *tenantHarness) usage(t *testing.T, tenant string) tenants.Usage {
	t.Helper()
	u, _, err := h.store.TenantUsage(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// waitCountedOut waits until the tenant's usage no longer counts the run:
// a run is counted out just after its record says it finished.
func (h *tenantHarness) waitCountedOut(t *testing.T, tenant, id string) {
	t.Helper()
	waitUntil(t, "run "+id+" counted out of tenant "+tenant, func() bool {
		_, counted := h.usage(t, tenant).Runs[id]
		return !counted
	})
}

// audits are the audit lines of action on the run.
func (h *tenantHarness) audits(action, runID string) []map[string]any {
	var out []map[string]any
	for _, e := range h.logs.FilterMessage("audit").All() {
		f := e.ContextMap()
		if f["action"] == action && f["run_id"] == runID {
			out = append(out, f)
		}
	}
	return out
}

// assertAudit checks that the run has exactly one audit line of action,
// by by, and returns its fields.
func (h *tenantHarness) assertAudit(t *testing.T, action, runID string, by runs.Actor) map[string]any {
	t.Helper()
	got := h.audits(action, runID)
	if len(got) != 1 {
		t.Errorf("%d audit lines of %s on run %s, want 1: %v", len(got), action, runID, got)
		return nil
	}
	if got[0]["key_id"] != by.KeyID || got[0]["tenant"] != by.Tenant {
		t.Errorf("audit line of %s on run %s = %v, want key %q of tenant %q", action, runID, got[0], by.KeyID, by.Tenant)
	}
	return got[0]
}

func fieldOf(err error) string {
	var fe *runs.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

func quotaLimit(t *testing.T, err error) *tenants.QuotaError {
	t.Helper()
	var qe *tenants.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, tenants.ErrQuota) {
		t.Fatalf("err = %v (%T), want a *QuotaError wrapping ErrQuota", err, err)
	}
	return qe
}

func sameActor(p *runs.Actor, a runs.Actor) bool { return p != nil && *p == a }

func TestTenantRunRecordsTenantAndCreator(t *testing.T) {
	h := newTenantHarness(t, Config{})
	alice := runs.Actor{KeyID: "key-a1", Tenant: "acme"}
	r := h.submitAs(t, runs.WithActor(context.Background(), alice), runs.Spec{Prompt: "mode:hello"})
	if r.Tenant != "acme" || !sameActor(r.CreatedBy, alice) || r.CancelledBy != nil {
		t.Fatalf("submitted run: tenant %q, created by %+v, cancelled by %+v", r.Tenant, r.CreatedBy, r.CancelledBy)
	}
	done := h.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Succeeded || done.Tenant != "acme" || !sameActor(done.CreatedBy, alice) || done.Spec.Tenant != "acme" {
		t.Fatalf("finished run: status %s, tenant %q, created by %+v, spec tenant %q", done.Status, done.Tenant, done.CreatedBy, done.Spec.Tenant)
	}
	// Its fresh directory is the tenant's, named after the run.
	want := filepath.Join(h.root, "tenants", "acme", r.ID)
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
		t.Fatalf("fresh directory %s: %v", want, err)
	}
	if got := h.agent.dir(r.ID); got != realPath(want) {
		t.Errorf("the agent ran in %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(h.root, r.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a directory of the run under the workspace root itself: %v", err)
	}
	if done.Spec.Cwd != r.ID {
		t.Errorf("recorded cwd %q, want the run's id", done.Spec.Cwd)
	}

	// The anonymous caller of a gateway without keys: no tenant, no
	// creator, the workspace root itself.
	anon := h.submitAs(t, context.Background(), runs.Spec{Prompt: "mode:hello"})
	done = h.wait(t, anon.ID, 20*time.Second)
	if done.Tenant != "" || done.CreatedBy != nil {
		t.Fatalf("anonymous run: tenant %q, created by %+v", done.Tenant, done.CreatedBy)
	}
	if fi, err := os.Stat(filepath.Join(h.root, anon.ID)); err != nil || !fi.IsDir() {
		t.Fatalf("anonymous run's directory: %v", err)
	}
	h.assertAudit(t, "run.create", r.ID, alice)
	h.assertAudit(t, "run.create", anon.ID, runs.Actor{})
}

func TestTenantListShowsOnlyItsRuns(t *testing.T) {
	h := newTenantHarness(t, Config{})
	byTenant := map[string][]string{}
	for _, tenant := range []string{"acme", "globex", "acme", ""} {
		r := h.submitAs(t, as(tenant, "k-"+tenant), runs.Spec{Prompt: "mode:hello"})
		byTenant[tenant] = append(byTenant[tenant], r.ID)
	}
	for _, ids := range byTenant {
		for _, id := range ids {
			h.wait(t, id, 20*time.Second)
		}
	}
	for tenant, want := range byTenant {
		page, err := h.sup.List(context.Background(), runs.Filter{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range page.Runs {
			if r.Tenant != tenant {
				t.Errorf("listing of tenant %q holds run %s of tenant %q", tenant, r.ID, r.Tenant)
			}
			got = append(got, r.ID)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("tenant %q lists %v, want %v", tenant, got, want)
		}
	}
	page, err := h.sup.List(context.Background(), runs.Filter{Tenant: "acme", Status: runs.Failed})
	if err != nil || len(page.Runs) != 0 {
		t.Errorf("acme's failed runs: %v, %v", page.Runs, err)
	}
	if page, _ := h.sup.List(context.Background(), runs.Filter{Tenant: "nobody"}); len(page.Runs) != 0 {
		t.Errorf("a tenant without runs lists %d", len(page.Runs))
	}
}

func TestTenantCwdIsRelativeToItsRoot(t *testing.T) {
	h := newTenantHarness(t, Config{})
	acme := filepath.Join(h.root, "tenants", "acme")
	globex := filepath.Join(h.root, "tenants", "globex")
	for _, d := range []string{filepath.Join(acme, "proj"), filepath.Join(globex, "proj"), filepath.Join(globex, "secret")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A link inside acme's root to globex's directory.
	if err := os.Symlink(filepath.Join(globex, "secret"), filepath.Join(acme, "link")); err != nil {
		t.Fatal(err)
	}

	// The same name is each tenant's own directory.
	a := h.submitAs(t, as("acme", "ka"), runs.Spec{Prompt: "mode:hello", Cwd: "proj"})
	g := h.submitAs(t, as("globex", "kg"), runs.Spec{Prompt: "mode:hello", Cwd: "proj"})
	for id, want := range map[string]string{a.ID: filepath.Join(acme, "proj"), g.ID: filepath.Join(globex, "proj")} {
		done := h.wait(t, id, 20*time.Second)
		if done.Status != runs.Succeeded || done.Spec.Cwd != "proj" {
			t.Errorf("run %s: status %s, cwd %q", id, done.Status, done.Spec.Cwd)
		}
		if got := h.agent.dir(id); got != realPath(want) {
			t.Errorf("run %s ran in %s, want %s", id, got, want)
		}
	}

	// Nothing names another tenant's directory.
	for _, cwd := range []string{"../globex/proj", "../globex", "..", "../../tenants/globex/secret", "link", "secret", filepath.Join(globex, "proj")} {
		_, err := h.sup.Submit(as("acme", "ka"), runs.Spec{Agent: "fake", Prompt: "mode:hello", Cwd: cwd})
		if fieldOf(err) != runs.FieldCwd || !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("acme's cwd %q: %v, want an invalid cwd", cwd, err)
		}
	}
	// The workspace root's own directories are not a tenant's either.
	if err := os.Mkdir(filepath.Join(h.root, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sup.Submit(as("acme", "ka"), runs.Spec{Agent: "fake", Prompt: "mode:hello", Cwd: "shared"}); fieldOf(err) != runs.FieldCwd {
		t.Errorf("acme's cwd naming the workspace root's directory: %v", err)
	}
}

func TestTenantCannotResumeAnothersSession(t *testing.T) {
	h := newTenantHarness(t, Config{})
	// The fake reports session "sess-1" when it has a session cost.
	first := h.submitAs(t, as("acme", "ka"), runs.Spec{Prompt: "mode:hello", Metadata: map[string]string{"session_cost": "0.01"}})
	first = h.wait(t, first.ID, 20*time.Second)
	if first.SessionID != "sess-1" {
		t.Fatalf("session %q", first.SessionID)
	}
	// Another tenant names it by its session or by the run that began it;
	// the anonymous caller by its session.
	for _, c := range []struct {
		ctx     context.Context
		session string
	}{{as("globex", "kg"), "sess-1"}, {as("globex", "kg"), first.ID}, {context.Background(), "sess-1"}} {
		_, err := h.sup.Submit(c.ctx, runs.Spec{Agent: "fake", Prompt: "mode:hello", ResumeSessionID: c.session})
		if fieldOf(err) != runs.FieldResumeSessionID || !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("tenant %q resuming acme's %q: %v, want an invalid resume_session_id", runs.ActorFrom(c.ctx).Tenant, c.session, err)
		}
	}
	// Its own tenant resumes it, in the session's directory.
	again := h.submitAs(t, as("acme", "ka2"), runs.Spec{Prompt: "mode:hello", ResumeSessionID: "sess-1"})
	if done := h.wait(t, again.ID, 20*time.Second); done.Status != runs.Succeeded || h.agent.dir(again.ID) != h.agent.dir(first.ID) {
		t.Errorf("resumed run: status %s, ran in %s, want %s", done.Status, h.agent.dir(again.ID), h.agent.dir(first.ID))
	}
}

func TestTenantIdempotencyKeysAreTheirOwn(t *testing.T) {
	h := newTenantHarness(t, Config{})
	spec := runs.Spec{Prompt: "mode:hello", IdempotencyKey: "order-7"}
	a := h.submitAs(t, as("acme", "ka"), spec)
	g := h.submitAs(t, as("globex", "kg"), spec)
	n := h.submitAs(t, context.Background(), spec)
	if a.ID == g.ID || a.ID == n.ID || g.ID == n.ID {
		t.Fatalf("one key of three tenants made runs %s, %s, %s", a.ID, g.ID, n.ID)
	}
	if g.Tenant != "globex" || a.Tenant != "acme" || n.Tenant != "" {
		t.Fatalf("tenants %q %q %q", a.Tenant, g.Tenant, n.Tenant)
	}
	// Within a tenant the key still makes one run.
	if again := h.submitAs(t, as("acme", "ka-other-key"), spec); again.ID != a.ID {
		t.Errorf("acme's retry made run %s, want %s", again.ID, a.ID)
	}
	if again := h.submitAs(t, as("globex", "kg"), spec); again.ID != g.ID {
		t.Errorf("globex's retry made run %s, want %s", again.ID, g.ID)
	}
	for _, id := range []string{a.ID, g.ID, n.ID} {
		h.wait(t, id, 20*time.Second)
	}
}

func TestCancelRecordsWhoCancelledARunningRun(t *testing.T) {
	h := newTenantHarness(t, Config{})
	creator, canceller := runs.Actor{KeyID: "k-create", Tenant: "acme"}, runs.Actor{KeyID: "k-cancel", Tenant: "acme"}
	r := h.submitAs(t, runs.WithActor(context.Background(), creator), runs.Spec{Prompt: "hold:g1"})
	h.running(t, r.ID)
	if _, err := h.sup.Cancel(runs.WithActor(context.Background(), canceller), r.ID); err != nil {
		t.Fatal(err)
	}
	done := h.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Cancelled || !sameActor(done.CancelledBy, canceller) || !sameActor(done.CreatedBy, creator) {
		t.Fatalf("cancelled run: status %s, cancelled by %+v, created by %+v", done.Status, done.CancelledBy, done.CreatedBy)
	}
	h.assertAudit(t, "run.cancel", r.ID, canceller)
	h.assertAudit(t, "run.create", r.ID, creator)
	// A second cancel changes nothing of the record.
	if _, err := h.sup.Cancel(as("acme", "k-late"), r.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.store.GetRun(context.Background(), r.ID); !sameActor(got.CancelledBy, canceller) {
		t.Errorf("after a second cancel, cancelled by %+v", got.CancelledBy)
	}
}

func TestCancelRecordsWhoCancelledAQueuedRun(t *testing.T) {
	h := newTenantHarness(t, Config{MaxConcurrent: 1})
	busy := h.submitAs(t, as("acme", "k1"), runs.Spec{Prompt: "hold:g1"})
	h.running(t, busy.ID)
	queued := h.submitAs(t, as("acme", "k1"), runs.Spec{Prompt: "mode:hello"})
	canceller := runs.Actor{KeyID: "k2", Tenant: "acme"}
	got, err := h.sup.Cancel(runs.WithActor(context.Background(), canceller), queued.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runs.Cancelled || !sameActor(got.CancelledBy, canceller) {
		t.Fatalf("cancel of a queued run returned status %s, cancelled by %+v", got.Status, got.CancelledBy)
	}
	stored := h.wait(t, queued.ID, 20*time.Second)
	if stored.Status != runs.Cancelled || !sameActor(stored.CancelledBy, canceller) {
		t.Fatalf("stored: status %s, cancelled by %+v", stored.Status, stored.CancelledBy)
	}
	if slices.Contains(h.types(queued.ID), runs.EventRunStarted) {
		t.Errorf("the cancelled queued run started: %v", h.types(queued.ID))
	}
	h.assertAudit(t, "run.cancel", queued.ID, canceller)
	h.agent.open(t, "g1")
	if done := h.wait(t, busy.ID, 20*time.Second); done.Status != runs.Succeeded || done.CancelledBy != nil {
		t.Errorf("the other run: status %s, cancelled by %+v", done.Status, done.CancelledBy)
	}
}

// decidedBy is the decided_by of an approval.resolved event.
func decidedBy(t *testing.T, ev runs.Event) *runs.Actor {
	t.Helper()
	b, err := json.Marshal(ev.Data)
	if err != nil {
		t.Fatal(err)
	}
	var d runs.ApprovalResolvedData
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d.DecidedBy
}

// Every step of an interactive run by a key is in the audit trail, and an
// answer names its key in the approval and in approval.resolved.
func TestAuditTrailOfAnInteractiveRun(t *testing.T) {
	h := newTenantHarness(t, Config{})
	creator := runs.Actor{KeyID: "k-create", Tenant: "acme"}
	decider := runs.Actor{KeyID: "k-decide", Tenant: "acme"}
	sender := runs.Actor{KeyID: "k-send", Tenant: "acme"}
	closer := runs.Actor{KeyID: "k-close", Tenant: "acme"}
	deleter := runs.Actor{KeyID: "k-delete", Tenant: "acme"}
	r := h.submitAs(t, runs.WithActor(context.Background(), creator), runs.Spec{Agent: "sess", Prompt: "ask first", Interactive: true, Approvals: runs.ApprovalsAsk})
	rec := h.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	a := rec.PendingApprovals[0]
	res, err := h.sup.Input(runs.WithActor(context.Background(), decider), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: a.ID, Decision: runs.Allow})
	if err != nil {
		t.Fatal(err)
	}
	if res.Approval == nil || !sameActor(res.Approval.DecidedBy, decider) || res.Approval.Reason != runs.ResolvedByClient {
		t.Fatalf("answer = %+v", res.Approval)
	}
	h.waitRecord(t, r.ID, "idle after turn 1", idle)
	evs := h.eventsOfType(t, r.ID, runs.EventApprovalResolved)
	if len(evs) != 1 || !sameActor(decidedBy(t, evs[0]), decider) {
		t.Fatalf("approval.resolved = %+v", evs)
	}
	if _, err := h.sup.Input(runs.WithActor(context.Background(), sender), r.ID, runs.Input{Kind: runs.InputMessage, Text: "second"}); err != nil {
		t.Fatal(err)
	}
	h.waitRecord(t, r.ID, "idle after turn 2", func(r runs.Run) bool { return idle(r) && len(r.Turns) == 2 })
	if _, err := h.sup.Input(runs.WithActor(context.Background(), closer), r.ID, runs.Input{Kind: runs.InputClose}); err != nil {
		t.Fatal(err)
	}
	if done := h.wait(t, r.ID, 20*time.Second); done.Status != runs.Succeeded || !sameActor(done.CreatedBy, creator) || done.CancelledBy != nil {
		t.Fatalf("finished run: status %s, created by %+v, cancelled by %+v", done.Status, done.CreatedBy, done.CancelledBy)
	}
	if err := h.sup.Delete(runs.WithActor(context.Background(), deleter), r.ID); err != nil {
		t.Fatal(err)
	}

	h.assertAudit(t, "run.create", r.ID, creator)
	if f := h.assertAudit(t, "run.decision", r.ID, decider); f != nil && (f["approval_id"] != a.ID || f["decision"] != string(runs.Allow)) {
		t.Errorf("audit line of the decision = %v", f)
	}
	h.assertAudit(t, "run.message", r.ID, sender)
	h.assertAudit(t, "run.close", r.ID, closer)
	h.assertAudit(t, "run.delete", r.ID, deleter)
	for _, e := range h.logs.FilterMessage("audit").All() {
		for _, k := range []string{"action", "key_id", "tenant", "run_id"} {
			if _, ok := e.ContextMap()[k]; !ok {
				t.Errorf("audit line without %s: %v", k, e.ContextMap())
			}
		}
	}
}

// An answer through another replica keeps who answered.
func TestDecidedByCrossesReplicas(t *testing.T) {
	owner := newTenantHarness(t, Config{Replica: "owner"})
	decider := runs.Actor{KeyID: "k-decide", Tenant: "acme"}
	r := owner.submitAs(t, as("acme", "k-create"), runs.Spec{Agent: "sess", Prompt: "ask", Interactive: true, Approvals: runs.ApprovalsAsk})
	rec := owner.waitRecord(t, r.ID, "awaiting an approval", awaiting)
	if rec.Owner != "owner" {
		t.Fatalf("owner %q", rec.Owner)
	}
	// Started once the run is the owner's, so that it cannot take it.
	other := newSessionHarness(t, owner.store, "other")
	res, err := other.sup.Input(runs.WithActor(context.Background(), decider), r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: rec.PendingApprovals[0].ID, Decision: runs.Deny})
	if err != nil {
		t.Fatal(err)
	}
	if res.Approval == nil || !sameActor(res.Approval.DecidedBy, decider) {
		t.Fatalf("answer through the other replica = %+v", res.Approval)
	}
	owner.waitRecord(t, r.ID, "idle", idle)
	evs := owner.eventsOfType(t, r.ID, runs.EventApprovalResolved)
	if len(evs) != 1 || !sameActor(decidedBy(t, evs[0]), decider) {
		t.Fatalf("approval.resolved = %+v", evs)
	}
	if _, err := owner.sup.Input(as("acme", "k"), r.ID, runs.Input{Kind: runs.InputClose}); err != nil {
		t.Fatal(err)
	}
	owner.wait(t, r.ID, 20*time.Second)
}

func TestDeleteRunningRunIsAConflict(t *testing.T) {
	h := newTenantHarness(t, Config{})
	r := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "hold:g1"})
	h.running(t, r.ID)
	err := h.sup.Delete(as("acme", "k"), r.ID)
	if !errors.Is(err, runs.ErrConflict) || conflictCode(err) != runs.ConflictRunNotFinished {
		t.Fatalf("delete of a running run: %v, want conflict %s", err, runs.ConflictRunNotFinished)
	}
	if len(h.audits("run.delete", r.ID)) != 0 {
		t.Errorf("a refused delete is in the audit trail as done")
	}
	if _, err := h.store.GetRun(context.Background(), r.ID); err != nil {
		t.Fatalf("the running run's record after a refused delete: %v", err)
	}
	h.agent.open(t, "g1")
	if done := h.wait(t, r.ID, 20*time.Second); done.Status != runs.Succeeded {
		t.Fatalf("status %s", done.Status)
	}
}

func TestDeleteFinishedRun(t *testing.T) {
	h := newTenantHarness(t, Config{})
	named := filepath.Join(h.root, "tenants", "acme", "proj")
	if err := os.MkdirAll(named, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(named, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	deleter := runs.Actor{KeyID: "k-del", Tenant: "acme"}
	fresh := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "mode:hello"})
	inNamed := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "mode:hello", Cwd: "proj"})
	anon := h.submitAs(t, context.Background(), runs.Spec{Prompt: "mode:hello"})
	for _, id := range []string{fresh.ID, inNamed.ID, anon.ID} {
		h.wait(t, id, 20*time.Second)
		if len(h.store.eventsOf(id)) == 0 {
			t.Fatalf("run %s has no events", id)
		}
		if err := h.sup.Delete(runs.WithActor(context.Background(), deleter), id); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
		if _, err := h.store.GetRun(context.Background(), id); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("run %s after delete: %v, want not found", id, err)
		}
		if _, err := h.sup.Get(context.Background(), id); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("Get of run %s after delete: %v", id, err)
		}
		if n := len(h.store.eventsOf(id)); n != 0 {
			t.Errorf("run %s has %d events after delete", id, n)
		}
		h.assertAudit(t, "run.delete", id, deleter)
		if err := h.sup.Delete(runs.WithActor(context.Background(), deleter), id); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("second delete of %s: %v, want not found", id, err)
		}
	}
	for _, gone := range []string{filepath.Join(h.root, "tenants", "acme", fresh.ID), filepath.Join(h.root, anon.ID)} {
		if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a deleted run's fresh directory %s: %v", gone, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(named, "keep.txt")); err != nil || string(b) != "mine" {
		t.Errorf("the client's directory after delete: %q, %v", b, err)
	}
}

func TestQuotaMaxRunning(t *testing.T) {
	h := newQuotaHarness(t, Config{}, tenants.Quotas{MaxRunning: 1})
	first := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "hold:g1"})
	h.running(t, first.ID)
	_, err := h.sup.Submit(as("acme", "k"), runs.Spec{Agent: "fake", Prompt: "mode:hello"})
	if qe := quotaLimit(t, err); qe.Limit != tenants.LimitRunning || qe.RetryAfter <= 0 || qe.Message == "" {
		t.Fatalf("quota error %+v, want limit %s", qe, tenants.LimitRunning)
	}
	// Refused runs are not made.
	if page, _ := h.sup.List(context.Background(), runs.Filter{Tenant: "acme"}); len(page.Runs) != 1 {
		t.Errorf("acme has %d runs, want the first alone", len(page.Runs))
	}
	// Another tenant is not held by acme's limit.
	other := h.submitAs(t, as("globex", "kg"), runs.Spec{Prompt: "mode:hello"})
	if done := h.wait(t, other.ID, 20*time.Second); done.Status != runs.Succeeded {
		t.Fatalf("globex's run: %s", done.Status)
	}

	h.agent.open(t, "g1")
	h.wait(t, first.ID, 20*time.Second)
	h.waitCountedOut(t, "acme", first.ID)
	next := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "mode:hello"})
	if done := h.wait(t, next.ID, 20*time.Second); done.Status != runs.Succeeded {
		t.Fatalf("the run after the first ended: %s", done.Status)
	}
	h.waitCountedOut(t, "acme", next.ID)
	if u := h.usage(t, "acme"); len(u.Runs) != 0 {
		t.Errorf("acme's usage counts %v with nothing running", u.Runs)
	}
}

func TestQuotaMaxQueued(t *testing.T) {
	h := newQuotaHarness(t, Config{MaxConcurrent: 1}, tenants.Quotas{MaxQueued: 1})
	first := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "hold:g1"})
	h.running(t, first.ID)
	second := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "mode:hello"})
	if second.Status != runs.Queued {
		t.Fatalf("second run %s", second.Status)
	}
	_, err := h.sup.Submit(as("acme", "k"), runs.Spec{Agent: "fake", Prompt: "mode:hello"})
	if qe := quotaLimit(t, err); qe.Limit != tenants.LimitQueued || qe.RetryAfter <= 0 {
		t.Fatalf("quota error %+v, want limit %s", qe, tenants.LimitQueued)
	}
	other := h.submitAs(t, as("globex", "kg"), runs.Spec{Prompt: "mode:hello"})
	if other.Status != runs.Queued {
		t.Fatalf("globex's run %s", other.Status)
	}
	u := h.usage(t, "acme")
	if u.Runs[first.ID] != runs.Running || u.Runs[second.ID] != runs.Queued || len(u.Runs) != 2 {
		t.Errorf("acme's usage %v", u.Runs)
	}
	// A cancelled queued run frees its place at once.
	if _, err := h.sup.Cancel(as("acme", "k"), second.ID); err != nil {
		t.Fatal(err)
	}
	h.waitCountedOut(t, "acme", second.ID)
	third := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "mode:hello"})

	h.agent.open(t, "g1")
	for _, id := range []string{first.ID, other.ID, third.ID} {
		if done := h.wait(t, id, 20*time.Second); done.Status != runs.Succeeded {
			t.Errorf("run %s: %s", id, done.Status)
		}
	}
	h.waitCountedOut(t, "acme", third.ID)
	h.waitCountedOut(t, "globex", other.ID)
}

// testClock is a clock that runs from a chosen time and can jump.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func newTestClock(at time.Time) *testClock { return &testClock{offset: time.Until(at)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) jump(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

func TestQuotaDailyBudget(t *testing.T) {
	clock := newTestClock(time.Date(2030, 3, 4, 22, 0, 0, 0, time.UTC))
	h := newQuotaHarness(t, Config{Now: clock.Now}, tenants.Quotas{DailyBudgetUSD: 1})
	costly := runs.Spec{Prompt: "mode:hello", Metadata: map[string]string{"session_cost": "0.6"}}
	for i := range 2 {
		r := h.submitAs(t, as("acme", "k"), costly)
		if done := h.wait(t, r.ID, 20*time.Second); done.Status != runs.Succeeded || done.CostUSD == nil || *done.CostUSD != 0.6 {
			t.Fatalf("run %d: status %s, cost %v", i, done.Status, done.CostUSD)
		}
		waitUntil(t, "acme's cost counted", func() bool { return h.usage(t, "acme").CostUSD >= 0.6*float64(i+1)-1e-9 })
	}
	u := h.usage(t, "acme")
	if u.Day != "2030-03-04" || u.CostUSD < 1.2-1e-9 || u.CostUSD > 1.2+1e-9 {
		t.Fatalf("acme's usage %+v", u)
	}
	_, err := h.sup.Submit(as("acme", "k"), runs.Spec{Agent: "fake", Prompt: "mode:hello"})
	qe := quotaLimit(t, err)
	if qe.Limit != tenants.LimitDailyBudget || qe.RetryAfter <= 0 || qe.RetryAfter > 2*time.Hour || qe.RetryAfter > 24*time.Hour {
		t.Fatalf("quota error %+v, want limit %s and a retry within the 2 h left of the day", qe, tenants.LimitDailyBudget)
	}
	// Another tenant's budget is its own.
	other := h.submitAs(t, as("globex", "kg"), runs.Spec{Prompt: "mode:hello"})
	h.wait(t, other.ID, 20*time.Second)

	// The next UTC day admits again, and counts from zero.
	clock.jump(3 * time.Hour)
	r := h.submitAs(t, as("acme", "k"), costly)
	h.wait(t, r.ID, 20*time.Second)
	waitUntil(t, "the new day's cost", func() bool { return h.usage(t, "acme").Day == "2030-03-05" })
	if u := h.usage(t, "acme"); u.CostUSD < 0.6-1e-9 || u.CostUSD > 0.6+1e-9 {
		t.Errorf("the new day's usage %+v, want $0.6", u)
	}
	h.wait(t, h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "mode:hello"}).ID, 20*time.Second)
}

// A usage record that counts runs that ended (or were never recorded),
// as a replica that died before counting them out leaves it, holds the
// tenant at its limits neither at submission nor at start.
func TestQuotaUsageHealsItself(t *testing.T) {
	open := make(chan struct{})
	h := newQuotaHarness(t, Config{}, tenants.Quotas{MaxRunning: 1, MaxQueued: 1},
		func(m *memStore) runs.Store { return &pausedStore{memStore: m, open: open} })
	ctx := context.Background()
	finished := runs.Run{ID: uuid.Must(uuid.NewV7()).String(), Agent: "fake", Status: runs.Succeeded, Tenant: "acme", CreatedAt: time.Now().UTC()}
	if err := h.store.CreateRun(ctx, finished); err != nil {
		t.Fatal(err)
	}
	ghost := uuid.Must(uuid.NewV7()).String()
	if err := h.store.SetTenantUsage(ctx, "acme", tenants.Usage{Runs: map[string]runs.State{ghost: runs.Running, finished.ID: runs.Queued}}, 0); err != nil {
		t.Fatal(err)
	}
	// Both limits are reached by runs that are not running or queued.
	r := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "mode:hello"})
	if u := h.usage(t, "acme"); len(u.Runs) != 1 || u.Runs[r.ID] != runs.Queued {
		t.Fatalf("acme's usage after admission %v, want the new run alone", u.Runs)
	}
	// A stale running entry left while the run waits in the queue.
	if err := setUsage(h.store, "acme", func(u *tenants.Usage) { u.Runs[ghost] = runs.Running }); err != nil {
		t.Fatal(err)
	}
	close(open)
	if done := h.wait(t, r.ID, 20*time.Second); done.Status != runs.Succeeded {
		t.Fatalf("status %s", done.Status)
	}
	h.waitCountedOut(t, "acme", r.ID)
	if u := h.usage(t, "acme"); len(u.Runs) != 0 {
		t.Errorf("acme's usage still counts %v", u.Runs)
	}
}

// setUsage changes a tenant's usage record by compare-and-set.
func setUsage(st tenants.Store, tenant string, change func(u *tenants.Usage)) error {
	for {
		u, rev, err := st.TenantUsage(context.Background(), tenant)
		if err != nil {
			return err
		}
		if u.Runs == nil {
			u.Runs = map[string]runs.State{}
		}
		change(&u)
		if err := st.SetTenantUsage(context.Background(), tenant, u, rev); !errors.Is(err, tenants.ErrStale) {
			return err
		}
	}
}

// inQueue says whether the run waits in the shared queue, or is taken.
func (m *memStore) inQueue(id string) (waiting, taken bool) {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Contains(q.waiting, id), q.taken[id]
}

// pausedStore is a memStore whose queue gives nothing until open is
// closed, so that a test can queue runs before any replica takes one.
type pausedStore struct {
	*memStore
	open chan struct{}
}

func (p *pausedStore) Dequeue(ctx context.Context) (runs.QueuedRun, error) {
	select {
	case <-p.open:
	case <-ctx.Done():
		return runs.QueuedRun{}, ctx.Err()
	}
	return p.memStore.Dequeue(ctx)
}

// Two queued runs of a tenant at MaxRunning 1 never run at once, though
// the replica has slots for both: the second waits in the queue until the
// first ends.
func TestQuotaMaxRunningEnforcedAtStart(t *testing.T) {
	open := make(chan struct{})
	h := newQuotaHarness(t, Config{MaxConcurrent: 2}, tenants.Quotas{MaxRunning: 1},
		func(m *memStore) runs.Store { return &pausedStore{memStore: m, open: open} })
	gates := map[string]string{}
	for _, g := range []string{"g1", "g2"} {
		r := h.submitAs(t, as("acme", "k"), runs.Spec{Prompt: "hold:" + g})
		gates[r.ID] = g
	}
	close(open)
	var first, second string
	waitUntil(t, "one of the runs running", func() bool {
		for id := range gates {
			if slices.Contains(h.types(id), runs.EventRunStarted) {
				first = id
				return true
			}
		}
		return false
	})
	for id := range gates {
		if id != first {
			second = id
		}
	}
	h.running(t, first)
	// The second was taken, found its tenant at the limit, and given back.
	waitUntil(t, "the second run given back", func() bool { return h.store.naksOf(second) > 0 })
	if r, _ := h.store.GetRun(context.Background(), second); r.Status != runs.Queued || r.Owner != "" || slices.Contains(h.types(second), runs.EventRunStarted) {
		t.Fatalf("the second run while the first runs: status %s, owner %q, events %v", r.Status, r.Owner, h.types(second))
	}
	if u := h.usage(t, "acme"); u.Runs[first] != runs.Running || u.Runs[second] != runs.Queued {
		t.Errorf("acme's usage %v", u.Runs)
	}
	h.agent.open(t, gates[first])
	done1 := h.wait(t, first, 20*time.Second)
	// The first ended: the second starts, on either worker.
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(h.types(second), runs.EventRunStarted) {
		if time.Now().After(deadline) {
			r, _ := h.store.GetRun(context.Background(), second)
			waiting, taken := h.store.inQueue(second)
			t.Fatalf("the second run never started once the first ended: status %s, owner %q, given back %d times, in the queue: waiting %v, taken %v; acme's usage %v",
				r.Status, r.Owner, h.store.naksOf(second), waiting, taken, h.usage(t, "acme").Runs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.running(t, second)
	h.agent.open(t, gates[second])
	done2 := h.wait(t, second, 20*time.Second)
	if done1.Status != runs.Succeeded || done2.Status != runs.Succeeded {
		t.Fatalf("statuses %s, %s", done1.Status, done2.Status)
	}
	if done2.StartedAt == nil || done1.FinishedAt == nil || done2.StartedAt.Before(*done1.FinishedAt) {
		t.Errorf("the second run started at %v, before the first finished at %v", done2.StartedAt, done1.FinishedAt)
	}
}
