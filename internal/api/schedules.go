package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/schedules"
)

// Schedules is what the schedule routes need of the service: the
// schedules are the caller's tenant's, as runs.ActorFrom(ctx) names it.
// Errors wrap runs.ErrNotFound, a *runs.FieldError or an
// *autorun.LimitError.
type Schedules interface {
	CreateSchedule(ctx context.Context, req schedules.Request) (schedules.View, error)
	GetSchedule(ctx context.Context, id string) (schedules.View, error)
	ListSchedules(ctx context.Context) ([]schedules.View, error)
	UpdateSchedule(ctx context.Context, id string, p schedules.Patch) (schedules.View, error)
	DeleteSchedule(ctx context.Context, id string) error
	// FireSchedule fires a schedule now; a retry with the same
	// idempotency key ("" for none) fires once.
	FireSchedule(ctx context.Context, id, idempotencyKey string) (schedules.Fire, error)
	ScheduleFires(ctx context.Context, id string, limit int) ([]schedules.Fire, error)
}

// CodeTooManySchedules: the tenant keeps
// AGENTGATE_MAX_SCHEDULES_PER_TENANT schedules (429).
const CodeTooManySchedules = schedules.CodeTooMany

// The fields of a schedule's request body.
var scheduleFields = []string{"name", "cron", "timezone", "every", "run", "when_busy", "catch_up", "paused"}

// ScheduleList is the body of GET /v1/schedules.
type ScheduleList struct {
	Schedules []schedules.View `json:"schedules"`
}

// FireList is the body of GET /v1/schedules/{id}/fires.
type FireList struct {
	Fires []schedules.Fire `json:"fires"`
}

// schedulesOf returns the service's schedules, or fails the request with
// a 404 on a gateway that has none.
func (s *server) schedulesOf(w http.ResponseWriter, r *http.Request) (Schedules, bool) {
	sc, ok := s.svc.(Schedules)
	if !ok {
		s.fail(w, r, edgeErr(http.StatusNotFound, CodeNotFound, "", "this gateway keeps no schedules"))
	}
	return sc, ok
}

// ownerID is the route's {id} of a schedule or a trigger: a UUID, or a
// 404 without a lookup.
func ownerID(r *http.Request, what string) (string, error) {
	id := chi.URLParam(r, "id")
	if u, err := uuid.Parse(id); err != nil || u.String() != id {
		return "", edgeErr(http.StatusNotFound, CodeNotFound, "", "no "+what+" with id "+quote(id))
	}
	return id, nil
}

// readRequestObject reads a JSON body of known fields.
func (s *server) readRequestObject(w http.ResponseWriter, r *http.Request, known []string) (fields, error) {
	if err := checkJSONContentType(r.Header); err != nil {
		return nil, err
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyReadTimeout)
	if err != nil {
		return nil, err
	}
	members, err := readObject(body)
	if err != nil {
		return nil, err
	}
	return byName(members, known)
}

// createSchedule answers POST /v1/schedules: 201 with the schedule.
func (s *server) createSchedule(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.schedulesOf(w, r)
	if !ok {
		return
	}
	f, err := s.readRequestObject(w, r, scheduleFields)
	var req schedules.Request
	if err == nil {
		req, err = decodeScheduleRequest(f)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := sc.CreateSchedule(r.Context(), req)
	if err != nil {
		s.fail(w, r, fmt.Errorf("create schedule: %w", err))
		return
	}
	w.Header().Set("Location", "/v1/schedules/"+url.PathEscape(v.ID))
	s.writeJSON(w, r, http.StatusCreated, v)
}

// decodeScheduleRequest reads a new schedule; "name" and "run" are
// required.
func decodeScheduleRequest(f fields) (schedules.Request, error) {
	p, err := decodeSchedulePatch(f)
	if err != nil {
		return schedules.Request{}, err
	}
	if p.Run == nil {
		return schedules.Request{}, invalidField("run", "is required: the body of a POST /v1/runs that each fire submits")
	}
	if p.Name == nil {
		return schedules.Request{}, invalidField("name", "is required: a few words that say what runs")
	}
	req := schedules.Request{Name: *p.Name, Run: *p.Run}
	for dst, v := range map[*string]*string{&req.Cron: p.Cron, &req.Timezone: p.Timezone, &req.Every: p.Every} {
		if v != nil {
			*dst = *v
		}
	}
	if p.WhenBusy != nil {
		req.WhenBusy = *p.WhenBusy
	}
	if p.CatchUp != nil {
		req.CatchUp = *p.CatchUp
	}
	if p.Paused != nil {
		req.Paused = *p.Paused
	}
	return req, nil
}

// decodeSchedulePatch reads the fields given.
func decodeSchedulePatch(f fields) (schedules.Patch, error) {
	var p schedules.Patch
	for name, dst := range map[string]**string{"name": &p.Name, "cron": &p.Cron, "timezone": &p.Timezone, "every": &p.Every} {
		v, given, err := f.str(name)
		if err != nil {
			return p, err
		}
		if given {
			*dst = &v
		}
	}
	var err error
	if p.Run, p.WhenBusy, p.Paused, err = decodeOwnerFields(f); err != nil {
		return p, err
	}
	if v, given, err := f.str("catch_up"); err != nil {
		return p, err
	} else if given {
		c := schedules.CatchUp(v)
		p.CatchUp = &c
	}
	return p, nil
}

// decodeOwnerFields reads what schedules and triggers share: their run
// request, when_busy and paused, each nil when not given.
func decodeOwnerFields(f fields) (run *runs.Spec, whenBusy *autorun.WhenBusy, paused *bool, err error) {
	if raw := f.get("run"); raw != nil {
		spec, err := decodeRunRequest(raw)
		if err != nil {
			return nil, nil, nil, inRun(err)
		}
		run = &spec
	}
	if v, given, err := f.str("when_busy"); err != nil {
		return nil, nil, nil, err
	} else if given {
		w := autorun.WhenBusy(v)
		whenBusy = &w
	}
	if f.get("paused") != nil {
		b, err := f.boolean("paused")
		if err != nil {
			return nil, nil, nil, err
		}
		paused = &b
	}
	return run, whenBusy, paused, nil
}

// inRun names a field of the run request inside the body that holds it
// ("run.prompt"), in the API's own errors as autorun.InRun does in the
// service's.
func inRun(err error) error {
	var edge *edgeError
	if !errors.As(err, &edge) {
		return autorun.InRun(err)
	}
	c := *edge
	if c.field != "" {
		c.msg = strings.Replace(c.msg, quote(c.field), quote("run."+c.field), 1)
		c.field = "run." + c.field
	} else {
		c.msg = "run: " + c.msg
	}
	return &c
}

// getSchedule answers GET /v1/schedules/{id}.
func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) {
	s.withSchedule(w, r, func(sc Schedules, id string) (int, any, error) {
		v, err := sc.GetSchedule(r.Context(), id)
		return http.StatusOK, v, err
	})
}

