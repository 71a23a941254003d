package triggers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/runs"
)

// Outcomes of deliveries that are not a Record's: counted, not kept.
const (
	OutcomeDuplicate       = "duplicate"
	OutcomeUnauthenticated = "unauthenticated"
	OutcomeTooLarge        = "too_large"
	OutcomeRateLimited     = "rate_limited"
	OutcomeInvalidPayload  = "invalid_payload"
)

// CodeInvalidPayload: a delivery's body is not JSON (400).
const CodeInvalidPayload = "invalid_payload"

// ConflictInProgress: a delivery with this id is being started by
// another request right now (409); its sender retries.
const ConflictInProgress = "delivery_in_progress"

// Refused counts a delivery the API refused before the service saw it
// (too large, rate limited).
func (s *Service) Refused(outcome string) { s.Observer.TriggerDelivery(outcome) }

// Deliver answers one delivery to the trigger id: its proof, then admit
// (the trigger's rate, which only a proved delivery spends), its id seen
// before or not, and the start it makes. An unknown trigger and a wrong
// proof are the same ErrBadProof. dup is true when the delivery came
// before: the Delivery is then the first one's.
func (s *Service) Deliver(ctx context.Context, id string, h http.Header, body []byte, admit func() error) (d Delivery, dup bool, err error) {
	t, err := s.verified(ctx, id, h, body)
	if err != nil {
		return Delivery{}, false, err
	}
	if err := admit(); err != nil {
		s.Observer.TriggerDelivery(OutcomeRateLimited)
		return Delivery{}, false, err
	}
	rec, payload, err := s.readDelivery(t, h, body)
	if err != nil {
		s.Observer.TriggerDelivery(OutcomeInvalidPayload)
		return Delivery{}, false, err
	}
	held, done, err := s.claimDelivery(ctx, t, rec.Key)
	switch {
	case err != nil:
		return Delivery{}, false, err
	case done != nil:
		s.Observer.TriggerDelivery(OutcomeDuplicate)
		return deliveryOf(*done), true, nil
	}
	rec, err = s.start(ctx, t, rec, h, payload)
	if err != nil {
		return Delivery{}, false, err
	}
	s.forgetIfDeleted(ctx, t)
	if err := held.Done(ctx, rec); err != nil {
		s.Log.Debug("record a delivery in its claim", zap.String("trigger", t.ID), zap.Error(err))
	}
	s.Observer.TriggerDelivery(string(rec.Outcome))
	return deliveryOf(rec), false, nil
}

// verified returns the trigger of id if the delivery proves it.
func (s *Service) verified(ctx context.Context, id string, h http.Header, body []byte) (Trigger, error) {
	t, err := s.byID(ctx, id)
	if errors.Is(err, runs.ErrNotFound) {
		s.Observer.TriggerDelivery(OutcomeUnauthenticated)
		return Trigger{}, ErrBadProof
	}
	if err != nil {
		return Trigger{}, err
	}
	secrets, err := s.secretsOf(t)
	if err != nil {
		return Trigger{}, err
	}
	if err := Check(t.Verify, secrets, h, body, s.Now()); err != nil {
		s.Observer.TriggerDelivery(OutcomeUnauthenticated)
		return Trigger{}, ErrBadProof
	}
	return t, nil
}

// secretsOf are the secrets t checks proofs with, opened.
func (s *Service) secretsOf(t Trigger) (Secrets, error) {
	open := func(b []byte) (string, error) {
		if len(b) == 0 || t.Verify == VerifyToken {
			return string(b), nil
		}
		plain, err := s.Secrets.Open(t.ID, b)
		if err != nil {
			return "", fmt.Errorf("open the secret of trigger %s: %w", t.ID, err)
		}
		return string(plain), nil
	}
	cur, err := open(t.Secret)
	if err != nil {
		return Secrets{}, err
	}
	prev, err := open(t.Previous)
	if err != nil {
		return Secrets{}, err
	}
	return Secrets{Current: cur, Previous: prev, PreviousUntil: t.PreviousUntil}, nil
}

// readDelivery reads the delivery's ids and its JSON body.
func (s *Service) readDelivery(t Trigger, h http.Header, body []byte) (autorun.Record, any, error) {
	deliveryID, err := DeliveryID(t.Verify, h)
	if err != nil {
		return autorun.Record{}, nil, err
	}
	ours := uuid.NewString()
	rec := autorun.Record{ID: ours, Key: "delivery." + t.ID + "." + ours, Time: s.Now(), DeliveryID: deliveryID, Event: Event(h)}
	if same := sameDelivery(t.Verify, deliveryID, body); same != "" {
		sum := sha256.Sum256([]byte(same))
		rec.Key = "delivery." + t.ID + "." + hex.EncodeToString(sum[:16])
	}
	var payload any
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&payload); err != nil || dec.More() {
		return rec, nil, &runs.FieldError{Field: "body", Kind: runs.ErrInvalid, Code: CodeInvalidPayload,
			Reason: "a delivery's body must be one JSON value (Content-Type: application/json)"}
	}
	return rec, payload, nil
}

// sameDelivery is what tells a delivery sent again: for GitHub, whose
// signature covers the body alone, the body (a signed body replayed with
// another X-GitHub-Delivery is the same delivery); else the sender's
// delivery id, which Standard Webhooks signs; "" for none.
func sameDelivery(v Verify, deliveryID string, body []byte) string {
	if v == VerifyGitHub {
		return "body\x00" + string(body)
	}
	if deliveryID != "" {
		return "id\x00" + deliveryID
	}
	return ""
}

