package schedules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/seal"
)

// Observer is told of fires, for metrics: internal/metrics implements it.
type Observer interface {
	// ScheduleFire counts a fire by outcome; lag is how late a clock
	// fire's run was submitted (negative when it started none).
	ScheduleFire(outcome string, lag time.Duration)
}

// Config bounds schedules.
type Config struct {
	// MaxPerTenant is the most schedules a tenant keeps (0: 100).
	MaxPerTenant int
	// MissAfter is how late a fire may be handled and still run: a fire
	// found later (no replica ran at its time) is missed (0: 1 minute).
	MissAfter time.Duration
	// Tick is how often each replica looks for fires due (0: 1 s).
	Tick time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxPerTenant <= 0 {
		c.MaxPerTenant = 100
	}
	if c.MissAfter <= 0 {
		c.MissAfter = time.Minute
	}
	if c.Tick <= 0 {
		c.Tick = time.Second
	}
	return c
}

// Deps are what the Service works with.
type Deps struct {
	Records autorun.Records
	Claims  autorun.Claims
	Starter *autorun.Starter
	// Check admits a run request without making the run, as a
	// submission would (the agent, its fields, the workspace).
	Check    func(ctx context.Context, spec runs.Spec) error
	Box      *seal.Box
	Observer Observer
	Now      func() time.Time
	Log      *zap.Logger
}

// CodeTooMany is the API's code for a tenant at its bound of schedules.
const CodeTooMany = "too_many_schedules"

// Service keeps a tenant's schedules and fires them, on every replica.
type Service struct {
	cfg Config
	Deps

	mu    sync.Mutex
	quiet map[string]quietSpan // schedule's key → nothing to do until
	// lastWarned is when Tick last said it could not list schedules
	// (Tick's own: one runs at a time).
	lastWarned time.Time
}

// New returns a Service. Observer, Now and Log may be nil.
func New(cfg Config, d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Observer == nil {
		d.Observer = nopObserver{}
	}
	return &Service{cfg: cfg.withDefaults(), Deps: d}
}

type nopObserver struct{}

func (nopObserver) ScheduleFire(string, time.Duration) {}

// Create checks req and keeps it as a schedule of the caller's tenant.
func (s *Service) Create(ctx context.Context, req Request) (View, error) {
	tenant := runs.ActorFrom(ctx).Tenant
	if req.WhenBusy == "" {
		req.WhenBusy = autorun.Skip
	}
	if req.CatchUp == "" {
		req.CatchUp = CatchUpNone
	}
	now := s.now()
	sc := Schedule{ID: uuid.NewString(), Tenant: tenant, Name: req.Name, Cron: req.Cron, Timezone: req.Timezone, Every: req.Every,
		WhenBusy: req.WhenBusy, CatchUp: req.CatchUp, Paused: req.Paused, Anchor: now, Since: now, CreatedAt: now, UpdatedAt: now}
	if err := s.check(ctx, sc, req.Run); err != nil {
		return View{}, err
	}
	if err := s.checkCount(ctx, tenant); err != nil {
		return View{}, err
	}
	var err error
	if sc.Run, err = autorun.SealSpec(s.Box, sc.ID, req.Run); err != nil {
		return View{}, err
	}
	data, err := json.Marshal(sc)
	if err != nil {
		return View{}, err
	}
	if _, err := s.Records.Create(ctx, scheduleKey(tenant, sc.ID), data); err != nil {
		return View{}, fmt.Errorf("keep schedule: %w", err)
	}
	return s.view(ctx, sc)
}

// check checks a schedule's fields and its run request.
func (s *Service) check(ctx context.Context, sc Schedule, run runs.Spec) error {
	if err := CheckName(sc.Name); err != nil {
		return err
	}
	if _, err := sc.timing(); err != nil {
		return err
	}
	if err := checkRules(sc.WhenBusy, sc.CatchUp); err != nil {
		return err
	}
	return autorun.CheckRun(ctx, s.Check, run)
}

