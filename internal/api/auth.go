package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/console"
	"github.com/agentgate/agentgate/internal/runs"
)

// Keys finds the API key a bearer secret belongs to. auth.KeyFile
// implements it, re-reading its file when it changes.
type Keys interface {
	Lookup(secret string) (auth.Key, bool)
	// ByID finds a key by its id: a stream token dies with its key.
	ByID(id string) (auth.Key, bool)
}

// Tokens issues and verifies the stream tokens of browsers' EventSource,
// which cannot send an Authorization header. auth.Signer implements it;
// every replica holds the same secret, so a token verifies on any.
type Tokens interface {
	Issue(c auth.StreamClaims) (string, error)
	Verify(token string, now time.Time) (auth.StreamClaims, error)
}

// Error codes of identity, origin and quotas.
const (
	// CodeUnauthenticated: no API key, or one the gateway does not know
	// (401).
	CodeUnauthenticated = "unauthenticated"
	// CodeInvalidAuthorization: an Authorization header that is not one
	// "Bearer <key>" (401).
	CodeInvalidAuthorization = "invalid_authorization"
	// CodeInvalidToken: a stream token that is malformed, expired, badly
	// signed, for another run, or of a revoked key (401).
	CodeInvalidToken = "invalid_token"
	// CodeForbidden: the key's role does not allow the request (403).
	CodeForbidden = "forbidden"
	// CodeOriginNotAllowed: a browser request from an origin not in
	// AGENTGATE_CORS_ORIGINS that would change something (403).
	CodeOriginNotAllowed = "origin_not_allowed"
	// CodeHostNotAllowed: the Host header is not one the gateway serves,
	// as in DNS rebinding (421).
	CodeHostNotAllowed = "host_not_allowed"
	// CodeInvalidQuery: the query string does not parse (400).
	CodeInvalidQuery = "invalid_query"
	// CodeRateLimited: the tenant sends requests faster than its rate
	// (429, with Retry-After).
	CodeRateLimited = "rate_limited"
	// CodeTooManyRunning: the tenant has as many runs running as it may
	// (429, with Retry-After).
	CodeTooManyRunning = "too_many_running_runs"
	// CodeTooManyQueued: the tenant has as many runs queued as it may
	// (429, with Retry-After).
	CodeTooManyQueued = "too_many_queued_runs"
	// CodeTooManyOpen: the tenant has as many interactive runs open,
	// hibernated ones included, as it may (429, with Retry-After).
	CodeTooManyOpen = "too_many_open_conversations"
	// CodeDailyBudgetExceeded: the tenant's runs reached its daily cost
	// budget (429, with Retry-After to the next UTC day).
	CodeDailyBudgetExceeded = "daily_budget_exceeded"
	// CodeTooManyStreams: the tenant holds as many event streams open on
	// this replica as it may (429, with Retry-After).
	CodeTooManyStreams = "too_many_streams"
)

// DefaultStreamTokenTTL is how long a stream token lives.
const DefaultStreamTokenTTL = 5 * time.Minute

// principal is who a request acts as.
type principal struct {
	auth.Key
	// token is set for a request authenticated by a stream token: it
	// may read that one run, nothing else.
	token *auth.StreamClaims
}

type principalKey struct{}

func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// anonymous is the caller of a gateway without keys: the one tenant "",
// with every right. The gateway then listens only on loopback, unless its
// operator chose otherwise.
var anonymous = auth.Key{Role: auth.RoleAdmin}

// unauthenticatedRoutes answer without a key: a load balancer and a
// Prometheus server must reach them, and they say nothing of any run.
var unauthenticatedRoutes = []string{"/healthz", "/readyz", "/metrics"}

// consoleFile reports whether r reads a file of the web console: the page
// and its scripts carry no secret and say nothing of any run, and a
// browser cannot send a key with them.
func consoleFile(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return r.URL.Path == console.PagePath || strings.HasPrefix(r.URL.Path, console.Prefix)
}

