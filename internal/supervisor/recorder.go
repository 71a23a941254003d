package supervisor

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// finish emits the outcome's events and run.completed, and stores the
// run's final state. override, when set, replaces the decoder's verdict:
// the supervisor ended the run (cancel, timeout, shutdown), or it never
// ran.
func (s *Supervisor) finish(ctx context.Context, t *task, out runs.Outcome, override *runs.RunError, exit *runs.Exit) {
	// Approvals still pending in the record (a run finished by recovery,
	// or the sweep of a dead replica) can never be answered now.
	for _, a := range t.run.PendingApprovals {
		s.emit(t, runs.NewEvent(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: a.ID, Reason: runs.ResolvedRunEnded}))
	}
	t.run.PendingApprovals, t.run.Activity = nil, ""
	s.emit(t, out.Events...)
	t.mu.Lock()
	override = t.budget.settle(&out, override)
	t.mu.Unlock()
	status, runErr := s.verdict(t, &out, override)
	s.keepWork(ctx, t, cmp.Or(out.SessionID, t.run.SessionID))
	s.unlockSession(ctx, t)
	s.removeHome(t)
	if session := cmp.Or(out.SessionID, t.run.SessionID); session != "" {
		out.CostUSD, out.Usage = s.recordSession(ctx, t, session, out)
	} else {
		if out.SessionCostUSD != nil {
			out.CostUSD = out.SessionCostUSD
		}
		if out.SessionUsage != nil {
			out.Usage = *out.SessionUsage
		}
	}
	if t.woken {
		out.Usage, out.CostUSD = sleptRunTotals(t, out.Usage, out.CostUSD)
	}
	now := s.cfg.Now().UTC()
	r := s.recordFinished(t, out, status, runErr, exit, now)
	var dur time.Duration
	if r.StartedAt != nil {
		dur = now.Sub(*r.StartedAt)
	}
	// The record first, then the event: whoever reads run.completed and
	// then the run finds it finished, and a run is never left running
	// once its run.completed is stored. LastEventSeq covers the moment in
	// between, so that a stream does not end before run.completed.
	completed := runs.NewEvent(runs.EventRunCompleted, runs.RunCompletedData{
		Status: status, StopReason: out.StopReason, Result: out.Result,
		StructuredOutput: json.RawMessage(out.StructuredOutput), Usage: out.Usage, CostUSD: out.CostUSD,
		NumTurns: out.NumTurns, Diff: out.Diff, DiffTruncated: r.DiffTruncated, Files: r.Files, FilesTruncated: r.FilesTruncated, DurationMS: dur.Milliseconds(), Exit: exit, Error: runErr,
		Git: r.Git,
	})
	// Metrics count the run before anyone can read it finished, so that
	// a client that sees it end and then scrapes finds it counted.
	class := runs.Class("")
	if runErr != nil {
		class = runErr.Class
	}
	s.obs.RunFinished(r.Agent, r.Model, status, class, dur.Seconds(), r.Usage, r.CostUSD)
	s.log.Info("run finished", zap.String("run_id", r.ID), zap.String("agent", r.Agent),
		zap.String("status", string(status)), zap.String("class", string(class)), zap.Duration("duration", dur))
	s.publishFinished(ctx, t, r, completed)
}

// verdict is how the run ended: the outcome's status and error unless
// override replaces them, made to fail when the run's log is not whole
// or its answer does not match the run's output schema. It sets
// out.StructuredOutput from the answer checked against the schema.
func (s *Supervisor) verdict(t *task, out *runs.Outcome, override *runs.RunError) (runs.State, *runs.RunError) {
	status, runErr := out.Status, out.Error
	if override != nil {
		runErr = override
		switch override.Class {
		case runs.ClassCancelled:
			status = runs.Cancelled
		case runs.Timeout:
			status = runs.TimedOut
		default:
			status = runs.Failed
		}
	}
	if status == "" || !status.Terminal() {
		status = runs.Failed
	}
	if status == runs.Failed && runErr == nil {
		runErr = runs.NewRunError(runs.Internal, "the run failed without a reason", "")
	}
	t.mu.Lock()
	lost := t.lost
	t.mu.Unlock()
	if lost > 0 && status != runs.Cancelled {
		// A run whose log is not whole must not say it succeeded: a
		// client that trusts run.completed would miss what was lost. A
		// run that also timed out (its writes were waiting on the store)
		// or failed says so, but the store is the cause to fix first.
		msg := fmt.Sprintf("%d of the run's events could not be stored", lost)
		if runErr != nil {
			msg += fmt.Sprintf(" (the run also ended %s: %s)", runErr.Class, runErr.Message)
		}
		status, runErr = runs.Failed, runs.NewRunError(runs.StoreFailed, msg,
			"the event store was unavailable or overloaded; see the gateway's log, then submit the run again")
	}
	if status == runs.Succeeded && len(t.run.Spec.OutputSchema) > 0 {
		// Every agent's answer is checked, the CLI's own structured
		// output too; a run that failed has no answer to check.
		var mismatch *runs.RunError
		if out.StructuredOutput, mismatch = s.structuredOutput(t.run.Spec.OutputSchema, *out); mismatch != nil {
			status, runErr = runs.Failed, mismatch
		}
	}
	if status == runs.Succeeded {
		runErr = nil
	}
	return status, runErr
}

