package fanout

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

// fanoutResult is what one pass of the fan-out benchmark measured.
type fanoutResult struct {
	cpuPerDelivery time.Duration // process CPU (the embedded store's included)
	bytesPerReader float64       // live heap and stacks, mid-run
	goroutines     float64       // per reader, beyond the reader's own
	storeReads     float64       // per reader: store cursors of its own (hub)
	p50, p99       time.Duration // from the append to the reader
}

// BenchmarkFanout: 1,000 readers of one run fed at 1,000 events/s from the
// embedded store, through a Hub, against the same readers each with a
// store cursor of its own (what the gateway did before), and through a Hub
// that wakes its readers for every event (each-*: what it did before it
// spaced its wake-ups), in the same run.
// Each reader checks that it gets every event once, in order. Run it with
// -benchtime=1x: one pass of each is several seconds.
func BenchmarkFanout(b *testing.B) {
	for _, c := range []struct{ readers, rate, events int }{
		{1000, 1000, 3000},
		{1000, 200, 1000},
	} {
		b.Run(fmt.Sprintf("readers=%d/rate=%d", c.readers, c.rate), func(b *testing.B) {
			st := runstest.Store(b)
			var hub, each, own fanoutResult
			for i := range b.N {
				h := New(st, Options{}, zap.NewNop())
				hub = fanoutPass(b, st, h, fmt.Sprintf("hub-%d", i), c.readers, c.rate, c.events)
				hub.storeReads = float64(h.Stats().StoreReads) / float64(c.readers)
				h.Close()
				h = New(st, Options{WakePerReader: -1}, zap.NewNop())
				each = fanoutPass(b, st, h, fmt.Sprintf("each-%d", i), c.readers, c.rate, c.events)
				each.storeReads = float64(h.Stats().StoreReads) / float64(c.readers)
				h.Close()
				own = fanoutPass(b, st, st, fmt.Sprintf("own-%d", i), c.readers, c.rate, c.events)
			}
			b.ReportMetric(float64(each.cpuPerDelivery.Nanoseconds()), "each-cpu-ns/delivery")
			b.ReportMetric(float64(each.cpuPerDelivery)/float64(hub.cpuPerDelivery), "each-cpu-ratio")
			b.ReportMetric(float64(each.p99.Microseconds()), "each-p99-µs")
			b.ReportMetric(each.storeReads, "each-store-reads/reader")
			b.ReportMetric(float64(hub.cpuPerDelivery.Nanoseconds()), "hub-cpu-ns/delivery")
			b.ReportMetric(float64(own.cpuPerDelivery.Nanoseconds()), "own-cpu-ns/delivery")
			b.ReportMetric(float64(own.cpuPerDelivery)/float64(hub.cpuPerDelivery), "cpu-ratio")
			b.ReportMetric(hub.bytesPerReader, "hub-B/reader")
			b.ReportMetric(own.bytesPerReader, "own-B/reader")
			b.ReportMetric(own.bytesPerReader/hub.bytesPerReader, "mem-ratio")
			b.ReportMetric(hub.storeReads, "hub-store-reads/reader")
			b.ReportMetric(hub.goroutines, "hub-goroutines/reader")
			b.ReportMetric(own.goroutines, "own-goroutines/reader")
			b.ReportMetric(float64(hub.p50.Microseconds()), "hub-p50-µs")
			b.ReportMetric(float64(hub.p99.Microseconds()), "hub-p99-µs")
			b.ReportMetric(float64(own.p50.Microseconds()), "own-p50-µs")
			b.ReportMetric(float64(own.p99.Microseconds()), "own-p99-µs")
		})
	}
}

// opener is what fanoutPass opens its readers' cursors on: a Hub, or the
// store itself.
type opener interface {
	OpenCursor(ctx context.Context, runID string, after uint64) (runs.Cursor, error)
}

func fanoutPass(b *testing.B, st runs.Store, op opener, id string, readers, rate, total int) fanoutResult {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := st.AppendEvents(ctx, id, events(id, 1, 1, false)); err != nil {
		b.Fatal(err)
	}
	sent := make([]atomic.Int64, total+1) // append time of each seq, ns
	// The harness's own record of latencies, made before the baseline so
	// that a reader's bytes are its cursor's and its goroutine's.
	lat := make([][]time.Duration, readers)
	for i := range lat {
		lat[i] = make([]time.Duration, 0, total)
	}
	base := memNow()
	g0 := runtime.NumGoroutine()

	curs := make([]runs.Cursor, readers)
	for i := range curs {
		cur, err := op.OpenCursor(ctx, id, 1)
		if err != nil {
			b.Fatalf("open reader %d: %v", i, err)
		}
		curs[i] = cur
	}
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for i, cur := range curs {
		wg.Go(func() {
			defer cur.Close()
			want := uint64(2)
			l := lat[i]
			for {
				evs, err := cur.Next(ctx, 256)
				if err != nil {
					errs <- fmt.Errorf("reader %d after %d: %w", i, want-1, err)
					return
				}
				now := time.Now().UnixNano()
				for _, ev := range evs {
					if ev.Seq != want {
						errs <- fmt.Errorf("reader %d: event %d, want %d", i, ev.Seq, want)
						return
					}
					want++
					l = append(l, time.Duration(now-sent[ev.Seq].Load()))
					if ev.Type == runs.EventRunCompleted {
						lat[i] = l
						return
					}
				}
			}
		})
	}
	goroutines := float64(runtime.NumGoroutine()-g0-readers) / float64(readers)

	cpu0 := cpuNow()
	start := time.Now()
	seq := 2
	var mid float64
	for seq <= total {
		due := 2 + int(time.Since(start).Seconds()*float64(rate))
		if due < seq {
			time.Sleep(time.Millisecond)
			continue
		}
		n := min(due, total) - seq + 1
		batch := events(id, uint64(seq), n, seq+n-1 == total)
		now := time.Now().UnixNano()
		for j := range batch {
			sent[seq+j].Store(now)
		}
		if err := st.AppendEvents(ctx, id, batch); err != nil {
			b.Fatal(err)
		}
		if seq <= total/2 && seq+n > total/2 {
			mid = float64(memNow()-base) / float64(readers)
		}
		seq += n
	}
	wg.Wait()
	cpu := cpuNow() - cpu0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	deliveries := readers * (total - 1)
	if len(all) != deliveries {
		b.Fatalf("%d deliveries, want %d", len(all), deliveries)
	}
	return fanoutResult{
		cpuPerDelivery: cpu / time.Duration(deliveries),
		bytesPerReader: mid,
		goroutines:     goroutines,
		p50:            all[len(all)/2],
		p99:            all[len(all)*99/100],
	}
}

// memNow is the live heap and the goroutines' stacks, after a collection.
func memNow() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// cpuNow is the CPU the process has used, user and system.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
