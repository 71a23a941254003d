package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/runs"
)

// Run fires every replica's share of the schedules until ctx ends: each
// Tick it finds the fire times due and claims each once in the cluster.
// Every replica runs it; which one fires a given time is whichever
// claims it first.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	for {
		s.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick handles the fires due now of every schedule.
func (s *Service) Tick(ctx context.Context) {
	keys, err := s.Records.Keys(ctx, "schedule")
	if err != nil {
		if ctx.Err() == nil && s.now().Sub(s.lastWarned) >= warnEvery {
			// The store is down or slow: once in a while is enough.
			s.lastWarned = s.now()
			s.Log.Warn("list schedules", zap.Error(err))
		}
		return
	}
	// A few schedules at once: one whose store calls are slow must not
	// hold the others.
	sem := make(chan struct{}, tickWorkers)
	var wg sync.WaitGroup
	for _, k := range keys {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.tickOne(ctx, k); err != nil && ctx.Err() == nil {
				s.Log.Warn("schedule", zap.String("key", k), zap.Error(err))
			}
		})
	}
	wg.Wait()
}

// warnEvery spaces the warnings of a store that cannot list schedules.
const warnEvery = 30 * time.Second

// tickWorkers bounds the schedules one replica handles at once.
const tickWorkers = 8

func (s *Service) tickOne(ctx context.Context, key string) error {
	data, rev, err := s.Records.Get(ctx, key)
	if errors.Is(err, runs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.isQuiet(key, rev) {
		return nil
	}
	var sc Schedule
	if err := json.Unmarshal(data, &sc); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	// A tick's store calls are bounded: a store that hangs must not stop
	// every other schedule's fires for ever.
	ctx, cancel := context.WithTimeout(ctx, tickTimeout)
	defer cancel()
	if !sc.Paused {
		if _, err := s.Starter.Drain(ctx, sc.owner(), func(autorun.Waiting) (runs.Spec, error) {
			return autorun.OpenSpec(s.Box, sc.ID, sc.Run)
		}); err != nil {
			return fmt.Errorf("start the fire that waited: %w", err)
		}
	}
	next, err := s.fireDue(ctx, sc)
	// A schedule that queues may have a start waiting that another
	// replica queued: it is looked at each tick.
	if err == nil && !next.IsZero() && sc.WhenBusy != autorun.Queue {
		s.setQuiet(key, rev, next)
	}
	return err
}

// tickTimeout bounds one schedule's work in a tick, well within
// MissAfter: a schedule whose store calls hang must not make the others
// late enough to be missed.
const tickTimeout = 20 * time.Second

// quietSpan is what a replica knows of a schedule between ticks: while
// its record keeps revision rev and until comes, it has nothing to fire
// and no start waits. A start this replica queues forgets it; one another
// replica queues is started by that replica, or by this one at the next
// fire time.
type quietSpan struct {
	rev   uint64
	until time.Time
}

func (s *Service) isQuiet(key string, rev uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.quiet[key]
	return ok && q.rev == rev && s.now().Before(q.until)
}

func (s *Service) setQuiet(key string, rev uint64, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quiet == nil {
		s.quiet = map[string]quietSpan{}
	}
	s.quiet[key] = quietSpan{rev: rev, until: until}
}

func (s *Service) forgetQuiet(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.quiet, key)
}

// maxDue bounds the fire times one tick handles for a schedule: after a
// long outage the older ones are summed up in one record.
const maxDue = 100

// fireDue handles the fire times of sc due now, oldest first, and moves
// its cursor past the ones handled. A fire claimed by a replica still
// starting it stops the cursor there until that replica is done or its
// claim's lease ends. next is when sc has something to do again: its
// next fire time, or zero when it is not known to be quiet until then.
func (s *Service) fireDue(ctx context.Context, sc Schedule) (next time.Time, err error) {
	tm, err := sc.timing()
	if err != nil {
		return time.Time{}, err
	}
	st, _, err := s.Starter.State(ctx, sc.owner())
	if err != nil {
		return time.Time{}, err
	}
	now := s.now()
	waiting := st.Waiting != nil
	if sc.Paused {
		if waiting {
			return time.Time{}, nil
		}
		return now.Add(time.Hour), nil // until its record changes
	}
	due, older := dueTimes(tm, later(st.Cursor, sc.Since), now)
	handled, cursor := time.Time{}, later(st.Cursor, sc.Since)
	for i, t := range due {
		f := fireTime{at: t, last: i == len(due)-1}
		if i == 0 {
			f.older = older
		}
		outcome, err := s.fire(ctx, sc, f, now)
		waiting = waiting || outcome == autorun.Queued
		if errors.Is(err, errInFlight) {
			return time.Time{}, s.advance(ctx, sc, handled)
		}
		if err != nil && !errors.Is(err, errDone) {
			return time.Time{}, err
		}
		handled, cursor = t, t
	}
	if err := s.advance(ctx, sc, handled); err != nil {
		return time.Time{}, err
	}
	if waiting {
		return time.Time{}, nil // look again each tick until it starts
	}
	next, _ = tm.Next(cursor)
	return next, nil
}

