package supervisor

import (
	"context"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// sweepEvery is how often, in replica TTLs, runs are swept for dead owners
// when no replica was seen to die. A sweep reads every stored run, so it
// runs on a change, not on every heartbeat.
const sweepEvery = 10

// liveness sends this replica's heartbeat and takes over the unfinished
// runs of replicas that stopped sending theirs, until ctx ends. It sweeps
// once a TTL after it starts (a replica that died before then has expired
// by that time), whenever a replica it saw alive is gone, and every
// sweepEvery TTLs in any case.
func (s *Supervisor) liveness(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReplicaTTL / 4)
	defer t.Stop()
	start := s.cfg.Now()
	var lastSweep time.Time
	var seen map[string]bool
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
		// Every replica reports the shared queue, taking runs or not.
		s.observeQueue()
		live, err := s.store.LiveReplicas(ctx)
		if err != nil {
			s.log.Warn("read live replicas", zap.Error(err))
			continue
		}
		now := s.cfg.Now()
		due := lastSweep.IsZero() && now.Sub(start) >= s.cfg.ReplicaTTL ||
			!lastSweep.IsZero() && now.Sub(lastSweep) >= sweepEvery*s.cfg.ReplicaTTL
		for r := range seen {
			due = due || !live[r]
		}
		seen = live
		if !due {
			continue
		}
		lastSweep = now
		if err := s.sweepOrphans(ctx, live); err != nil && ctx.Err() == nil {
			s.log.Warn("sweep runs of dead replicas", zap.Error(err))
		}
	}
}

// orphanQueuedAfter is how old a queued run that nobody owns must be,
// and still not in the queue, before a sweep queues it again: its
// submission stopped between recording it and queueing it.
const orphanQueuedAfter = time.Minute

// sweepOrphans finishes, as interrupted, the runs whose replica died while
// running them: it has not come back, so nothing will ever finish them.
// Queued runs a dead replica had taken go back to the queue, and a queued
// run missing from the queue is queued again. Several replicas may sweep
// at once: the store keeps one run.completed per run and seq, and the
// queue one message per run; a run queued twice is claimed once.
//
// Hibernated runs have no process: those of a dead replica are adopted
// (their timers kept here), and this replica's timers are made those of
// the hibernated runs it owns.
//
// A run is read after live was: its owner may have started since, and
// claimed it, its heartbeat stored before its first claim. So an owner
// live does not name is looked up again, after its run was read, before
// anything of it is taken; once found dead it stays so for the sweep.
func (s *Supervisor) sweepOrphans(ctx context.Context, live map[string]bool) error {
	asleep, since := map[string]time.Time{}, s.cfg.Now()
	dead := map[string]bool{}
	alive := func(owner string) bool {
		if live[owner] || dead[owner] {
			return live[owner]
		}
		fresh, err := s.store.LiveReplicas(ctx)
		if err != nil {
			return true // unknown: nothing is taken from it this sweep
		}
		live = fresh
		dead[owner] = !live[owner]
		return live[owner]
	}
	err := s.eachRun(ctx, []runs.State{runs.Queued, runs.Running}, func(r runs.Run) {
		switch {
		case r.Owner == s.cfg.Replica:
			if r.Activity == runs.Hibernated {
				asleep[r.ID] = closesAt(r, s.cfg.Now())
			}
		case r.Owner != "" && alive(r.Owner):
		case r.Activity == runs.Hibernated:
			if closes, ok := s.adoptSleeper(ctx, r); ok {
				asleep[r.ID] = closes
			}
		case r.Owner != "" && r.Status == runs.Queued:
			s.log.Warn("queued run given back: its replica stopped answering", zap.String("run_id", r.ID), zap.String("owner", r.Owner))
			s.giveBack(&task{run: r})
		case r.Owner != "" && s.canTakeOver(ctx, r):
			if err := s.takeOver(ctx, r); err != nil {
				s.log.Warn("take over a run of a replica that stopped answering; the next sweep tries again", zap.String("run_id", r.ID), zap.Error(err))
			}
		case r.Owner != "":
			s.interruptOrphan(ctx, r.ID)
		case s.cfg.Now().Sub(r.CreatedAt) > orphanQueuedAfter:
			if pos, err := s.store.QueuePosition(ctx, r.ID); err == nil && pos == 0 {
				if cur, err := s.store.GetRun(ctx, r.ID); err == nil && cur.Status == runs.Queued && cur.Owner == "" {
					s.log.Warn("queued run missing from the queue: queued again", zap.String("run_id", r.ID))
					if err := s.store.Enqueue(ctx, r.ID, cur.Spec); err != nil {
						s.log.Warn("queue run again", zap.String("run_id", r.ID), zap.Error(err))
					}
				}
			}
		}
	})
	if err == nil {
		s.keepSleepers(asleep, since)
	}
	return err
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
	s.finish(ctx, &task{run: r, seq: last.Seq}, runs.Outcome{}, runs.NewRunError(runs.Interrupted,
		"the gateway replica running it ("+r.Owner+") stopped answering", "submit the run again"), nil)
}
