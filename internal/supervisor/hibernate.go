package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// A hibernated run (runs/hibernate.go) is held by no replica: its record,
// with activity hibernated, is all there is of it. The replica that put
// it to sleep (its owner) keeps a timer that closes it at ClosesAt; a
// replica that takes a message for it claims it from the record, by
// compare-and-set, and wakes it there. A run falls asleep in three ways:
//
//	idle for hibernate_after_seconds ─┐
//	idle when its replica shuts down ─┼─► the CLI's stdin closed ─► the CLI exits
//	                                  │        ─► hibernate: session kept, home removed,
//	                                  │           run.hibernated, record hibernated
//	its replica died (takeOver) ──────┘           (taken over: sleep at once)
//
// and ends in three: a message wakes it (wakeStored), a close or cancel
// ends it (endHibernated), or nobody wrote for idle_timeout_seconds (its
// owner's timer, closeSleeper).

// errFallingAsleep: the run's CLI is exiting to hibernate. Input waits
// until it sleeps, then goes to the record (hibernatedInput).
var errFallingAsleep = errors.New("the run is falling asleep")

// sleepWait bounds how long input waits for a run falling asleep: its
// CLI's exit and a few writes to the store.
const sleepWait = 2 * time.Minute

// canHibernate reports whether runs of a can hibernate here: the agent's
// interactive session resumes a session from the files the gateway keeps
// in its runs' homes, and this gateway keeps them in the cluster.
func (s *Supervisor) canHibernate(a *Agent) bool {
	if a == nil || s.ws == nil || s.cfg.HomesDir == "" {
		return false
	}
	if _, keeps := a.Adapter.(runs.HomeKeeper); !keeps {
		return false
	}
	d := a.Adapter.Describe()
	return d.Interaction.ResumesSession && slices.Contains(d.Fields, runs.FieldResumeSessionID)
}

// hibernateAfter is how long t's run waits idle before it hibernates; 0:
// never.
func (s *Supervisor) hibernateAfter(t *task) time.Duration {
	if !t.run.Spec.Interactive || !s.canHibernate(t.agent) {
		return 0
	}
	if n := t.run.Spec.HibernateAfterSeconds; n > 0 {
		return time.Duration(n) * time.Second
	}
	return s.cfg.HibernateAfter
}

// mayHibernate reports whether a run of a with spec may fall asleep: when
// idle, when its replica shuts down, or taken over from one that died.
// Its CLI must then keep the session, as for keep_session: Codex's
// threads are ephemeral unless asked, and a woken run would find nothing
// to resume.
func (s *Supervisor) mayHibernate(spec runs.Spec, a *Agent) bool {
	return spec.Interactive && s.canHibernate(a)
}

// idleTimeout is how long t's run may stay open with no turn, asleep or
// not.
func (s *Supervisor) idleTimeout(spec runs.Spec) time.Duration {
	if n := spec.IdleTimeoutSeconds; n > 0 {
		return time.Duration(n) * time.Second
	}
	return s.cfg.IdleTimeout
}

// checkHibernation checks a spec's idle and hibernation times against the
// operator's bounds and the agent.
func (s *Supervisor) checkHibernation(spec runs.Spec, a *Agent) error {
	if d := time.Duration(spec.IdleTimeoutSeconds) * time.Second; d > s.cfg.MaxIdleTimeout {
		return runs.Invalid(runs.FieldIdleTimeoutSeconds, fmt.Sprintf("must be at most %d on this gateway", int(s.cfg.MaxIdleTimeout/time.Second)))
	}
	if spec.HibernateAfterSeconds == 0 {
		return nil
	}
	if !s.canHibernate(a) {
		return runs.Unsupported(spec.Agent, runs.FieldHibernateAfterSeconds,
			"runs of this agent do not hibernate here: it cannot resume a session the gateway keeps (see interaction.hibernate in /v1/agents)")
	}
	if d := time.Duration(spec.HibernateAfterSeconds) * time.Second; d > s.cfg.MaxHibernateAfter {
		return runs.Invalid(runs.FieldHibernateAfterSeconds, fmt.Sprintf("must be at most %d on this gateway", int(s.cfg.MaxHibernateAfter/time.Second)))
	}
	return nil
}

