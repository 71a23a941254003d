package metrics

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/fanout"
	"github.com/agentgate/agentgate/internal/runs"
)

// fanoutLog is a fanout.Source of one run's log in memory.
type fanoutLog struct {
	mu      sync.Mutex
	events  []runs.StoredEvent
	changed chan struct{}
}

func newFanoutLog() *fanoutLog { return &fanoutLog{changed: make(chan struct{})} }

func (l *fanoutLog) add(n int) { l.put(l.next(n)) }

// next makes the log's next n events, without storing them.
func (l *fanoutLog) next(n int) []runs.StoredEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var evs []runs.StoredEvent
	for i := range n {
		seq := uint64(len(l.events)+i) + 1
		evs = append(evs, runs.StoredEvent{Seq: seq, Type: runs.EventMessageDelta, JSON: []byte(`{"v":1}`)})
	}
	return evs
}

// put stores evs, made by next.
func (l *fanoutLog) put(evs []runs.StoredEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, evs...)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *fanoutLog) LastEvent(context.Context, string) (runs.StoredEvent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		return runs.StoredEvent{}, nil
	}
	return l.events[len(l.events)-1], nil
}

func (l *fanoutLog) OpenCursor(_ context.Context, _ string, after uint64) (runs.Cursor, error) {
	return &fanoutLogCursor{l: l, pos: after}, nil
}

type fanoutLogCursor struct {
	l   *fanoutLog
	pos uint64
}

func (c *fanoutLogCursor) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	for {
		c.l.mu.Lock()
		var out []runs.StoredEvent
		for _, ev := range c.l.events {
			if ev.Seq > c.pos && len(out) < max {
				out = append(out, ev)
			}
		}
		changed := c.l.changed
		c.l.mu.Unlock()
		if len(out) > 0 {
			c.pos = out[len(out)-1].Seq
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

func (c *fanoutLogCursor) Close() error { return nil }

// TestFanoutMetrics: the fan-out metrics follow a real hub: a reader that
// joins is on the ring, one that falls behind it is counted as fallen off
// and on the store, the events each is given are counted, and once they
// leave the gauges are back at 0.
func TestFanoutMetrics(t *testing.T) {
	r, reg := newTest(t)
	if got := samples(t, reg); got[`agentgate_fanout_feeds{}`] != 0 || len(fanoutSamples(got)) != 0 {
		t.Fatalf("fan-out series before ObserveFanout: %v", fanoutSamples(got))
	}
	log := newFanoutLog()
	log.add(1)
	hub := fanout.New(log, fanout.Options{RingEvents: 4}, zap.NewNop())
	defer hub.Close()
	r.ObserveFanout(hub)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	fast, err := hub.OpenCursor(ctx, "run", 0)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := hub.OpenCursor(ctx, "run", 0)
	if err != nil {
		t.Fatal(err)
	}
	assertFanout(t, reg, map[string]float64{
		`agentgate_fanout_feeds{}`:                  1,
		`agentgate_fanout_readers{source="ring"}`:   2,
		`agentgate_fanout_readers{source="store"}`:  0,
		`agentgate_fanout_store_reads_total{}`:      0,
		`agentgate_fanout_fell_off_total{}`:         0,
		`agentgate_fanout_events_delivered_total{}`: 0,
	})

	// The fast reader reads each event as it comes; the slow one reads
	// nothing until the ring has moved on past it.
	read := func(cur runs.Cursor, want uint64) {
		t.Helper()
		for got := uint64(0); got < want; {
			evs, err := cur.Next(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			got = evs[len(evs)-1].Seq
		}
	}
	read(fast, 1)
	for want := uint64(2); want <= 20; want++ {
		log.add(1)
		read(fast, want)
	}
	// The ring holds 4 events: the slow reader, at 0, has fallen off. It
	// reads from the store for as long as it is behind the ring's start.
	evs, err := slow.Next(ctx, 5)
	if err != nil || len(evs) != 5 || evs[0].Seq != 1 {
		t.Fatalf("the slow reader's first batch: %d events, %v", len(evs), err)
	}
	assertFanout(t, reg, map[string]float64{
		`agentgate_fanout_readers{source="ring"}`:   1,
		`agentgate_fanout_readers{source="store"}`:  1,
		`agentgate_fanout_store_reads_total{}`:      1,
		`agentgate_fanout_fell_off_total{}`:         1,
		`agentgate_fanout_events_delivered_total{}`: 20 + 5,
	})
	read(slow, 20)
	assertFanout(t, reg, map[string]float64{
		`agentgate_fanout_readers{source="ring"}`:   2,
		`agentgate_fanout_readers{source="store"}`:  0,
		`agentgate_fanout_events_delivered_total{}`: 40,
	})

	// Events this replica stored itself, offered to the hub, keep the feed
	// without its store cursor.
	// (Offered before the log has them, so that the store cursor cannot
	// bring them first.)
	stored := log.next(3)
	hub.Offer("run", stored)
	log.put(stored)
	read(fast, 23)
	read(slow, 23)
	assertFanout(t, reg, map[string]float64{
		`agentgate_fanout_events_offered_total{}`:  3,
		`agentgate_fanout_local_feeds{}`:           1,
		`agentgate_fanout_local_fallbacks_total{}`: 0,
	})

	_ = fast.Close()
	_ = slow.Close()
	assertFanout(t, reg, map[string]float64{
		`agentgate_fanout_local_feeds{}`:           0,
		`agentgate_fanout_feeds{}`:                 0,
		`agentgate_fanout_readers{source="ring"}`:  0,
		`agentgate_fanout_readers{source="store"}`: 0,
		`agentgate_fanout_fell_off_total{}`:        1,
	})
}

// fanoutSamples is the fan-out metrics among samples.
func fanoutSamples(all map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if strings.HasPrefix(k, "agentgate_fanout_") {
			out[k] = v
		}
	}
	return out
}

func assertFanout(t *testing.T, reg prometheus.Gatherer, want map[string]float64) {
	t.Helper()
	got := samples(t, reg)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
