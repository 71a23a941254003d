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
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
	"github.com/agentgate/agentgate/internal/runs"
)

// scaleEnv is the settings of a scale benchmark's gateway: every client
// comes from 127.0.0.1, so the per-client bounds are lifted.
func scaleEnv(tb testing.TB, bin string, concurrent int) map[string]string {
	installLightReaper(tb)
	env := benchGatewayEnv(tb, bin)
	env["AGENTGATE_AGENTS"] = "claude"
	env["AGENTGATE_MAX_CONNS_PER_CLIENT"] = "-1"
	env["AGENTGATE_MAX_CONNS"] = "-1"
	env["AGENTGATE_TENANT_STREAMS"] = "0"
	env["AGENTGATE_MAX_CONCURRENT_RUNS"] = strconv.Itoa(max(concurrent, 4))
	env["AGENTGATE_QUEUE_SIZE"] = strconv.Itoa(max(4*concurrent, 64))
	// BENCH_AGENT_NICE sets the agents' niceness (AGENTGATE_AGENT_NICE),
	// to compare in one sitting what putting them below the gateway gives.
	if n := os.Getenv("BENCH_AGENT_NICE"); n != "" {
		env["AGENTGATE_AGENT_NICE"] = n
	}
	return env
}

// lightReaper is built once per test binary.
var lightReaper struct {
	once sync.Once
	err  error
}

// installLightReaper builds cmd/agentgate-reaper beside the test binary,
// which is the gateway in these benchmarks, so that each run's reaper is
// the light one as in the Docker image (proctree.ReaperBeside), built as
// the image builds it, not the test binary started again. BENCH_REAPER=go
// builds it without cgo instead, the reaper in Go it was before, for a
// comparison in one sitting.
func installLightReaper(tb testing.TB) {
	tb.Helper()
	lightReaper.once.Do(func() {
		cgo := "1"
		switch mode := os.Getenv("BENCH_REAPER"); mode {
		case "", "c":
		case "go":
			cgo = "0"
		default:
			lightReaper.err = fmt.Errorf("BENCH_REAPER=%q: want c or go", mode)
			return
		}
		root, err := agenttest.RepoRoot()
		if err != nil {
			lightReaper.err = err
			return
		}
		out := filepath.Join(filepath.Dir(os.Args[0]), proctree.ReaperName)
		cmd := exec.Command("go", "build", "-ldflags="+proctreetest.ReaperLDFlags, "-o", out, "./cmd/agentgate-reaper")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		if b, err := cmd.CombinedOutput(); err != nil {
			lightReaper.err = fmt.Errorf("build the light reaper: %v\n%s", err, b)
		}
	})
	if lightReaper.err != nil {
		tb.Fatal(lightReaper.err)
	}
}

// procStatus reads the name and the resident memory of process pid, all of
// it and its anonymous part, in KiB, from /proc; ok is false once it is gone.
func procStatus(pid int) (name string, rss, anon int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", 0, 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		n, _ := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
		switch k {
		case "Name":
			name = v
		case "VmRSS":
			rss = n
		case "RssAnon":
			anon = n
		}
	}
	return name, rss, anon, true
}

// procCPU is the CPU time process pid has used, user and system, in
// clock ticks of 10 ms (Linux's USER_HZ, 100 on every architecture it
// runs on).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	// utime and stime are the 14th and 15th fields, the 12th and 13th
	// after the command's closing paren.
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(user+sys) * 10 * time.Millisecond
}

