package main

import (
	"context"

	"github.com/agentgate/agentgate/internal/api"
	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/schedules"
	"github.com/agentgate/agentgate/internal/seal"
)

// startSchedules makes the schedules' service and starts its loop on
// this replica, as on every other: each fire time goes to the replica
// that claims it first. The loop stops as the shutdown begins, so that a
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
	ctx, stop := context.WithCancel(context.Background())
	g.stopSchedules = stop
	g.onClose(stop)
	go g.schedules.Run(ctx)
	return nil
}

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

func (s service) FireSchedule(ctx context.Context, id string) (schedules.Fire, error) {
	return s.schedules.FireNow(ctx, id)
}

func (s service) ScheduleFires(ctx context.Context, id string, limit int) ([]schedules.Fire, error) {
	return s.schedules.Fires(ctx, id, limit)
}

var _ api.Schedules = service{}
