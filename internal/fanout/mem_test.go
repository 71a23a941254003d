package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/agentgate/agentgate/internal/runs"
)

// memLog is an in-memory Source: runs' logs, with the store cursors
// opened on them counted, and failures to inject.
type memLog struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every append
	events  map[string][]runs.StoredEvent
	opened  int // store cursors opened
	open    int // store cursors not yet closed
	// openErr, when set, is what OpenCursor returns; lastErr, what
	// LastEvent returns.
	openErr, lastErr error
	lastCalls        int // LastEvent calls
	// failAfter, when positive, makes every cursor opened from then on
	// fail with errInjected once it has returned that many events.
	failAfter int
}

var errInjected = errors.New("injected store failure")

func newMemLog() *memLog {
	return &memLog{changed: make(chan struct{}), events: map[string][]runs.StoredEvent{}}
}

// envelope is what the gateway stores for an event, near enough.
func envelope(runID string, seq uint64, t runs.EventType) runs.StoredEvent {
	b, _ := json.Marshal(map[string]any{"v": 1, "run_id": runID, "seq": seq, "type": t, "data": map[string]string{"text": "some text of a message"}})
	return runs.StoredEvent{Seq: seq, Type: t, JSON: b}
}

// add appends n events to the run's log; the last is run.completed when
// complete is set.
func (m *memLog) add(runID string, n int, complete bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	evs := m.events[runID]
	for i := range n {
		seq := uint64(len(evs)) + 1
		t := runs.EventMessageDelta
		if complete && i == n-1 {
			t = runs.EventRunCompleted
		}
		evs = append(evs, envelope(runID, seq, t))
	}
	m.events[runID] = evs
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *memLog) counts() (opened, open int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.opened, m.open
}

func (m *memLog) LastEvent(_ context.Context, runID string) (runs.StoredEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastCalls++
	if m.lastErr != nil {
		return runs.StoredEvent{}, m.lastErr
	}
	evs := m.events[runID]
	if len(evs) == 0 {
		return runs.StoredEvent{}, nil
	}
	last := evs[len(evs)-1]
	return runs.StoredEvent{Seq: last.Seq, Type: last.Type}, nil
}

func (m *memLog) OpenCursor(_ context.Context, runID string, after uint64) (runs.Cursor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.openErr != nil {
		return nil, m.openErr
	}
	m.opened++
	m.open++
	return &memCursor{m: m, id: runID, after: after, failAfter: m.failAfter}, nil
}

type memCursor struct {
	m         *memLog
	id        string
	after     uint64
	failAfter int
	given     int
	closed    bool
}

func (c *memCursor) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	for {
		if c.failAfter > 0 && c.given >= c.failAfter {
			return nil, errInjected
		}
		c.m.mu.Lock()
		var out []runs.StoredEvent
		for _, e := range c.m.events[c.id] {
			if e.Seq > c.after && len(out) < max && (c.failAfter == 0 || c.given+len(out) < c.failAfter) {
				out = append(out, e)
			}
		}
		changed := c.m.changed
		c.m.mu.Unlock()
		if len(out) > 0 {
			c.after = out[len(out)-1].Seq
			c.given += len(out)
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

func (c *memCursor) Close() error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.m.open--
	}
	return nil
}