// rssKiB is the resident memory of process pid.
func rssKiB(pid int) int64 {
	_, rss, _, _ := procStatus(pid)
	return rss
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
		if f, ok := proctreetest.StatFields(e.Name()); ok {
			pp, _ := strconv.Atoi(f[1]) // the parent
			children[pp] = append(children[pp], p)
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
// it completes. It finds the text without decoding the whole envelope (a
// reader of a thousand streams at a thousand events a second parses a
// million of them a second, on the machine it measures): data.text is
// read in place when it holds no escape, and only then is the envelope
// unmarshalled.
func (st *stampText) take(envelope []byte) []int64 {
	text, ok := deltaText(envelope)
	if !ok {
		var env struct {
			Data struct {
				Text string `json:"text"`
			} `json:"data"`
		}
		if json.Unmarshal(envelope, &env) != nil {
			return nil
		}
		text = []byte(env.Data.Text)
	}
	st.carry = append(st.carry, text...)
	var out []int64
	for {
		i := bytes.IndexByte(st.carry, '<')
		j := bytes.IndexByte(st.carry, '>')
		if i < 0 || j < i {
			break
		}
		if ns, ok := parseStamp(st.carry[i+1 : j]); ok {
			out = append(out, ns)
		}
		st.carry = st.carry[j+1:]
	}
	if len(st.carry) == 0 {
		st.carry = st.carry[:0:0] // let the consumed text go
	}
	return out
}

// deltaText returns the text of a message.delta envelope, found after its
// "data" key, when that string holds no escape: ok is false otherwise, and
// the caller decodes the envelope.
func deltaText(envelope []byte) (text []byte, ok bool) {
	i := bytes.Index(envelope, []byte(`"data":`))
	if i < 0 {
		return nil, false
	}
	rest := envelope[i:]
	j := bytes.Index(rest, []byte(`"text":"`))
	if j < 0 {
		return nil, false
	}
	rest = rest[j+len(`"text":"`):]
	k := bytes.IndexByte(rest, '"')
	if k < 0 || bytes.IndexByte(rest[:k], '\\') >= 0 {
		return nil, false
	}
	return rest[:k], true
}

// parseStamp reads decimal Unix nanoseconds, digits only, without a
// string copy.
func parseStamp(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// openSSE opens url's event stream after lastEventID ("" from the
// start); any answer but 200 is an error that quotes the body's start.
func openSSE(ctx context.Context, hc *http.Client, url, lastEventID string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return resp, nil
}

func (c *streamClient) follow(ctx context.Context, hc *http.Client, url, lastEventID string) {
	defer c.markStarted()
	resp, err := openSSE(ctx, hc, url, lastEventID)
	if err != nil {
		c.err = err
		return
	}
	defer resp.Body.Close()
	want := uint64(1)
	if lastEventID != "" {
		n, _ := strconv.ParseUint(lastEventID, 10, 64)
		want = n + 1
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	// typ and data are reused from event to event: the reader allocates
	// nothing per event but what it records.
	var typ, data []byte
	var id uint64
	var at time.Time
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(typ) == 0 {
				continue
			}
			if string(typ) == string(runs.EventMessageDelta) {
				c.stamps(data, at)
			}
			completed := string(typ) == string(runs.EventRunCompleted)
			if completed && !bytes.Contains(data, []byte(`"status":"succeeded"`)) {
				c.err = fmt.Errorf("the run did not succeed: %s", data)
				return
			}
			if id != want {
				c.err = fmt.Errorf("event id %d, want %d", id, want)
				return
			}
			want++
			c.events++
			if string(typ) == string(runs.EventRunStarted) {
				c.markStarted()
			}
			if completed {
				return
			}
			typ = typ[:0]
		case bytes.HasPrefix(line, []byte("id: ")):
			var ok bool
			if id, ok = parseSeqBytes(line[4:]); !ok {
				c.err = fmt.Errorf("a bad event id %q", line)
				return
			}
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = append(typ[:0], line[7:]...)
		case bytes.HasPrefix(line, []byte("data: ")):
			at = time.Now()
			data = append(data[:0], line[6:]...)
		}
	}
	c.err = fmt.Errorf("the stream ended after %d events without run.completed (%v)", c.events, sc.Err())
}

// parseSeqBytes reads an event id without a string copy.
func parseSeqBytes(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// markStarted closes started once, for a client that has one.
func (c *streamClient) markStarted() {
	if c.started != nil {
		c.once.Do(func() { close(c.started) })
	}
}

// reportDelivery reports the delivery p50 and p99 of all, sorted, beside
// the p99 of its baseline of bare pipes, sorted too, and their ratio.
func reportDelivery(b *testing.B, all, pipe []time.Duration) {
	b.ReportMetric(micros(percentile(all, 50)), "p50-µs")
	b.ReportMetric(micros(percentile(all, 99)), "p99-µs")
	b.ReportMetric(micros(percentile(pipe, 99)), "pipe-p99-µs")
	b.ReportMetric(float64(percentile(all, 99))/float64(max(percentile(pipe, 99), time.Microsecond)), "x-pipe-p99")
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
// the delivery p50 and p99 across every client and the gateway's memory
// per client (its RSS with the clients connected and the run gated, less
// its RSS before). Two baselines are measured in the same iterations, with
// the timer stopped:
//
//   - the pipe: the same agent read from a bare pipe (x-pipe-p99 is the
//     gateway's p99 over the pipe's);
//   - the floor: the same agent's lines, as envelopes in the same SSE
//     framing, broadcast to the same number of clients, read by the same
//     reader, by the least an SSE server on 127.0.0.1 can do (floorServer).
//     x-floor-p99 is the gateway's p99 over the floor's, and
//     floor-KiB/client the floor's memory per client: the benchmark
//     process's Go heap and stacks with its clients connected, less what
//     the same clients of the gateway cost it.
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
				var all, pipe, floor []time.Duration
				var perClient, floorPerClient []float64
				var cpu time.Duration
				n := 0
				for b.Loop() {
					run := s
					run.Gate = filepath.Join(gates, strconv.Itoa(n))
					n++
					idle := rssKiB(cmd.Process.Pid)
					readerIdle := goMemKiB()
					id := g.create(b, hc, map[string]any{"agent": "claude", "prompt": run.prompt(b)})
					cs := connectClients(b, hc, g.URL+"/v1/runs/"+id+"/events", clients)
					perClient = append(perClient, float64(rssKiB(cmd.Process.Pid)-idle)/float64(clients))
					readerKiB := float64(goMemKiB()-readerIdle) / float64(clients)
					cpu0 := procCPU(cmd.Process.Pid)
					if err := os.WriteFile(run.Gate, nil, 0o644); err != nil {
						b.Fatal(err)
					}
					all = append(all, waitStamps(b, cs, s.Count)...)
					cpu += procCPU(cmd.Process.Pid) - cpu0

					b.StopTimer()
					floorLat, floorKiB := floorRun(b, bin, fakeSettings{Lines: lines, Count: s.Count, IntervalNS: s.IntervalNS, Stamp: true, Final: s.Final}, clients)
					floor = append(floor, floorLat...)
					floorPerClient = append(floorPerClient, floorKiB-readerKiB)
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
				slices.Sort(floor)
				slices.Sort(perClient)
				slices.Sort(floorPerClient)
				reportDelivery(b, all, pipe)
				b.ReportMetric(micros(percentile(floor, 50)), "floor-p50-µs")
				b.ReportMetric(micros(percentile(floor, 99)), "floor-p99-µs")
				b.ReportMetric(float64(percentile(all, 99))/float64(max(percentile(floor, 99), time.Microsecond)), "x-floor-p99")
				b.ReportMetric(perClient[len(perClient)/2], "KiB/client")
				b.ReportMetric(floorPerClient[len(floorPerClient)/2], "floor-KiB/client")
				// The gateway's CPU while the run wrote and its clients
				// read, per event delivered to a client.
				b.ReportMetric(micros(cpu)/float64(n*clients*s.Count), "gw-cpu-µs/delivery")
			})
		}
	}
}

