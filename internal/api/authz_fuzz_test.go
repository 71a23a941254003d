package api

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/auth"
)

// FuzzAuthzCredentials: whatever a client puts in its Authorization header
// and its ?token=, without a key of the keyring or a token the signer made
// it gets a 401 with one of the three codes of identity, and no route does
// anything.
func FuzzAuthzCredentials(f *testing.F) {
	ts := newTenants(f)
	good, err := ts.signer.Issue(auth.StreamClaims{RunID: runA, Tenant: tenantAcme, KeyID: "acme-read", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	for i, seed := range []struct{ header, token string }{
		{"", ""}, {"Bearer", ""}, {"Bearer ", ""}, {"bearer agk_x", ""}, {"Basic YTpi", ""},
		{"Bearer a b", ""}, {"Bearer " + good, ""}, {"Bearer agk_" + good[3:], ""}, {"", good[:len(good)-1] + "A"},
		{"", "v1.e30.AAAA"}, {"", "v1..."}, {"", "v2." + good[3:]}, {"Bearer x==", "x"}, {"Token abc", good + "."},
		{"Bearer " + string(make([]byte, 1100)), ""}, {"", "\x00"},
	} {
		f.Add(seed.header, seed.token, uint8(i))
	}
	c := &calls{}
	h := New(ts.config(), tenantService(f, c, nil), nil, nil, nil)
	f.Fuzz(func(t *testing.T, header, token string, which uint8) {
		if _, err := ts.signer.Verify(token, time.Now()); err == nil {
			return // a genuine token: not what this fuzzes
		}
		rt := routes[int(which)%len(routes)]
		path := rt.pathFor(runA)
		if token != "" {
			path += "?token=" + url.QueryEscape(token)
		}
		req := httptest.NewRequest(rt.method, path, nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		c.reset()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("%s %s with Authorization %q: %d %s", rt.method, path, header, w.Code, w.Body)
		}
		if e := decodeError(t, w.Body.Bytes()); !slices.Contains([]string{CodeUnauthenticated, CodeInvalidAuthorization, CodeInvalidToken}, e.Code) {
			t.Fatalf("code %q", e.Code)
		}
		for m, n := range c.handled() {
			if n != 0 {
				t.Fatalf("%s was called", m)
			}
		}
	})
}
