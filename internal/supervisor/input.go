package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/tenants"
	"go.uber.org/zap"
)

// Input delivers in to the run id wherever it executes: here, or through
// the store to the replica that owns it. Errors: ErrNotFound (no such run
// or approval), a *ConflictError (ErrConflict: the approval was resolved,
// the run is not interactive or has ended, no turn runs), a *FieldError
// (ErrInvalid, or ErrUnsupported for a steer the agent cannot do), or
// ErrOwnerUnavailable when the owner cannot be reached.
func (s *Supervisor) Input(ctx context.Context, id string, in runs.Input) (runs.InputResult, error) {
	if err := in.Validate(); err != nil {
		return runs.InputResult{}, err
	}
	in.By = actorPtr(runs.ActorFrom(ctx))
	if err := s.attachInput(ctx, id, &in); err != nil {
		return runs.InputResult{}, err
	}
	s.audit("run."+string(in.Kind), runs.ActorFrom(ctx), id, zap.String("approval_id", in.ApprovalID), zap.String("decision", string(in.Decision)))
	if t := s.task(id); t != nil {
		res, err := s.localInput(t, in)
		if !errors.Is(err, errFallingAsleep) {
			return res, err
		}
		if err := t.waitAsleep(ctx); err != nil {
			return runs.InputResult{}, err
		}
	}
	r, err := s.store.GetRun(ctx, id)
	if err != nil {
		return runs.InputResult{}, err
	}
	if err := inputConflict(r); err != nil {
		return runs.InputResult{}, err
	}
	if r.Activity == runs.Hibernated {
		return s.hibernatedInput(ctx, r, in, false)
	}
	if r.Owner == s.cfg.Replica {
		// Ours, but no longer running here: it ended as the input came.
		return runs.InputResult{}, runs.Conflict(runs.ConflictRunEnded, "the run has ended")
	}
	return s.forwardInput(ctx, r, in)
}

// inputConflict says why a run, as stored, takes no input; nil when it
// might.
func inputConflict(r runs.Run) error {
	switch {
	case r.Status.Terminal():
		return runs.Conflict(runs.ConflictRunEnded, fmt.Sprintf("the run has ended (%s)", r.Status))
	case !r.Spec.Session():
		return runs.Conflict(runs.ConflictNotInteractive, "the run is neither interactive nor asking for approvals")
	}
	return nil
}

func (s *Supervisor) task(id string) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tasks[id]
}

// localInput delivers in to a run of this replica.
func (s *Supervisor) localInput(t *task, in runs.Input) (runs.InputResult, error) {
	if t.beingPutToSleep() {
		return runs.InputResult{}, errFallingAsleep
	}
	t.mu.Lock()
	sess, done, started := t.sess, t.done, t.started
	t.mu.Unlock()
	switch {
	case !started:
		return runs.InputResult{}, runs.Conflict(runs.ConflictNotStarted, "the run has not started yet")
	case done:
		return runs.InputResult{}, runs.Conflict(runs.ConflictRunEnded, "the run has ended")
	case !t.inv.Spec.Session():
		return runs.InputResult{}, runs.Conflict(runs.ConflictNotInteractive, "the run is neither interactive nor asking for approvals")
	case sess == nil:
		return runs.InputResult{}, runs.Conflict(runs.ConflictNotStarted, "the run has not started yet")
	}
	images, err := s.inputImages(t, in)
	if err != nil {
		return runs.InputResult{}, err
	}
	return sess.input(in, images)
}

// beingPutToSleep reports whether t is a run taken over from a dead
// replica that this one is putting to sleep (takeOver): it has no
// session, and input waits until it sleeps.
func (t *task) beingPutToSleep() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.slept != nil && t.sess == nil
}

// waitAsleep waits until t's run, falling asleep, sleeps or has ended.
func (t *task) waitAsleep(ctx context.Context) error {
	t.mu.Lock()
	ch := t.slept
	t.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(sleepWait):
		return runs.Conflict(runs.ConflictNotStarted, "the run is still falling asleep; send it again in a moment")
	}
}

// wakeSleepWaiters lets the input waiting for t's run to fall asleep go
// on: it slept, or it ended.
func (t *task) wakeSleepWaiters() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.slept != nil {
		close(t.slept)
		t.slept = nil
	}
}

// serveInputs answers the input other replicas send for this replica's
// runs, until ctx ends.
func (s *Supervisor) serveInputs(reqs <-chan runs.InputRequest) {
	for req := range reqs {
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			req.Reply(encodeInputReply(s.answerInput(req)))
		}()
	}
}

