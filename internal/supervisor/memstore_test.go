package supervisor

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/agentgate/agentgate/internal/runs"
)

// memStore is an in-memory Store for the supervisor's tests. The real one
// is internal/store, tested on its own.
type memStore struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every append
	runs    map[string]runs.Run
	events  map[string][]runs.StoredEvent
	cancels chan runs.CancelRequest
	costs   map[string]runs.SessionRecord
	live    map[string]bool
	inputs  map[string]chan runs.InputRequest // by replica, while it listens
	// failAppend, when set, decides whether an append fails.
	failAppend func(id string, evs []runs.StoredEvent) bool
	queue      *memQueue // made on first use; see memqueue_test.go
	// failUpdate, when set, decides whether an update of a run fails.
	failUpdate func(r runs.Run) bool
	claims     int                // ClaimRun calls
	files      map[string]memFile // by tenant and id; see files_test.go
}

func newMemStore() *memStore {
	return &memStore{changed: make(chan struct{}), runs: map[string]runs.Run{}, events: map[string][]runs.StoredEvent{}, cancels: make(chan runs.CancelRequest, 16), costs: map[string]runs.SessionRecord{}}
}

func (m *memStore) CreateRun(_ context.Context, r runs.Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.runs[r.ID]; ok {
		return fmt.Errorf("run %s exists", r.ID)
	}
	m.runs[r.ID] = r
	return nil
}

func (m *memStore) UpdateRun(_ context.Context, r runs.Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failUpdate != nil && m.failUpdate(r) {
		return fmt.Errorf("update %s: the test's store refuses it", r.ID)
	}
	m.runs[r.ID] = r
	return nil
}

func (m *memStore) GetRun(_ context.Context, id string) (runs.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
	}
	return r, nil
}

func (m *memStore) ListRuns(_ context.Context, f runs.Filter) (runs.Page, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []runs.Run
	for _, r := range m.runs {
		// As the real store: a listing is of one tenant's runs, the
		// empty tenant's on a gateway without keys, unless it is of all.
		if (f.AllTenants || r.Tenant == f.Tenant) && (f.Status == "" || r.Status == f.Status) && (f.Agent == "" || r.Agent == f.Agent) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return runs.Page{Runs: out}, nil
}

func (m *memStore) AppendEvents(_ context.Context, id string, evs []runs.StoredEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failAppend != nil && m.failAppend(id, evs) {
		return fmt.Errorf("append to %s: the test's store refuses it", id)
	}
	m.events[id] = append(m.events[id], evs...)
	close(m.changed)
	m.changed = make(chan struct{})
	return nil
}

func (m *memStore) LastEvent(_ context.Context, id string) (runs.StoredEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	evs := m.events[id]
	if len(evs) == 0 {
		return runs.StoredEvent{}, nil
	}
	return runs.StoredEvent{Seq: evs[len(evs)-1].Seq, Type: evs[len(evs)-1].Type}, nil
}

func (m *memStore) OpenCursor(_ context.Context, id string, after uint64) (runs.Cursor, error) {
	return &memCursor{m: m, id: id, after: after}, nil
}

func (m *memStore) Session(_ context.Context, agent, session string) (runs.SessionRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.costs[agent+"/"+session]
	return rec, ok, nil
}

func (m *memStore) SetSession(_ context.Context, agent, session string, rec runs.SessionRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.costs[agent+"/"+session] = rec
	return nil
}

func (m *memStore) Heartbeat(_ context.Context, replica string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live == nil {
		m.live = map[string]bool{}
	}
	m.live[replica] = true
	return nil
}

func (m *memStore) LiveReplicas(context.Context) (map[string]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for k := range m.live {
		out[k] = true
	}
	return out, nil
}

func (m *memStore) RequestCancel(_ context.Context, id string, by runs.Actor) error {
	m.cancels <- runs.CancelRequest{RunID: id, By: by}
	return nil
}

func (m *memStore) CancelRequests(ctx context.Context) (<-chan runs.CancelRequest, error) {
	out := make(chan runs.CancelRequest)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-m.cancels:
				select {
				case out <- id:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (m *memStore) eventsOf(id string) []runs.StoredEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]runs.StoredEvent(nil), m.events[id]...)
}

type memCursor struct {
	m     *memStore
	id    string
	after uint64
}

func (c *memCursor) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	for {
		c.m.mu.Lock()
		var out []runs.StoredEvent
		for _, e := range c.m.events[c.id] {
			if e.Seq > c.after && len(out) < max {
				out = append(out, e)
			}
		}
		changed := c.m.changed
		c.m.mu.Unlock()
		if len(out) > 0 {
			c.after = out[len(out)-1].Seq
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

func (c *memCursor) Close() error { return nil }

// nopObserver counts nothing.
type nopObserver struct{}

func (nopObserver) RunQueued(string)           {}
func (nopObserver) RunStarted(string, float64) {}
func (nopObserver) RunFinished(string, string, runs.State, runs.Class, float64, runs.Usage, *float64) {
}
func (nopObserver) Event(string, runs.EventType)                            {}
func (nopObserver) FirstEvent(string, float64)                              {}
func (nopObserver) QueueDepth(int, int)                                     {}
func (nopObserver) ApprovalRequested(string)                                {}
func (nopObserver) ApprovalResolved(string, runs.Decision, string, float64) {}
func (nopObserver) TurnStarted(string)                                      {}
func (nopObserver) TurnFinished(string, runs.State, float64)                {}
func (nopObserver) WorkspacePrepared(string, float64, bool)                 {}
func (nopObserver) SnapshotKept(runs.SnapshotKind, int64)                   {}
func (nopObserver) SnapshotRestored(runs.SnapshotKind)                      {}
func (nopObserver) NetworkDenied(string, string)                            {}
func (nopObserver) RunHibernated(string)                                    {}
func (nopObserver) RunWoken(string)                                         {}
func (nopObserver) WokenFirstEvent(string, float64)                         {}

func (m *memStore) SendInput(ctx context.Context, replica, runID string, body []byte) ([]byte, error) {
	m.mu.Lock()
	ch := m.inputs[replica]
	m.mu.Unlock()
	if ch == nil {
		return nil, fmt.Errorf("replica %s: %w", replica, runs.ErrOwnerUnavailable)
	}
	reply := make(chan []byte, 1)
	select {
	case ch <- runs.InputRequest{RunID: runID, Body: body, Reply: func(b []byte) { reply <- b }}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case b := <-reply:
		return b, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("replica %s: %w", replica, runs.ErrOwnerUnavailable)
	}
}

func (m *memStore) Inputs(ctx context.Context, replica string) (<-chan runs.InputRequest, error) {
	ch := make(chan runs.InputRequest)
	m.mu.Lock()
	if m.inputs == nil {
		m.inputs = map[string]chan runs.InputRequest{}
	}
	m.inputs[replica] = ch
	m.mu.Unlock()
	out := make(chan runs.InputRequest)
	go func() {
		defer close(out)
		defer func() {
			m.mu.Lock()
			delete(m.inputs, replica)
			m.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case req := <-ch:
				select {
				case out <- req:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// hasCompleted reports whether the run's log holds run.completed. It is
// safe to call from a fail hook, which runs with m.mu held.
func (m *memStore) hasCompleted(id string) bool {
	for _, e := range m.events[id] {
		if e.Type == runs.EventRunCompleted {
			return true
		}
	}
	return false
}
