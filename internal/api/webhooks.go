package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhooks"
)

// Webhooks is what GET /v1/runs/{id}/webhooks needs from the service; the
// gateway's service implements it with its webhooks.Deliverer. It gets the
// run as the route found it, its tenant's.
type Webhooks interface {
	// RunWebhooks returns the run's webhook deliveries, oldest first,
	// each with its attempts.
	RunWebhooks(ctx context.Context, r runs.Run) ([]webhooks.Delivery, error)
}

// RunWebhooks is the body of GET /v1/runs/{id}/webhooks.
type RunWebhooks struct {
	Deliveries []webhooks.Delivery `json:"deliveries"`
}

// runWebhooks answers GET /v1/runs/{id}/webhooks: every delivery of the
// run's webhooks and its attempts; none for a run without any, and 404 on
// a gateway that sends no webhooks.
func (s *server) runWebhooks(w http.ResponseWriter, r *http.Request) {
	hooks, ok := s.svc.(Webhooks)
	run, found := ownedRun(r.Context())
	if !ok || !found {
		s.fail(w, r, edgeErr(http.StatusNotFound, CodeNotFound, "", "this gateway sends no webhooks"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	list, err := hooks.RunWebhooks(ctx, run)
	if err != nil {
		s.fail(w, r, fmt.Errorf("webhooks of run %s: %w", run.ID, err))
		return
	}
	if list == nil {
		list = []webhooks.Delivery{}
	}
	s.writeJSON(w, r, http.StatusOK, RunWebhooks{Deliveries: list})
}