// hibernate puts t's run to sleep once its CLI exited for it: the session
// as the CLI left it is kept, the run's home removed, run.hibernated
// emitted and then the record stored hibernated, so that a replica that
// reads it hibernated finds the whole log. The task then leaves this
// replica.
func (s *Supervisor) hibernate(t *task, reason string, idleSince time.Time) {
	s.keepTurn(t)
	s.removeHome(t)
	s.sleep(t, reason, idleSince.Add(s.idleTimeout(t.run.Spec)))
}

// sleep records t's run hibernated until closes, and arms the timer that
// closes it then. The caller made sure no process of the run is left.
func (s *Supervisor) sleep(t *task, reason string, closes time.Time) {
	now := s.cfg.Now().UTC()
	closes = closes.UTC()
	t.mu.Lock()
	turn := lastFinishedTurn(t.run.Turns)
	t.mu.Unlock()
	s.emit(t, runs.NewEvent(runs.EventRunHibernated, runs.RunHibernatedData{
		Turn: turn, Replica: s.cfg.Replica, Reason: reason, ClosesAt: closes}))
	t.mu.Lock()
	t.run.Activity, t.run.PendingApprovals = runs.Hibernated, nil
	t.run.HibernatedAt, t.run.ClosesAt = &now, &closes
	r := s.recordOf(t, t.run)
	t.mu.Unlock()
	if err := s.storeRun(r); err != nil {
		s.log.Warn("store a hibernated run", zap.String("run_id", r.ID), zap.Error(err))
	}
	s.cfg.Quotas.Hibernate(context.Background(), r.Tenant, r.ID)
	s.obs.RunHibernated(r.Agent)
	s.untrack(t)
	s.armSleeper(r.ID, closes)
	t.wakeSleepWaiters()
	s.log.Info("run hibernated", zap.String("run_id", r.ID), zap.String("agent", r.Agent),
		zap.String("reason", reason), zap.Time("closes_at", closes))
}

// lastFinishedTurn is the number of the last turn that ended.
func lastFinishedTurn(turns []runs.Turn) int {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].FinishedAt != nil {
			return turns[i].Turn
		}
	}
	return 0
}

// armSleeper (re)arms the timer that closes the hibernated run id at
// closes, unless this replica stops first.
func (s *Supervisor) armSleeper(id string, closes time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.sleepers[id]; old.timer != nil {
		old.timer.Stop()
	}
	if s.closing {
		return // the replica that adopts it, or this one restarted, arms it
	}
	s.sleepers[id] = sleeper{armed: s.cfg.Now(),
		timer: time.AfterFunc(max(closes.Sub(s.cfg.Now()), 0), func() { s.closeSleeper(id) })}
}

// sleeper is the timer that closes a hibernated run, and when it was
// armed.
type sleeper struct {
	timer *time.Timer
	armed time.Time
}

// forgetSleeper drops the timer of run id, claimed by this replica.
func (s *Supervisor) forgetSleeper(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.sleepers[id]; old.timer != nil {
		old.timer.Stop()
		delete(s.sleepers, id)
	}
}

// closeSleeper closes the hibernated run id at its ClosesAt, if it still
// sleeps under this replica: woken and asleep again elsewhere, it has
// another owner and timer.
func (s *Supervisor) closeSleeper(id string) {
	s.mu.Lock()
	delete(s.sleepers, id)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := s.store.GetRun(ctx, id)
	if err != nil || r.Activity != runs.Hibernated || r.Owner != s.cfg.Replica {
		return
	}
	if r.ClosesAt != nil && r.ClosesAt.After(s.cfg.Now()) {
		s.armSleeper(id, *r.ClosesAt) // fired early: a clock step
		return
	}
	claimed, err := s.store.ClaimHibernated(ctx, id, s.cfg.Replica, s.cfg.Replica, runs.Stopping)
	if err != nil {
		return // woken or closed meanwhile
	}
	s.endHibernated(ctx, claimed, func(t *task) {
		s.emit(t, runs.NewEvent(runs.EventWarning, runs.WarningData{Code: "idle_timeout",
			Message: fmt.Sprintf("no message for %s: the hibernated session is closed", s.idleTimeout(r.Spec))}))
	})
}

