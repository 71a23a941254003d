package api

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/fanout"
	"github.com/agentgate/agentgate/internal/runs"
)

// pollCursor is a memLog cursor that answers Poll, as the fan-out hub's
// readers do. Once it has returned the event blindAfter (when set), Poll
// answers that it cannot tell, as a reader behind its ring does, and the
// stream must read on with Next.
type pollCursor struct {
	l          *memLog
	pos        uint64
	blindAfter uint64
	polls      atomic.Int32
	nexts      atomic.Int32
}

func (c *pollCursor) take(max int) ([]runs.StoredEvent, <-chan struct{}) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	var out []runs.StoredEvent
	for _, ev := range c.l.events {
		if ev.Seq > c.pos && len(out) < max {
			out = append(out, ev)
		}
	}
	if len(out) > 0 {
		c.pos = out[len(out)-1].Seq
	}
	return out, c.l.changed
}

func (c *pollCursor) Poll(max int) ([]runs.StoredEvent, <-chan struct{}, error) {
	c.polls.Add(1)
	if c.blindAfter > 0 && c.pos >= c.blindAfter {
		return nil, nil, nil
	}
	out, changed := c.take(max)
	if len(out) > 0 {
		return out, nil, nil
	}
	return nil, changed, nil
}

func (c *pollCursor) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	c.nexts.Add(1)
	for {
		out, changed := c.take(max)
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

func (c *pollCursor) Close() error { c.l.closed.Add(1); return nil }

// pollService serves l's run through pollCursors, and sends each one it
// opens on opened.
func pollService(l *memLog, blindAfter uint64, opened chan<- *pollCursor) *fakeService {
	svc := streamService(l, fixed(runs.Running))
	svc.events = func(_ context.Context, _ string, after uint64) (runs.Cursor, error) {
		l.opened.Add(1)
		c := &pollCursor{l: l, pos: after, blindAfter: blindAfter}
		opened <- c
		return c, nil
	}
	return svc
}

// readEvents reads the stream until it ends and checks that its events are
// 1..n, in order, each once.
func readEvents(t *testing.T, body io.Reader, n int) *eventSource {
	t.Helper()
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	p := newEventSource()
	p.feed(b)
	if len(p.events) != n {
		t.Fatalf("%d events, want %d: %q", len(p.events), n, b)
	}
	for i, ev := range p.events {
		if ev.lastEventID != strconv.Itoa(i+1) {
			t.Fatalf("event %d has id %s", i+1, ev.lastEventID)
		}
	}
	return p
}

// TestEventsPolledCursor: a stream on a cursor that answers Poll writes
// every event once, in order, as the log grows, and never calls Next: it
// needs no goroutine of its own to wait.
func TestEventsPolledCursor(t *testing.T) {
	evs := runLog(t, runA, 12)
	l := newMemLog(evs[:3]...)
	opened := make(chan *pollCursor, 1)
	h := newHarness(t, Config{}, pollService(l, 0, opened))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := connectES(ctx, t, h.srv.Client(), h.srv.URL+"/v1/runs/"+runA+"/events", "")
	defer resp.Body.Close()
	c := <-opened
	waitFor(t, "the stream to poll", func() bool { return c.polls.Load() > 0 })
	l.append(evs[3:7]...)
	l.append(evs[7:]...)
	readEvents(t, resp.Body, 12)
	if n := c.nexts.Load(); n != 0 {
		t.Errorf("Next called %d times on a cursor that answers Poll", n)
	}
	waitFor(t, "the cursor to close", func() bool { return l.closed.Load() == 1 })
}

// TestEventsPolledCursorFallsBackToNext: a cursor that stops answering Poll
// (a hub reader that fell off its ring) is read on with Next, without a gap
// or a repeat.
func TestEventsPolledCursorFallsBackToNext(t *testing.T) {
	evs := runLog(t, runA, 10)
	l := newMemLog(evs[:4]...)
	opened := make(chan *pollCursor, 1)
	h := newHarness(t, Config{}, pollService(l, 4, opened))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := connectES(ctx, t, h.srv.Client(), h.srv.URL+"/v1/runs/"+runA+"/events", "")
	defer resp.Body.Close()
	c := <-opened
	waitFor(t, "the stream to read with Next", func() bool { return c.nexts.Load() > 0 })
	l.append(evs[4:]...)
	readEvents(t, resp.Body, 10)
	waitFor(t, "the cursor to close", func() bool { return l.closed.Load() == 1 })
}

// TestEventsPolledHeartbeatAndDrain: while a polled stream waits, it still
// pings, and a drain ends it with the hint to reconnect.
func TestEventsPolledHeartbeatAndDrain(t *testing.T) {
	l := newMemLog(runLog(t, runA, 5)[:2]...)
	opened := make(chan *pollCursor, 1)
	draining := make(chan struct{})
	h := newHarness(t, Config{PingInterval: 20 * time.Millisecond, Draining: draining}, pollService(l, 0, opened))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := connectES(ctx, t, h.srv.Client(), h.srv.URL+"/v1/runs/"+runA+"/events", "")
	defer resp.Body.Close()
	p := readComments(t, resp.Body, 2)
	close(draining)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p.feed(rest)
	if len(p.events) != 2 || p.comments[0] != " ping" {
		t.Fatalf("events %+v comments %q", p.events, p.comments)
	}
	if last := p.comments[len(p.comments)-1]; !strings.Contains(last, "reconnect with Last-Event-ID") {
		t.Errorf("last comment %q", last)
	}
	if c := <-opened; c.nexts.Load() != 0 {
		t.Errorf("Next called %d times", c.nexts.Load())
	}
}

// hubSource is a fanout.Source on a memLog.
type hubSource struct{ l *memLog }

func (s hubSource) OpenCursor(_ context.Context, _ string, after uint64) (runs.Cursor, error) {
	return s.l.cursor(after), nil
}

func (s hubSource) LastEvent(context.Context, string) (runs.StoredEvent, error) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if len(s.l.events) == 0 {
		return runs.StoredEvent{}, nil
	}
	return s.l.events[len(s.l.events)-1], nil
}