// advance moves sc's cursor to handled, unless it is there already.
func (s *Service) advance(ctx context.Context, sc Schedule, handled time.Time) error {
	if handled.IsZero() {
		return nil
	}
	return s.Starter.Change(ctx, sc.owner(), func(st *autorun.State) {
		if handled.After(st.Cursor) {
			st.Cursor = handled
		}
	})
}

// dueTimes are the fire times after cursor up to now, at most maxDue of
// the latest; older counts those left out.
func dueTimes(tm Timing, cursor, now time.Time) (due []time.Time, older int) {
	for t, ok := tm.Next(cursor); ok && !t.After(now); t, ok = tm.Next(t) {
		if len(due) == maxDue {
			due, older = append(due[1:], t), older+1
			continue
		}
		due = append(due, t)
	}
	return due, older
}

// fireTime is one fire time due: last, the latest due now; older, the
// fires before it that no record will name.
type fireTime struct {
	at    time.Time
	last  bool
	older int
}

// fire claims one fire time of sc and starts it, or records it missed.
// A fire taken over from a replica that died is started however late:
// that replica may have made its run, which the start then finds.
func (s *Service) fire(ctx context.Context, sc Schedule, f fireTime, now time.Time) (autorun.Outcome, error) {
	key := fmt.Sprintf("fire.%s.%d", sc.ID, f.at.Unix())
	held, err := s.claimFire(ctx, sc, key, now)
	if err != nil {
		return "", err
	}
	rec := autorun.Record{Key: key, Time: f.at}
	if !held.TakenOver && now.Sub(f.at) > s.cfg.MissAfter && !(sc.CatchUp == CatchUpOnce && f.last) {
		rec.Outcome = autorun.Missed
		rec.Error = &autorun.ErrorInfo{Code: "missed", Message: missedMessage(f)}
		s.Observer.ScheduleFire(string(autorun.Missed), -1)
		err := s.Starter.Change(ctx, sc.owner(), func(st *autorun.State) {
			if done, ok := st.Find(key); !ok || !done.Final() {
				st.Put(rec)
			}
		})
		s.done(ctx, held, rec, err)
		return autorun.Missed, err
	}
	rec, err = s.start(ctx, sc, rec)
	s.done(ctx, held, rec, err)
	return rec.Outcome, err
}

// done writes a recorded fire into its claim, which outlives the
// schedule's list of fires.
func (s *Service) done(ctx context.Context, held *autorun.Held, rec autorun.Record, err error) {
	if err != nil {
		return
	}
	if err := held.Done(ctx, rec); err != nil && ctx.Err() == nil {
		s.Log.Debug("record a fire in its claim", zap.String("fire", rec.Key), zap.Error(err))
	}
}

func missedMessage(f fireTime) string {
	var b strings.Builder
	b.WriteString("no replica of the gateway ran at this fire time, and the schedule's catch_up is \"none\"")
	if f.older > 0 {
		fmt.Fprintf(&b, "; %d earlier fire times were missed as well", f.older)
	}
	return b.String()
}

// claimFire takes the fire of key for this replica (autorun.TakeClaim).
// It returns errDone when the fire has its record, and errInFlight while
// another replica holds it.
func (s *Service) claimFire(ctx context.Context, sc Schedule, key string, now time.Time) (*autorun.Held, error) {
	held, done, err := autorun.TakeClaim(ctx, s.Claims, key, now)
	switch {
	case errors.Is(err, autorun.ErrInFlight):
		return nil, errInFlight
	case err != nil:
		return nil, err
	case done != nil:
		return nil, errDone
	}
	if held.TakenOver {
		// Its record may be in the schedule's state, written before the
		// claim's: then it is done.
		st, _, err := s.Starter.State(ctx, sc.owner())
		if err != nil {
			return nil, err
		}
		if rec, ok := st.Find(key); ok && rec.Final() {
			return nil, errDone
		}
		s.Log.Info("took over a fire whose replica did not record it", zap.String("schedule", sc.ID), zap.String("fire", key))
	}
	return held, nil
}

// errInFlight: another replica claimed the fire and is still starting it.
var errInFlight = errors.New("fire claimed by another replica, still starting")

// errDone: the fire has its record already.
var errDone = errors.New("fire recorded already")