// authenticate finds the request's key, or answers 401. With no Keys
// configured, every request is the anonymous admin.
func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(unauthenticatedRoutes, r.URL.Path) || r.Method == http.MethodOptions ||
			(slices.Contains(specRoutes, r.URL.Path) && safeMethod(r.Method)) || consoleFile(r) || triggerDelivery(r) {
			next.ServeHTTP(w, r)
			return
		}
		p, err := s.principal(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentgate"`)
			s.fail(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), principalKey{}, p)
		ctx = runs.WithActor(ctx, runs.Actor{KeyID: p.ID, Tenant: p.Tenant})
		if s.cfg.Keys != nil {
			s.audit.Info("key used", zap.String("key_id", p.ID), zap.String("tenant", p.Tenant),
				zap.String("method", methodLabel(r.Method)), zap.String("path", r.URL.Path))
		}
		if err := s.limits.allow(p.Tenant); err != nil {
			s.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// principal reads the request's credentials: a bearer key, or, on the
// event stream alone, a stream token in ?token=.
func (s *server) principal(r *http.Request) (principal, error) {
	if s.cfg.Keys == nil {
		return principal{Key: anonymous}, nil
	}
	secret, ok, err := auth.ParseBearer(r.Header)
	if err != nil {
		return principal{}, edgeErr(http.StatusUnauthorized, CodeInvalidAuthorization, "",
			"the Authorization header must be exactly one \"Bearer <API key>\"")
	}
	if ok {
		key, found := s.cfg.Keys.Lookup(secret)
		if !found {
			return principal{}, edgeErr(http.StatusUnauthorized, CodeUnauthenticated, "", "the API key is not valid (unknown or revoked)")
		}
		return principal{Key: key}, nil
	}
	if tok := r.URL.Query().Get("token"); tok != "" && s.cfg.Tokens != nil {
		return s.streamPrincipal(r, tok)
	}
	return principal{}, edgeErr(http.StatusUnauthorized, CodeUnauthenticated, "",
		"this route needs an API key: send Authorization: Bearer <key>")
}

// streamPrincipal verifies a stream token. It is accepted only where a
// browser's EventSource needs it: GET (or HEAD) of one run's events.
func (s *server) streamPrincipal(r *http.Request, tok string) (principal, error) {
	invalid := func(msg string) (principal, error) {
		return principal{}, edgeErr(http.StatusUnauthorized, CodeInvalidToken, "", msg)
	}
	runID, ok := eventsRoute(r)
	if !ok {
		return invalid("a stream token is accepted only by GET /v1/runs/{id}/events; send an API key")
	}
	c, err := s.cfg.Tokens.Verify(tok, time.Now())
	switch {
	case errors.Is(err, auth.ErrTokenExpired):
		return invalid("the stream token has expired: ask for a new one with POST /v1/runs/{id}/stream-token")
	case err != nil:
		return invalid("the stream token is not valid")
	case !c.Allows(runID):
		return invalid("the stream token is for another run")
	}
	key, found := s.cfg.Keys.ByID(c.KeyID)
	if !found || key.Tenant != c.Tenant {
		return invalid("the key that asked for this stream token has been revoked")
	}
	return principal{Key: auth.Key{ID: key.ID, Tenant: key.Tenant, Role: auth.RoleRead}, token: &c}, nil
}

// eventsRoute returns the run id of a GET or HEAD of /v1/runs/{id}/events.
func eventsRoute(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/runs/")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/events")
	return id, ok && id != "" && !strings.Contains(id, "/")
}