// endHibernated finishes r, a hibernated run this replica claimed, closed
// or idle too long: its status is that of its last turn. before, if set,
// emits what comes before the run's end.
func (s *Supervisor) endHibernated(ctx context.Context, r runs.Run, before func(*task)) runs.Run {
	ctx = context.WithoutCancel(ctx)
	t := s.asleepTask(ctx, r)
	if before != nil {
		before(t)
	}
	out := runs.Outcome{Status: runs.Succeeded, Usage: r.Usage, CostUSD: r.CostUSD, SessionID: r.SessionID}
	if n := len(r.Turns); n > 0 && r.Turns[n-1].Status != "" {
		out.Status, out.Error = r.Turns[n-1].Status, r.Turns[n-1].Error
		if out.Status == runs.Cancelled {
			out.Status = runs.Failed
		}
	}
	s.finish(ctx, t, out, nil, nil)
	return t.run
}

// cancelAsleep finishes r, a hibernated run this replica claimed,
// cancelled by by.
func (s *Supervisor) cancelAsleep(ctx context.Context, r runs.Run, by runs.Actor) runs.Run {
	ctx = context.WithoutCancel(ctx)
	t := s.asleepTask(ctx, r)
	t.cancelledBy = actorPtr(by)
	out := runs.Outcome{Usage: r.Usage, CostUSD: r.CostUSD, SessionID: r.SessionID}
	s.finish(ctx, t, out, stopError(errCancelled, r.Agent), nil)
	return t.run
}

// asleepTask is the task that records the end of r, a hibernated run this
// replica claimed, after the events stored of it.
func (s *Supervisor) asleepTask(ctx context.Context, r runs.Run) *task {
	last, err := s.store.LastEvent(ctx, r.ID)
	if err != nil {
		s.log.Warn("read a hibernated run's last event", zap.String("run_id", r.ID), zap.Error(err))
	}
	return &task{run: r, seq: last.Seq, agent: s.agents[r.Agent]}
}

// cancelHibernated ends the run id cancelled by by, when it is hibernated.
func (s *Supervisor) cancelHibernated(id string, by runs.Actor) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	claimed, err := s.store.ClaimHibernated(ctx, id, "", s.cfg.Replica, runs.Stopping)
	if err != nil {
		return // not asleep: it ended, or runs where the request went too
	}
	s.forgetSleeper(id)
	s.cancelAsleep(ctx, claimed, by)
}

// hibernatedInput carries out in for r, a run whose record says it
// hibernates: a queued message wakes it here, a close ends it; a steer or
// an interrupt has no turn to act on. forwarded says the input came from
// another replica, which could not wake the run: it is not sent on again.
func (s *Supervisor) hibernatedInput(ctx context.Context, r runs.Run, in runs.Input, forwarded bool) (runs.InputResult, error) {
	switch in.Kind {
	case runs.InputMessage:
		if in.Mode == runs.MessageSteer {
			return runs.InputResult{}, runs.Conflict(runs.ConflictHibernated,
				"the run is hibernated: it has no turn to steer; send the message with mode queue to wake it")
		}
		return s.wakeStored(ctx, r, in, forwarded)
	case runs.InputInterrupt:
		return runs.InputResult{}, runs.Conflict(runs.ConflictHibernated,
			"the run is hibernated: no turn is running; a message wakes it")
	case runs.InputClose:
		claimed, err := s.store.ClaimHibernated(ctx, r.ID, "", s.cfg.Replica, runs.Stopping)
		if errors.Is(err, runs.ErrClaimed) {
			return s.Input(ctx, r.ID, in) // woken meanwhile: close it where it runs
		}
		if err != nil {
			return runs.InputResult{}, err
		}
		s.forgetSleeper(r.ID)
		s.endHibernated(ctx, claimed, nil)
		return runs.InputResult{}, nil
	}
	return runs.InputResult{}, fmt.Errorf("approval %s: %w", in.ApprovalID, runs.ErrNotFound)
}

