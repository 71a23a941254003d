package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/runs"
)

// The tenants of these tests and the run each owns: runA is acme's, runB
// globex's.
const (
	tenantAcme   = "acme"
	tenantGlobex = "globex"
)

var (
	tenantRoles = []auth.Role{auth.RoleAdmin, auth.RoleWrite, auth.RoleRead}
	tenantOf    = map[string]string{runA: tenantAcme, runB: tenantGlobex}
	runOf       = map[string]string{tenantAcme: runA, tenantGlobex: runB}
)

// revocableKeys is a keyring whose keys can be revoked while the API runs,
// as a reloaded keys file does.
type revocableKeys struct {
	ring    *auth.Keyring
	mu      sync.Mutex
	revoked map[string]bool
}

func (k *revocableKeys) Lookup(secret string) (auth.Key, bool) {
	key, ok := k.ring.Lookup(secret)
	if !ok || k.isRevoked(key.ID) {
		return auth.Key{}, false
	}
	return key, true
}

func (k *revocableKeys) ByID(id string) (auth.Key, bool) {
	key, ok := k.ring.ByID(id)
	if !ok || k.isRevoked(id) {
		return auth.Key{}, false
	}
	return key, true
}

func (k *revocableKeys) revoke(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.revoked[id] = true
}

func (k *revocableKeys) isRevoked(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.revoked[id]
}

// keyedTenants is two tenants with a key of each role, their keyring and a
// stream token signer.
type keyedTenants struct {
	// secrets maps a key id ("acme-write") to its bearer secret.
	secrets map[string]string
	keys    *revocableKeys
	signer  *auth.Signer
}

func keyID(tenant string, role auth.Role) string { return tenant + "-" + string(role) }

func newTenants(t testing.TB) *keyedTenants {
	t.Helper()
	ts := &keyedTenants{secrets: map[string]string{}}
	var lines []string
	for _, tenant := range []string{tenantAcme, tenantGlobex} {
		for _, role := range tenantRoles {
			secret, err := auth.NewKey()
			if err != nil {
				t.Fatal(err)
			}
			id := keyID(tenant, role)
			ts.secrets[id] = secret
			lines = append(lines, auth.Line(id, tenant, role, secret))
		}
	}
	ring, err := auth.ParseKeys(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ring.Len() != 6 {
		t.Fatalf("keyring has %d keys, want 6", ring.Len())
	}
	ts.keys = &revocableKeys{ring: ring, revoked: map[string]bool{}}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	if ts.signer, err = auth.NewSigner(secret); err != nil {
		t.Fatal(err)
	}
	return ts
}

// config is an API config that authenticates by these keys and signs
// stream tokens.
func (ts *keyedTenants) config() Config { return Config{Keys: ts.keys, Tokens: ts.signer} }

// bearer is the Authorization header of a key.
func (ts *keyedTenants) bearer(t *testing.T, id string) []string {
	t.Helper()
	s, ok := ts.secrets[id]
	if !ok {
		t.Fatalf("no key %q", id)
	}
	return []string{"Authorization", "Bearer " + s}
}

// calls counts what a tenantService was asked, and records who asked.
type calls struct {
	get, submit, list, cancel, input, delete, events, agents atomic.Int32

	mu     sync.Mutex
	actors []runs.Actor
	filter *runs.Filter
	inputs []runs.Input
}

func (c *calls) reset() {
	for _, n := range []*atomic.Int32{&c.get, &c.submit, &c.list, &c.cancel, &c.input, &c.delete, &c.events, &c.agents} {
		n.Store(0)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.actors, c.filter, c.inputs = nil, nil, nil
}

// handled is the number of calls of the methods that do what a request
// asks (all but Get, which the run routes use to check the tenant).
func (c *calls) handled() map[string]int32 {
	return map[string]int32{
		"submit": c.submit.Load(), "list": c.list.Load(), "cancel": c.cancel.Load(), "input": c.input.Load(),
		"delete": c.delete.Load(), "events": c.events.Load(), "agents": c.agents.Load(),
	}
}

func (c *calls) actor(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.actors = append(c.actors, runs.ActorFrom(ctx))
}

func (c *calls) recorded() ([]runs.Actor, *runs.Filter, []runs.Input) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]runs.Actor(nil), c.actors...), c.filter, append([]runs.Input(nil), c.inputs...)
}

