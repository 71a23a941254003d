package supervisor_test

// The appender against the embedded store the gateway runs on: the cost
// per event of storing a run's events, with the append window and without
// (the path before it), in the same iterations.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// timedStore records when each event of the run was stored.
type timedStore struct {
	runs.Store
	mu     sync.Mutex
	stored map[uint64]time.Time
	calls  int
}

func (t *timedStore) AppendEvents(ctx context.Context, id string, evs []runs.StoredEvent) error {
	if err := t.Store.AppendEvents(ctx, id, evs); err != nil {
		return err
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls++
	for _, e := range evs {
		t.stored[e.Seq] = now
	}
	return nil
}

// cpuTime is the process's user and system CPU time so far: the embedded
// store's server runs in the process, as in the gateway.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func openStore(b *testing.B) *store.Store {
	srv, err := store.StartEmbedded(b.TempDir(), zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	st, err := store.Open(context.Background(), nc, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// pace is a workload: events in bursts of burst, spread over spread, one
// burst every every; every 0 is as fast as the appender takes them.
type pace struct {
	name   string
	events int
	burst  int
	spread time.Duration
	every  time.Duration
}

// BenchmarkAppenderStore stores one run's events through an appender on
// the embedded store, with the supervisor's window and with none (the
// path before windows), alternated every iteration. The paces: one event
// every 5 ms (200 events/s, the rate of a streaming answer); bursts of 5
// lines over 200 µs every 25 ms (the same rate, as an agent writes the
// lines of one message); and as fast as the store takes them. One op is
// one run of each variant.
//
// Metrics: cpu-µs/event and window0-cpu-µs/event (the process's CPU, the
// store's server included, over the events), x-cpu (no window over
// window), p50-µs and p99-µs (from add to stored, with the window),
// window0-p99-µs, and events/append of each.
func BenchmarkAppenderStore(b *testing.B) {
	for _, p := range []pace{
		{name: "steady200", events: 200, burst: 1, every: 5 * time.Millisecond},
		{name: "bursts200", events: 200, burst: 5, spread: 200 * time.Microsecond, every: 25 * time.Millisecond},
		{name: "fullspeed", events: 20000, burst: 1},
	} {
		b.Run("pace="+p.name, func(b *testing.B) {
			st := openStore(b)
			type variant struct {
				window time.Duration
				cpu    time.Duration
				events int
				calls  int
				lat    []time.Duration
			}
			variants := []*variant{{window: supervisor.AppendWindow}, {window: 0}}
			runNo := 0
			measure := func(v *variant) {
				runNo++
				id := fmt.Sprintf("01a232e0-0000-7000-8000-%012d", runNo)
				ts := &timedStore{Store: st, stored: map[uint64]time.Time{}}
				added := make([]time.Time, p.events+1)
				start := cpuTime(b)
				a := supervisor.NewTestAppender(ts, id, v.window)
				t0 := time.Now()
				for i := range p.events {
					if p.every > 0 {
						k := i / p.burst
						at := t0.Add(time.Duration(k)*p.every + time.Duration(i%p.burst)*p.spread/time.Duration(p.burst))
						time.Sleep(time.Until(at))
					}
					seq := uint64(i + 1)
					added[seq] = time.Now()
					a.Add([]runs.StoredEvent{{Seq: seq, Type: runs.EventMessageDelta,
						JSON: fmt.Appendf(nil, `{"v":1,"run_id":%q,"seq":%d,"type":"message.delta","data":{"message_id":"msg_mock_0001","text":"Hello "}}`, id, seq)}})
				}
				if lost := a.Close(); lost != 0 {
					b.Fatalf("%d events lost", lost)
				}
				v.cpu += cpuTime(b) - start
				last, err := st.LastEvent(context.Background(), id)
				if err != nil || last.Seq != uint64(p.events) {
					b.Fatalf("run %s: last stored event %d (%v), want %d", id, last.Seq, err, p.events)
				}
				for seq := uint64(1); seq <= uint64(p.events); seq++ {
					v.lat = append(v.lat, ts.stored[seq].Sub(added[seq]))
				}
				v.events += p.events
				v.calls += ts.calls
			}
			i := 0
			for b.Loop() {
				for k := range variants {
					measure(variants[(i+k)%len(variants)])
				}
				i++
			}
			pct := func(v *variant, q float64) float64 {
				l := slices.Clone(v.lat)
				slices.Sort(l)
				return float64(l[min(len(l)-1, int(q*float64(len(l))))].Nanoseconds()) / 1e3
			}
			perEvent := func(v *variant) float64 { return float64(v.cpu.Nanoseconds()) / 1e3 / float64(v.events) }
			w, old := variants[0], variants[1]
			b.ReportMetric(perEvent(w), "cpu-µs/event")
			b.ReportMetric(perEvent(old), "window0-cpu-µs/event")
			b.ReportMetric(perEvent(old)/perEvent(w), "x-cpu")
			b.ReportMetric(pct(w, 0.5), "p50-µs")
			b.ReportMetric(pct(w, 0.99), "p99-µs")
			b.ReportMetric(pct(old, 0.99), "window0-p99-µs")
			b.ReportMetric(float64(w.events)/float64(w.calls), "events/append")
			b.ReportMetric(float64(old.events)/float64(old.calls), "window0-events/append")
		})
	}
}
