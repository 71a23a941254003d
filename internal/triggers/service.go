package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/schedules"
	"github.com/agentgate/agentgate/internal/seal"
)

// Observer is told of deliveries, for metrics: internal/metrics
// implements it.
type Observer interface {
	TriggerDelivery(outcome string)
}

// CodeTooMany is the API's code for a tenant at its bound of triggers.
const CodeTooMany = "too_many_triggers"

// Config bounds triggers.
type Config struct {
	// MaxPerTenant is the most triggers a tenant keeps (0: 100).
	MaxPerTenant int
	// Tick is how often a replica starts the deliveries that waited for
	// a run to end (0: 1 s).
	Tick time.Duration
}

// Deps are what the Service works with.
type Deps struct {
	Records  autorun.Records
	Claims   autorun.Claims
	Starter  *autorun.Starter
	Check    func(ctx context.Context, spec runs.Spec) error
	RunBox   *seal.Box // run requests
	Secrets  *seal.Box // signing secrets
	Observer Observer
	Now      func() time.Time
	Log      *zap.Logger
}

// Service keeps a tenant's triggers and answers their deliveries.
type Service struct {
	cfg Config
	Deps
}

// New returns a Service. Observer, Now and Log may be nil.
func New(cfg Config, d Deps) *Service {
	if cfg.MaxPerTenant <= 0 {
		cfg.MaxPerTenant = 100
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Observer == nil {
		d.Observer = nopObserver{}
	}
	return &Service{cfg: cfg, Deps: d}
}

type nopObserver struct{}

func (nopObserver) TriggerDelivery(string) {}

// Create checks req and keeps it as a trigger of the caller's tenant. The
// View holds the trigger's secret: the only time it is shown.
func (s *Service) Create(ctx context.Context, req Request) (View, error) {
	tenant := runs.ActorFrom(ctx).Tenant
	if req.WhenBusy == "" {
		req.WhenBusy = autorun.Skip
	}
	now := s.Now()
	t := Trigger{ID: uuid.NewString(), Tenant: tenant, Name: req.Name, Verify: req.Verify, WhenBusy: req.WhenBusy,
		Paused: req.Paused, CreatedAt: now, UpdatedAt: now}
	if !req.Verify.Valid() {
		return View{}, runs.Invalid("verify", `must be "token", "github" or "standard_webhooks"`)
	}
	if err := s.check(ctx, t, req.Run); err != nil {
		return View{}, err
	}
	if err := s.checkCount(ctx, tenant); err != nil {
		return View{}, err
	}
	secret, err := s.newSecret(&t)
	if err != nil {
		return View{}, err
	}
	if t.Run, err = autorun.SealSpec(s.RunBox, t.ID, req.Run); err != nil {
		return View{}, err
	}
	if err := s.keep(ctx, t); err != nil {
		return View{}, err
	}
	return s.viewWithSecret(ctx, t, secret), nil
}

// viewWithSecret is t's view with its new secret, which is not kept and
// must not be lost to a failed read of its state: the view then shows
// none of its deliveries.
func (s *Service) viewWithSecret(ctx context.Context, t Trigger, secret string) View {
	v, err := s.view(ctx, t)
	if err != nil {
		s.Log.Warn("read a trigger's state for its answer", zap.String("trigger", t.ID), zap.Error(err))
		v = s.viewOf(t, autorun.State{}, runs.Spec{})
		if run, err := autorun.OpenSpec(s.RunBox, t.ID, t.Run); err == nil {
			v.Run = autorun.PublicSpec(run)
		}
	}
	v.Secret = secret
	return v
}

// newSecret gives t a new secret and returns it in the clear.
func (s *Service) newSecret(t *Trigger) (string, error) {
	secret, err := NewSecret(t.Verify)
	if err != nil {
		return "", err
	}
	if t.Verify == VerifyToken {
		t.Secret = []byte(HashToken(secret))
	} else {
		t.Secret = s.Secrets.Seal(t.ID, []byte(secret))
	}
	return secret, nil
}

// keep stores a new trigger and its index by id.
func (s *Service) keep(ctx context.Context, t Trigger) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if _, err := s.Records.Create(ctx, indexKey(t.ID), []byte(triggerKey(t.Tenant, t.ID))); err != nil {
		return fmt.Errorf("keep trigger: %w", err)
	}
	if _, err := s.Records.Create(ctx, triggerKey(t.Tenant, t.ID), data); err != nil {
		return fmt.Errorf("keep trigger: %w", err)
	}
	return nil
}