// need answers 403 unless the request's key has role.
func (s *server) need(role auth.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principalFrom(r.Context())
			if !p.Role.Allows(role) {
				s.fail(w, r, edgeErr(http.StatusForbidden, CodeForbidden, "",
					fmt.Sprintf("the key %q has the role %s; this request needs %s", p.ID, p.Role, role)))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// ownRun returns the run if the request's tenant owns it. Another
// tenant's run is a 404, as a run that does not exist: whether an id
// exists elsewhere is not the caller's to know.
func (s *server) ownRun(ctx context.Context, id string) (runs.Run, error) {
	run, err := s.svc.Record(ctx, id)
	if err != nil {
		return runs.Run{}, noRun(id, err)
	}
	if run.Tenant != principalFrom(ctx).Tenant {
		return runs.Run{}, noRun(id, runs.ErrNotFound)
	}
	return run, nil
}

// noRun is err as the client is told it: a run that is not there, or is
// another tenant's, is one plain sentence with its id, whatever layers the
// error passed through; any other error is left as it is.
func noRun(id string, err error) error {
	if errors.Is(err, runs.ErrNotFound) {
		return edgeErr(http.StatusNotFound, CodeNotFound, "", "no run with id "+quote(id))
	}
	return err
}

// checkHost answers 421 for a Host the gateway does not serve: a page on
// another site that rebinds its name to the gateway's address must not
// reach the API with the victim's network position.
func (s *server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(unauthenticatedRoutes, r.URL.Path) || s.hostAllowed(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		s.fail(w, r, edgeErr(http.StatusMisdirectedRequest, CodeHostNotAllowed, "",
			"the Host "+quote(r.Host)+" is not one this gateway serves (AGENTGATE_ALLOWED_HOSTS)"))
	})
}

// hostAllowed: with AllowedHosts set, only those names; else, with
// LoopbackHostsOnly, loopback names and addresses; else any.
func (s *server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if len(s.cfg.AllowedHosts) > 0 {
		for _, h := range s.cfg.AllowedHosts {
			if strings.EqualFold(h, host) {
				return true
			}
		}
		return false
	}
	if !s.cfg.LoopbackHostsOnly {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errRequestTimeout is why a request's context ended when the gateway, not
// the client, gave up on it.
var errRequestTimeout = errors.New("the request took longer than AGENTGATE_REQUEST_TIMEOUT")

// bounded gives every request but an event stream RequestTimeout to get
// its answer: a store that hangs must not hold requests (and their
// connections) for ever.
func (s *server) bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, stream := eventsRoute(r); stream {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeoutCause(r.Context(), s.cfg.RequestTimeout, errRequestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// checkQuery refuses a query string that does not parse: Go's parser
// drops what it cannot read (a ";" for one), and a filter silently
// dropped widens a listing.
func (s *server) checkQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
				s.fail(w, r, edgeErr(http.StatusBadRequest, CodeInvalidQuery, "",
					"the query string does not parse: "+echoed(err.Error())))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// cors answers browsers: an origin in CORSOrigins may call the API
// (preflights get the methods and headers the API takes); any other
// origin gets no CORS headers, and its requests that would change
// something are refused outright: a simple cross-site form POST needs no
// preflight, and on a gateway without keys the victim's browser is all
// the credential it needs. The gateway's own origin (as the Host or a
// proxy's X-Forwarded-Host names it) and pages on this machine (another
// local port) are not cross-site.
func (s *server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		allowed := slices.Contains(s.cfg.CORSOrigins, origin)
		if len(s.cfg.CORSOrigins) > 0 {
			// The answer depends on the origin: no cache may give
			// one origin's answer to another.
			w.Header().Add("Vary", "Origin")
		}
		if allowed {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", "Location, Retry-After, WWW-Authenticate, X-Diff-Truncated")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			if !allowed {
				s.fail(w, r, edgeErr(http.StatusForbidden, CodeOriginNotAllowed, "",
					"the origin "+quote(origin)+" is not allowed (AGENTGATE_CORS_ORIGINS)"))
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Last-Event-ID")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if !allowed && !safeMethod(r.Method) && !sameOrigin(origin, r) && !loopbackOrigin(origin) {
			s.fail(w, r, edgeErr(http.StatusForbidden, CodeOriginNotAllowed, "",
				"the origin "+quote(origin)+" may not change anything here (AGENTGATE_CORS_ORIGINS)"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackOrigin reports whether a browser's Origin is a page on this
// machine (another local port, as a local console or proxy serves it).
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin reports whether a browser's Origin is the gateway's own
// address as the request named it: a page the gateway's origin serves.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	// A proxy in front that rewrote Host says which it was.
	fwd := r.Header.Get("X-Forwarded-Host")
	return fwd != "" && strings.EqualFold(u.Host, strings.TrimSpace(strings.Split(fwd, ",")[0]))
}

// retryAfterHeader sets Retry-After to d, in whole seconds, at least 1.
func retryAfterHeader(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))))
}

func zapKey(p principal) zap.Field {
	return zap.Dict("key", zap.String("id", p.ID), zap.String("tenant", p.Tenant))
}
func zapRun(id string) zap.Field { return zap.String("run_id", id) }