func (s *Service) checkCount(ctx context.Context, tenant string) error {
	return autorun.CheckCount(ctx, s.Records, "schedule."+autorun.TenantKey(tenant), s.cfg.MaxPerTenant, CodeTooMany, "schedules", "AGENTGATE_MAX_SCHEDULES_PER_TENANT")
}

// load reads a schedule of the caller's tenant.
func (s *Service) load(ctx context.Context, id string) (Schedule, uint64, error) {
	return autorun.Load[Schedule](ctx, s.Records, scheduleKey(runs.ActorFrom(ctx).Tenant, id), "schedule", id)
}

// Get returns a schedule of the caller's tenant.
func (s *Service) Get(ctx context.Context, id string) (View, error) {
	sc, _, err := s.load(ctx, id)
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, sc)
}

// List returns the caller's tenant's schedules by name.
func (s *Service) List(ctx context.Context) ([]View, error) {
	keys, err := s.Records.Keys(ctx, "schedule."+autorun.TenantKey(runs.ActorFrom(ctx).Tenant))
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out := make([]View, 0, len(keys))
	for _, k := range keys {
		sc, _, err := s.load(ctx, k[strings.LastIndexByte(k, '.')+1:])
		if errors.Is(err, runs.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		v, err := s.view(ctx, sc)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b View) int {
		return cmpOr(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// Update applies p to a schedule of the caller's tenant.
func (s *Service) Update(ctx context.Context, id string, p Patch) (View, error) {
	for range 20 {
		sc, rev, err := s.load(ctx, id)
		if err != nil {
			return View{}, err
		}
		run, err := autorun.OpenSpec(s.Box, sc.ID, sc.Run)
		if err != nil {
			return View{}, fmt.Errorf("open schedule %s: %w", id, err)
		}
		sc, run = s.patched(sc, run, p)
		if err := s.check(ctx, sc, run); err != nil {
			return View{}, err
		}
		if sc.Run, err = autorun.SealSpec(s.Box, sc.ID, run); err != nil {
			return View{}, err
		}
		data, err := json.Marshal(sc)
		if err != nil {
			return View{}, err
		}
		_, err = s.Records.Update(ctx, scheduleKey(sc.Tenant, sc.ID), data, rev)
		if errors.Is(err, runs.ErrConflict) {
			continue
		}
		if err != nil {
			return View{}, fmt.Errorf("change schedule %s: %w", id, err)
		}
		return s.view(ctx, sc)
	}
	return View{}, fmt.Errorf("change schedule %s: it kept changing", id)
}

// patched is sc with p applied. A new timing starts afresh from now, as
// does a resumed schedule: the fires of a pause are not missed.
func (s *Service) patched(sc Schedule, run runs.Spec, p Patch) (Schedule, runs.Spec) {
	now := s.now()
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&sc.Name, p.Name)
	if p.Cron != nil || p.Every != nil || p.Timezone != nil {
		if p.Cron != nil {
			sc.Every = ""
		}
		if p.Every != nil {
			sc.Cron, sc.Timezone = "", ""
		}
		set(&sc.Cron, p.Cron)
		set(&sc.Every, p.Every)
		set(&sc.Timezone, p.Timezone)
		sc.Anchor, sc.Since = now, now
	}
	if p.Run != nil {
		run = *p.Run
	}
	if p.WhenBusy != nil {
		sc.WhenBusy = *p.WhenBusy
	}
	if p.CatchUp != nil {
		sc.CatchUp = *p.CatchUp
	}
	if p.Paused != nil {
		if sc.Paused && !*p.Paused {
			sc.Since = now
		}
		sc.Paused = *p.Paused
	}
	sc.UpdatedAt = now
	return sc, run
}

// Delete removes a schedule of the caller's tenant, and its fires. Its
// runs go on.
func (s *Service) Delete(ctx context.Context, id string) error {
	sc, _, err := s.load(ctx, id)
	if err != nil {
		return err
	}
	if err := s.Records.Delete(ctx, scheduleKey(sc.Tenant, sc.ID)); err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	return s.Starter.Forget(ctx, sc.owner())
}

// FireNow fires a schedule of the caller's tenant at once, under its
// when_busy rule, paused or not. A retry with the same idempotency key
// (the request's Idempotency-Key; "" for none) fires once.
func (s *Service) FireNow(ctx context.Context, id, idempotencyKey string) (Fire, error) {
	sc, _, err := s.load(ctx, id)
	if err != nil {
		return Fire{}, err
	}
	attempt := uuid.NewString()
	if idempotencyKey != "" {
		sum := sha256.Sum256([]byte(idempotencyKey))
		attempt = hex.EncodeToString(sum[:16])
	}
	rec := autorun.Record{Key: "fire." + sc.ID + ".manual." + attempt, Time: s.now().Truncate(time.Second), Manual: true}
	rec, err = s.start(ctx, sc, rec)
	if err != nil {
		return Fire{}, err
	}
	return fireOf(rec), nil
}

// start starts rec of sc with its run request.
func (s *Service) start(ctx context.Context, sc Schedule, rec autorun.Record) (autorun.Record, error) {
	spec, err := autorun.OpenSpec(s.Box, sc.ID, sc.Run)
	if err != nil {
		return rec, fmt.Errorf("open schedule %s: %w", sc.ID, err)
	}
	rec, err = s.Starter.Start(ctx, sc.owner(), rec, spec)
	if rec.Outcome == autorun.Queued {
		s.forgetQuiet(scheduleKey(sc.Tenant, sc.ID)) // a start now waits: look each tick
	}
	s.forgetIfDeleted(ctx, sc)
	if err == nil {
		lag := time.Duration(-1)
		if rec.Outcome == autorun.Started && !rec.Manual {
			lag = rec.Lag
		}
		s.Observer.ScheduleFire(string(rec.Outcome), lag)
	}
	return rec, err
}

// forgetIfDeleted removes the state a start wrote for a schedule deleted
// while it started, which Delete's own removal came too early to catch.
func (s *Service) forgetIfDeleted(ctx context.Context, sc Schedule) {
	if _, _, err := s.Records.Get(ctx, scheduleKey(sc.Tenant, sc.ID)); errors.Is(err, runs.ErrNotFound) {
		_ = s.Starter.Forget(ctx, sc.owner())
	}
}

// Fires returns a schedule's last fires, newest first, at most limit.
func (s *Service) Fires(ctx context.Context, id string, limit int) ([]Fire, error) {
	sc, _, err := s.load(ctx, id)
	if err != nil {
		return nil, err
	}
	st, _, err := s.Starter.State(ctx, sc.owner())
	if err != nil {
		return nil, err
	}
	return firesOf(st.Recent, limit), nil
}

func firesOf(recs []autorun.Record, limit int) []Fire {
	return autorun.Latest(recs, limit, fireOf)
}

// view is sc as the API shows it, with its state.
func (s *Service) view(ctx context.Context, sc Schedule) (View, error) {
	run, err := autorun.OpenSpec(s.Box, sc.ID, sc.Run)
	if err != nil {
		return View{}, fmt.Errorf("open schedule %s: %w", sc.ID, err)
	}
	st, _, err := s.Starter.State(ctx, sc.owner())
	if err != nil {
		return View{}, err
	}
	v := View{ID: sc.ID, Name: sc.Name, Cron: sc.Cron, Timezone: sc.Timezone, Every: sc.Every, Run: autorun.PublicSpec(run),
		WhenBusy: sc.WhenBusy, CatchUp: sc.CatchUp, Paused: sc.Paused, LastRunID: st.LastRunID,
		LastFires: firesOf(st.Recent, lastFiresShown), CreatedAt: sc.CreatedAt.UTC().Truncate(time.Second), UpdatedAt: sc.UpdatedAt.UTC().Truncate(time.Second)}
	if v.Cron != "" && v.Timezone == "" {
		v.Timezone = "UTC"
	}
	if tm, err := sc.timing(); err == nil && !sc.Paused {
		if next, ok := tm.Next(later(s.now(), sc.Since)); ok {
			next = next.UTC()
			v.NextFireAt = &next
		}
	}
	return v, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (s *Service) now() time.Time { return s.Now() }