func (s *Service) check(ctx context.Context, t Trigger, run runs.Spec) error {
	if err := schedules.CheckName(t.Name); err != nil {
		return err
	}
	if err := autorun.CheckWhenBusy(t.WhenBusy); err != nil {
		return err
	}
	if _, err := ParseTemplate(run.Prompt); err != nil {
		return autorun.InRun(err)
	}
	return autorun.CheckRun(ctx, s.Check, run)
}

func (s *Service) checkCount(ctx context.Context, tenant string) error {
	return autorun.CheckCount(ctx, s.Records, "trigger."+autorun.TenantKey(tenant), s.cfg.MaxPerTenant, CodeTooMany, "triggers", "AGENTGATE_MAX_TRIGGERS_PER_TENANT")
}

// load reads a trigger of the caller's tenant.
func (s *Service) load(ctx context.Context, id string) (Trigger, uint64, error) {
	return s.read(ctx, triggerKey(runs.ActorFrom(ctx).Tenant, id), id)
}

func (s *Service) read(ctx context.Context, key, id string) (Trigger, uint64, error) {
	return autorun.Load[Trigger](ctx, s.Records, key, "trigger", id)
}

// byID reads a trigger by its id alone, for a delivery.
func (s *Service) byID(ctx context.Context, id string) (Trigger, error) {
	key, _, err := s.Records.Get(ctx, indexKey(id))
	if err != nil {
		return Trigger{}, err
	}
	t, _, err := s.read(ctx, string(key), id)
	return t, err
}

// Get returns a trigger of the caller's tenant.
func (s *Service) Get(ctx context.Context, id string) (View, error) {
	t, _, err := s.load(ctx, id)
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, t)
}

