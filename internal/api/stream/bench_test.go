package stream

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// discardStream is a ResponseWriter that counts what is written and
// flushed, and keeps none of it: the stream's own work, without a socket.
type discardStream struct {
	h       http.Header
	bytes   int
	flushes int
}

func (d *discardStream) Header() http.Header         { return d.h }
func (d *discardStream) WriteHeader(int)             {}
func (d *discardStream) Write(p []byte) (int, error) { d.bytes += len(p); return len(p), nil }
func (d *discardStream) Flush()                      { d.flushes++ }

// BenchmarkStreamReplay writes a finished run of 100k text deltas, as a
// replay does, from a cursor that has every batch ready: the stream's
// framing and writes alone, per event (ns/event) and per replay (B/op,
// allocs/op).
func BenchmarkStreamReplay(b *testing.B) {
	const events = 100_000
	evs := make([]runs.StoredEvent, events)
	for i := range evs {
		seq := uint64(i + 1)
		typ := runs.EventMessageDelta
		if i == events-1 {
			typ = runs.EventRunCompleted
		}
		evs[i] = runs.StoredEvent{Seq: seq, Type: typ, JSON: fmt.Appendf(nil,
			`{"v":1,"seq":%d,"run_id":"run_01JABCDEFGHJKMNPQRSTVWXYZ0","type":%q,"time":"2026-12-03T18:00:00.000000001Z","data":{"message_id":"msg_0123456789","text":"some streamed text, a token or two <%d>"}}`,
			seq, typ, seq)}
	}
	// The gateway's default batch size (api.DefaultBatchSize).
	cfg := Config{BatchSize: 256, PingInterval: time.Hour, ReconnectDelay: time.Second, WriteTimeout: time.Minute}
	wrote := 0
	for b.Loop() {
		cur := sliceCursor(evs, true)
		w := &discardStream{h: http.Header{}}
		st := New(w, SSE{}, 0, &cfg)
		ctx, cancel := context.WithCancel(context.Background())
		if err := st.Serve(ctx, cancel, cur); err != nil {
			b.Fatal(err)
		}
		if st.last != events {
			b.Fatalf("the stream wrote up to event %d, want %d", st.last, events)
		}
		wrote = w.bytes
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
	b.ReportMetric(float64(wrote)/events, "bytes/event")
}
