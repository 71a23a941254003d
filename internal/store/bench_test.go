package store

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkAppendEvents stores batches of events of one run, with each
// event a message of its own (per=1, as before grouping: the baseline) and
// with messages of up to 256 events, the default.
func BenchmarkAppendEvents(b *testing.B) {
	for _, n := range []uint64{1, 16, 256} {
		for _, per := range []int{1, defaultEventsPerMessage} {
			b.Run(fmt.Sprintf("batch=%d/per=%d", n, per), func(b *testing.B) {
				e := newEnv(b)
				s, err := Open(context.Background(), e.nc, Options{EventsPerMessage: per})
				if err != nil {
					b.Fatal(err)
				}
				id := newID(b)
				c := context.Background()
				var seq uint64
				for b.Loop() {
					if err := s.AppendEvents(c, id, mkEvents(id, seq+1, seq+n)); err != nil {
						b.Fatal(err)
					}
					seq += n
				}
				b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

func BenchmarkCursorThroughput(b *testing.B) {
	e := newEnv(b)
	id := newID(b)
	const total = 5000
	for seq := uint64(1); seq <= total; seq += 100 {
		if err := e.s.AppendEvents(context.Background(), id, mkEvents(id, seq, seq+99)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		c, err := e.s.OpenCursor(context.Background(), id, 0)
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < total; {
			batch, err := c.Next(context.Background(), 256)
			if err != nil {
				b.Fatal(err)
			}
			n += len(batch)
		}
		c.Close()
	}
	b.ReportMetric(float64(b.N)*total/b.Elapsed().Seconds(), "events/s")
}
