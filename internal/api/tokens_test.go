package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/auth"
)

// issueToken asks for a stream token of run id with key keyID.
func issueToken(t *testing.T, h *harness, ts *keyedTenants, id, keyID string) streamTokenResponse {
	t.Helper()
	resp, b := h.do(t, "POST", "/v1/runs/"+id+"/stream-token", "", ts.bearer(t, keyID)...)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("stream token: %d %s", resp.StatusCode, b)
	}
	var tok streamTokenResponse
	if err := json.Unmarshal(b, &tok); err != nil {
		t.Fatalf("stream token body %s: %v", b, err)
	}
	return tok
}

// TestTokenStreamsWithoutKey: a token from POST stream-token opens its
// run's event stream without an Authorization header, as an EventSource
// does, until it expires.
func TestTokenStreamsWithoutKey(t *testing.T) {
	ts := newTenants(t)
	c := &calls{}
	h := newHarness(t, ts.config(), tenantService(t, c, nil))
	before := time.Now()
	tok := issueToken(t, h, ts, runA, keyID(tenantAcme, auth.RoleRead))
	if tok.Token == "" {
		t.Fatal("no token")
	}
	after := time.Now()
	// Whole seconds, rounded down, of the TTL from when it was issued.
	if earliest, latest := before.Add(DefaultStreamTokenTTL-time.Second), after.Add(DefaultStreamTokenTTL); tok.ExpiresAt.Before(earliest) || tok.ExpiresAt.After(latest) {
		t.Errorf("expires_at %s, want from %s to %s", tok.ExpiresAt, earliest, latest)
	}
	if tok.ExpiresAt.Nanosecond() != 0 {
		t.Errorf("expires_at %s is not whole seconds", tok.ExpiresAt)
	}
	if want := "/v1/runs/" + runA + "/events?token=" + tok.Token; tok.URL != want {
		t.Errorf("url %q, want %q", tok.URL, want)
	}
	claims, err := ts.signer.Verify(tok.Token, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want := (auth.StreamClaims{RunID: runA, Tenant: tenantAcme, KeyID: "acme-read", Expires: tok.ExpiresAt}); !claims.Expires.Equal(want.Expires) ||
		claims.RunID != want.RunID || claims.Tenant != want.Tenant || claims.KeyID != want.KeyID {
		t.Errorf("claims %+v, want %+v", claims, want)
	}

	resp, b := h.do(t, "GET", tok.URL, "")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), contentTypeSSE) {
		t.Fatalf("events by token: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if !strings.Contains(string(b), "event: run.completed") {
		t.Errorf("the stream lacks run.completed:\n%s", b)
	}
	if n := c.events.Load(); n != 1 {
		t.Errorf("events opened %d times, want 1", n)
	}
	// HEAD, which a client may use to check the URL, takes it too.
	if resp, b := h.do(t, "HEAD", tok.URL, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD events by token: %d %s", resp.StatusCode, b)
	}
	// A token in a URL must not be copied to the logs, which outlive it.
	for _, e := range h.logs.All() {
		if strings.Contains(fmt.Sprint(e.Message, e.ContextMap()), tok.Token) {
			t.Errorf("log line %q holds the token: %v", e.Message, e.ContextMap())
		}
	}
	// The request is the key's, for the audit trail.
	used := h.logs.FilterLoggerName("audit").FilterMessage("key used").FilterField(
		zap.String("path", "/v1/runs/"+runA+"/events")).All()
	if len(used) != 2 || used[0].ContextMap()["key_id"] != "acme-read" {
		t.Errorf("key used lines of the stream: %v", used)
	}
}

