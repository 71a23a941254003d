package autorun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Owner is a schedule or a trigger, as a start sees it.
type Owner struct {
	Kind     string // "schedule" or "trigger"
	ID       string
	Tenant   string
	WhenBusy WhenBusy
	// KeepPrompt, for an owner whose starts render their own prompt (a
	// trigger), gives what a start that waits keeps of its prompt: sealed,
	// as the owner opens it when the start is made. Nil: the owner's own
	// prompt is read again then.
	KeepPrompt func(prompt string) string
}

func (o Owner) stateKey() string { return StateKey(o.Kind, o.ID) }

// Starter starts the runs of owners under their WhenBusy rule.
type Starter struct {
	runs   Runs
	states Records
	now    func() time.Time
	// explain turns a refused submission's error into the API's code
	// and sentence: the HTTP edge's one classifier, injected.
	explain func(error) ErrorInfo
}

// NewStarter returns a Starter of rs, keeping States in st. explain
// gives a refused submission's error as the API would (nil: its text,
// code "refused"); now is the clock (nil: time.Now).
func NewStarter(rs Runs, st Records, explain func(error) ErrorInfo, now func() time.Time) *Starter {
	if explain == nil {
		explain = func(err error) ErrorInfo { return ErrorInfo{Code: "refused", Message: err.Error()} }
	}
	if now == nil {
		now = time.Now
	}
	return &Starter{runs: rs, states: st, now: now, explain: explain}
}

// maxAttempts bounds the compare-and-set retries of one change to a
// State: each conflict means another replica changed it meanwhile.
const maxAttempts = 50

// errRetry: a State changed under a compare-and-set; read it again.
var errRetry = errors.New("state changed meanwhile")

// Start makes the start rec (its Key and Time set) of owner with spec,
// unless the owner's previous run has not ended and its rule says
// otherwise, and records its outcome in the owner's State. Starting a
// key that already has a final Record returns that Record. An error is
// the store's, or a passing one of the gateway's (ErrTransient): the
// outcome is then unknown, and starting rec again is safe (the run's
// idempotency key is rec.Key).
func (s *Starter) Start(ctx context.Context, o Owner, rec Record, spec runs.Spec) (Record, error) {
	for range maxAttempts {
		st, rev, err := s.State(ctx, o)
		if err != nil {
			return rec, err
		}
		if done, ok := st.Find(rec.Key); ok && done.Final() {
			return done, nil
		}
		busy, err := s.busyRun(ctx, st, rec.Key)
		if err != nil {
			return rec, err
		}
		if busy == startingElsewhere && o.WhenBusy == CancelPrevious {
			// The run to cancel is being made: wait for its record.
			if err := s.waitPending(ctx, o); err != nil {
				return rec, err
			}
			continue
		}
		if busy != "" {
			out, stop, err := s.whileBusy(ctx, o, st, rev, rec, spec.Prompt, busy)
			if errors.Is(err, errRetry) {
				continue
			}
			if err != nil || stop {
				return out, err
			}
			rec = out
		}
		// Waiting stays until the start's record is written: a replica
		// that dies meanwhile leaves it for another to start.
		st.Pending = &Pending{Key: rec.Key, At: s.now()}
		if _, err := s.put(ctx, o, st, rev); errors.Is(err, runs.ErrConflict) {
			continue
		} else if err != nil {
			return rec, err
		}
		return s.submit(ctx, o, rec, spec)
	}
	return rec, fmt.Errorf("start %s %s: the owner's state kept changing", o.Kind, o.ID)
}

// startingElsewhere is busyRun's answer for a start in progress on
// another replica, whose run is not known yet.
const startingElsewhere = "?"

// busyRun returns the id of the owner's run that has not ended,
// startingElsewhere, or "" when the owner is free.
func (s *Starter) busyRun(ctx context.Context, st State, key string) (string, error) {
	if st.pendingHeld(key, s.now()) {
		return startingElsewhere, nil
	}
	if st.LastRunID == "" {
		return "", nil
	}
	r, err := s.runs.Record(ctx, st.LastRunID)
	switch {
	case errors.Is(err, runs.ErrNotFound):
		return "", nil // deleted: it has ended
	case err != nil:
		return "", fmt.Errorf("read the previous run %s: %w", st.LastRunID, err)
	case r.Status.Terminal():
		return "", nil
	}
	return r.ID, nil
}