func (s *Supervisor) answerInput(req runs.InputRequest) (runs.InputResult, error) {
	var in runs.Input
	if err := json.Unmarshal(req.Body, &in); err != nil {
		return runs.InputResult{}, runs.Invalid("input", "not an input: "+err.Error())
	}
	if err := in.Validate(); err != nil {
		return runs.InputResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sleepWait)
	defer cancel()
	if t := s.task(req.RunID); t != nil {
		res, err := s.localInput(t, in)
		if !errors.Is(err, errFallingAsleep) {
			return res, err
		}
		if err := t.waitAsleep(ctx); err != nil {
			return runs.InputResult{}, err
		}
	}
	// Asleep: the sender could not wake it, so it is woken here.
	if r, err := s.store.GetRun(ctx, req.RunID); err == nil && r.Activity == runs.Hibernated && !r.Status.Terminal() {
		return s.hibernatedInput(ctx, r, in, true)
	}
	s.log.Info("input for a run not running here", zap.String("run_id", req.RunID))
	return runs.InputResult{}, runs.Conflict(runs.ConflictRunEnded, "the run has ended")
}

// encodeInput is in as it goes to another replica.
func encodeInput(in runs.Input) ([]byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode input: %w", err)
	}
	return body, nil
}

// inputReply is an input's answer between replicas: the result, or the
// error with enough of its kind to be the same error on the other side.
type inputReply struct {
	Result *runs.InputResult `json:"result,omitempty"`
	Error  *wireError        `json:"error,omitempty"`
}

type wireError struct {
	Kind    string `json:"kind"` // not_found, conflict, invalid, unsupported, file, quota, capacity, internal
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Agent   string `json:"agent,omitempty"`
	// RetryAfterMS is a quota refusal's Retry-After.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

func encodeInputReply(res runs.InputResult, err error) []byte {
	var r inputReply
	var fe *runs.FieldError
	var ce *runs.ConflictError
	var fle *files.Refusal
	var qe *tenants.QuotaError
	switch {
	case err == nil:
		r.Result = &res
	case errors.As(err, &qe):
		r.Error = &wireError{Kind: "quota", Code: qe.Limit, Message: qe.Message, RetryAfterMS: qe.RetryAfter.Milliseconds()}
	case errors.Is(err, runs.ErrCapacity):
		r.Error = &wireError{Kind: "capacity", Message: err.Error()}
	case errors.As(err, &fle):
		r.Error = &wireError{Kind: "file", Code: fle.Code, Message: fle.Reason, Field: fle.Field}
	case errors.As(err, &ce):
		r.Error = &wireError{Kind: "conflict", Code: ce.Code, Message: ce.Message}
	case errors.As(err, &fe):
		kind := "invalid"
		if errors.Is(fe.Kind, runs.ErrUnsupported) {
			kind = "unsupported"
		}
		r.Error = &wireError{Kind: kind, Message: fe.Reason, Field: fe.Field, Agent: fe.Agent}
	case errors.Is(err, runs.ErrNotFound):
		r.Error = &wireError{Kind: "not_found", Message: err.Error()}
	default:
		r.Error = &wireError{Kind: "internal", Message: err.Error()}
	}
	b, _ := json.Marshal(r) // plain values only
	return b
}

func decodeInputReply(b []byte) (runs.InputResult, error) {
	var r inputReply
	if err := json.Unmarshal(b, &r); err != nil {
		return runs.InputResult{}, fmt.Errorf("read the owner's answer: %w", err)
	}
	if e := r.Error; e != nil {
		switch e.Kind {
		case "conflict":
			return runs.InputResult{}, runs.Conflict(e.Code, e.Message)
		case "file":
			return runs.InputResult{}, &files.Refusal{Code: e.Code, Field: e.Field, Reason: e.Message}
		case "capacity":
			return runs.InputResult{}, fmt.Errorf("the run's owner: %s: %w", e.Message, runs.ErrCapacity)
		case "quota":
			return runs.InputResult{}, &tenants.QuotaError{Limit: e.Code, Message: e.Message, RetryAfter: time.Duration(e.RetryAfterMS) * time.Millisecond}
		case "invalid":
			return runs.InputResult{}, runs.Invalid(e.Field, e.Message)
		case "unsupported":
			return runs.InputResult{}, runs.Unsupported(e.Agent, e.Field, e.Message)
		case "not_found":
			return runs.InputResult{}, fmt.Errorf("%s: %w", e.Message, runs.ErrNotFound)
		}
		return runs.InputResult{}, fmt.Errorf("the run's owner failed: %s", e.Message)
	}
	if r.Result == nil {
		return runs.InputResult{}, errors.New("the run's owner answered nothing")
	}
	return *r.Result, nil
}