// List returns the caller's tenant's triggers by name.
func (s *Service) List(ctx context.Context) ([]View, error) {
	keys, err := s.Records.Keys(ctx, "trigger."+autorun.TenantKey(runs.ActorFrom(ctx).Tenant))
	if err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	out := make([]View, 0, len(keys))
	for _, k := range keys {
		t, _, err := s.read(ctx, k, k[strings.LastIndexByte(k, '.')+1:])
		if errors.Is(err, runs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		v, err := s.view(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b View) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// change applies edit to a trigger of the caller's tenant by
// compare-and-set.
func (s *Service) change(ctx context.Context, id string, edit func(*Trigger) error) (Trigger, error) {
	for range 20 {
		t, rev, err := s.load(ctx, id)
		if err != nil {
			return Trigger{}, err
		}
		if err := edit(&t); err != nil {
			return Trigger{}, err
		}
		t.UpdatedAt = s.Now()
		data, err := json.Marshal(t)
		if err != nil {
			return Trigger{}, err
		}
		_, err = s.Records.Update(ctx, triggerKey(t.Tenant, t.ID), data, rev)
		if errors.Is(err, runs.ErrConflict) {
			continue
		}
		if err != nil {
			return Trigger{}, fmt.Errorf("change trigger %s: %w", id, err)
		}
		return t, nil
	}
	return Trigger{}, fmt.Errorf("change trigger %s: it kept changing", id)
}

// Update applies p to a trigger of the caller's tenant.
func (s *Service) Update(ctx context.Context, id string, p Patch) (View, error) {
	t, err := s.change(ctx, id, func(t *Trigger) error {
		run, err := autorun.OpenSpec(s.RunBox, t.ID, t.Run)
		if err != nil {
			return fmt.Errorf("open trigger %s: %w", t.ID, err)
		}
		if p.Name != nil {
			t.Name = *p.Name
		}
		if p.Run != nil {
			run = *p.Run
		}
		if p.WhenBusy != nil {
			t.WhenBusy = *p.WhenBusy
		}
		if p.Paused != nil {
			t.Paused = *p.Paused
		}
		if err := s.check(ctx, *t, run); err != nil {
			return err
		}
		t.Run, err = autorun.SealSpec(s.RunBox, t.ID, run)
		return err
	})
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, t)
}

// MaxKeepPrevious bounds how long a rotated secret stays accepted.
const MaxKeepPrevious = 7 * 24 * time.Hour

// Rotate gives a trigger of the caller's tenant a new secret, shown in
// the View; the old one stays accepted for keep.
func (s *Service) Rotate(ctx context.Context, id string, keep time.Duration) (View, error) {
	if keep < 0 || keep > MaxKeepPrevious {
		return View{}, runs.Invalid("keep_previous_seconds", fmt.Sprintf("must be from 0 to %d", int(MaxKeepPrevious.Seconds())))
	}
	var secret string
	t, err := s.change(ctx, id, func(t *Trigger) error {
		t.Previous, t.PreviousUntil = t.Secret, s.Now().Add(keep)
		var err error
		secret, err = s.newSecret(t)
		return err
	})
	if err != nil {
		return View{}, err
	}
	return s.viewWithSecret(ctx, t, secret), nil
}

// Delete removes a trigger of the caller's tenant and its deliveries.
func (s *Service) Delete(ctx context.Context, id string) error {
	t, _, err := s.load(ctx, id)
	if err != nil {
		return err
	}
	for _, k := range []string{triggerKey(t.Tenant, t.ID), indexKey(t.ID)} {
		if err := s.Records.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete trigger %s: %w", id, err)
		}
	}
	return s.Starter.Forget(ctx, t.owner())
}

// Deliveries returns a trigger's last deliveries, newest first.
func (s *Service) Deliveries(ctx context.Context, id string, limit int) ([]Delivery, error) {
	t, _, err := s.load(ctx, id)
	if err != nil {
		return nil, err
	}
	st, _, err := s.Starter.State(ctx, t.owner())
	if err != nil {
		return nil, err
	}
	return deliveriesOf(st.Recent, limit), nil
}

func deliveriesOf(recs []autorun.Record, limit int) []Delivery {
	return autorun.Latest(recs, limit, deliveryOf)
}

func (s *Service) view(ctx context.Context, t Trigger) (View, error) {
	run, err := autorun.OpenSpec(s.RunBox, t.ID, t.Run)
	if err != nil {
		return View{}, fmt.Errorf("open trigger %s: %w", t.ID, err)
	}
	st, _, err := s.Starter.State(ctx, t.owner())
	if err != nil {
		return View{}, err
	}
	return s.viewOf(t, st, run), nil
}

func (s *Service) viewOf(t Trigger, st autorun.State, run runs.Spec) View {
	v := View{ID: t.ID, Name: t.Name, Run: autorun.PublicSpec(run), WhenBusy: t.WhenBusy, Verify: t.Verify, Paused: t.Paused,
		URL: DeliveriesPath(t.ID), LastRunID: st.LastRunID, LastDeliveries: deliveriesOf(st.Recent, lastDeliveriesShown),
		CreatedAt: t.CreatedAt.UTC().Truncate(time.Second), UpdatedAt: t.UpdatedAt.UTC().Truncate(time.Second)}
	if len(t.Previous) > 0 && s.Now().Before(t.PreviousUntil) {
		until := t.PreviousUntil.UTC()
		v.PreviousSecretExpiresAt = &until
	}
	return v
}