// hubHarness serves runA, running, whose log is l, with every stream read
// through a fan-out hub on l, closed when the test ends.
func hubHarness(t *testing.T, l *memLog) (*harness, *fanout.Hub) {
	t.Helper()
	hub := fanout.New(hubSource{l}, fanout.Options{}, zap.NewNop())
	t.Cleanup(func() { hub.Close() })
	svc := streamService(l, fixed(runs.Running))
	svc.events = func(ctx context.Context, id string, after uint64) (runs.Cursor, error) {
		return hub.OpenCursor(ctx, id, after)
	}
	return newHarness(t, Config{}, svc), hub
}

// TestEventsThroughHub: clients of a live run read through the fan-out hub
// (whose readers answer Poll) get every event once, in order, one from the
// start and one resumed; the hub counts them on its ring while they stream
// and lets them go after.
func TestEventsThroughHub(t *testing.T) {
	evs := runLog(t, runA, 40)
	l := newMemLog(evs[:5]...)
	h, hub := hubHarness(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := h.srv.URL + "/v1/runs/" + runA + "/events"
	whole := connectES(ctx, t, h.srv.Client(), url, "")
	defer whole.Body.Close()
	resumed := connectES(ctx, t, h.srv.Client(), url, "3")
	defer resumed.Body.Close()
	waitFor(t, "both clients on the ring", func() bool { return hub.Stats().RingReaders == 2 })
	for i := 5; i < len(evs); i += 7 {
		l.append(evs[i:min(i+7, len(evs))]...)
	}
	readEvents(t, whole.Body, 40)
	b, err := io.ReadAll(resumed.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := newEventSource()
	p.feed(b)
	if len(p.events) != 37 || p.events[0].lastEventID != "4" || p.events[36].lastEventID != "40" {
		t.Fatalf("the resumed client got %d events: %q", len(p.events), b)
	}
	waitFor(t, "the clients to leave the hub", func() bool {
		st := hub.Stats()
		return st.RingReaders == 0 && st.StoreReaders == 0 && st.Feeds == 0
	})
	if st := hub.Stats(); st.Delivered != 40+37 {
		t.Errorf("the hub delivered %d events, want %d", st.Delivered, 40+37)
	}
}

// TestReleaseOwnedRun: once a stream has opened its cursor it lets go of
// the run owned put in its request's context, which would otherwise stay
// there for the stream's life; a request without one is left alone.
func TestReleaseOwnedRun(t *testing.T) {
	run := sampleRun(runA, runs.Running)
	ctx := context.WithValue(context.Background(), ownedRunKey{}, &ownedRunBox{run: run, found: true})
	if got, ok := ownedRun(ctx); !ok || got.ID != runA {
		t.Fatalf("ownedRun = %v, %v", got.ID, ok)
	}
	releaseOwnedRun(ctx)
	if got, ok := ownedRun(ctx); ok || got.ID != "" {
		t.Fatalf("ownedRun after release = %q, %v", got.ID, ok)
	}
	releaseOwnedRun(context.Background()) // nothing to release
	if _, ok := ownedRun(context.Background()); ok {
		t.Fatal("ownedRun found a run in an empty context")
	}
}

// TestManyStreamsThroughHubEachGetTheirOwnBytes: 32 clients of one run,
// through the hub, each get every event once, in order, byte for byte,
// while the run writes. The streams' write buffers and the readers'
// batches come from pools they share: a buffer or batch handed to two
// streams at once, or given back while one still writes it, shows here as
// a client's event that is not the stored one.
func TestManyStreamsThroughHubEachGetTheirOwnBytes(t *testing.T) {
	const clients, n = 32, 400
	evs := runLog(t, runA, n)
	l := newMemLog(evs[:2]...)
	h, hub := hubHarness(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := h.srv.URL + "/v1/runs/" + runA + "/events"
	bodies := make([][]byte, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		resp := connectES(ctx, t, h.srv.Client(), url, "")
		wg.Go(func() {
			defer resp.Body.Close()
			bodies[i], errs[i] = io.ReadAll(resp.Body)
		})
	}
	waitFor(t, "every client on the ring", func() bool { return hub.Stats().RingReaders == clients })
	for i := 2; i < n; i += 3 {
		l.append(evs[i:min(i+3, n)]...)
	}
	wg.Wait()
	for i, b := range bodies {
		if errs[i] != nil {
			t.Fatalf("client %d: %v", i, errs[i])
		}
		p := newEventSource()
		p.feed(b)
		if len(p.events) != n {
			t.Fatalf("client %d got %d events, want %d", i, len(p.events), n)
		}
		for j, ev := range p.events {
			if ev.lastEventID != strconv.Itoa(j+1) || ev.data != string(evs[j].JSON) {
				t.Fatalf("client %d, event %d: id %s, data %q; want id %d, data %q", i, j+1, ev.lastEventID, ev.data, j+1, evs[j].JSON)
			}
		}
	}
}