// tenantService serves runA (acme's) and runB (globex's), both running;
// their event logs are logs[id], or a finished log of three events. Every
// call is counted in c.
func tenantService(t testing.TB, c *calls, logs map[string]*memLog) *fakeService {
	log := func(id string) *memLog {
		if l, ok := logs[id]; ok {
			return l
		}
		return newMemLog(runLog(t, id, 3)...)
	}
	run := func(id string, st runs.State) (runs.Run, error) {
		tenant, ok := tenantOf[id]
		if !ok {
			return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
		}
		r := sampleRun(id, st)
		r.Tenant = tenant
		return r, nil
	}
	return &fakeService{
		get: func(_ context.Context, id string) (runs.Run, error) {
			c.get.Add(1)
			return run(id, runs.Running)
		},
		submit: func(ctx context.Context, spec runs.Spec) (runs.Run, error) {
			c.submit.Add(1)
			c.actor(ctx)
			r, _ := run(runOf[runs.ActorFrom(ctx).Tenant], runs.Queued)
			return r, nil
		},
		list: func(ctx context.Context, f runs.Filter) (runs.Page, error) {
			c.list.Add(1)
			c.mu.Lock()
			c.filter = &f
			c.mu.Unlock()
			// The service trusts the filter: a filter of another tenant
			// than the caller's would list that tenant's runs.
			if want := runs.ActorFrom(ctx).Tenant; f.Tenant != want || want == "" || f.AllTenants {
				return runs.Page{}, fmt.Errorf("filter of tenant %q (all tenants %v) for a caller of tenant %q", f.Tenant, f.AllTenants, want)
			}
			r, _ := run(runOf[f.Tenant], runs.Running)
			return runs.Page{Runs: []runs.Run{r}}, nil
		},
		cancel: func(ctx context.Context, id string) (runs.Run, error) {
			c.cancel.Add(1)
			c.actor(ctx)
			return run(id, runs.Cancelled)
		},
		input: func(ctx context.Context, id string, in runs.Input) (runs.InputResult, error) {
			c.input.Add(1)
			c.actor(ctx)
			c.mu.Lock()
			c.inputs = append(c.inputs, in)
			c.mu.Unlock()
			switch in.Kind {
			case runs.InputDecision:
				return runs.InputResult{Approval: &runs.ResolvedApproval{
					Approval: runs.Approval{ID: in.ApprovalID, Tool: "Bash", Options: runs.Decisions, Turn: 1, CreatedAt: t0, ExpiresAt: t0},
					Decision: in.Decision, Reason: runs.ResolvedByClient, ResolvedAt: t0,
				}}, nil
			case runs.InputMessage:
				return runs.InputResult{MessageID: "msg-1"}, nil
			}
			return runs.InputResult{}, nil
		},
		delete: func(ctx context.Context, id string) error {
			c.delete.Add(1)
			c.actor(ctx)
			return nil
		},
		events: func(_ context.Context, id string, after uint64) (runs.Cursor, error) {
			c.events.Add(1)
			return log(id).cursor(after), nil
		},
		lastEventSeq: func(_ context.Context, id string) (uint64, error) { return log(id).last(), nil },
		agents: func() []runs.AgentInfo {
			c.agents.Add(1)
			return []runs.AgentInfo{{Name: "claude", Installed: true}}
		},
		ready: func(context.Context) error { return nil },
	}
}

// route is one route of the API as a client calls it.
type route struct {
	method, path string // path has {id} for a run route
	body         string
	role         auth.Role // the least role that may use it
	ok           int       // the status of a request that succeeds
	handler      string    // the service method that does the work, as calls.handled names it
}

func (r route) run() bool { return strings.Contains(r.path, "{id}") }

func (r route) pathFor(id string) string { return strings.ReplaceAll(r.path, "{id}", id) }

// headers are the headers a request of the route needs besides its key.
func (r route) headers() []string {
	if r.body == "" {
		return nil
	}
	return []string{"Content-Type", "application/json"}
}