// wakeStored wakes the hibernated run r here with the message in: it
// claims the run, emits run.resumed, and starts its CLI again resuming its
// session, in as its next turn. A replica that cannot run the agent sends
// the message to the run's owner.
func (s *Supervisor) wakeStored(ctx context.Context, r runs.Run, in runs.Input, forwarded bool) (runs.InputResult, error) {
	a := s.agents[r.Agent]
	if !s.canHibernate(a) || !a.info.Installed || !s.enforces(a, r.Spec.Network) {
		if forwarded || r.Owner == s.cfg.Replica {
			return runs.InputResult{}, runs.Conflict(runs.ConflictHibernated,
				"the run is hibernated and this gateway cannot start its agent again")
		}
		return s.forwardInput(ctx, r, in)
	}
	if s.isClosing() {
		return runs.InputResult{}, runs.Conflict(runs.ConflictClosing, "the gateway is shutting down")
	}
	if !s.reserveWakeSlot() {
		if !forwarded && r.Owner != s.cfg.Replica {
			return s.forwardInput(ctx, r, in) // its owner may have room
		}
		return runs.InputResult{}, fmt.Errorf("every slot of this replica runs a run, so the hibernated run cannot wake here; send the message again in a moment (%w)", runs.ErrCapacity)
	}
	if err := s.cfg.Quotas.Wake(ctx, r.Tenant, r.ID); err != nil {
		s.releaseWakeSlot()
		return runs.InputResult{}, err
	}
	claimed, err := s.store.ClaimHibernated(ctx, r.ID, "", s.cfg.Replica, runs.InTurn)
	if err != nil {
		s.releaseWakeSlot()
	}
	if errors.Is(err, runs.ErrClaimed) {
		return s.Input(ctx, r.ID, in) // woken or closed meanwhile: as to any run
	}
	if err != nil {
		return runs.InputResult{}, err
	}
	s.forgetSleeper(r.ID)
	last, err := s.store.LastEvent(ctx, r.ID)
	if err != nil {
		// Claimed but not startable: the record says in_turn with no
		// replica running it; the sweep of its owner ends it.
		s.releaseWakeSlot()
		return runs.InputResult{}, fmt.Errorf("wake run %s: read its last event: %w", r.ID, err)
	}
	t := &task{run: claimed, seq: last.Seq, started: true, agent: a, woken: true, wokenAt: time.Now(), wokeFrom: r.Owner,
		usageBefore: claimed.Usage, costBefore: claimed.CostUSD}
	s.mu.Lock()
	s.tasks[r.ID] = t
	s.mu.Unlock()
	s.obs.RunWoken(r.Agent)
	s.log.Info("hibernated run woken by a message", zap.String("run_id", r.ID), zap.String("agent", r.Agent),
		zap.String("previous_replica", r.Owner))
	return s.startWoken(t, in, runs.NewEvent(runs.EventRunResumed, runs.RunResumedData{
		Replica: s.cfg.Replica, PreviousReplica: r.Owner, Turn: lastFinishedTurn(r.Turns), Reason: runs.ResumedWoken})), nil
}

// reserveWakeSlot counts a woken run in this replica's slots, unless they
// are all busy. A wake does not wait in the queue as a new run does: the
// message is refused, or sent to the run's owner, while this replica is
// full. runWoken's end frees the slot (untrackTaken).
func (s *Supervisor) reserveWakeSlot() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active >= s.cfg.MaxConcurrent {
		return false
	}
	s.active++
	return true
}