// claimDelivery takes the delivery of key for this request
// (autorun.TakeClaim). When it came before, done is its Record; while
// another request still starts it, the error is a ConflictInProgress.
func (s *Service) claimDelivery(ctx context.Context, t Trigger, key string) (held *autorun.Held, done *autorun.Record, err error) {
	held, done, err = autorun.TakeClaim(ctx, s.Claims, key, s.Now())
	switch {
	case errors.Is(err, autorun.ErrInFlight):
		return nil, nil, runs.Conflict(ConflictInProgress, "a delivery with this id is being started now; send it again in a few seconds")
	case err != nil || done != nil:
		return nil, done, err
	case held.TakenOver:
		st, _, err := s.Starter.State(ctx, t.owner())
		if err != nil {
			return nil, nil, err
		}
		if rec, ok := st.Find(key); ok && rec.Final() {
			return nil, &rec, nil
		}
		// The one who claimed it died before it recorded the delivery:
		// the run it may have made has the delivery's key as its
		// idempotency key.
		s.Log.Info("took over a delivery whose replica did not record it", zap.String("trigger", t.ID))
	}
	return held, nil, nil
}

// start renders the delivery's prompt and starts its run; a paused
// trigger, a ping, or a prompt that renders empty starts nothing.
func (s *Service) start(ctx context.Context, t Trigger, rec autorun.Record, h http.Header, payload any) (autorun.Record, error) {
	spec, err := autorun.OpenSpec(s.RunBox, t.ID, t.Run)
	if err != nil {
		return rec, fmt.Errorf("open trigger %s: %w", t.ID, err)
	}
	var prompt string
	var reason *autorun.ErrorInfo
	switch {
	case t.Paused:
		rec.Outcome, rec.Error = autorun.Ignored, &autorun.ErrorInfo{Code: "paused", Message: "the trigger is paused"}
	case rec.Event == "ping":
		rec.Outcome = autorun.Ignored
	default:
		prompt, reason = renderPrompt(spec.Prompt, h, payload)
	}
	switch {
	case reason != nil:
		rec.Outcome, rec.Error = autorun.Refused, reason
	case rec.Outcome == "" && strings.TrimSpace(prompt) == "":
		rec.Outcome, rec.Error = autorun.Ignored, &autorun.ErrorInfo{Code: "empty_prompt", Message: "the prompt rendered empty for this delivery: nothing to run"}
	}
	if rec.Outcome != "" {
		return rec, s.Starter.Change(ctx, t.owner(), func(st *autorun.State) { st.Put(rec) })
	}
	spec.Prompt = prompt
	return s.Starter.Start(ctx, s.owner(t), rec, spec)
}

// forgetIfDeleted removes the state a delivery wrote for a trigger
// deleted while it started, which Delete's own removal came too early to
// catch.
func (s *Service) forgetIfDeleted(ctx context.Context, t Trigger) {
	if _, _, err := s.Records.Get(ctx, triggerKey(t.Tenant, t.ID)); errors.Is(err, runs.ErrNotFound) {
		_ = s.Starter.Forget(ctx, t.owner())
	}
}

// owner is t as its starts see it: a start that waits keeps its rendered
// prompt sealed for t, as the drain opens it.
func (s *Service) owner(t Trigger) autorun.Owner {
	o := t.owner()
	o.KeepPrompt = func(prompt string) string {
		return base64.StdEncoding.EncodeToString(s.RunBox.Seal(t.ID+"\x00waiting", []byte(prompt)))
	}
	return o
}

// waitingPrompt opens the prompt a waiting start kept.
func (s *Service) waitingPrompt(t Trigger, kept string) (string, error) {
	sealed, err := base64.StdEncoding.DecodeString(kept)
	if err != nil {
		return "", fmt.Errorf("the prompt a delivery kept while it waited: %w", err)
	}
	plain, err := s.RunBox.Open(t.ID+"\x00waiting", sealed)
	return string(plain), err
}

// renderPrompt renders the run's prompt for a delivery; reason says why not.
func renderPrompt(text string, h http.Header, payload any) (string, *autorun.ErrorInfo) {
	tmpl, err := ParseTemplate(text)
	if err == nil {
		var out string
		if out, err = tmpl.Render(payload, h, runs.MaxPromptBytes); err == nil {
			return out, nil
		}
	}
	return "", &autorun.ErrorInfo{Code: "template_failed", Message: err.Error()}
}

// drainTimeout bounds the store calls of one trigger's waiting start.
const drainTimeout = 20 * time.Second

// Run starts, until ctx ends, the deliveries that waited (when_busy
// "queue") once their trigger's previous run has ended.
func (s *Service) Run(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Tick)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		keys, err := s.Records.Keys(ctx, "trigger")
		if err != nil {
			continue
		}
		for _, k := range keys {
			s.drain(ctx, k, n%everyTrigger == 0)
		}
	}
}

// everyTrigger is how many ticks apart the loop looks at the triggers
// that do not queue: one changed from queue while a start waited still
// has it. Those that queue are looked at each tick.
const everyTrigger = 10

func (s *Service) drain(ctx context.Context, key string, all bool) {
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	t, _, err := s.read(ctx, key, key)
	if err != nil || t.Paused || (t.WhenBusy != autorun.Queue && !all) {
		return
	}
	rec, err := s.Starter.Drain(ctx, s.owner(t), func(w autorun.Waiting) (runs.Spec, error) {
		spec, err := autorun.OpenSpec(s.RunBox, t.ID, t.Run)
		if err != nil {
			return spec, err
		}
		spec.Prompt, err = s.waitingPrompt(t, w.Prompt)
		return spec, err
	})
	if err != nil && ctx.Err() == nil {
		s.Log.Warn("start a delivery that waited", zap.String("trigger", t.ID), zap.Error(err))
	}
	if rec != nil {
		s.Observer.TriggerDelivery(string(rec.Outcome))
	}
}