// routes is every route of New but /healthz, /readyz and /metrics.
var routes = []route{
	{"GET", "/v1/agents", "", auth.RoleRead, http.StatusOK, "agents"},
	{"POST", "/v1/runs", `{"agent":"claude","prompt":"hi"}`, auth.RoleWrite, http.StatusCreated, "submit"},
	{"GET", "/v1/runs", "", auth.RoleRead, http.StatusOK, "list"},
	{"GET", "/v1/runs/{id}", "", auth.RoleRead, http.StatusOK, ""},
	{"DELETE", "/v1/runs/{id}", "", auth.RoleAdmin, http.StatusNoContent, "delete"},
	{"POST", "/v1/runs/{id}/cancel", "", auth.RoleWrite, http.StatusOK, "cancel"},
	{"POST", "/v1/runs/{id}/approvals/ap-1", `{"decision":"allow"}`, auth.RoleWrite, http.StatusOK, "input"},
	{"POST", "/v1/runs/{id}/messages", `{"text":"and now the tests"}`, auth.RoleWrite, http.StatusAccepted, "input"},
	{"POST", "/v1/runs/{id}/interrupt", "", auth.RoleWrite, http.StatusAccepted, "input"},
	{"POST", "/v1/runs/{id}/close", "", auth.RoleWrite, http.StatusAccepted, "input"},
	{"POST", "/v1/runs/{id}/stream-token", "", auth.RoleRead, http.StatusCreated, ""},
	{"GET", "/v1/runs/{id}/events", "", auth.RoleRead, http.StatusOK, "events"},
}

// authCase is one request of the matrix and what it must get.
type authCase struct {
	name   string
	route  route
	path   string
	header []string
	status int
	code   string // the error code; "" for a success
	// lookedUp: the request may look the run up (Get) before it is
	// refused.
	lookedUp bool
}

func authCases(t *testing.T, ts *keyedTenants) []authCase {
	unknown, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	var cases []authCase
	for _, rt := range routes {
		target := rt.pathFor(runA)
		// Without a valid key, the route's run does not matter: nothing
		// looks at it.
		for _, c := range []struct {
			name   string
			header []string
			code   string
		}{
			{"no key", nil, CodeUnauthenticated},
			{"basic", []string{"Authorization", "Basic YWxhZGRpbjpvcGVuc2VzYW1l"}, CodeInvalidAuthorization},
			{"bearer without token", []string{"Authorization", "Bearer"}, CodeInvalidAuthorization},
			{"bearer with a space in it", []string{"Authorization", "Bearer agk_a b"}, CodeInvalidAuthorization},
			{"unknown key", []string{"Authorization", "Bearer " + unknown}, CodeUnauthenticated},
		} {
			cases = append(cases, authCase{name: c.name, route: rt, path: target,
				header: append(c.header, rt.headers()...), status: http.StatusUnauthorized, code: c.code})
		}
		for _, tenant := range []string{tenantAcme, tenantGlobex} {
			for _, role := range tenantRoles {
				id := keyID(tenant, role)
				hdr := append(ts.bearer(t, id), rt.headers()...)
				if !role.Allows(rt.role) {
					cases = append(cases, authCase{name: id, route: rt, path: target, header: hdr,
						status: http.StatusForbidden, code: CodeForbidden})
					continue
				}
				if !rt.run() {
					cases = append(cases, authCase{name: id, route: rt, path: rt.path, header: hdr, status: rt.ok})
					continue
				}
				for _, runID := range []string{runA, runB} {
					c := authCase{name: id + " on " + tenantOf[runID] + "'s run", route: rt, path: rt.pathFor(runID),
						header: hdr, status: rt.ok, lookedUp: true}
					if tenantOf[runID] != tenant {
						c.status, c.code = http.StatusNotFound, CodeNotFound
					}
					cases = append(cases, c)
				}
			}
		}
	}
	return cases
}

