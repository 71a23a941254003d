// Package autoruntest holds in-memory stand-ins for the store and the
// runs of internal/autorun, for tests that control the clock
// (testing/synctest), where a real store's network cannot run. The
// store's own tests hold internal/store's implementation to the same
// behaviour.
package autoruntest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/runs"
)

// Mem is a Records and a Claims in memory.
type Mem struct {
	mu   sync.Mutex
	vals map[string]entry
	rev  uint64
	// Fail, when set, is returned by the next call instead of its work.
	Fail error
	// reads counts Get calls by key prefix up to the first ".".
	reads map[string]int
}

type entry struct {
	data []byte
	rev  uint64
}

// NewMem returns an empty Mem.
func NewMem() *Mem { return &Mem{vals: map[string]entry{}} }

func (m *Mem) failed() error {
	err := m.Fail
	m.Fail = nil
	return err
}

func (m *Mem) Create(_ context.Context, key string, data []byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.failed(); err != nil {
		return 0, err
	}
	if _, ok := m.vals[key]; ok {
		return 0, fmt.Errorf("%s: %w", key, runs.ErrConflict)
	}
	m.rev++
	m.vals[key] = entry{slices.Clone(data), m.rev}
	return m.rev, nil
}

func (m *Mem) Get(_ context.Context, key string) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reads == nil {
		m.reads = map[string]int{}
	}
	kind, _, _ := strings.Cut(key, ".")
	m.reads[kind]++
	if err := m.failed(); err != nil {
		return nil, 0, err
	}
	e, ok := m.vals[key]
	if !ok {
		return nil, 0, fmt.Errorf("%s: %w", key, runs.ErrNotFound)
	}
	return slices.Clone(e.data), e.rev, nil
}

// Reads counts the Get calls of keys that begin with kind and a ".".
func (m *Mem) Reads(kind string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads[kind]
}

func (m *Mem) Update(_ context.Context, key string, data []byte, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.failed(); err != nil {
		return 0, err
	}
	if e := m.vals[key]; e.rev != rev {
		return 0, fmt.Errorf("%s: revision %d, not %d: %w", key, e.rev, rev, runs.ErrConflict)
	}
	m.rev++
	m.vals[key] = entry{slices.Clone(data), m.rev}
	return m.rev, nil
}

func (m *Mem) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.vals, key)
	return m.failed()
}

func (m *Mem) Keys(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.failed(); err != nil {
		return nil, err
	}
	var keys []string
	for k := range m.vals {
		if strings.HasPrefix(k, prefix+".") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

func (m *Mem) Claim(ctx context.Context, key string, data []byte) (bool, []byte, uint64, error) {
	if rev, err := m.Create(ctx, key, data); err == nil {
		return true, nil, rev, nil
	}
	held, rev, err := m.Get(ctx, key)
	return false, held, rev, err
}

func (m *Mem) Reclaim(ctx context.Context, key string, data []byte, rev uint64) error {
	_, err := m.Update(ctx, key, data, rev)
	return err
}

// Runs is the runs of a gateway in memory: Submit records a run (one per
// idempotency key), which stays running until Finish.
type Runs struct {
	mu       sync.Mutex
	runs     map[string]*runs.Run
	specs    map[string]runs.Spec
	byKey    map[string]string
	order    []string
	Refuse   error // when set, Submit fails with it
	Canceled []string
}

// NewRuns returns a Runs with none.
func NewRuns() *Runs {
	return &Runs{runs: map[string]*runs.Run{}, specs: map[string]runs.Spec{}, byKey: map[string]string{}}
}

func (r *Runs) Submit(ctx context.Context, spec runs.Spec) (runs.Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Refuse != nil {
		return runs.Run{}, r.Refuse
	}
	spec.Tenant = runs.ActorFrom(ctx).Tenant
	key := spec.Tenant + "\x00" + spec.IdempotencyKey
	if id, ok := r.byKey[key]; ok && spec.IdempotencyKey != "" {
		return *r.runs[id], nil
	}
	id := uuid.NewString()
	r.runs[id] = &runs.Run{ID: id, Agent: spec.Agent, Status: runs.Running, Tenant: spec.Tenant}
	r.specs[id] = spec
	r.byKey[key] = id
	r.order = append(r.order, id)
	return *r.runs[id], nil
}

func (r *Runs) Record(_ context.Context, id string) (runs.Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.runs[id]
	if !ok {
		return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
	}
	return *run, nil
}

func (r *Runs) Cancel(_ context.Context, id string) (runs.Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.runs[id]
	if !ok {
		return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
	}
	r.Canceled = append(r.Canceled, id)
	run.Status = runs.Cancelled
	return *run, nil
}

// Finish ends a run.
func (r *Runs) Finish(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs[id].Status = runs.Succeeded
}

// FinishAll ends every run.
func (r *Runs) FinishAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, run := range r.runs {
		if !run.Status.Terminal() {
			run.Status = runs.Succeeded
		}
	}
}

// Submitted returns the specs of the runs made, in order, each with its
// idempotency key.
func (r *Runs) Submitted() []runs.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]runs.Spec, len(r.order))
	for i, id := range r.order {
		out[i] = r.specs[id]
	}
	return out
}

// Running counts the runs not ended.
func (r *Runs) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, run := range r.runs {
		if !run.Status.Terminal() {
			n++
		}
	}
	return n
}
