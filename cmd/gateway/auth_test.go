package main

// The gateway with a keys file, end to end: two tenants and three roles
// against real runs of the claude CLI, a browser's stream token, a key
// revoked by editing the file, and the audit trail on the run.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// testKey is one API key of a test's keys file.
type testKey struct {
	id, tenant string
	role       auth.Role
	secret     string
}

func newTestKey(t *testing.T, id, tenant string, role auth.Role) testKey {
	t.Helper()
	secret, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return testKey{id: id, tenant: tenant, role: role, secret: secret}
}

// writeKeys replaces the keys file at path, atomically, as an operator's
// deploy would.
func writeKeys(t *testing.T, path string, keys ...testKey) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# test keys\n")
	for _, k := range keys {
		b.WriteString(auth.Line(k.id, k.tenant, k.role, k.secret) + "\n")
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// call makes one request with key (none when empty) and returns the
// status and body.
func call(t *testing.T, method, url string, key testKey, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key.secret != "" {
		req.Header.Set("Authorization", "Bearer "+key.secret)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func errCode(b []byte) string {
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal(b, &e)
	return e.Error.Code
}

func TestTenantsAndRolesEndToEnd(t *testing.T) {
	m := startMock(t, anthropic.ToolTurn("echo tenant-run", "Done."))
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "api-keys")
	acmeAdmin := newTestKey(t, "acme-admin", "acme", auth.RoleAdmin)
	acmeWrite := newTestKey(t, "acme-write", "acme", auth.RoleWrite)
	acmeRead := newTestKey(t, "acme-read", "acme", auth.RoleRead)
	globexAdmin := newTestKey(t, "globex-admin", "globex", auth.RoleAdmin)
	writeKeys(t, keysFile, acmeAdmin, acmeWrite, acmeRead, globexAdmin)

	settings := gatewayEnv(t, filepath.Join(dir, "data"))
	settings["AGENTGATE_API_KEYS_FILE"] = keysFile
	g := startGateway(t, settings, mockCreds(m))
	none := testKey{}

	// Health and metrics need no key; everything else does.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if st, b := call(t, "GET", g.URL+p, none, ""); st != 200 {
			t.Errorf("GET %s without a key = %d %s", p, st, b)
		}
	}
	if st, b := call(t, "GET", g.URL+"/v1/runs", none, ""); st != 401 || errCode(b) != "unauthenticated" {
		t.Errorf("GET /v1/runs without a key = %d %s", st, b)
	}
	if st, b := call(t, "GET", g.URL+"/v1/agents", testKey{secret: "agk_not-a-key"}, ""); st != 401 {
		t.Errorf("GET /v1/agents with an unknown key = %d %s", st, b)
	}
	body := `{"agent":"claude","prompt":"say hi","timeout_seconds":120}`
	if st, b := call(t, "POST", g.URL+"/v1/runs", acmeRead, body); st != 403 || errCode(b) != "forbidden" {
		t.Errorf("POST /v1/runs with a read key = %d %s", st, b)
	}

	// acme's write key runs the real CLI; the run is acme's, and says who
	// made it.
	st, b := call(t, "POST", g.URL+"/v1/runs", acmeWrite, body)
	if st != 201 {
		t.Fatalf("POST /v1/runs = %d %s", st, b)
	}
	var run runs.Run
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	if run.Tenant != "acme" || run.CreatedBy == nil || run.CreatedBy.KeyID != "acme-write" {
		t.Errorf("run tenant %q created by %+v", run.Tenant, run.CreatedBy)
	}
	runURL := g.URL + "/v1/runs/" + run.ID

	// globex sees nothing of it, whatever it tries: a 404 as for no run.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "", ""}, {"GET", "/events", ""}, {"POST", "/cancel", ""}, {"DELETE", "", ""},
		{"POST", "/stream-token", ""}, {"POST", "/messages", `{"text":"hi"}`},
	} {
		if st, b := call(t, c.method, runURL+c.path, globexAdmin, c.body); st != 404 || errCode(b) != "not_found" {
			t.Errorf("globex %s %s = %d %s, want 404 not_found", c.method, c.path, st, b)
		}
	}
	if st, b := call(t, "GET", g.URL+"/v1/runs", globexAdmin, ""); st != 200 || strings.Contains(string(b), run.ID) {
		t.Errorf("globex's listing = %d %s", st, b)
	}

	// acme's read key streams it in a browser's way: a stream token, no
	// header.
	st, b = call(t, "POST", runURL+"/stream-token", acmeRead, "")
	if st != 201 {
		t.Fatalf("stream-token = %d %s", st, b)
	}
	var tok struct {
		Token string `json:"token"`
		URL   string `json:"url"`
	}
	if err := json.Unmarshal(b, &tok); err != nil || tok.Token == "" || !strings.HasPrefix(tok.URL, "/v1/runs/"+run.ID+"/events?token=") {
		t.Fatalf("stream token %s (%v)", b, err)
	}
	types := streamTypes(t, g.URL+tok.URL)
	if len(types) == 0 || types[len(types)-1] != string(runs.EventRunCompleted) || !subsequence(types, []string{"run.started", "tool_call.completed", "run.completed"}) {
		t.Errorf("token stream = %v", types)
	}
	if st, b := call(t, "GET", runURL+"?token="+tok.Token, none, ""); st != 401 {
		t.Errorf("GET of the run with a stream token = %d %s, want 401", st, b)
	}
	done := g.waitRunWith(t, run.ID, acmeRead, time.Minute)
	if done.Status != runs.Succeeded {
		t.Errorf("run %s: %+v", done.Status, done.Error)
	}

	// Delete is an admin's, and only its tenant's.
	if st, b := call(t, "DELETE", runURL, acmeWrite, ""); st != 403 {
		t.Errorf("DELETE with a write key = %d %s", st, b)
	}
	if st, b := call(t, "DELETE", runURL, acmeAdmin, ""); st != 204 {
		t.Errorf("DELETE with acme's admin key = %d %s", st, b)
	}
	if st, _ := call(t, "GET", runURL, acmeAdmin, ""); st != 404 {
		t.Errorf("GET after DELETE = %d", st)
	}

	// Revoking a key is an edit of the file: no restart.
	writeKeys(t, keysFile, acmeAdmin, acmeWrite, globexAdmin)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ := call(t, "GET", g.URL+"/v1/runs", acmeRead, "")
		if st == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked key still answers %d", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, b := call(t, "GET", g.URL+"/v1/runs", acmeWrite, ""); st != 200 {
		t.Errorf("a kept key after the edit = %d %s", st, b)
	}
}

