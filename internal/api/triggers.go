package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/triggers"
)

// Triggers is what the trigger routes need of the service: the triggers
// are the caller's tenant's, but for Deliver, which proves a delivery by
// the trigger's own secret. Errors wrap runs.ErrNotFound, a
// *runs.FieldError, an *autorun.LimitError, a *runs.ConflictError or
// triggers.ErrBadProof.
type Triggers interface {
	CreateTrigger(ctx context.Context, req triggers.Request) (triggers.View, error)
	GetTrigger(ctx context.Context, id string) (triggers.View, error)
	ListTriggers(ctx context.Context) ([]triggers.View, error)
	UpdateTrigger(ctx context.Context, id string, p triggers.Patch) (triggers.View, error)
	DeleteTrigger(ctx context.Context, id string) error
	RotateTrigger(ctx context.Context, id string, keep time.Duration) (triggers.View, error)
	TriggerDeliveries(ctx context.Context, id string, limit int) ([]triggers.Delivery, error)
	// Deliver answers a delivery: dup when it came before. admit, called
	// once the delivery is proved, refuses it past the trigger's rate.
	Deliver(ctx context.Context, id string, h http.Header, body []byte, admit func() error) (d triggers.Delivery, dup bool, err error)
	// DeliveryRefused counts a delivery the API refused itself.
	DeliveryRefused(outcome string)
}

// Error codes of triggers.
const (
	// CodeTooManyTriggers: the tenant keeps
	// AGENTGATE_MAX_TRIGGERS_PER_TENANT triggers (429).
	CodeTooManyTriggers = triggers.CodeTooMany
	// CodeInvalidPayload: a delivery's body is not JSON (400).
	CodeInvalidPayload = triggers.CodeInvalidPayload
	// CodeDeliveryInProgress: a delivery with this id is being started
	// by another request (409); send it again.
	CodeDeliveryInProgress = triggers.ConflictInProgress
)

// Defaults of the deliveries' bounds.
const (
	DefaultTriggerMaxBodyBytes = 1 << 20
	DefaultTriggerRate         = 1
	DefaultTriggerBurst        = 10
)

var triggerFields = []string{"name", "run", "when_busy", "verify", "paused"}

// TriggerList is the body of GET /v1/triggers.
type TriggerList struct {
	Triggers []triggers.View `json:"triggers"`
}

// DeliveryList is the body of GET /v1/triggers/{id}/deliveries.
type DeliveryList struct {
	Deliveries []triggers.Delivery `json:"deliveries"`
}

// deliveriesRoute matches POST /v1/triggers/{id}/deliveries, which answers
// without an API key.
var deliveriesRoute = regexp.MustCompile(`^/v1/triggers/[^/]+/deliveries$`)

func triggerDelivery(r *http.Request) bool {
	return r.Method == http.MethodPost && deliveriesRoute.MatchString(r.URL.Path)
}

func (s *server) triggersOf(w http.ResponseWriter, r *http.Request) (Triggers, bool) {
	tr, ok := s.svc.(Triggers)
	if !ok {
		s.fail(w, r, edgeErr(http.StatusNotFound, CodeNotFound, "", "this gateway keeps no triggers"))
	}
	return tr, ok
}

