package main

// Benchmarks at scale: many SSE clients on one run, many runs at once, a
// burst of short runs, and a late client on a long finished run. Each runs
// the gateway as a process of its own (the test binary as the gateway), so
// that its memory is read from /proc apart from the clients', and reports
// its figures next to a baseline measured in the same iterations. Every
// client checks that it got every event exactly once, in order.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// scaleEnv is the settings of a scale benchmark's gateway: every client
// comes from 127.0.0.1, so the per-client bounds are lifted.
func scaleEnv(tb testing.TB, bin string, concurrent int) map[string]string {
	installLightReaper(tb)
	env := benchGatewayEnv(tb.TempDir(), bin)
	env["AGENTGATE_AGENTS"] = "claude"
	env["AGENTGATE_MAX_CONNS_PER_CLIENT"] = "-1"
	env["AGENTGATE_MAX_CONNS"] = "-1"
	env["AGENTGATE_TENANT_STREAMS"] = "0"
	env["AGENTGATE_MAX_CONCURRENT_RUNS"] = strconv.Itoa(max(concurrent, 4))
	env["AGENTGATE_QUEUE_SIZE"] = strconv.Itoa(max(4*concurrent, 64))
	return env
}

// lightReaper is built once per test binary.
var lightReaper struct {
	once sync.Once
	err  error
}

// installLightReaper builds cmd/agentgate-reaper beside the test binary,
// which is the gateway in these benchmarks, so that each run's reaper is
// the light one as in the Docker image (proctree.ReaperBeside), not the
// test binary started again.
func installLightReaper(tb testing.TB) {
	tb.Helper()
	lightReaper.once.Do(func() {
		root, err := agenttest.RepoRoot()
		if err != nil {
			lightReaper.err = err
			return
		}
		out := filepath.Join(filepath.Dir(os.Args[0]), proctree.ReaperName)
		cmd := exec.Command("go", "build", "-o", out, "./cmd/agentgate-reaper")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			lightReaper.err = fmt.Errorf("build the light reaper: %v\n%s", err, b)
		}
	})
	if lightReaper.err != nil {
		tb.Fatal(lightReaper.err)
	}
}

// rssKiB is the resident memory of process pid, and with tree that of its
// descendants too (the runs' reapers and agents), from /proc.
func rssKiB(tb testing.TB, pid int, tree bool) int64 {
	tb.Helper()
	pids := []int{pid}
	if tree {
		pids = descendants(pid)
	}
	var total int64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue // gone meanwhile
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				total += n
			}
		}
	}
	return total
}

// descendants is pid and every process below it.
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The parent is the 2nd field after the command's closing paren.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 1 {
				pp, _ := strconv.Atoi(f[1])
				children[pp] = append(children[pp], p)
			}
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// streamClient follows one run's SSE stream from its start, checks that
// ids come 1, 2, 3… with none missing or repeated, and records the delivery
// latency of each stamped event.
type streamClient struct {
	started chan struct{} // closed at run.started, or when follow returns
	once    sync.Once
	lat     []time.Duration
	events  int
	err     error
	stampText
}

// bracketedDelta is a text delta whose text is "<@STAMP@>": stamps that
// can be told apart however the stream regroups the text.
func bracketedDelta(tb testing.TB) []byte {
	return bytes.Replace(stampedDelta(tb), []byte(stampMark), []byte("<"+stampMark+">"), 1)
}

// stamps takes the message text of one message.delta event, read at at,
// and records the latency of every stamp it completes.
func (c *streamClient) stamps(data []byte, at time.Time) {
	for _, ns := range c.stampText.take(data) {
		c.lat = append(c.lat, at.Sub(time.Unix(0, ns)))
	}
}

// stampText collects the "<stamp>" marks of a run's streamed text: the
// gateway's redaction holds back the tail of a streamed text, so a stamp
// may arrive in two message.delta events, and several in one.
type stampText struct{ carry []byte }

// take adds the text of one message.delta envelope and returns the stamps
// it completes.
func (st *stampText) take(envelope []byte) []int64 {
	var env struct {
		Data struct {
			Text string `json:"text"`
		} `json:"data"`
	}
	if json.Unmarshal(envelope, &env) != nil {
		return nil
	}
	st.carry = append(st.carry, env.Data.Text...)
	var out []int64
	for {
		i := bytes.IndexByte(st.carry, '<')
		j := bytes.IndexByte(st.carry, '>')
		if i < 0 || j < i {
			return out
		}
		if ns, err := strconv.ParseInt(string(st.carry[i+1:j]), 10, 64); err == nil {
			out = append(out, ns)
		}
		st.carry = st.carry[j+1:]
	}
}

