package main

import (
	"context"
	"net/http"
	"time"

	"github.com/agentgate/agentgate/internal/api"
	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/schedules"
	"github.com/agentgate/agentgate/internal/seal"
	"github.com/agentgate/agentgate/internal/triggers"
)

// startSchedules makes the services of schedules and triggers and starts
// their loops on this replica, as on every other: each fire time goes to
// the replica that claims it first. The loop stops as the shutdown begins, so that a
// draining replica claims no fire it could not start.
func (g *instance) startSchedules(context.Context) error {
	box, err := seal.New(g.seal, "schedule run")
	if err != nil {
		return err
	}
	starter := autorun.NewStarter(g.sup, g.st.Autoruns(), api.Explain, nil)
	g.schedules = schedules.New(schedules.Config{MaxPerTenant: g.cfg.MaxSchedulesPerTenant}, schedules.Deps{
		Records: g.st.Autoruns(), Claims: g.st.AutorunClaims(), Starter: starter, Check: g.sup.Check,
		Box: box, Observer: g.rec, Log: g.log.Named("schedules"),
	})
	runBox, err := seal.New(g.seal, "trigger run")
	if err != nil {
		return err
	}
	secrets, err := seal.New(g.seal, "trigger secret")
	if err != nil {
		return err
	}
	g.triggers = triggers.New(triggers.Config{MaxPerTenant: g.cfg.MaxTriggersPerTenant}, triggers.Deps{
		Records: g.st.Autoruns(), Claims: g.st.AutorunClaims(), Starter: starter, Check: g.sup.Check,
		RunBox: runBox, Secrets: secrets, Observer: g.rec, Log: g.log.Named("triggers"),
	})
	ctx, stop := context.WithCancel(context.Background())
	g.stopSchedules = stop
	g.onClose(stop)
	go g.schedules.Run(ctx)
	go g.triggers.Run(ctx)
	return nil
}

// The service's triggers (api.Triggers).

func (s service) CreateTrigger(ctx context.Context, req triggers.Request) (triggers.View, error) {
	return s.triggers.Create(ctx, req)
}

func (s service) GetTrigger(ctx context.Context, id string) (triggers.View, error) {
	return s.triggers.Get(ctx, id)
}

func (s service) ListTriggers(ctx context.Context) ([]triggers.View, error) {
	return s.triggers.List(ctx)
}

func (s service) UpdateTrigger(ctx context.Context, id string, p triggers.Patch) (triggers.View, error) {
	return s.triggers.Update(ctx, id, p)
}

func (s service) DeleteTrigger(ctx context.Context, id string) error {
	return s.triggers.Delete(ctx, id)
}

func (s service) RotateTrigger(ctx context.Context, id string, keep time.Duration) (triggers.View, error) {
	return s.triggers.Rotate(ctx, id, keep)
}

func (s service) TriggerDeliveries(ctx context.Context, id string, limit int) ([]triggers.Delivery, error) {
	return s.triggers.Deliveries(ctx, id, limit)
}

func (s service) Deliver(ctx context.Context, id string, h http.Header, body []byte, admit func() error) (triggers.Delivery, bool, error) {
	return s.triggers.Deliver(ctx, id, h, body, admit)
}

func (s service) DeliveryRefused(outcome string) { s.triggers.Refused(outcome) }

var _ api.Triggers = service{}

// The service's schedules (api.Schedules).

func (s service) CreateSchedule(ctx context.Context, req schedules.Request) (schedules.View, error) {
	return s.schedules.Create(ctx, req)
}

func (s service) GetSchedule(ctx context.Context, id string) (schedules.View, error) {
	return s.schedules.Get(ctx, id)
}

func (s service) ListSchedules(ctx context.Context) ([]schedules.View, error) {
	return s.schedules.List(ctx)
}

func (s service) UpdateSchedule(ctx context.Context, id string, p schedules.Patch) (schedules.View, error) {
	return s.schedules.Update(ctx, id, p)
}

func (s service) DeleteSchedule(ctx context.Context, id string) error {
	return s.schedules.Delete(ctx, id)
}

func (s service) FireSchedule(ctx context.Context, id, idempotencyKey string) (schedules.Fire, error) {
	return s.schedules.FireNow(ctx, id, idempotencyKey)
}

func (s service) ScheduleFires(ctx context.Context, id string, limit int) ([]schedules.Fire, error) {
	return s.schedules.Fires(ctx, id, limit)
}

var _ api.Schedules = service{}