// createTrigger answers POST /v1/triggers: 201 with the trigger and, this
// once, its secret.
func (s *server) createTrigger(w http.ResponseWriter, r *http.Request) {
	tr, ok := s.triggersOf(w, r)
	if !ok {
		return
	}
	f, err := s.readRequestObject(w, r, triggerFields)
	var req triggers.Request
	if err == nil {
		req, err = decodeTriggerRequest(f)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := tr.CreateTrigger(r.Context(), req)
	if err != nil {
		s.fail(w, r, fmt.Errorf("create trigger: %w", err))
		return
	}
	w.Header().Set("Location", "/v1/triggers/"+url.PathEscape(v.ID))
	s.writeJSON(w, r, http.StatusCreated, s.absolute(r, v))
}

func decodeTriggerRequest(f fields) (triggers.Request, error) {
	p, err := decodeTriggerPatch(f, true)
	if err != nil {
		return triggers.Request{}, err
	}
	switch {
	case p.Name == nil:
		return triggers.Request{}, invalidField("name", "is required: a few words that say what starts")
	case p.Run == nil:
		return triggers.Request{}, invalidField("run", "is required: the body of a POST /v1/runs that each delivery submits, its prompt a template")
	}
	req := triggers.Request{Name: *p.Name, Run: *p.Run}
	v, _, err := f.str("verify")
	if err != nil {
		return req, err
	}
	if v == "" {
		return req, invalidField("verify", `is required: "token", "github" or "standard_webhooks"`)
	}
	req.Verify = triggers.Verify(v)
	if p.WhenBusy != nil {
		req.WhenBusy = *p.WhenBusy
	}
	if p.Paused != nil {
		req.Paused = *p.Paused
	}
	return req, nil
}

// decodeTriggerPatch reads the fields given; verify only when creating.
func decodeTriggerPatch(f fields, creating bool) (triggers.Patch, error) {
	var p triggers.Patch
	if !creating && f.get("verify") != nil {
		return p, invalidField("verify", "cannot change: its senders hold a secret of its kind; make a new trigger")
	}
	if v, given, err := f.str("name"); err != nil {
		return p, err
	} else if given {
		p.Name = &v
	}
	var err error
	p.Run, p.WhenBusy, p.Paused, err = decodeOwnerFields(f)
	return p, err
}

// absolute makes v's URL the one senders use: AGENTGATE_PUBLIC_URL's, or
// this request's.
func (s *server) absolute(r *http.Request, v triggers.View) triggers.View {
	base := strings.TrimSuffix(s.cfg.PublicURL, "/")
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	v.URL = base + v.URL
	return v
}

func (s *server) getTrigger(w http.ResponseWriter, r *http.Request) {
	s.withTrigger(w, r, func(tr Triggers, id string) (int, any, error) {
		v, err := tr.GetTrigger(r.Context(), id)
		return http.StatusOK, s.absolute(r, v), err
	})
}

func (s *server) listTriggers(w http.ResponseWriter, r *http.Request) {
	tr, ok := s.triggersOf(w, r)
	if !ok {
		return
	}
	list, err := tr.ListTriggers(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("list triggers: %w", err))
		return
	}
	out := TriggerList{Triggers: make([]triggers.View, 0, len(list))}
	for _, v := range list {
		out.Triggers = append(out.Triggers, s.absolute(r, v))
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

func (s *server) updateTrigger(w http.ResponseWriter, r *http.Request) {
	s.withTrigger(w, r, func(tr Triggers, id string) (int, any, error) {
		f, err := s.readRequestObject(w, r, triggerFields)
		if err != nil {
			return 0, nil, err
		}
		p, err := decodeTriggerPatch(f, false)
		if err != nil {
			return 0, nil, err
		}
		v, err := tr.UpdateTrigger(r.Context(), id, p)
		return http.StatusOK, s.absolute(r, v), err
	})
}

func (s *server) deleteTrigger(w http.ResponseWriter, r *http.Request) {
	s.withTrigger(w, r, func(tr Triggers, id string) (int, any, error) {
		return http.StatusNoContent, nil, tr.DeleteTrigger(r.Context(), id)
	})
}

// rotateTrigger answers POST /v1/triggers/{id}/rotate
// {"keep_previous_seconds": N}: the new secret, shown this once.
func (s *server) rotateTrigger(w http.ResponseWriter, r *http.Request) {
	s.withTrigger(w, r, func(tr Triggers, id string) (int, any, error) {
		body, err := readBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyReadTimeout)
		if err != nil {
			return 0, nil, err
		}
		f, err := readFields(body, []string{"keep_previous_seconds"})
		if err != nil {
			return 0, nil, err
		}
		keep := 24 * 60 * 60
		if f.get("keep_previous_seconds") != nil {
			if keep, err = f.integer("keep_previous_seconds", 0, int(triggers.MaxKeepPrevious.Seconds())); err != nil {
				return 0, nil, err
			}
		}
		v, err := tr.RotateTrigger(r.Context(), id, time.Duration(keep)*time.Second)
		return http.StatusOK, s.absolute(r, v), err
	})
}

func (s *server) triggerDeliveries(w http.ResponseWriter, r *http.Request) {
	s.withTrigger(w, r, func(tr Triggers, id string) (int, any, error) {
		limit, err := recordsLimit(r.URL.Query())
		if err != nil {
			return 0, nil, err
		}
		list, err := tr.TriggerDeliveries(r.Context(), id, limit)
		if list == nil {
			list = []triggers.Delivery{}
		}
		return http.StatusOK, DeliveryList{Deliveries: list}, err
	})
}

func (s *server) withTrigger(w http.ResponseWriter, r *http.Request, h func(Triggers, string) (int, any, error)) {
	if tr, ok := s.triggersOf(w, r); ok {
		withOwner(s, w, r, "trigger", tr, h)
	}
}

// badProof is the one answer to a delivery that does not prove its
// trigger: it says nothing of whether the trigger exists.
func badProof() *edgeError {
	return edgeErr(http.StatusUnauthorized, CodeUnauthenticated, "",
		"the delivery's proof is missing or not valid for this URL")
}

// deliver answers POST /v1/triggers/{id}/deliveries, which needs no API
// key: 202 with what the delivery started, 200 with the first one's for
// a delivery id that came before.
func (s *server) deliver(w http.ResponseWriter, r *http.Request) {
	tr, ok := s.svc.(Triggers)
	id, err := ownerID(r, "trigger")
	if !ok || err != nil {
		s.fail(w, r, badProof())
		return
	}
	body, err := readBody(w, r, s.cfg.TriggerMaxBodyBytes, s.cfg.BodyReadTimeout)
	if err != nil {
		var edge *edgeError
		if errors.As(err, &edge) && edge.code == CodeBodyTooLarge {
			tr.DeliveryRefused(triggers.OutcomeTooLarge)
		}
		s.fail(w, r, err)
		return
	}
	// Only a proved delivery spends the trigger's rate: a stranger who
	// knows its URL cannot use it up.
	admit := func() error {
		err := s.triggerLimits.allow(id)
		var edge *edgeError
		if errors.As(err, &edge) {
			edge.msg = fmt.Sprintf("this trigger takes at most %g deliveries a second (burst %g); slow down", s.triggerLimits.rate, s.triggerLimits.burst)
		}
		return err
	}
	d, dup, err := tr.Deliver(r.Context(), id, r.Header, body, admit)
	switch {
	case errors.Is(err, triggers.ErrBadProof):
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentgate"`)
		s.fail(w, r, badProof())
	case err != nil:
		s.fail(w, r, fmt.Errorf("delivery to trigger %s: %w", id, err))
	case dup:
		d.Duplicate = true
		s.writeJSON(w, r, http.StatusOK, d)
	default:
		s.writeJSON(w, r, http.StatusAccepted, d)
	}
}