// recordFinished writes the run's end into t's record, marks t done and
// returns the record, redacted: what is stored, returned and retried.
func (s *Supervisor) recordFinished(t *task, out runs.Outcome, status runs.State, runErr *runs.RunError, exit *runs.Exit, now time.Time) *runs.Run {
	r := &t.run
	r.Status, r.FinishedAt, r.Error, r.Exit = status, &now, runErr, exit
	t.mu.Lock()
	if status == runs.Cancelled {
		r.CancelledBy = t.cancelledBy
	}
	// From here the run has ended for everyone who asks this replica:
	// input is a run_ended conflict, a cancel changes nothing.
	t.done = true
	t.mu.Unlock()
	r.Result, r.StructuredOutput, r.Usage, r.CostUSD, r.NumTurns = out.Result, out.StructuredOutput, out.Usage, out.CostUSD, out.NumTurns
	r.Diff = out.Diff
	r.NetworkDenied = int(t.netDenied.Load())
	*r = s.redactor(t).Run(*r) // what is stored, returned and retried later
	if out.SessionID != "" {
		r.SessionID = out.SessionID
	}
	if out.Model != "" {
		r.Model = out.Model
	}
	return r
}

// publishFinished stores the finished record r, then emits completed; a
// store that keeps failing gets both from finishLater. Either way the
// run's place in its tenant's quota is given back first.
func (s *Supervisor) publishFinished(ctx context.Context, t *task, r *runs.Run, completed runs.Event) {
	if err := s.storeRun(*r); err != nil {
		// The store has been unreachable for the whole retry time.
		// Keep trying in the background; run.completed waits for the
		// record, and a restart of this replica interrupts the run if
		// the record never lands.
		s.log.Error("store finished run: still failing; retrying in the background", zap.String("run_id", r.ID), zap.Error(err))
		rec := *r
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			s.finishLater(t, rec, completed)
		}()
	} else {
		// Counted out before anyone can see it end: a client that
		// submits again at run.completed finds the slot free.
		s.cfg.Quotas.CountOut(ctx, r.Tenant, r.ID, r.CostUSD)
		s.emit(t, completed)
		return
	}
	s.cfg.Quotas.CountOut(ctx, r.Tenant, r.ID, r.CostUSD)
}

// storeRun writes the run's record, retrying a failing store for
// Config.StoreRetry.
func (s *Supervisor) storeRun(r runs.Run) error {
	rec := s.recordOf(nil, r) // a finished run's own secrets are gone already: see finish
	return retryStore(s.cfg.StoreRetry, func(ctx context.Context) error { return s.store.UpdateRun(ctx, rec) })
}

// finishLater stores a finished run's record once the store takes it, then
// its run.completed, trying every few seconds until the supervisor is
// forced to stop.
func (s *Supervisor) finishLater(t *task, r runs.Run, completed runs.Event) {
	for {
		select {
		case <-s.runCtx.Done():
			s.log.Error("store finished run: given up at shutdown; the run is interrupted when this replica restarts",
				zap.String("run_id", r.ID))
			return
		case <-time.After(5 * time.Second):
		}
		if err := s.storeRun(r); err == nil {
			s.log.Info("finished run stored after the store came back", zap.String("run_id", r.ID))
			s.emit(t, completed)
			return
		}
	}
}

// sleptRunTotals is the usage and cost of t, a run that slept and woke:
// its CLI, started again, reports only the turns it ran, and the record
// counts them all (the sum of the turns, or the live figures from the
// wake on).
func sleptRunTotals(t *task, usage runs.Usage, cost *float64) (runs.Usage, *float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if total(t.run.Usage) > total(usage) {
		usage = t.run.Usage
	}
	if c := t.run.CostUSD; c != nil && (cost == nil || *c > *cost) {
		v := *c
		cost = &v
	}
	return usage, cost
}

