package webhooks

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// memStore is a Store in memory, with the NATS store's semantics: records
// changed by revision, a queue whose messages are taken until Done or
// Later. Tests wait on it for a condition with until.
type memStore struct {
	mu      sync.Mutex
	recs    map[string]memRec
	queue   []*memJob
	changed chan struct{} // closed and replaced at every change
	// failCreate, when set, is what CreateDelivery returns.
	failCreate error
}

type memRec struct {
	d   Delivery
	rev uint64
}

type memJob struct {
	runID, id string
	m         Message
	due       time.Time
	taken     bool
}

func newMemStore() *memStore {
	return &memStore{recs: map[string]memRec{}, changed: make(chan struct{})}
}

func (s *memStore) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *memStore) CreateDelivery(ctx context.Context, d Delivery, m Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failCreate != nil {
		return s.failCreate
	}
	k := d.RunID + "." + d.ID
	if _, ok := s.recs[k]; ok {
		return nil
	}
	s.recs[k] = memRec{d: d, rev: 1}
	s.queue = append(s.queue, &memJob{runID: d.RunID, id: d.ID, m: m, due: time.Now()})
	s.signalLocked()
	return nil
}

func (s *memStore) Delivery(ctx context.Context, runID, id string) (Delivery, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[runID+"."+id]
	if !ok {
		return Delivery{}, 0, fmt.Errorf("delivery %s: %w", id, runs.ErrNotFound)
	}
	return r.d, r.rev, nil
}

func (s *memStore) UpdateDelivery(ctx context.Context, d Delivery, rev uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := d.RunID + "." + d.ID
	r, ok := s.recs[k]
	if !ok || r.rev != rev {
		return ErrStale
	}
	d.Attempts = slices.Clone(d.Attempts)
	s.recs[k] = memRec{d: d, rev: rev + 1}
	s.signalLocked()
	return nil
}

func (s *memStore) Deliveries(ctx context.Context, runID string) ([]Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Delivery{}
	for _, r := range s.recs {
		if r.d.RunID == runID {
			out = append(out, r.d)
		}
	}
	slices.SortFunc(out, func(a, b Delivery) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (s *memStore) TakeDelivery(ctx context.Context) (Taken, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Taken{}, err
		}
		s.mu.Lock()
		now := time.Now()
		var next time.Time
		for _, j := range s.queue {
			if j.taken {
				continue
			}
			if !j.due.After(now) {
				j.taken = true
				s.signalLocked()
				s.mu.Unlock()
				return s.taken(j), nil
			}
			if next.IsZero() || j.due.Before(next) {
				next = j.due
			}
		}
		changed := s.changed
		s.mu.Unlock()
		var timer *time.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if err := ctx.Err(); err != nil {
			return Taken{}, err
		}
	}
}

func (s *memStore) taken(j *memJob) Taken {
	return Taken{
		RunID: j.runID, ID: j.id, Message: j.m,
		Done: func() error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.queue = slices.DeleteFunc(s.queue, func(x *memJob) bool { return x == j })
			s.signalLocked()
			return nil
		},
		Later: func(d time.Duration) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			j.taken, j.due = false, time.Now().Add(d)
			s.signalLocked()
			return nil
		},
	}
}

// queued returns the messages in the queue: due when, and taken or not.
func (s *memStore) queued() []memJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []memJob
	for _, j := range s.queue {
		out = append(out, *j)
	}
	return out
}

// until waits until ok holds of the store, or fails the test after a
// hang guard.
func (s *memStore) until(t *testing.T, what string, ok func() bool) {
	t.Helper()
	guard := time.NewTimer(20 * time.Second)
	defer guard.Stop()
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if ok() {
			return
		}
		select {
		case <-changed:
		case <-guard.C:
			t.Fatalf("never %s", what)
		}
	}
}

// untilEnded waits until the run's one delivery has ended, and returns it.
func (s *memStore) untilEnded(t *testing.T, runID string) Delivery {
	t.Helper()
	s.until(t, "the delivery ended", func() bool {
		ds, _ := s.Deliveries(context.Background(), runID)
		return len(ds) == 1 && ended(ds[0])
	})
	return s.only(t, runID)
}

// only returns the run's one delivery.
func (s *memStore) only(t *testing.T, runID string) Delivery {
	t.Helper()
	ds, _ := s.Deliveries(context.Background(), runID)
	if len(ds) != 1 {
		t.Fatalf("run %s has %d deliveries, want 1: %+v", runID, len(ds), ds)
	}
	return ds[0]
}