// follower is one client of a stream, for connectEach.
type follower interface {
	// readFromStart reads url's stream from its first event until it
	// ends or ctx does.
	readFromStart(ctx context.Context, hc *http.Client, url string)
	// streaming is closed once the client has read run.started, or has
	// stopped.
	streaming() <-chan struct{}
	// failure is why it stopped early, or nil.
	failure() error
}

// clientSet is the clients of one stream, connected one after another.
type clientSet[C follower] struct {
	cs     []C
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// connectEach connects n clients made by newClient to url, each streaming
// before the next connects, all of them bounded by within.
func connectEach[C follower](tb testing.TB, hc *http.Client, url string, n int, within time.Duration, newClient func() C) *clientSet[C] {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	set := &clientSet[C]{cs: make([]C, n), cancel: cancel}
	for i := range set.cs {
		c := newClient()
		set.cs[i] = c
		set.wg.Go(func() { c.readFromStart(ctx, hc, url) })
		<-c.streaming()
		if err := c.failure(); err != nil {
			cancel()
			set.wg.Wait()
			tb.Fatalf("client %d: %v", i, err)
		}
	}
	return set
}

// connectClients connects n stamp-reading clients to url.
func connectClients(tb testing.TB, hc *http.Client, url string, n int) *clientSet[*streamClient] {
	return connectEach(tb, hc, url, n, benchDeadline, func() *streamClient {
		return &streamClient{started: make(chan struct{})}
	})
}

func (c *streamClient) readFromStart(ctx context.Context, hc *http.Client, url string) {
	c.follow(ctx, hc, url, "")
}
func (c *streamClient) streaming() <-chan struct{} { return c.started }
func (c *streamClient) failure() error             { return c.err }

// wait waits for every client's stream to end, checks that each got count
// stamps, and returns their latencies.
func waitStamps(tb testing.TB, set *clientSet[*streamClient], count int) []time.Duration {
	set.wg.Wait()
	set.cancel()
	var all []time.Duration
	for _, c := range set.cs {
		if c.err != nil || len(c.lat) != count {
			tb.Fatalf("a client: %v, %d of %d stamped events", c.err, len(c.lat), count)
		}
		all = append(all, c.lat...)
	}
	return all
}

// goMemKiB is this process's Go heap in use and goroutine stacks, after a
// collection.
func goMemKiB() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse+m.StackInuse) / 1024
}