// TestTokenRefused: every token that is not good for the request is a 401
// invalid_token, and the stream is not opened.
func TestTokenRefused(t *testing.T) {
	ts := newTenants(t)
	c := &calls{}
	h := newHarness(t, ts.config(), tenantService(t, c, nil))
	good := issueToken(t, h, ts, runA, keyID(tenantAcme, auth.RoleWrite)).Token
	revokedKey := issueToken(t, h, ts, runA, keyID(tenantAcme, auth.RoleRead)).Token
	ts.keys.revoke(keyID(tenantAcme, auth.RoleRead))
	globexToken := issueToken(t, h, ts, runB, keyID(tenantGlobex, auth.RoleRead)).Token

	sign := func(cl auth.StreamClaims) string {
		tok, err := ts.signer.Issue(cl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	expired := sign(auth.StreamClaims{RunID: runA, Tenant: tenantAcme, KeyID: "acme-write", Expires: time.Now().Add(-time.Second)})
	// A token that names a tenant its key is not of: only a forger could
	// make one, but the key check must not trust the token's tenant.
	crossTenant := sign(auth.StreamClaims{RunID: runB, Tenant: tenantGlobex, KeyID: "acme-admin", Expires: time.Now().Add(time.Minute)})
	noKey := sign(auth.StreamClaims{RunID: runA, Tenant: tenantAcme, Expires: time.Now().Add(time.Minute)})
	other, err := auth.NewSigner([]byte(strings.Repeat("another secret!!", 2)))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issue(auth.StreamClaims{RunID: runA, Tenant: tenantAcme, KeyID: "acme-write", Expires: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}

	events := func(id string) string { return "/v1/runs/" + id + "/events?token=" }
	for _, tc := range []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"expired", "GET", events(runA) + expired, http.StatusUnauthorized, CodeInvalidToken},
		{"for another run", "GET", events(runB) + good, http.StatusUnauthorized, CodeInvalidToken},
		{"of another tenant's run", "GET", events(runA) + globexToken, http.StatusUnauthorized, CodeInvalidToken},
		{"flipped payload byte", "GET", events(runA) + flip(good, 5), http.StatusUnauthorized, CodeInvalidToken},
		{"flipped signature byte", "GET", events(runA) + flip(good, len(good)-10), http.StatusUnauthorized, CodeInvalidToken},
		{"cut short", "GET", events(runA) + good[:len(good)-1], http.StatusUnauthorized, CodeInvalidToken},
		{"not a token", "GET", events(runA) + "hello", http.StatusUnauthorized, CodeInvalidToken},
		{"signed with another secret", "GET", events(runA) + foreign, http.StatusUnauthorized, CodeInvalidToken},
		{"of a revoked key", "GET", events(runA) + revokedKey, http.StatusUnauthorized, CodeInvalidToken},
		{"of a key of another tenant", "GET", events(runB) + crossTenant, http.StatusUnauthorized, CodeInvalidToken},
		{"of no key", "GET", events(runA) + noKey, http.StatusUnauthorized, CodeInvalidToken},
		// A token is good for the event stream alone: anywhere else it
		// is refused as a token, which tells the client what is wrong.
		{"on GET of the run", "GET", "/v1/runs/" + runA + "?token=" + good, http.StatusUnauthorized, CodeInvalidToken},
		{"on cancel", "POST", "/v1/runs/" + runA + "/cancel?token=" + good, http.StatusUnauthorized, CodeInvalidToken},
		{"on DELETE", "DELETE", "/v1/runs/" + runA + "?token=" + good, http.StatusUnauthorized, CodeInvalidToken},
		{"on the listing", "GET", "/v1/runs?token=" + good, http.StatusUnauthorized, CodeInvalidToken},
		{"minting a token", "POST", "/v1/runs/" + runA + "/stream-token?token=" + good, http.StatusUnauthorized, CodeInvalidToken},
		{"on POST of the events", "POST", events(runA) + good, http.StatusUnauthorized, CodeInvalidToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.reset()
			resp, b := h.do(t, tc.method, tc.path, "")
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if e := decodeError(t, b); e.Code != tc.code {
				t.Errorf("code %q, want %q (%s)", e.Code, tc.code, e.Message)
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("no WWW-Authenticate")
			}
			for m, n := range c.handled() {
				if n != 0 {
					t.Errorf("the service's %s was called %d times", m, n)
				}
			}
		})
	}

	// The revoked key's token was good before; the good one still is.
	if resp, b := h.do(t, "GET", events(runA)+good, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("the good token: %d %s", resp.StatusCode, b)
	}
	// A token is not an API key.
	resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events", "", "Authorization", "Bearer "+good)
	if e := decodeError(t, b); resp.StatusCode != http.StatusUnauthorized || e.Code != CodeUnauthenticated {
		t.Errorf("a token as a bearer key: %d %+v", resp.StatusCode, e)
	}
}

// TestTokenCannotMintToken: a token reaches nothing but its stream, so it
// cannot get a new token that would outlive it.
func TestTokenCannotMintToken(t *testing.T) {
	ts := newTenants(t)
	h := newHarness(t, ts.config(), tenantService(t, &calls{}, nil))
	tok := issueToken(t, h, ts, runA, keyID(tenantAcme, auth.RoleAdmin)).Token
	resp, b := h.do(t, "POST", "/v1/runs/"+runA+"/stream-token?token="+url.QueryEscape(tok), "")
	if resp.StatusCode != http.StatusUnauthorized || decodeError(t, b).Code != CodeInvalidToken {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if n := h.logs.FilterMessage("stream token issued").Len(); n != 1 {
		t.Fatalf("%d tokens issued, want 1", n)
	}
}

// TestTokenWithoutSigner: without Tokens there are no stream tokens, and a
// ?token= is no credential.
func TestTokenWithoutSigner(t *testing.T) {
	ts := newTenants(t)
	cfg := ts.config()
	cfg.Tokens = nil
	h := newHarness(t, cfg, tenantService(t, &calls{}, nil))
	resp, b := h.do(t, "POST", "/v1/runs/"+runA+"/stream-token", "", ts.bearer(t, keyID(tenantAcme, auth.RoleRead))...)
	if resp.StatusCode != http.StatusNotFound || decodeError(t, b).Code != CodeNotFound {
		t.Errorf("stream token without a signer: %d %s", resp.StatusCode, b)
	}
	tok, err := ts.signer.Issue(auth.StreamClaims{RunID: runA, Tenant: tenantAcme, KeyID: "acme-read", Expires: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	resp, b = h.do(t, "GET", "/v1/runs/"+runA+"/events?token="+tok, "")
	if resp.StatusCode != http.StatusUnauthorized || decodeError(t, b).Code != CodeUnauthenticated {
		t.Errorf("a token without a signer: %d %s", resp.StatusCode, b)
	}
}

// flip changes the base64url character at i of tok to another one.
func flip(tok string, i int) string {
	b := []byte(tok)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