// listSchedules answers GET /v1/schedules.
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.schedulesOf(w, r)
	if !ok {
		return
	}
	list, err := sc.ListSchedules(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("list schedules: %w", err))
		return
	}
	if list == nil {
		list = []schedules.View{}
	}
	s.writeJSON(w, r, http.StatusOK, ScheduleList{Schedules: list})
}

// updateSchedule answers PATCH /v1/schedules/{id}.
func (s *server) updateSchedule(w http.ResponseWriter, r *http.Request) {
	s.withSchedule(w, r, func(sc Schedules, id string) (int, any, error) {
		f, err := s.readRequestObject(w, r, scheduleFields)
		if err != nil {
			return 0, nil, err
		}
		p, err := decodeSchedulePatch(f)
		if err != nil {
			return 0, nil, err
		}
		v, err := sc.UpdateSchedule(r.Context(), id, p)
		return http.StatusOK, v, err
	})
}

// deleteSchedule answers DELETE /v1/schedules/{id}: 204.
func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	s.withSchedule(w, r, func(sc Schedules, id string) (int, any, error) {
		return http.StatusNoContent, nil, sc.DeleteSchedule(r.Context(), id)
	})
}

// fireSchedule answers POST /v1/schedules/{id}/run: 201 with the fire
// when it started a run, 200 with it when not.
func (s *server) fireSchedule(w http.ResponseWriter, r *http.Request) {
	s.withSchedule(w, r, func(sc Schedules, id string) (int, any, error) {
		key, err := idempotencyKey(r.Header)
		if err != nil {
			return 0, nil, err
		}
		f, err := sc.FireSchedule(r.Context(), id, key)
		if err == nil && f.Outcome == autorun.Started {
			w.Header().Set("Location", "/v1/runs/"+url.PathEscape(f.RunID))
			return http.StatusCreated, f, nil
		}
		return http.StatusOK, f, err
	})
}

// scheduleFires answers GET /v1/schedules/{id}/fires?limit=.
func (s *server) scheduleFires(w http.ResponseWriter, r *http.Request) {
	s.withSchedule(w, r, func(sc Schedules, id string) (int, any, error) {
		limit, err := recordsLimit(r.URL.Query())
		if err != nil {
			return 0, nil, err
		}
		fires, err := sc.ScheduleFires(r.Context(), id, limit)
		if fires == nil {
			fires = []schedules.Fire{}
		}
		return http.StatusOK, FireList{Fires: fires}, err
	})
}

// withSchedule runs one schedule's handler and answers with what it
// returns.
func (s *server) withSchedule(w http.ResponseWriter, r *http.Request, h func(Schedules, string) (int, any, error)) {
	if sc, ok := s.schedulesOf(w, r); ok {
		withOwner(s, w, r, "schedule", sc, h)
	}
}

// withOwner runs the handler of one schedule or trigger (what) of the
// service svc, with the route's id, and answers with what it returns.
func withOwner[S any](s *server, w http.ResponseWriter, r *http.Request, what string, svc S, h func(S, string) (int, any, error)) {
	id, err := ownerID(r, what)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status, body, err := h(svc, id)
	if err != nil {
		s.fail(w, r, fmt.Errorf("%s %s: %w", what, id, err))
		return
	}
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	s.writeJSON(w, r, status, body)
}

// recordsLimit reads ?limit= of a listing of fires or deliveries: 1 to
// autorun.MaxRecent, all of them by default.
func recordsLimit(q url.Values) (int, error) {
	for name, vs := range q {
		switch {
		case name != "limit":
			return 0, unknownField(name, []string{"limit"})
		case len(vs) > 1:
			return 0, invalidField(name, "appears more than once")
		}
	}
	v := q.Get("limit")
	if v == "" {
		return autorun.MaxRecent, nil
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' || n > autorun.MaxRecent {
			return 0, invalidField("limit", fmt.Sprintf("must be an integer from 1 to %d", autorun.MaxRecent))
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > autorun.MaxRecent {
		return 0, invalidField("limit", fmt.Sprintf("must be an integer from 1 to %d", autorun.MaxRecent))
	}
	return n, nil
}