// floorRun is the floor of BenchmarkFanout: clients clients of a
// floorServer, fed fakeclaude's stamped lines as message.delta envelopes
// as the pipe reads them. It returns the clients' latencies and the
// process's Go memory per client while they were connected (readers and
// server together).
func floorRun(tb testing.TB, bin string, s fakeSettings, clients int) ([]time.Duration, float64) {
	f := newFloorServer()
	defer f.close()
	f.publish(runs.EventRunStarted, []byte(`{"prompt":"floor"}`))
	hc := benchClient(tb)
	idle := goMemKiB()
	cs := connectClients(tb, hc, f.srv.URL+"/events", clients)
	kib := float64(goMemKiB()-idle) / float64(clients)
	var text []byte
	pipeRun(tb, bin, s, func(line []byte, _ time.Time) {
		ns, ok := bracketStamp(line)
		if !ok {
			return
		}
		text = strconv.AppendInt(append(text[:0], `{"message_id":"msg_floor","text":"<`...), ns, 10)
		f.publish(runs.EventMessageDelta, append(text, `>"}`...))
	})
	f.publish(runs.EventRunCompleted, []byte(`{"status":"succeeded"}`))
	lat := waitStamps(tb, cs, s.Count)
	hc.CloseIdleConnections()
	return lat, kib
}

// floorServer is the least an SSE broadcaster on 127.0.0.1 does: it frames
// each event once, as the gateway frames a stored envelope, and each
// client's handler writes what it has not sent yet in one write and one
// flush, woken when there is more. No store, no hub, no middleware.
type floorServer struct {
	srv *httptest.Server

	mu     sync.Mutex
	frames [][]byte      // the framed events, seq i+1 at i
	ended  bool          // run.completed is among them
	wake   chan struct{} // closed, and replaced, when frames grows
}

func newFloorServer() *floorServer {
	f := &floorServer{wake: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve)) // on 127.0.0.1
	return f
}

