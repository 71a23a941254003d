package runs

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// liveness sends this replica's heartbeat and takes over the unfinished
// runs of replicas that stopped sending theirs, until ctx ends.
func (s *Supervisor) liveness(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReplicaTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.store.Heartbeat(ctx, s.cfg.Replica); err != nil {
			s.log.Warn("heartbeat", zap.Error(err))
			continue
		}
		if err := s.sweepOrphans(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("sweep runs of dead replicas", zap.Error(err))
		}
	}
}

// sweepOrphans marks interrupted the queued and running runs whose replica
// has no live heartbeat: it died and has not come back, so nothing will
// ever finish them. Several replicas may sweep at once; the store keeps one
// run.completed per run and seq.
func (s *Supervisor) sweepOrphans(ctx context.Context) error {
	live, err := s.store.LiveReplicas(ctx)
	if err != nil {
		return err
	}
	for _, st := range []State{Queued, Running} {
		cursor := ""
		for {
			page, err := s.store.ListRuns(ctx, Filter{Status: st, Limit: 500, Cursor: cursor})
			if err != nil {
				return err
			}
			for _, r := range page.Runs {
				if r.Owner != s.cfg.Replica && r.Owner != "" && !live[r.Owner] {
					s.interruptOrphan(ctx, r.ID)
				}
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
	}
	return nil
}

// interruptOrphan finishes a run whose replica died, unless it finished
// meanwhile.
func (s *Supervisor) interruptOrphan(ctx context.Context, id string) {
	r, err := s.store.GetRun(ctx, id)
	if err != nil || r.Status.Terminal() {
		return
	}
	last, err := s.store.LastEvent(ctx, id)
	if err != nil {
		return
	}
	s.log.Warn("run interrupted: its replica stopped answering", zap.String("run_id", id),
		zap.String("agent", r.Agent), zap.String("owner", r.Owner))
	s.finish(ctx, &task{run: r, seq: last.Seq}, Outcome{}, NewRunError(Interrupted,
		"the gateway replica running it ("+r.Owner+") stopped answering", "submit the run again"), nil)
}
