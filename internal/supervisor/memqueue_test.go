package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/tenants"
)

// memQueue is the shared queue of memStore: FIFO, bounded, with taken runs
// held until Ack or Nak, as the JetStream work queue holds them.
type memQueue struct {
	mu      sync.Mutex
	max     int // 0 means 64
	waiting []string
	taken   map[string]bool
	wake    chan struct{} // closed and replaced when waiting grows
	idem    map[string]runs.IdempotencyRecord
	specs   map[string]runs.Spec
	naks    map[string]int // runs given back, by id
	pulling int            // Dequeue calls waiting for a run
	tenants map[string]tenantEntry
}

func (m *memStore) q() *memQueue {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.queue == nil {
		m.queue = &memQueue{taken: map[string]bool{}, wake: make(chan struct{}), idem: map[string]runs.IdempotencyRecord{}, specs: map[string]runs.Spec{}, naks: map[string]int{}}
	}
	return m.queue
}

// setQueueSize bounds the shared queue.
func (m *memStore) setQueueSize(n int) {
	q := m.q()
	q.mu.Lock()
	q.max = n
	q.mu.Unlock()
}

func (q *memQueue) grew() {
	close(q.wake)
	q.wake = make(chan struct{})
}

func (m *memStore) Enqueue(_ context.Context, id string, spec runs.Spec) error {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	if slices.Contains(q.waiting, id) || q.taken[id] {
		return nil
	}
	max := q.max
	if max == 0 {
		max = 64
	}
	if len(q.waiting)+len(q.taken) >= max {
		return fmt.Errorf("enqueue %s: %w", id, runs.ErrCapacity)
	}
	q.waiting = append(q.waiting, id)
	q.specs[id] = spec
	q.grew()
	return nil
}

func (m *memStore) Requeue(ctx context.Context, id string, spec runs.Spec) error {
	return m.Enqueue(ctx, id, spec)
}

func (m *memStore) Unqueue(_ context.Context, id string) error {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting = slices.DeleteFunc(q.waiting, func(w string) bool { return w == id })
	return nil
}

func (m *memStore) Dequeue(ctx context.Context) (runs.QueuedRun, error) {
	q := m.q()
	for {
		if err := ctx.Err(); err != nil {
			return runs.QueuedRun{}, err
		}
		q.mu.Lock()
		if len(q.waiting) > 0 {
			id := q.waiting[0]
			q.waiting = q.waiting[1:]
			q.taken[id] = true
			spec := q.specs[id]
			q.mu.Unlock()
			var once sync.Once
			end := func(back bool) error {
				once.Do(func() {
					q.mu.Lock()
					defer q.mu.Unlock()
					if !back {
						delete(q.taken, id)
						return
					}
					q.naks[id]++
					// As NakWithDelay: back in the queue a moment later,
					// not to the replica that gave it back at once.
					time.AfterFunc(20*time.Millisecond, func() {
						q.mu.Lock()
						defer q.mu.Unlock()
						delete(q.taken, id)
						q.waiting = append([]string{id}, q.waiting...)
						q.grew()
					})
				})
				return nil
			}
			return runs.QueuedRun{RunID: id, Spec: &spec, Ack: func() error { return end(false) }, Nak: func() error { return end(true) }}, nil
		}
		wake := q.wake
		q.pulling++
		q.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-wake:
		}
		q.mu.Lock()
		q.pulling--
		q.mu.Unlock()
	}
}

func (m *memStore) QueueLength(context.Context) (int, error) {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting) + len(q.taken), nil
}

func (m *memStore) QueuePosition(_ context.Context, id string) (int, error) {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Index(q.waiting, id) + 1, nil
}

func (m *memStore) ClaimRun(_ context.Context, id, replica string) (runs.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims++
	r, ok := m.runs[id]
	if !ok {
		return runs.Run{}, fmt.Errorf("claim %s: %w", id, runs.ErrNotFound)
	}
	if r.Status != runs.Queued || r.Owner != "" {
		return r, fmt.Errorf("claim %s: %w", id, runs.ErrClaimed)
	}
	r.Owner = replica
	m.runs[id] = r
	return r, nil
}

func (m *memStore) TakeOverRun(_ context.Context, id, from, replica string) (runs.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return runs.Run{}, fmt.Errorf("take over %s: %w", id, runs.ErrNotFound)
	}
	if r.Status != runs.Running || r.Owner != from {
		return r, fmt.Errorf("take over %s: %w", id, runs.ErrClaimed)
	}
	r.Owner = replica
	m.runs[id] = r
	return r, nil
}

func (m *memStore) ClaimHibernated(_ context.Context, id, from, replica string, next runs.Activity) (runs.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return runs.Run{}, fmt.Errorf("claim hibernated %s: %w", id, runs.ErrNotFound)
	}
	if r.Status != runs.Running || r.Activity != runs.Hibernated || from != "" && r.Owner != from {
		return r, fmt.Errorf("claim hibernated %s: %w", id, runs.ErrClaimed)
	}
	r.Owner, r.Activity = replica, next
	if next != runs.Hibernated {
		r.HibernatedAt, r.ClosesAt = nil, nil
	}
	m.runs[id] = r
	return r, nil
}

func (m *memStore) DeleteRun(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, id)
	delete(m.events, id)
	return nil
}

func (m *memStore) ClaimIdempotencyKey(_ context.Context, key string, rec runs.IdempotencyRecord) (runs.IdempotencyRecord, bool, error) {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	if got, ok := q.idem[key]; ok {
		return got, false, nil
	}
	q.idem[key] = rec
	return rec, true, nil
}

func (m *memStore) TenantUsage(_ context.Context, tenant string) (tenants.Usage, uint64, error) {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.tenants[tenant]
	if !ok {
		return tenants.Usage{}, 0, nil
	}
	// A copy: the caller changes its map.
	b, _ := json.Marshal(e.u)
	var u tenants.Usage
	_ = json.Unmarshal(b, &u)
	return u, e.rev, nil
}

func (m *memStore) SetTenantUsage(_ context.Context, tenant string, u tenants.Usage, rev uint64) error {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tenants == nil {
		q.tenants = map[string]tenantEntry{}
	}
	if q.tenants[tenant].rev != rev {
		return tenants.ErrStale
	}
	q.tenants[tenant] = tenantEntry{u: u, rev: rev + 1}
	return nil
}

type tenantEntry struct {
	u   tenants.Usage
	rev uint64
}

// naksOf is how often the run was given back to the queue.
func (m *memStore) naksOf(id string) int {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.naks[id]
}

// claimsMade is how many claims of runs were tried.
func (m *memStore) claimsMade() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claims
}

// pullers is how many Dequeue calls wait for a run.
func (m *memStore) pullers() int {
	q := m.q()
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pulling
}
