package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentgate/agentgate/internal/runs"
)

// fakeService is a Service whose methods are function fields. A method
// whose field is nil fails with errUnexpected, which maps to a 500.
type fakeService struct {
	submit       func(ctx context.Context, spec runs.Spec) (runs.Run, error)
	get          func(ctx context.Context, id string) (runs.Run, error)
	record       func(ctx context.Context, id string) (runs.Run, error)
	position     func(ctx context.Context, id string) int
	list         func(ctx context.Context, f runs.Filter) (runs.Page, error)
	cancel       func(ctx context.Context, id string) (runs.Run, error)
	delete       func(ctx context.Context, id string) error
	events       func(ctx context.Context, id string, after uint64) (runs.Cursor, error)
	lastEventSeq func(ctx context.Context, id string) (uint64, error)
	agents       func() []runs.AgentInfo
	ready        func(ctx context.Context) error
	input        func(ctx context.Context, id string, in runs.Input) (runs.InputResult, error)
}

func (f *fakeService) Input(ctx context.Context, id string, in runs.Input) (runs.InputResult, error) {
	if f.input == nil {
		return runs.InputResult{}, fmt.Errorf("Input: %w", errUnexpected)
	}
	return f.input(ctx, id, in)
}

var errUnexpected = errors.New("unexpected call")

func (f *fakeService) Submit(ctx context.Context, spec runs.Spec) (runs.Run, error) {
	if f.submit == nil {
		return runs.Run{}, fmt.Errorf("Submit: %w", errUnexpected)
	}
	return f.submit(ctx, spec)
}

// Get without a get func finds every run, running, of the anonymous
// tenant: the routes of one run look it up before their handler runs.
func (f *fakeService) Get(ctx context.Context, id string) (runs.Run, error) {
	if f.get == nil {
		return runs.Run{ID: id, Status: runs.Running}, nil
	}
	return f.get(ctx, id)
}

// Record without a record func is Get.
func (f *fakeService) Record(ctx context.Context, id string) (runs.Run, error) {
	if f.record == nil {
		return f.Get(ctx, id)
	}
	return f.record(ctx, id)
}

// AddQueuePosition without a position func leaves the run as it is.
func (f *fakeService) AddQueuePosition(ctx context.Context, r *runs.Run) {
	if f.position != nil && r.Status == runs.Queued {
		r.QueuePosition = f.position(ctx, r.ID)
	}
}

func (f *fakeService) Delete(ctx context.Context, id string) error {
	if f.delete == nil {
		return fmt.Errorf("Delete: %w", errUnexpected)
	}
	return f.delete(ctx, id)
}

func (f *fakeService) List(ctx context.Context, fl runs.Filter) (runs.Page, error) {
	if f.list == nil {
		return runs.Page{}, fmt.Errorf("List: %w", errUnexpected)
	}
	return f.list(ctx, fl)
}

func (f *fakeService) Cancel(ctx context.Context, id string) (runs.Run, error) {
	if f.cancel == nil {
		return runs.Run{}, fmt.Errorf("Cancel: %w", errUnexpected)
	}
	return f.cancel(ctx, id)
}

func (f *fakeService) Events(ctx context.Context, id string, after uint64) (runs.Cursor, error) {
	if f.events == nil {
		return nil, fmt.Errorf("Events: %w", errUnexpected)
	}
	return f.events(ctx, id, after)
}

func (f *fakeService) LastEventSeq(ctx context.Context, id string) (uint64, error) {
	if f.lastEventSeq == nil {
		return 0, fmt.Errorf("LastEventSeq: %w", errUnexpected)
	}
	return f.lastEventSeq(ctx, id)
}

func (f *fakeService) Agents() []runs.AgentInfo {
	if f.agents == nil {
		return nil
	}
	return f.agents()
}

func (f *fakeService) Ready(ctx context.Context) error {
	if f.ready == nil {
		return fmt.Errorf("Ready: %w", errUnexpected)
	}
	return f.ready(ctx)
}

// fakeCursor is a Cursor whose methods are function fields.
type fakeCursor struct {
	next  func(ctx context.Context, max int) ([]runs.StoredEvent, error)
	close func() error
}

func (c *fakeCursor) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	return c.next(ctx, max)
}

func (c *fakeCursor) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// sliceCursor returns a cursor that hands out evs in batches as large as
// asked, each a copy when copied (as the store's decoding of a pack makes
// one), and then waits for its context to end.
func sliceCursor(evs []runs.StoredEvent, copied bool) *fakeCursor {
	pos := 0
	return &fakeCursor{next: func(ctx context.Context, max int) ([]runs.StoredEvent, error) {
		if pos == len(evs) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		n := min(max, len(evs)-pos)
		pos += n
		if copied {
			return append([]runs.StoredEvent(nil), evs[pos-n:pos]...), nil
		}
		return evs[pos-n : pos], nil
	}}
}

// memLog is one run's event log in memory, appendable while cursors read
// it, like the store's.
type memLog struct {
	mu      sync.Mutex
	events  []runs.StoredEvent
	changed chan struct{} // closed and replaced on every append
	opened  atomic.Int32
	closed  atomic.Int32
	// afters records the resume point of every cursor opened.
	afters []uint64
}

func newMemLog(evs ...runs.StoredEvent) *memLog {
	return &memLog{events: evs, changed: make(chan struct{})}
}

