package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/runs"
)

// Page sizes of GET /v1/runs.
const (
	defaultPageSize = 50
	maxPageSize     = 500
)

// listParams are the query parameters of GET /v1/runs.
var listParams = []string{"status", "agent", "limit", "cursor"}

// createRun answers POST /v1/runs: 201 with the run and its Location.
func (s *server) createRun(w http.ResponseWriter, r *http.Request) {
	if err := checkJSONContentType(r.Header); err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes+s.inlineAllowance(), s.cfg.BodyReadTimeout)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	spec, err := decodeRunRequest(body)
	if err = s.boundBody(len(body), s.cfg.MaxBodyBytes, spec.Attachments, err); err == nil {
		err = s.checkInline(runs.FieldAttachments, spec.Attachments)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if spec.IdempotencyKey, err = idempotencyKey(r.Header); err != nil {
		s.fail(w, r, err)
		return
	}
	run, err := s.svc.Submit(r.Context(), spec)
	if err != nil {
		s.fail(w, r, fmt.Errorf("submit run: %w", err))
		return
	}
	w.Header().Set("Location", "/v1/runs/"+url.PathEscape(run.ID))
	s.writeJSON(w, r, http.StatusCreated, run)
}

// getRun answers GET /v1/runs/{id}.
func (s *server) getRun(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	run, ok := ownedRun(r.Context())
	if !ok {
		var err error
		if run, err = s.ownRun(r.Context(), id); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	// The tenant check read the record alone; a queued run's answer has
	// its place in the queue too.
	s.svc.AddQueuePosition(r.Context(), &run)
	s.writeJSON(w, r, http.StatusOK, run)
}

// cancelRun answers POST /v1/runs/{id}/cancel: 200 with the run as it is
// now, whose status may still be running for a moment. It is idempotent:
// cancelling an ended run answers 200 with the run unchanged.
func (s *server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	run, err := s.svc.Cancel(r.Context(), id)
	if err != nil {
		s.fail(w, r, fmt.Errorf("cancel run %s: %w", id, err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, run)
}

// runList is the body of GET /v1/runs.
type runList struct {
	Runs       []runs.Run `json:"runs"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// listRuns answers GET /v1/runs?status=&agent=&limit=&cursor=, newest
// first. An unknown or repeated parameter is a 400, like an unknown body
// field: a typo must not silently widen the listing.
func (s *server) listRuns(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), principalFrom(r.Context()).Tenant)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.svc.List(r.Context(), f)
	if err != nil {
		s.fail(w, r, fmt.Errorf("list runs: %w", err))
		return
	}
	out := runList{Runs: page.Runs, NextCursor: page.NextCursor}
	if out.Runs == nil {
		out.Runs = []runs.Run{}
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

// parseFilter reads the query of GET /v1/runs. An empty value is the same
// as an absent one.
func parseFilter(q url.Values, tenant string) (runs.Filter, error) {
	f := runs.Filter{Limit: defaultPageSize, Tenant: tenant}
	for name, vs := range q {
		switch {
		case !slices.Contains(listParams, name):
			return runs.Filter{}, unknownField(name, listParams)
		case len(vs) > 1:
			return runs.Filter{}, invalidField(name, "appears more than once")
		}
	}
	if v := q.Get("status"); v != "" {
		f.Status = runs.State(v)
		if !f.Status.Valid() {
			names := make([]string, len(runs.States))
			for i, st := range runs.States {
				names[i] = string(st)
			}
			return runs.Filter{}, invalidField("status", "must be one of "+strings.Join(names, ", "))
		}
	}
	f.Agent = q.Get("agent")
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || !isDigits(v) || n < 1 || n > maxPageSize {
			return runs.Filter{}, invalidField("limit", fmt.Sprintf("must be an integer from 1 to %d", maxPageSize))
		}
		f.Limit = n
	}
	// A cursor is the id of the last run of the page before, so anything
	// but a run id is a client's mistake, not an empty page.
	if v := q.Get("cursor"); v != "" {
		if u, err := uuid.Parse(v); err != nil || u.String() != v {
			return runs.Filter{}, invalidField("cursor", "is not a cursor this listing gave out: pass next_cursor as it came")
		}
		f.Cursor = v
	}
	return f, nil
}

// listAgents answers GET /v1/agents.
func (s *server) listAgents(w http.ResponseWriter, r *http.Request) {
	agents := s.svc.Agents()
	if agents == nil {
		agents = []runs.AgentInfo{}
	}
	s.writeJSON(w, r, http.StatusOK, map[string][]runs.AgentInfo{"agents": agents})
}

// runID returns the {id} of the route. Run ids are UUIDs in canonical form;
// anything else cannot name a run, so it is a 404 without asking the
// service.
func runID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	if u, err := uuid.Parse(id); err != nil || u.String() != id {
		return "", edgeErr(http.StatusNotFound, CodeNotFound, "", "no run with id "+quote(id))
	}
	return id, nil
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// idempotencyKey reads the request's Idempotency-Key: at most 255
// printable ASCII characters; absent is fine.
func idempotencyKey(h http.Header) (string, error) {
	vals := h.Values("Idempotency-Key")
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", invalidHeader("Idempotency-Key", "given more than once")
	}
	k := vals[0]
	if k == "" || len(k) > maxIdempotencyKey {
		return "", invalidHeader("Idempotency-Key", fmt.Sprintf("must be 1 to %d characters", maxIdempotencyKey))
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", invalidHeader("Idempotency-Key", "must be printable ASCII without spaces")
		}
	}
	return k, nil
}