// recordSession records the run's session for the runs that resume it:
// its directory, and the cumulative cost and usage its CLI reported. It
// returns the run's cost and usage. A CLI that reports the session's
// cumulative cost or usage gets the run's own: the session's total now,
// less its total when the run began, as recorded by the run before it.
// When the earlier total is unknown (the session began outside this
// gateway, or its record expired) the whole total is the run's.
func (s *Supervisor) recordSession(ctx context.Context, t *task, session string, out runs.Outcome) (*float64, runs.Usage) {
	cost, usage := out.CostUSD, out.Usage
	var prev runs.SessionRecord
	if t.inv.Spec.ResumeSessionID != "" {
		var err error
		if prev, _, err = s.store.Session(ctx, t.run.Agent, session); err != nil {
			s.log.Warn("read session", zap.String("run_id", t.run.ID), zap.Error(err))
		}
	}
	rec := runs.SessionRecord{Cwd: t.run.Spec.Cwd, CostUSD: prev.CostUSD, Usage: prev.Usage, Tenant: t.run.Tenant,
		RunID: t.run.ID, WorkDir: t.run.Spec.WorkDir}
	if total := out.SessionCostUSD; total != nil {
		own := *total
		if prev.CostUSD != nil {
			own = max(*total-*prev.CostUSD, 0)
		}
		cost, rec.CostUSD = &own, total
	}
	if total := out.SessionUsage; total != nil {
		own := *total
		if prev.Usage != nil {
			own = total.Sub(*prev.Usage)
		}
		usage, rec.Usage = own, total
	}
	if err := s.store.SetSession(ctx, t.run.Agent, session, rec); err != nil {
		s.log.Warn("record session", zap.String("run_id", t.run.ID), zap.Error(err))
	}
	return cost, usage
}

// emit stamps, bounds, encodes and appends events to t's log. It is the one
// point where events leave a decoder. While the agent runs, events go
// through the run's appender; otherwise they are appended at once. A store
// that fails is retried briefly; the events are logged if it still fails.
func (s *Supervisor) emit(t *task, evs ...runs.Event) {
	if len(evs) == 0 {
		return
	}
	batch := make([]runs.StoredEvent, 0, len(evs))
	var hooks []runs.StoredEvent // run.completed and approval.requested, for Config.Webhooks
	t.mu.Lock()
	evs = s.scrubEvents(t, evs)
	// The budgets see every event of the run, as it is emitted.
	overBudget := t.budget.observe(evs)
	red := s.redactor(t)
	for _, ev := range evs {
		observeUsageLocked(t, ev)
		t.seq++
		ev.V, ev.RunID, ev.Seq, ev.Time, ev.Agent = runs.EnvelopeVersion, t.run.ID, t.seq, s.cfg.Now().UTC(), t.run.Agent
		// A helper's events (a sub-agent, under a tool call) carry its
		// own session; only the root's say which session the run is.
		switch {
		case ev.SessionID == "":
			ev.SessionID = t.run.SessionID
		case ev.ParentToolCallID == "":
			t.run.SessionID = ev.SessionID
		}
		b, err := s.encodeBounded(&ev)
		if err != nil {
			// A payload that cannot be encoded is a decoder bug; keep
			// the sequence dense with a warning in its place.
			ev.Type, ev.Data = runs.EventWarning, runs.WarningData{Code: "encode_failed", Message: err.Error()}
			b, _ = encodeEvent(ev)
		}
		b = red.Bytes(b) // whatever the payload's own pass missed: ids, metadata, new types
		batch = append(batch, runs.StoredEvent{Seq: ev.Seq, Type: ev.Type, JSON: b})
		s.obs.Event(t.run.Agent, ev.Type)
		if s.cfg.Webhooks != nil && isWebhookEvent(ev.Type) {
			hooks = append(hooks, batch[len(batch)-1])
		}
	}
	var hookRun runs.Run
	if len(hooks) > 0 {
		hookRun = t.run
	}
	app := t.app
	t.mu.Unlock()
	if len(hooks) > 0 {
		// Once the events are stored, or queued to be.
		defer s.notifyWebhooks(hookRun, hooks)
	}
	if overBudget != nil {
		s.stopTask(t, overBudget)
	}
	if len(batch) == 0 {
		return // only deltas, held back whole
	}
	if app != nil {
		app.add(batch)
		return
	}
	if err := appendWithRetry(s.store, t.run.ID, batch, s.cfg.StoreRetry, s.log); err != nil {
		t.mu.Lock()
		t.lost += len(batch)
		t.mu.Unlock()
	}
}

// encodeBounded bounds ev's payload and encodes it, bounding it more
// tightly while the encoding is over Limits.MaxEncoded (text that JSON
// escapes heavily). As a last resort the payload is replaced by a warning
// saying what was dropped.
func (s *Supervisor) encodeBounded(ev *runs.Event) ([]byte, error) {
	l := s.cfg.Limits
	for range 4 {
		*ev = l.Bound(*ev)
		b, err := encodeEvent(*ev)
		if err != nil || l.MaxEncoded <= 0 || len(b) <= l.MaxEncoded {
			return b, err
		}
		l = l.tighter()
	}
	ev.Type, ev.Data = runs.EventWarning, runs.WarningData{Code: "event_too_large",
		Message: fmt.Sprintf("a %s event was dropped: larger than %d bytes even when bounded", ev.Type, l.MaxEncoded)}
	return encodeEvent(*ev)
}