func (l *memLog) append(evs ...runs.StoredEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, evs...)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *memLog) last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		return 0
	}
	return l.events[len(l.events)-1].Seq
}

func (l *memLog) cursorAfters() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.afters...)
}

// cursor reads the log after seq `after`, waiting for appends.
func (l *memLog) cursor(after uint64) runs.Cursor {
	l.mu.Lock()
	l.afters = append(l.afters, after)
	l.mu.Unlock()
	l.opened.Add(1)
	pos := after
	return &fakeCursor{
		next: func(ctx context.Context, max int) ([]runs.StoredEvent, error) {
			for {
				l.mu.Lock()
				var out []runs.StoredEvent
				for _, ev := range l.events {
					if ev.Seq > pos && len(out) < max {
						out = append(out, ev)
					}
				}
				changed := l.changed
				l.mu.Unlock()
				if len(out) > 0 {
					pos = out[len(out)-1].Seq
					return out, nil
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-changed:
				}
			}
		},
		close: func() error { l.closed.Add(1); return nil },
	}
}

// fakeObserver records what it is told.
type fakeObserver struct {
	mu       sync.Mutex
	requests []observedRequest
	clients  atomic.Int64
	maxSeen  atomic.Int64
}

type observedRequest struct {
	route, method string
	status        int
}

func (o *fakeObserver) HTTPRequest(route, method string, status int, seconds float64) {
	if seconds < 0 {
		panic("negative duration")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests = append(o.requests, observedRequest{route, method, status})
}

func (o *fakeObserver) SSEClientsAdd(delta int) {
	n := o.clients.Add(int64(delta))
	for {
		m := o.maxSeen.Load()
		if n <= m || o.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
}

func (o *fakeObserver) observed() []observedRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observedRequest(nil), o.requests...)
}

// harness is a running API on a real loopback HTTP server.
type harness struct {
	srv  *httptest.Server
	obs  *fakeObserver
	logs *observer.ObservedLogs
}

func newHarness(t *testing.T, cfg Config, svc Service) *harness {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	obs := &fakeObserver{}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "agentgate_up 1\n")
	})
	srv := httptest.NewServer(New(cfg, svc, obs, metrics, zap.New(core)))
	t.Cleanup(srv.Close)
	return &harness{srv: srv, obs: obs, logs: logs}
}

// do sends a request and returns the response with its body read.
func (h *harness) do(t *testing.T, method, path string, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	// A stream that does not end fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// errorBody decodes an error response, failing the test unless it is
// exactly the documented error body.
func errorBody(t *testing.T, b []byte) ErrorDetail {
	t.Helper()
	validateOpenAPI(t, "Error", b)
	var e ErrorResponse
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %q: %v", b, err)
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error body %s lacks code or message", b)
	}
	return e.Error
}

// Fixed run ids.
const (
	runA = "0196a7c8-5a3e-7b1e-9d0a-2f4c6b8e1a3d"
	runB = "0196a7c8-5a3f-7c2f-8e1b-3a5d7c9f2b4e"
)

var t0 = time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)

func sampleRun(id string, st runs.State) runs.Run {
	return runs.Run{
		ID: id, Agent: "claude", Status: st, CreatedAt: t0,
		Usage:    runs.Usage{InputTokens: 10, OutputTokens: 5},
		Metadata: map[string]string{"ticket": "ENG-1"},
	}
}

// storedEvent builds the stored form of an event, encoded once as the
// supervisor does.
func storedEvent(t testing.TB, runID string, seq uint64, typ runs.EventType, data any) runs.StoredEvent {
	t.Helper()
	b, err := json.Marshal(runs.Event{
		V: runs.EnvelopeVersion, RunID: runID, Seq: seq, Time: t0.Add(time.Duration(seq) * time.Millisecond),
		Type: typ, Agent: "claude", Data: data,
	})
	if err != nil {
		t.Fatal(err)
	}
	return runs.StoredEvent{Seq: seq, Type: typ, JSON: b}
}

// runLog builds a run's log of n events: run.queued, n-2 message deltas and
// run.completed.
func runLog(t testing.TB, runID string, n int) []runs.StoredEvent {
	t.Helper()
	evs := []runs.StoredEvent{storedEvent(t, runID, 1, runs.EventRunQueued, runs.RunQueuedData{Agent: "claude", Position: 1})}
	for i := 2; i < n; i++ {
		evs = append(evs, storedEvent(t, runID, uint64(i), runs.EventMessageDelta,
			runs.MessageData{MessageID: "m1", Text: fmt.Sprintf("part %d: <b>&\"quoted\"</b>", i)}))
	}
	return append(evs, storedEvent(t, runID, uint64(n), runs.EventRunCompleted,
		runs.RunCompletedData{Status: runs.Succeeded, DurationMS: 1200}))
}

// streamService serves one run whose log is l and whose status is status().
func streamService(l *memLog, status func() runs.State) *fakeService {
	return &fakeService{
		get: func(_ context.Context, id string) (runs.Run, error) {
			if id != runA {
				return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
			}
			return sampleRun(id, status()), nil
		},
		lastEventSeq: func(context.Context, string) (uint64, error) { return l.last(), nil },
		events: func(_ context.Context, _ string, after uint64) (runs.Cursor, error) {
			return l.cursor(after), nil
		},
	}
}

func fixed(st runs.State) func() runs.State { return func() runs.State { return st } }

// httptestServer serves h on loopback until the test ends.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// get fetches url and returns the response with its body read.
func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