func (s *Supervisor) releaseWakeSlot() {
	s.mu.Lock()
	s.active--
	s.signalIdleLocked()
	s.mu.Unlock()
}

// startWoken makes in t's next turn and starts t's CLI again, resuming its
// session. resumed, run.resumed, is stored with in's message.queued, in
// one write.
func (s *Supervisor) startWoken(t *task, in runs.Input, resumed runs.Event) runs.InputResult {
	id := uuid.NewString()
	spec := t.run.Spec
	spec.Prompt, spec.Attachments, spec.ResumeSessionID = in.Text, in.Attachments, t.run.SessionID
	t.mu.Lock()
	t.run.Spec, t.wakeMessageID = spec, id
	t.mu.Unlock()
	s.emit(t, resumed, runs.NewEvent(runs.EventMessageQueued, runs.MessageQueuedData{MessageID: id, Text: in.Text, Mode: runs.MessageQueue, Attachments: in.Attachments}))
	go s.runWoken(t)
	return runs.InputResult{MessageID: id}
}

// forwardInput sends in to r's owner, as for any run another replica
// holds.
func (s *Supervisor) forwardInput(ctx context.Context, r runs.Run, in runs.Input) (runs.InputResult, error) {
	body, err := encodeInput(in)
	if err != nil {
		return runs.InputResult{}, err
	}
	reply, err := s.store.SendInput(ctx, r.Owner, r.ID, body)
	if err != nil {
		return runs.InputResult{}, err
	}
	return decodeInputReply(reply)
}

// keepSleepers makes this replica's timers those of the hibernated runs
// it owns, as a sweep that began at since found them: a run woken
// elsewhere loses its timer here, one this replica adopted or kept before
// it restarted gets one. A timer armed since the sweep began stays.
func (s *Supervisor) keepSleepers(owned map[string]time.Time, since time.Time) {
	s.mu.Lock()
	for id, sl := range s.sleepers {
		if _, ok := owned[id]; !ok && sl.armed.Before(since) {
			sl.timer.Stop()
			delete(s.sleepers, id)
		}
	}
	missing := map[string]time.Time{}
	for id, closes := range owned {
		if s.sleepers[id].timer == nil {
			missing[id] = closes
		}
	}
	s.mu.Unlock()
	for id, closes := range missing {
		s.armSleeper(id, closes)
	}
}

// adoptSleeper makes this replica the owner of r, a hibernated run whose
// owner died, and returns when it closes; false when another replica
// adopted it first, or it woke.
func (s *Supervisor) adoptSleeper(ctx context.Context, r runs.Run) (time.Time, bool) {
	claimed, err := s.store.ClaimHibernated(ctx, r.ID, r.Owner, s.cfg.Replica, runs.Hibernated)
	if err != nil {
		return time.Time{}, false
	}
	s.forgetLocalRun(r.ID) // the dead replica may have run it after this one
	s.log.Info("hibernated run adopted: its replica stopped answering", zap.String("run_id", r.ID), zap.String("previous_replica", r.Owner))
	return closesAt(claimed, s.cfg.Now()), true
}

// stopSleepersLocked stops this replica's timers when it shuts down: its
// hibernated runs are adopted by another replica, or by this one when it
// starts again.
func (s *Supervisor) stopSleepersLocked() {
	for id, sl := range s.sleepers {
		sl.timer.Stop()
		delete(s.sleepers, id)
	}
}

// ActivityCounts is how many of this replica's runs do what: the running
// interactive runs and runs with approvals by activity, and the
// hibernated runs whose timer it keeps.
func (s *Supervisor) ActivityCounts() map[runs.Activity]int {
	out := map[runs.Activity]int{runs.InTurn: 0, runs.AwaitingApproval: 0, runs.Idle: 0, runs.Stopping: 0, runs.Hibernated: 0}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tasks {
		t.mu.Lock()
		if a := t.run.Activity; a != "" && a != runs.Hibernated {
			out[a]++
		}
		t.mu.Unlock()
	}
	out[runs.Hibernated] = len(s.sleepers)
	return out
}
