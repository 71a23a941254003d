package main

// Benchmarks of many runs: many at once, each followed by a client, and
// bursts of short ones, against the same agents run directly.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkConcurrentRuns: runs runs at once, each an agent writing
// stamped deltas at 200 a second for a second, each followed by one
// client. It reports the delivery p50 and p99, and the memory of the
// gateway's process tree (reapers and agents included) per run at the
// runs' peak, less the idle gateway's; the baseline is the same agents
// read from bare pipes at once (x-pipe-p99).
func BenchmarkConcurrentRuns(b *testing.B) {
	bin := buildFakeClaude(b)
	final := recording(b, "text")
	lines := writeLines(b, [][]byte{bracketedDelta(b)})
	for _, k := range []int{10, 50, 200} {
		b.Run(fmt.Sprintf("runs=%d", k), func(b *testing.B) {
			g, cmd := startGatewayProcess(b, scaleEnv(b, bin, k), nil)
			hc := benchClient(b)
			s := fakeSettings{Lines: lines, Count: 200, IntervalNS: int64(5 * time.Millisecond), Stamp: true, Final: string(final[len(final)-1])}
			gates := b.TempDir()
			var all, pipe []time.Duration
			var perRun []float64
			n := 0
			for b.Loop() {
				gate := filepath.Join(gates, strconv.Itoa(n))
				n++
				idle := rssKiB(b, cmd.Process.Pid, true)
				ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
				cs := make([]*streamClient, k)
				var wg sync.WaitGroup
				for i := range cs {
					run := s
					run.Gate = gate
					id := g.create(b, hc, map[string]any{"agent": "claude", "prompt": run.prompt(b)})
					cs[i] = &streamClient{started: make(chan struct{})}
					wg.Add(1)
					go func() {
						defer wg.Done()
						cs[i].follow(ctx, hc, g.URL+"/v1/runs/"+id+"/events", "")
					}()
				}
				for _, c := range cs {
					<-c.started
				}
				perRun = append(perRun, float64(rssKiB(b, cmd.Process.Pid, true)-idle)/float64(k))
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					b.Fatal(err)
				}
				wg.Wait()
				cancel()
				for _, c := range cs {
					if c.err != nil || len(c.lat) != s.Count {
						b.Fatalf("a run's client: %v, %d of %d stamped events", c.err, len(c.lat), s.Count)
					}
					all = append(all, c.lat...)
				}
				b.StopTimer()
				var mu sync.Mutex
				var pw sync.WaitGroup
				for range k {
					pw.Add(1)
					go func() {
						defer pw.Done()
						pipeRun(b, bin, fakeSettings{Lines: lines, Count: s.Count, IntervalNS: s.IntervalNS, Stamp: true, Final: s.Final},
							func(line []byte, at time.Time) {
								if ns, ok := bracketStamp(line); ok {
									mu.Lock()
									pipe = append(pipe, at.Sub(time.Unix(0, ns)))
									mu.Unlock()
								}
							})
					}()
				}
				pw.Wait()
				b.StartTimer()
			}
			slices.Sort(all)
			slices.Sort(pipe)
			slices.Sort(perRun)
			b.ReportMetric(micros(percentile(all, 50)), "p50-µs")
			b.ReportMetric(micros(percentile(all, 99)), "p99-µs")
			b.ReportMetric(micros(percentile(pipe, 99)), "pipe-p99-µs")
			b.ReportMetric(float64(percentile(all, 99))/float64(max(percentile(pipe, 99), time.Microsecond)), "x-pipe-p99")
			b.ReportMetric(perRun[len(perRun)/2], "KiB/run")
		})
	}
}

// BenchmarkBurst: 200 short runs (one text delta and the result) posted at
// once, and the time until every one has ended, as runs a second; the
// baseline is the same agent started 200 times at once directly, read from
// pipes (x-direct: how many times slower the gateway is).
func BenchmarkBurst(b *testing.B) {
	const burst = 200
	bin := buildFakeClaude(b)
	final := recording(b, "text")
	lines := writeLines(b, [][]byte{bracketedDelta(b)})
	g, _ := startGatewayProcess(b, scaleEnv(b, bin, burst), nil)
	hc := benchClient(b)
	s := fakeSettings{Lines: lines, Count: 1, Final: string(final[len(final)-1])}
	var viaGateway, direct []float64
	for b.Loop() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
		var wg sync.WaitGroup
		errs := make(chan error, burst)
		for range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := g.create(b, hc, map[string]any{"agent": "claude", "prompt": s.prompt(b)})
				c := &streamClient{}
				c.follow(ctx, hc, g.URL+"/v1/runs/"+id+"/events", "")
				if c.err != nil {
					errs <- fmt.Errorf("run %s: %w", id, c.err)
				}
			}()
		}
		wg.Wait()
		cancel()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		viaGateway = append(viaGateway, burst/time.Since(start).Seconds())
		b.StopTimer()
		start = time.Now()
		var pw sync.WaitGroup
		for range burst {
			pw.Add(1)
			go func() { defer pw.Done(); pipeRun(b, bin, s, nil) }()
		}
		pw.Wait()
		direct = append(direct, burst/time.Since(start).Seconds())
		b.StartTimer()
	}
	slices.Sort(viaGateway)
	slices.Sort(direct)
	gw, d := viaGateway[len(viaGateway)/2], direct[len(direct)/2]
	b.ReportMetric(gw, "runs/s")
	b.ReportMetric(d, "direct-runs/s")
	b.ReportMetric(d/gw, "x-direct")
}
