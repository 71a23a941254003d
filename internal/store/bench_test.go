package store

import (
	"context"
	"fmt"
	"testing"
)

func BenchmarkAppendEvents(b *testing.B) {
	for _, n := range []uint64{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			e := newEnv(b)
			id := newID(b)
			c := context.Background()
			var seq uint64
			for b.Loop() {
				if err := e.s.AppendEvents(c, id, mkEvents(id, seq+1, seq+n)); err != nil {
					b.Fatal(err)
				}
				seq += n
			}
			b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds(), "events/s")
		})
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