func (f *floorServer) close() {
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// publish frames one event whose envelope has data as its data, and wakes
// the clients.
func (f *floorServer) publish(typ runs.EventType, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq := len(f.frames) + 1
	env := fmt.Appendf(nil, `{"v":1,"run_id":"run_floor","seq":%d,"time":%q,"type":%q,"agent":"claude","data":%s}`,
		seq, time.Now().UTC().Format(time.RFC3339Nano), typ, data)
	frame := fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", seq, typ, env)
	f.frames = append(f.frames, frame)
	f.ended = f.ended || typ == runs.EventRunCompleted
	close(f.wake)
	f.wake = make(chan struct{})
}

func (f *floorServer) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	var buf []byte
	sent := 0
	for {
		f.mu.Lock()
		frames, ended, wake := f.frames[sent:], f.ended, f.wake
		f.mu.Unlock()
		if len(frames) == 0 {
			if ended {
				return
			}
			select {
			case <-wake:
				continue
			case <-r.Context().Done():
				return
			}
		}
		buf = buf[:0]
		for _, fr := range frames {
			buf = append(buf, fr...)
		}
		sent += len(frames)
		if _, err := w.Write(buf); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// BenchmarkLateJoin: a finished run of 100k text deltas; a client that
// joins with Last-Event-ID ten events from its end (first-event latency),
// and one that replays it whole (events a second). The baseline is the
// same stream's bytes, read once into memory, parsed by the same reader:
// x-raw is how many times slower the replay is. gw-cpu-ns/event is the
// gateway process's CPU per event of the whole replays, read from /proc:
// it moves less than the rate, which the reader beside it on the same CPUs
// shares.
func BenchmarkLateJoin(b *testing.B) {
	const events = 100_000
	bin := buildFakeClaude(b)
	final := recording(b, "text")
	lines := writeLines(b, [][]byte{bracketedDelta(b)})
	g, cmd := startGatewayProcess(b, scaleEnv(b, bin, 1), nil)
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
	// The gateway's CPU over every replay: /proc counts it in ticks of
	// 10ms, a tenth of one replay's.
	var replayCPU time.Duration
	replayed := 0
	packReads := func() (read, missing float64) {
		m := g.metrics(b)
		return m("agentgate_store_packs_reads_total", map[string]string{"result": "read"}),
			m("agentgate_store_packs_reads_total", map[string]string{"result": "missing"})
	}
	read0, missing0 := packReads()
	replays := 0
	for b.Loop() {
		replays++
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
		cpu0 := procCPU(cmd.Process.Pid)
		whole := &streamClient{}
		whole.follow(ctx, hc, url, "")
		cancel()
		if whole.err != nil || whole.events != total {
			b.Fatalf("a replay: %v, %d of %d events", whole.err, whole.events, total)
		}
		replay = append(replay, float64(total)/time.Since(start).Seconds())
		replayCPU += procCPU(cmd.Process.Pid) - cpu0
		replayed += total

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
	b.ReportMetric(float64(replayCPU)/float64(replayed), "gw-cpu-ns/event")
	b.ReportMetric(replay[len(replay)/2], "replay-events/s")
	b.ReportMetric(rawRate[len(rawRate)/2], "raw-events/s")
	b.ReportMetric(rawRate[len(rawRate)/2]/replay[len(replay)/2], "x-raw")
	// What served the replays: packs, or the log where they were missing
	// (a copy behind its leader, on a cluster).
	read, missing := packReads()
	b.ReportMetric((read-read0)/float64(replays), "packs-read/replay")
	b.ReportMetric((missing-missing0)/float64(replays), "packs-missing/replay")
}

// TestStampReader checks the benchmarks' reader of streamed text: stamps
// split across deltas, several in one, an escaped text (decoded the slow
// way) and ids read without a copy.
func TestStampReader(t *testing.T) {
	var st stampText
	var got []int64
	for _, text := range []string{"<12", "3>", "<4><5", ">x<6>", `<7\u003e`, "<8>"} {
		env, err := json.Marshal(map[string]any{"v": 1, "type": "message.delta", "data": map[string]string{"message_id": "m", "text": text}})
		if err != nil {
			t.Fatal(err)
		}
		if text == `<7\u003e` {
			env = bytes.Replace(env, []byte(`\\u003e`), []byte(`\u003e`), 1) // a JSON escape of '>'
		}
		got = append(got, st.take(env)...)
	}
	if want := []int64{123, 4, 5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Errorf("stamps %v, want %v", got, want)
	}
	for in, want := range map[string]uint64{"1": 1, "18446744073709551615": 0, "": 0, "12a": 0, "42": 42} {
		if n, ok := parseSeqBytes([]byte(in)); n != want || ok != (want != 0) {
			t.Errorf("parseSeqBytes(%q) = %d, %v", in, n, ok)
		}
	}
}

// FuzzStampText: for any text a message.delta envelope carries, the
// reader finds the same stamps as decoding the envelope whole would.
func FuzzStampText(f *testing.F) {
	for _, s := range []string{"<1764448932123456789>", "a<1>b<2", `"<3>"`, "<\\4>", "é<5>\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		env, err := json.Marshal(map[string]any{"v": 1, "seq": 3, "type": "message.delta",
			"data": map[string]string{"message_id": "m", "text": text}})
		if err != nil {
			t.Skip()
		}
		var fast stampText
		got := fast.take(env)
		// The reference: the envelope decoded whole.
		var dec struct {
			Data struct {
				Text string `json:"text"`
			} `json:"data"`
		}
		if err := json.Unmarshal(env, &dec); err != nil {
			t.Fatal(err)
		}
		var want []int64
		carry := []byte(dec.Data.Text)
		for {
			i, j := bytes.IndexByte(carry, '<'), bytes.IndexByte(carry, '>')
			if i < 0 || j < i {
				break
			}
			digits := len(carry[i+1:j]) > 0 && !bytes.ContainsFunc(carry[i+1:j], func(r rune) bool { return r < '0' || r > '9' })
			if ns, err := strconv.ParseInt(string(carry[i+1:j]), 10, 64); err == nil && digits {
				want = append(want, ns)
			}
			carry = carry[j+1:]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("text %q: stamps %v, want %v", text, got, want)
		}
	})
}
