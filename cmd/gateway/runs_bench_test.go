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

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/sandbox"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// treeMemory is the resident memory of a gateway's process tree by role,
// in KiB: the gateway itself, the runs' reapers, and the agents, which
// are the agent's cost and not the gateway's. anon is the part of the
// reapers' that is theirs alone (RssAnon); the rest of their resident
// memory is the reaper binary's pages, shared by every reaper.
type treeMemory struct {
	gateway, reapers, reapersAnon, agents int64
	nReapers                              int
}

// memoryByRole reads treeMemory for the gateway process pid.
func memoryByRole(pid int) treeMemory {
	var m treeMemory
	for _, p := range descendants(pid) {
		name, rss, anon, ok := procStatus(p)
		if !ok {
			continue // gone meanwhile
		}
		switch {
		case p == pid:
			m.gateway += rss
		case name == proctree.ReaperName[:min(15, len(proctree.ReaperName))]:
			// The kernel cuts Name to 15 characters.
			m.reapers += rss
			m.reapersAnon += anon
			m.nReapers++
		default:
			m.agents += rss
		}
	}
	return m
}

// BenchmarkConcurrentRuns: runs runs at once, each an agent writing
// stamped deltas at 200 a second for a second, each followed by one
// client. It reports the delivery p50 and p99, and the memory per run at
// the runs' peak: the gateway's (less its idle memory), and the reapers'
// (resident, and of that their own, anonymous); the agents' own memory is
// left out. gw-cpu-µs/event is the gateway process's CPU from the agents'
// release to each client's last event, over the events delivered: the
// budget that decides whether it keeps up with the agents beside it. The
// baseline is the same agents read from bare pipes at once (x-pipe-p99).
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
			var perRun, reaperRun, reaperAnon []float64
			var gatewayCPU time.Duration // from the agents' release to the clients' last event
			n := 0
			// The gateway's memory before any run: after one, its heap
			// holds what the runs left to the collector.
			idle := rssKiB(cmd.Process.Pid)
			for b.Loop() {
				gate := filepath.Join(gates, strconv.Itoa(n))
				n++
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
				// run.started comes before its process: wait for every
				// run's reaper, held with its agent at the gate.
				mem := memoryByRole(cmd.Process.Pid)
				for deadline := time.Now().Add(benchDeadline); mem.nReapers < k; mem = memoryByRole(cmd.Process.Pid) {
					if time.Now().After(deadline) {
						b.Fatalf("%d reapers running, want one for each of %d runs", mem.nReapers, k)
					}
					time.Sleep(10 * time.Millisecond)
				}
				perRun = append(perRun, float64(mem.gateway-idle)/float64(k))
				reaperRun = append(reaperRun, float64(mem.reapers)/float64(mem.nReapers))
				reaperAnon = append(reaperAnon, float64(mem.reapersAnon)/float64(mem.nReapers))
				cpuBefore := procCPU(cmd.Process.Pid)
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					b.Fatal(err)
				}
				wg.Wait()
				gatewayCPU += procCPU(cmd.Process.Pid) - cpuBefore
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
			reportDelivery(b, all, pipe)
			slices.Sort(reaperRun)
			slices.Sort(reaperAnon)
			b.ReportMetric(perRun[len(perRun)/2], "gateway-KiB/run")
			b.ReportMetric(reaperRun[len(reaperRun)/2], "reaper-KiB/run")
			b.ReportMetric(reaperAnon[len(reaperAnon)/2], "reaper-anon-KiB/run")
			b.ReportMetric(float64(gatewayCPU.Nanoseconds())/1e3/float64(n*k*s.Count), "gw-cpu-µs/event")
		})
	}
}