// A cancel by a key is on the run's record: who cancelled it.
func TestCancelIsAudited(t *testing.T) {
	m := startMock(t, anthropic.LongTool())
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "api-keys")
	writer := newTestKey(t, "ops-writer", "ops", auth.RoleWrite)
	canceller := newTestKey(t, "ops-oncall", "ops", auth.RoleWrite)
	writeKeys(t, keysFile, writer, canceller)
	settings := gatewayEnv(t, filepath.Join(dir, "data"))
	settings["AGENTGATE_API_KEYS_FILE"] = keysFile
	g := startGateway(t, settings, mockCreds(m))

	st, b := call(t, "POST", g.URL+"/v1/runs", writer, `{"agent":"claude","prompt":"run it","timeout_seconds":120}`)
	if st != 201 {
		t.Fatalf("POST = %d %s", st, b)
	}
	var run runs.Run
	_ = json.Unmarshal(b, &run)
	g.waitEventWith(t, run.ID, writer, runs.EventToolCallStarted, time.Minute)
	if st, b := call(t, "POST", g.URL+"/v1/runs/"+run.ID+"/cancel", canceller, ""); st != 200 {
		t.Fatalf("cancel = %d %s", st, b)
	}
	done := g.waitRunWith(t, run.ID, writer, time.Minute)
	if done.Status != runs.Cancelled || done.CancelledBy == nil || *done.CancelledBy != (runs.Actor{KeyID: "ops-oncall", Tenant: "ops"}) {
		t.Errorf("run %s cancelled by %+v", done.Status, done.CancelledBy)
	}
	if done.CreatedBy == nil || done.CreatedBy.KeyID != "ops-writer" {
		t.Errorf("created by %+v", done.CreatedBy)
	}
}

// streamTypes reads an SSE stream that needs no header to its end and
// returns its event types.
func streamTypes(t *testing.T, url string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream = %d %s", resp.StatusCode, b)
	}
	var types []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		if typ, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			types = append(types, typ)
		}
	}
	return types
}

// waitRunWith polls the run with key until it is terminal.
func (g *gateway) waitRunWith(t *testing.T, id string, key testKey, within time.Duration) runs.Run {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, b := call(t, "GET", g.URL+"/v1/runs/"+id, key, "")
		var r runs.Run
		if st == 200 && json.Unmarshal(b, &r) == nil && r.Status.Terminal() {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not finished after %s: %d %s", id, within, st, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitEventWith follows the run's NDJSON stream with key until an event of
// typ comes.
func (g *gateway) waitEventWith(t *testing.T, id string, key testKey, typ runs.EventType, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.URL+"/v1/runs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+key.secret)
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"type":"`+string(typ)+`"`) {
			return
		}
	}
	t.Fatalf("no %s event in run %s (stream: %d, %v)", typ, id, resp.StatusCode, sc.Err())
}
