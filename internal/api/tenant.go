package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/runs"
)

type ownedRunKey struct{}

// ownedRunBox holds the run owned found for a request, in its context.
type ownedRunBox struct {
	run   runs.Run
	found bool
}

// ownedRun returns the run that owned found for the request.
func ownedRun(ctx context.Context) (runs.Run, bool) {
	b, _ := ctx.Value(ownedRunKey{}).(*ownedRunBox)
	if b == nil || !b.found {
		return runs.Run{}, false
	}
	return b.run, true
}

// releaseOwnedRun lets go of the run owned found, for a handler that
// outlives its use of it: an event stream lasts as long as its run, and
// the run (its prompt among it) would stay in the request's context all
// that time, a few KiB for each client. ownedRun finds nothing after it.
// Only the request's own goroutine may call it.
func releaseOwnedRun(ctx context.Context) {
	if b, _ := ctx.Value(ownedRunKey{}).(*ownedRunBox); b != nil {
		*b = ownedRunBox{}
	}
}

// owned answers 404 for a route of a run that is not the caller's
// tenant's, before its handler runs, and gives the handler the run. A
// stream token reaches only its own run: it is checked again here, with
// the run's tenant.
func (s *server) owned(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r, ok := s.ownedRequest(w, r); ok {
			next.ServeHTTP(w, r)
		}
	})
}

// ownedRequest is owned's check: the request with its run, or !ok once it
// has answered. A call of its own, so that the run it looks at is not on
// the stack of a handler below it, such as an event stream that lasts as
// long as its run.
//
//go:noinline
func (s *server) ownedRequest(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	run, err := s.ownRun(ctx, id)
	cancel()
	if err != nil {
		s.fail(w, r, fmt.Errorf("run %s: %w", id, err))
		return nil, false
	}
	if p := principalFrom(r.Context()); p.token != nil && !p.token.Allows(run.ID) {
		s.fail(w, r, edgeErr(http.StatusUnauthorized, CodeInvalidToken, "", "the stream token is for another run"))
		return nil, false
	}
	return r.WithContext(context.WithValue(r.Context(), ownedRunKey{}, &ownedRunBox{run: run, found: true})), true
}

// streamGate bounds the tenant's open streams on this replica and answers
// HEAD of a stream with its headers alone.
func (s *server) streamGate(stream http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			h := w.Header()
			if prefersNDJSON(r.Header.Values("Accept")) {
				h.Set("Content-Type", "application/x-ndjson")
			} else {
				h.Set("Content-Type", "text/event-stream")
			}
			h.Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			return
		}
		release, err := s.limits.openStream(principalFrom(r.Context()).Tenant)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer release()
		stream(w, r)
	}
}

// deleteRun answers DELETE /v1/runs/{id}: 204 once a finished run's
// record, events and directory are gone; 409 run_not_finished for a run
// that has not ended.
func (s *server) deleteRun(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if err := s.svc.Delete(ctx, id); err != nil {
		s.fail(w, r, fmt.Errorf("delete run %s: %w", id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// streamTokenResponse is the body of POST /v1/runs/{id}/stream-token.
type streamTokenResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	// URL is the run's event stream with the token, for EventSource.
	URL string `json:"url"`
}

// streamToken answers POST /v1/runs/{id}/stream-token: a token that lets
// a browser's EventSource, which cannot send an Authorization header,
// read this one run's events for a few minutes, on any replica.
func (s *server) streamToken(w http.ResponseWriter, r *http.Request) {
	run, _ := ownedRun(r.Context())
	p := principalFrom(r.Context())
	if s.cfg.Tokens == nil || p.token != nil {
		// A token cannot beget tokens: it would outlive its own expiry.
		s.fail(w, r, edgeErr(http.StatusNotFound, CodeNotFound, "", "stream tokens are not enabled on this gateway"))
		return
	}
	exp := time.Now().Add(s.cfg.StreamTokenTTL).Truncate(time.Second)
	tok, err := s.cfg.Tokens.Issue(auth.StreamClaims{RunID: run.ID, Tenant: run.Tenant, KeyID: p.ID, Expires: exp})
	if err != nil {
		s.fail(w, r, fmt.Errorf("issue stream token: %w", err))
		return
	}
	s.audit.Info("stream token issued", zapKey(p), zapRun(run.ID))
	s.writeJSON(w, r, http.StatusCreated, streamTokenResponse{
		Token: tok, ExpiresAt: exp.UTC(), URL: "/v1/runs/" + run.ID + "/events?token=" + tok,
	})
}