func (c *streamClient) follow(ctx context.Context, hc *http.Client, url, lastEventID string) {
	defer c.markStarted()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.err = err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		c.err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
		return
	}
	want := uint64(1)
	if lastEventID != "" {
		n, _ := strconv.ParseUint(lastEventID, 10, 64)
		want = n + 1
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var typ string
	var id uint64
	var data []byte
	var at time.Time
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if typ == "" {
				continue
			}
			if typ == string(runs.EventMessageDelta) {
				c.stamps(data, at)
			}
			if typ == string(runs.EventRunCompleted) && !bytes.Contains(data, []byte(`"status":"succeeded"`)) {
				c.err = fmt.Errorf("the run did not succeed: %s", data)
				return
			}
			if id != want {
				c.err = fmt.Errorf("event id %d, want %d", id, want)
				return
			}
			want++
			c.events++
			if typ == string(runs.EventRunStarted) {
				c.markStarted()
			}
			if typ == string(runs.EventRunCompleted) {
				return
			}
			typ = ""
		case bytes.HasPrefix(line, []byte("id: ")):
			id, _ = strconv.ParseUint(string(line[4:]), 10, 64)
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			at = time.Now()
			data = append(data[:0], line[6:]...)
		}
	}
	c.err = fmt.Errorf("the stream ended after %d events without run.completed (%v)", c.events, sc.Err())
}

// markStarted closes started once, for a client that has one.
func (c *streamClient) markStarted() {
	if c.started != nil {
		c.once.Do(func() { close(c.started) })
	}
}

// bracketStamp reads the stamp of a raw "<stamp>" line.
func bracketStamp(line []byte) (int64, bool) {
	i, j := bytes.IndexByte(line, '<'), bytes.IndexByte(line, '>')
	if i < 0 || j < i {
		return 0, false
	}
	ns, err := strconv.ParseInt(string(line[i+1:j]), 10, 64)
	return ns, err == nil
}

// BenchmarkFanout: clients SSE clients follow one run whose agent writes
// stamped text deltas at rate lines a second for two seconds. It reports
// the delivery p50 and p99 across every client, the gateway's memory per
// client (its RSS with the clients connected and the run gated, less its
// RSS before), and, as the baseline of the same iterations, the same
// agent read from a bare pipe: x-pipe-p99 is the gateway's p99 over the
// pipe's.
func BenchmarkFanout(b *testing.B) {
	bin := buildFakeClaude(b)
	final := recording(b, "text")
	lines := writeLines(b, [][]byte{bracketedDelta(b)})
	for _, rate := range []int{200, 1000} {
		for _, clients := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("rate=%d/clients=%d", rate, clients), func(b *testing.B) {
				g, cmd := startGatewayProcess(b, scaleEnv(b, bin, 1), nil)
				hc := benchClient(b)
				s := fakeSettings{Lines: lines, Count: 2 * rate, IntervalNS: int64(time.Second) / int64(rate), Stamp: true,
					Final: string(final[len(final)-1])}
				gates := b.TempDir()
				var all, pipe []time.Duration
				var perClient []float64
				n := 0
				for b.Loop() {
					run := s
					run.Gate = filepath.Join(gates, strconv.Itoa(n))
					n++
					idle := rssKiB(b, cmd.Process.Pid, false)
					id := g.create(b, hc, map[string]any{"agent": "claude", "prompt": run.prompt(b)})
					ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
					cs := make([]*streamClient, clients)
					var wg sync.WaitGroup
					for i := range cs {
						cs[i] = &streamClient{started: make(chan struct{})}
						started := cs[i].started
						wg.Add(1)
						go func() {
							defer wg.Done()
							cs[i].follow(ctx, hc, g.URL+"/v1/runs/"+id+"/events", "")
						}()
						<-started // connected and streaming, before the next
					}
					perClient = append(perClient, float64(rssKiB(b, cmd.Process.Pid, false)-idle)/float64(clients))
					if err := os.WriteFile(run.Gate, nil, 0o644); err != nil {
						b.Fatal(err)
					}
					wg.Wait()
					cancel()
					for _, c := range cs {
						if c.err != nil || len(c.lat) != s.Count {
							b.Fatalf("a client: %v, %d of %d stamped events", c.err, len(c.lat), s.Count)
						}
						all = append(all, c.lat...)
					}
					b.StopTimer()
					pipeRun(b, bin, fakeSettings{Lines: lines, Count: s.Count, IntervalNS: s.IntervalNS, Stamp: true, Final: s.Final},
						func(line []byte, at time.Time) {
							if ns, ok := bracketStamp(line); ok {
								pipe = append(pipe, at.Sub(time.Unix(0, ns)))
							}
						})
					b.StartTimer()
				}
				slices.Sort(all)
				slices.Sort(pipe)
				slices.Sort(perClient)
				b.ReportMetric(micros(percentile(all, 50)), "p50-µs")
				b.ReportMetric(micros(percentile(all, 99)), "p99-µs")
				b.ReportMetric(micros(percentile(pipe, 99)), "pipe-p99-µs")
				b.ReportMetric(float64(percentile(all, 99))/float64(max(percentile(pipe, 99), time.Microsecond)), "x-pipe-p99")
				b.ReportMetric(perClient[len(perClient)/2], "KiB/client")
			})
		}
	}
}

