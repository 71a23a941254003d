package supervisor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// discardAppends is a memStore whose AppendEvents keeps nothing: emit
// with a store that costs nothing.
type discardAppends struct {
	*memStore
	events int
}

func (d *discardAppends) AppendEvents(_ context.Context, _ string, evs []runs.StoredEvent) error {
	d.events += len(evs)
	return nil
}

// BenchmarkEmit measures the supervisor's per-event work at the one point
// where events leave a decoder: stamping the envelope, bounding the payload,
// encoding it and handing it to the store (here one that keeps nothing),
// one call per event as the supervisor makes it per stdout line. The
// baseline, timed in the same iterations with the benchmark timer stopped,
// is json.Marshal of the same stamped envelope. One op is emitBatch events.
//
// Metrics: ns/event, marshal-ns/event and x-marshal (emit over marshal).
func BenchmarkEmit(b *testing.B) {
	const emitBatch = 256
	st := &discardAppends{memStore: newMemStore()}
	s := New(Config{}, st, nil, nopObserver{}, zap.NewNop())
	t := &task{run: runs.Run{ID: "01a228f2-2e55-7491-8b9d-4b5884c1f93b", Agent: "claude",
		SessionID: "01a228f2-2e55-7491-8b9d-4b5884c1f93b"}}
	// A text delta as the claude decoder makes it from a recorded line.
	ev := runs.NewEvent(runs.EventMessageDelta, runs.MessageData{MessageID: "msg_mock_0001", Text: "Hello "})
	stamped := ev
	stamped.V, stamped.RunID, stamped.Seq, stamped.Time, stamped.Agent, stamped.SessionID =
		runs.EnvelopeVersion, t.run.ID, 1234, time.Now().UTC(), t.run.Agent, t.run.SessionID
	var base time.Duration
	iters := 0
	for b.Loop() {
		for range emitBatch {
			s.emit(t, ev)
		}
		b.StopTimer()
		start := time.Now()
		for range emitBatch {
			if _, err := json.Marshal(stamped); err != nil {
				b.Fatal(err)
			}
		}
		base += time.Since(start)
		iters++
		b.StartTimer()
	}
	if want := iters * emitBatch; st.events != want || t.seq != uint64(want) {
		b.Fatalf("emitted %d events up to seq %d, want %d", st.events, t.seq, want)
	}
	n := float64(iters * emitBatch)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64(base.Nanoseconds())/n, "marshal-ns/event")
	b.ReportMetric(b.Elapsed().Seconds()/base.Seconds(), "x-marshal")
}