// TestAuthzEveryRoute sends every route every kind of caller: no key, a
// malformed header, an unknown key, and each role of each tenant on its
// own run and the other tenant's. A refused request never reaches the
// service; another tenant's run is a 404, never a 403.
func TestAuthzEveryRoute(t *testing.T) {
	ts := newTenants(t)
	c := &calls{}
	h := newHarness(t, ts.config(), tenantService(t, c, nil))
	for _, tc := range authCases(t, ts) {
		t.Run(tc.route.method+" "+tc.route.path+"/"+tc.name, func(t *testing.T) {
			c.reset()
			resp, b := h.do(t, tc.route.method, tc.path, tc.route.body, tc.header...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			handled := c.handled()
			if tc.code != "" {
				if e := decodeError(t, b); e.Code != tc.code {
					t.Errorf("code %q, want %q (%s)", e.Code, tc.code, e.Message)
				}
				if got := resp.Header.Get("WWW-Authenticate"); (tc.status == http.StatusUnauthorized) != (got != "") {
					t.Errorf("WWW-Authenticate %q on a %d", got, tc.status)
				} else if got != "" && !strings.HasPrefix(got, "Bearer ") {
					t.Errorf("WWW-Authenticate %q, want the Bearer scheme", got)
				}
				for m, n := range handled {
					if n != 0 {
						t.Errorf("the service's %s was called %d times for a refused request", m, n)
					}
				}
				if n := c.get.Load(); n != 0 && !tc.lookedUp {
					t.Errorf("the run was looked up %d times for a request refused before", n)
				}
				return
			}
			for m, n := range handled {
				want := int32(0)
				if m == tc.route.handler {
					want = 1
				}
				if n != want {
					t.Errorf("the service's %s was called %d times, want %d", m, n, want)
				}
			}
		})
	}
}

// TestAuthzOpenRoutes: a load balancer and Prometheus reach /healthz,
// /readyz and /metrics without a key.
func TestAuthzOpenRoutes(t *testing.T) {
	ts := newTenants(t)
	h := newHarness(t, ts.config(), tenantService(t, &calls{}, nil))
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, b := h.do(t, "GET", path, "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a key: %d %s", path, resp.StatusCode, b)
		}
		if got := resp.Header.Get("WWW-Authenticate"); got != "" {
			t.Errorf("GET %s: WWW-Authenticate %q", path, got)
		}
	}
}

// TestAuthzActor: the service learns who asks from the request's context,
// and a listing is always of the caller's tenant.
func TestAuthzActor(t *testing.T) {
	ts := newTenants(t)
	c := &calls{}
	h := newHarness(t, ts.config(), tenantService(t, c, nil))
	for _, tenant := range []string{tenantAcme, tenantGlobex} {
		t.Run(tenant, func(t *testing.T) {
			c.reset()
			id := keyID(tenant, auth.RoleAdmin)
			own := runOf[tenant]
			hdr := ts.bearer(t, id)
			jsonHdr := append(ts.bearer(t, id), "Content-Type", "application/json")
			for _, req := range []struct {
				method, path, body string
				header             []string
				status             int
			}{
				{"POST", "/v1/runs", `{"agent":"claude","prompt":"hi"}`, jsonHdr, http.StatusCreated},
				{"POST", "/v1/runs/" + own + "/cancel", "", hdr, http.StatusOK},
				{"POST", "/v1/runs/" + own + "/messages", `{"text":"more"}`, jsonHdr, http.StatusAccepted},
				{"POST", "/v1/runs/" + own + "/approvals/ap-1", `{"decision":"deny"}`, jsonHdr, http.StatusOK},
				{"POST", "/v1/runs/" + own + "/interrupt", "", hdr, http.StatusAccepted},
				{"POST", "/v1/runs/" + own + "/close", "", hdr, http.StatusAccepted},
				{"DELETE", "/v1/runs/" + own, "", hdr, http.StatusNoContent},
			} {
				if resp, b := h.do(t, req.method, req.path, req.body, req.header...); resp.StatusCode != req.status {
					t.Fatalf("%s %s: %d %s", req.method, req.path, resp.StatusCode, b)
				}
			}
			actors, _, _ := c.recorded()
			if len(actors) != 7 {
				t.Fatalf("the service saw %d actors, want 7", len(actors))
			}
			want := runs.Actor{KeyID: id, Tenant: tenant}
			for i, a := range actors {
				if a != want {
					t.Errorf("call %d: actor %+v, want %+v", i, a, want)
				}
			}

			resp, b := h.do(t, "GET", "/v1/runs?status=running", "", hdr...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("list: %d %s", resp.StatusCode, b)
			}
			validateOpenAPI(t, "RunList", b)
			if _, f, _ := c.recorded(); f == nil || f.Tenant != tenant || f.AllTenants || f.Status != runs.Running {
				t.Errorf("filter %+v, want tenant %q alone and status running", f, tenant)
			}
			// Nothing in the query widens the listing to another tenant
			// or to all of them.
			for _, q := range []string{"tenant=globex", "tenant=", "all_tenants=true", "AllTenants=true"} {
				if resp, b := h.do(t, "GET", "/v1/runs?"+q, "", hdr...); resp.StatusCode != http.StatusBadRequest {
					t.Errorf("list ?%s: %d %s, want 400", q, resp.StatusCode, b)
				}
			}
		})
	}
}