// BenchmarkBurst: 200 short runs (one text delta and the result) posted at
// once, and the time until every one has ended, as runs a second; the
// baseline is the same agent started 200 times at once directly, read from
// pipes (x-direct: how many times slower the gateway is). A second
// baseline starts the agent 200 times at once under the processes the
// gateway starts each run under, the light reaper and the sandbox's
// wrappers, without the gateway (x-wrapped): what is left of x-direct
// once those processes are paid. It runs with the gateway's bubblewrap
// sandbox, as a production gateway does, and with the CLIs' own flags
// only (AGENTGATE_SANDBOX=cli-only), which leaves what the gateway adds
// to a run besides confining it.
func BenchmarkBurst(b *testing.B) {
	for _, sandbox := range []string{"bubblewrap", "cli-only"} {
		b.Run("sandbox="+sandbox, func(b *testing.B) { benchBurst(b, sandbox) })
	}
}

func benchBurst(b *testing.B, sandbox string) {
	const burst = 200
	bin := buildFakeClaude(b)
	final := recording(b, "text")
	lines := writeLines(b, [][]byte{bracketedDelta(b)})
	env := scaleEnv(b, bin, burst)
	env["AGENTGATE_SANDBOX"] = sandbox
	g, cmd := startGatewayProcess(b, env, nil)
	hc := benchClient(b)
	s := fakeSettings{Lines: lines, Count: 1, Final: string(final[len(final)-1])}
	wrapped := wrappedArgv(b, sandbox, []string{bin, "-p"})
	var viaGateway, direct, viaWrappers []float64
	// The gateway process's own CPU over its bursts, from /proc: what a
	// change to the gateway moves, where runs/s is also the agents',
	// reapers' and clients' beside it on the same CPUs.
	var gatewayCPU time.Duration
	bursts := 0
	for b.Loop() {
		bursts++
		cpu0 := procCPU(cmd.Process.Pid)
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
		gatewayCPU += procCPU(cmd.Process.Pid) - cpu0
		b.StopTimer()
		start = time.Now()
		var pw sync.WaitGroup
		for range burst {
			pw.Add(1)
			go func() { defer pw.Done(); pipeRun(b, bin, s, nil) }()
		}
		pw.Wait()
		direct = append(direct, burst/time.Since(start).Seconds())
		start = time.Now()
		for range burst {
			pw.Add(1)
			go func() {
				defer pw.Done()
				if n := pipeRunArgv(b, wrapped, s, nil); n != 2 {
					b.Errorf("the wrapped agent printed %d lines, want 2", n)
				}
			}()
		}
		pw.Wait()
		viaWrappers = append(viaWrappers, burst/time.Since(start).Seconds())
		b.StartTimer()
	}
	slices.Sort(viaGateway)
	slices.Sort(direct)
	slices.Sort(viaWrappers)
	gw, d, w := viaGateway[len(viaGateway)/2], direct[len(direct)/2], viaWrappers[len(viaWrappers)/2]
	b.ReportMetric(gw, "runs/s")
	b.ReportMetric(d, "direct-runs/s")
	b.ReportMetric(d/gw, "x-direct")
	b.ReportMetric(w, "wrapped-runs/s")
	b.ReportMetric(w/gw, "x-wrapped")
	b.ReportMetric(float64(gatewayCPU.Microseconds())/float64(bursts*burst), "gw-cpu-µs/run")
}

// wrappedArgv returns argv as the gateway starts an agent: under the light
// reaper and, for the bubblewrap sandbox, wrapped by it for a run that may
// write its directory, with directories of the benchmark's own.
func wrappedArgv(b *testing.B, sandboxName string, argv []string) []string {
	b.Helper()
	if sandboxName == "bubblewrap" {
		bw, err := sandbox.New(sandbox.Options{})
		if err != nil {
			b.Fatal(err)
		}
		root := b.TempDir()
		c := supervisor.Confinement{RunID: "burst", Permission: runs.WorkspaceWrite,
			Dir: filepath.Join(root, "dir"), Home: filepath.Join(root, "home"), TempDir: filepath.Join(root, "tmp")}
		for _, d := range []string{c.Dir, c.Home, c.TempDir} {
			if err := os.Mkdir(d, 0o700); err != nil {
				b.Fatal(err)
			}
		}
		if argv, err = bw.Wrap(c, argv); err != nil {
			b.Fatal(err)
		}
	}
	reaper := filepath.Join(filepath.Dir(os.Args[0]), proctree.ReaperName)
	return append([]string{reaper}, proctree.ReaperArgs(argv)...)
}