// BenchmarkLateJoin: a finished run of 100k text deltas; a client that
// joins with Last-Event-ID ten events from its end (first-event latency),
// and one that replays it whole (events a second). The baseline is the
// same stream's bytes, read once into memory, parsed by the same reader:
// x-raw is how many times slower the replay is.
func BenchmarkLateJoin(b *testing.B) {
	const events = 100_000
	bin := buildFakeClaude(b)
	final := recording(b, "text")
	lines := writeLines(b, [][]byte{bracketedDelta(b)})
	g, _ := startGatewayProcess(b, scaleEnv(b, bin, 1), nil)
	hc := benchClient(b)
	s := fakeSettings{Lines: lines, Count: events, Stamp: true, Final: string(final[len(final)-1])}
	id := g.create(b, hc, map[string]any{"agent": "claude", "prompt": s.prompt(b)})
	var raw bytes.Buffer
	func() {
		resp, err := hc.Get(g.URL + "/v1/runs/" + id + "/events")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := raw.ReadFrom(resp.Body); err != nil {
			b.Fatal(err)
		}
	}()
	total := 0
	for _, l := range bytes.Split(raw.Bytes(), []byte("\n")) {
		if bytes.HasPrefix(l, []byte("id: ")) {
			total++
		}
	}
	if total < events {
		b.Fatalf("the run has %d events, want at least %d", total, events)
	}
	url := g.URL + "/v1/runs/" + id + "/events"
	var first, replay, rawRate []float64
	for b.Loop() {
		start := time.Now()
		c := &streamClient{started: make(chan struct{})}
		tail := strconv.Itoa(total - 10)
		ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Last-Event-ID", tail)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				b.Fatalf("the late client got no event: %v", err)
			}
			if strings.HasPrefix(l, "id: ") {
				break
			}
		}
		first = append(first, float64(time.Since(start))/float64(time.Millisecond))
		resp.Body.Close()
		c.follow(ctx, hc, url, tail)
		if c.err != nil || c.events != 10 {
			b.Fatalf("a late client: %v, %d events, want 10", c.err, c.events)
		}

		start = time.Now()
		whole := &streamClient{}
		whole.follow(ctx, hc, url, "")
		cancel()
		if whole.err != nil || whole.events != total {
			b.Fatalf("a replay: %v, %d of %d events", whole.err, whole.events, total)
		}
		replay = append(replay, float64(total)/time.Since(start).Seconds())

		b.StopTimer()
		start = time.Now()
		sc := bufio.NewScanner(bytes.NewReader(raw.Bytes()))
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		n := 0
		for sc.Scan() {
			if bytes.HasPrefix(sc.Bytes(), []byte("id: ")) {
				n++
			}
		}
		if n != total {
			b.Fatalf("raw read: %d of %d events", n, total)
		}
		rawRate = append(rawRate, float64(total)/time.Since(start).Seconds())
		b.StartTimer()
	}
	slices.Sort(first)
	slices.Sort(replay)
	slices.Sort(rawRate)
	b.ReportMetric(first[len(first)/2], "first-event-ms")
	b.ReportMetric(replay[len(replay)/2], "replay-events/s")
	b.ReportMetric(rawRate[len(rawRate)/2], "raw-events/s")
	b.ReportMetric(rawRate[len(rawRate)/2]/replay[len(replay)/2], "x-raw")
}