// pendingPoll is how often a start waiting for another's record looks.
const pendingPoll = 200 * time.Millisecond

// waitPending waits until no other start holds the owner, or its lease
// ran out.
func (s *Starter) waitPending(ctx context.Context, o Owner) error {
	t := time.NewTicker(pendingPoll)
	defer t.Stop()
	for {
		st, _, err := s.State(ctx, o)
		if err != nil || !st.pendingHeld("", s.now()) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// whileBusy applies the owner's rule to a start that found busy running.
// stop is true when the start ends here with out; false to go on and
// start (cancel_previous), with out the start to make.
func (s *Starter) whileBusy(ctx context.Context, o Owner, st State, rev uint64, rec Record, prompt, busy string) (out Record, stop bool, err error) {
	if busy != startingElsewhere {
		rec.BusyRunID = busy
	}
	switch {
	case o.WhenBusy == CancelPrevious && busy != startingElsewhere:
		if _, err := s.runs.Cancel(runs.WithActor(ctx, runs.Actor{Tenant: o.Tenant}), busy); err != nil && !errors.Is(err, runs.ErrNotFound) {
			return rec, true, fmt.Errorf("cancel the previous run %s: %w", busy, err)
		}
		return rec, false, nil
	case o.WhenBusy == Queue && (st.Waiting == nil || st.Waiting.Record.Key == rec.Key):
		rec.Outcome = Queued
		if o.KeepPrompt == nil {
			prompt = "" // the owner's own, read again when it starts
		} else {
			prompt = o.KeepPrompt(prompt)
		}
		st.Waiting = &Waiting{Record: rec, Prompt: prompt}
	default:
		rec.Outcome = SkippedBusy
		if o.WhenBusy == Queue {
			rec.Error = &ErrorInfo{Code: "already_queued", Message: "a start already waits for the previous run to end"}
		}
	}
	st.Put(rec)
	if _, err := s.put(ctx, o, st, rev); err != nil {
		if errors.Is(err, runs.ErrConflict) {
			err = errRetry
		}
		return rec, true, err
	}
	return rec, true, nil
}

// RetryFor is how long after its time a start whose submission failed
// for a passing reason (ErrTransient) is left to be tried again, rather
// than recorded refused.
const RetryFor = 2 * time.Minute

// ErrTransient wraps a submission that failed for a reason of the
// gateway's that may pass (shutting down, its store, its disk).
var ErrTransient = errors.New("the gateway could not take the run now")

// submitTimeout bounds a start's submission and its record, which go on
// when the caller leaves: a run made and not recorded would be an owner's
// run nobody knows of.
const submitTimeout = 30 * time.Second

// submit submits the start's run, the owner held by its Pending, and
// records the outcome, freeing the owner.
func (s *Starter) submit(ctx context.Context, o Owner, rec Record, spec runs.Spec) (Record, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitTimeout)
	defer cancel()
	spec.IdempotencyKey = rec.Key
	actor := runs.Actor{KeyID: o.Kind + ":" + o.ID, Tenant: o.Tenant}
	run, err := s.runs.Submit(runs.WithActor(ctx, actor), spec)
	if err != nil && s.transient(err) && s.now().Sub(rec.Time) < RetryFor {
		// Free the owner, and leave the start to be tried again.
		_ = s.change(ctx, o, func(st *State) {
			if st.Pending != nil && st.Pending.Key == rec.Key {
				st.Pending = nil
			}
		})
		return rec, fmt.Errorf("start %s: %w: %w", rec.Key, ErrTransient, err)
	}
	if err != nil {
		rec.Outcome, rec.Error = Refused, ptr(s.explain(err))
	} else {
		rec.Outcome, rec.RunID, rec.Error = Started, run.ID, nil
		if !rec.Manual && rec.ID == "" {
			rec.Lag = max(0, s.now().Sub(rec.Time))
		}
	}
	return rec, s.change(ctx, o, func(st *State) {
		if st.Pending != nil && st.Pending.Key == rec.Key {
			st.Pending = nil
		}
		st.Waiting = dropWaiting(st.Waiting, rec.Key)
		if rec.Outcome == Started {
			st.LastRunID = run.ID
		}
		st.Put(rec)
	})
}

// transientCodes are the API's codes of refusals that may pass, for
// which a client would retry: the gateway's own trouble, not the request's.
var transientCodes = map[string]bool{
	"internal": true, "shutting_down": true, "disk_full": true, "owner_unavailable": true,
	"request_timeout": true, "not_ready": true,
}

// transient reports a submission refused for a reason that may pass, as
// the API would classify it.
func (s *Starter) transient(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || transientCodes[s.explain(err).Code]
}

func ptr[T any](v T) *T { return &v }

// dropWaiting is w unless it is the start of key, which is starting now.
func dropWaiting(w *Waiting, key string) *Waiting {
	if w != nil && w.Record.Key == key {
		return nil
	}
	return w
}

// State reads the owner's State and its revision (0: none yet).
func (s *Starter) State(ctx context.Context, o Owner) (State, uint64, error) {
	data, rev, err := s.states.Get(ctx, o.stateKey())
	if errors.Is(err, runs.ErrNotFound) {
		return State{}, 0, nil
	}
	if err != nil {
		return State{}, 0, fmt.Errorf("read the state of %s %s: %w", o.Kind, o.ID, err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, 0, fmt.Errorf("decode the state of %s %s: %w", o.Kind, o.ID, err)
	}
	return st, rev, nil
}

func (s *Starter) put(ctx context.Context, o Owner, st State, rev uint64) (uint64, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return 0, err
	}
	return s.states.Update(ctx, o.stateKey(), data, rev)
}

// change applies edit to the owner's State by compare-and-set, again
// on a conflict.
func (s *Starter) change(ctx context.Context, o Owner, edit func(*State)) error {
	for range maxAttempts {
		st, rev, err := s.State(ctx, o)
		if err != nil {
			return err
		}
		edit(&st)
		if _, err = s.put(ctx, o, st, rev); !errors.Is(err, runs.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("change the state of %s %s: it kept changing", o.Kind, o.ID)
}

// Change applies edit to the owner's State by compare-and-set: what a
// schedule's fires that start nothing (missed) and its cursor need.
func (s *Starter) Change(ctx context.Context, o Owner, edit func(*State)) error {
	return s.change(ctx, o, edit)
}

// Forget removes the owner's State, with the owner.
func (s *Starter) Forget(ctx context.Context, o Owner) error {
	return s.states.Delete(ctx, o.stateKey())
}

// Drain starts the owner's Waiting start once its previous run has
// ended, with the spec specFor gives for it. It does nothing when no
// start waits or the owner is still busy; started is the outcome when
// it started one.
func (s *Starter) Drain(ctx context.Context, o Owner, specFor func(Waiting) (runs.Spec, error)) (started *Record, err error) {
	st, _, err := s.State(ctx, o)
	if err != nil || st.Waiting == nil {
		return nil, err
	}
	if done, ok := st.Find(st.Waiting.Record.Key); ok && done.Final() {
		// Recorded, but its Waiting was left: drop it, or it blocks
		// every later start that would wait.
		key := done.Key
		return nil, s.change(ctx, o, func(st *State) { st.Waiting = dropWaiting(st.Waiting, key) })
	}
	busy, err := s.busyRun(ctx, st, st.Waiting.Record.Key)
	if err != nil || busy != "" {
		return nil, err
	}
	w := *st.Waiting
	spec, err := specFor(w)
	rec := w.Record
	rec.Outcome, rec.BusyRunID = "", ""
	if err != nil {
		rec.Outcome, rec.Error = Refused, ptr(s.explain(err))
		return &rec, s.change(ctx, o, func(st *State) { st.Waiting = dropWaiting(st.Waiting, rec.Key); st.Put(rec) })
	}
	out, err := s.Start(ctx, o, rec, spec)
	return &out, err
}