// TestAuthzTenantNotInBody: a request cannot name its tenant; the key does.
func TestAuthzTenantNotInBody(t *testing.T) {
	ts := newTenants(t)
	c := &calls{}
	h := newHarness(t, ts.config(), tenantService(t, c, nil))
	resp, b := h.do(t, "POST", "/v1/runs", `{"agent":"claude","prompt":"hi","tenant":"globex"}`,
		append(ts.bearer(t, keyID(tenantAcme, auth.RoleWrite)), "Content-Type", "application/json")...)
	if e := decodeError(t, b); resp.StatusCode != http.StatusBadRequest || e.Code != CodeUnknownField || e.Field != "tenant" {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	if n := c.submit.Load(); n != 0 {
		t.Fatalf("submit called %d times", n)
	}
}

// TestAuthzAudit: every use of a key is an info line of the "audit" logger
// naming the key and its tenant, and so is every stream token issued; a
// request without a valid key is not.
func TestAuthzAudit(t *testing.T) {
	ts := newTenants(t)
	h := newHarness(t, ts.config(), tenantService(t, &calls{}, nil))
	if resp, b := h.do(t, "GET", "/v1/runs/"+runB, "", ts.bearer(t, keyID(tenantGlobex, auth.RoleRead))...); resp.StatusCode != http.StatusOK {
		t.Fatalf("get: %d %s", resp.StatusCode, b)
	}
	if resp, b := h.do(t, "GET", "/v1/agents", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a key: %d %s", resp.StatusCode, b)
	}
	used := h.logs.FilterLoggerName("audit").FilterMessage("key used").All()
	if len(used) != 1 {
		t.Fatalf("%d \"key used\" lines, want 1: %+v", len(used), used)
	}
	fields := used[0].ContextMap()
	if used[0].Level.String() != "info" || fields["key_id"] != "globex-read" || fields["tenant"] != tenantGlobex ||
		fields["method"] != "GET" || fields["path"] != "/v1/runs/"+runB {
		t.Errorf("key used: %s %v", used[0].Level, fields)
	}

	resp, b := h.do(t, "POST", "/v1/runs/"+runA+"/stream-token", "", ts.bearer(t, keyID(tenantAcme, auth.RoleWrite))...)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("stream token: %d %s", resp.StatusCode, b)
	}
	issued := h.logs.FilterLoggerName("audit").FilterMessage("stream token issued").All()
	if len(issued) != 1 {
		t.Fatalf("%d \"stream token issued\" lines, want 1", len(issued))
	}
	fields = issued[0].ContextMap()
	key, _ := fields["key"].(map[string]any)
	if issued[0].Level.String() != "info" || fields["run_id"] != runA || key["id"] != "acme-write" || key["tenant"] != tenantAcme {
		t.Errorf("stream token issued: %s %v", issued[0].Level, fields)
	}
	for _, e := range h.logs.FilterLoggerName("audit").All() {
		for _, v := range e.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, "agk_") {
				t.Errorf("audit line %q holds a secret: %v", e.Message, e.ContextMap())
			}
		}
	}
}

// TestAuthzNoKeysNoAudit: a gateway without keys is one anonymous admin and
// writes no audit line per request.
func TestAuthzNoKeysNoAudit(t *testing.T) {
	h := newHarness(t, Config{}, &fakeService{agents: func() []runs.AgentInfo { return nil }})
	if resp, b := h.do(t, "GET", "/v1/agents", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if n := h.logs.FilterLoggerName("audit").Len(); n != 0 {
		t.Fatalf("%d audit lines", n)
	}
}

// TestAuthzErrorCodesDocumented: every code of identity, origin, quotas and
// the edge's limits is one openapi.yaml's ErrorCode lists, as clients
// generated from it branch on the enum.
func TestAuthzErrorCodesDocumented(t *testing.T) {
	for _, code := range []string{
		CodeUnauthenticated, CodeInvalidAuthorization, CodeInvalidToken, CodeForbidden,
		CodeOriginNotAllowed, CodeHostNotAllowed, CodeInvalidQuery, CodeRateLimited,
		CodeTooManyRunning, CodeTooManyQueued, CodeDailyBudgetExceeded, CodeTooManyStreams,
		CodeBodyTimeout, CodeTooManyOpen,
	} {
		t.Run(code, func(t *testing.T) {
			b, err := json.Marshal(ErrorResponse{Error: ErrorDetail{Code: code, Message: "a sentence"}})
			if err != nil {
				t.Fatal(err)
			}
			validateOpenAPI(t, "Error", b)
		})
	}
}
