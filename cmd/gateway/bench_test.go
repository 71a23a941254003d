package main

// Benchmarks of the whole pipeline: agent stdout → supervisor → decoder →
// store → SSE client. docs/performance.md explains the method and reads the
// figures; scripts/bench.sh runs them. Every benchmark measures its baseline
// in the same iterations, so that the reported ratios share the machine's
// noise; the absolute figures are reported too, for context only.
//
// The agent is fakeclaude (internal/supervisor/testdata/fakeclaude), a stand-in
// for the claude CLI that writes recorded stream-json lines at a
// controlled rate, except in BenchmarkClaudeRun and BenchmarkCodexRun,
// which run the real CLIs against the mock model servers.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/adapters/claude"
	"github.com/agentgate/agentgate/internal/adapters/codex"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/metrics"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/natstest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
	"github.com/agentgate/agentgate/internal/supervisor"
	"github.com/agentgate/agentgate/internal/tenants"
)

// Sizes of the benchmarks' runs: each iteration takes well under a second
// of the pipeline's time on a small machine.
const (
	// throughputLines is how many stdout lines one throughput run writes.
	throughputLines = 5000
	// latencyLines and latencyInterval pace one latency run: a line every
	// 2 ms for a second, so that p99 rests on several samples per run.
	latencyLines    = 500
	latencyInterval = 2 * time.Millisecond
	// benchDeadline bounds any one run of a benchmark.
	benchDeadline = 2 * time.Minute
)

// stampMark is what fakeclaude replaces with the time of its write.
const stampMark = "@STAMP@"

// fakeSettings is fakeclaude's stdin: see its doc comment.
type fakeSettings struct {
	Lines      string `json:"lines"`
	Count      int    `json:"count"`
	IntervalNS int64  `json:"interval_ns,omitempty"`
	Stamp      bool   `json:"stamp,omitempty"`
	Gate       string `json:"gate,omitempty"`
	Final      string `json:"final,omitempty"`
}

func (s fakeSettings) prompt(tb testing.TB) string {
	b, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// buildFakeClaude compiles fakeclaude into a temporary directory.
func buildFakeClaude(tb testing.TB) string {
	tb.Helper()
	root, err := agenttest.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("the go command is needed to build the fake agent: %v", err)
	}
	out := filepath.Join(tb.TempDir(), "fakeclaude")
	cmd := exec.Command(goBin, "build", "-o", out, "./internal/supervisor/testdata/fakeclaude")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build fakeclaude: %v\n%s", err, b)
	}
	return out
}

// recording returns the lines of the claude adapter's recorded transcript
// name (testdata/<name>.jsonl).
func recording(tb testing.TB, name string) [][]byte {
	tb.Helper()
	root, err := agenttest.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "internal", "adapters", "claude", "testdata", name+".jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(raw, []byte("\n")) {
		if len(l) > 0 {
			lines = append(lines, l)
		}
	}
	return lines
}

// lineMix is what a fake run writes: body cycled to count lines, then final
// (a result line, so that the run succeeds).
type lineMix struct {
	name  string
	body  [][]byte
	final []byte
}

// mixes are the throughput benchmark's workloads. "delta" is a text delta
// per line, each one event: the most frequent line of a real stream, and
// the worst case for a per-event cost. "transcript" cycles the recorded
// tool turn, where most lines (thinking-token counts, raw API events the
// assistant line repeats) make no event.
func mixes(tb testing.TB) []lineMix {
	text := recording(tb, "text")
	final := text[len(text)-1]
	if !bytes.Contains(final, []byte(`"type":"result"`)) {
		tb.Fatal("the text recording does not end with its result line")
	}
	var delta []byte
	for _, l := range text {
		if bytes.Contains(l, []byte(`"type":"text_delta"`)) {
			delta = l
			break
		}
	}
	if delta == nil {
		tb.Fatal("no text delta in the text recording")
	}
	var turn [][]byte
	for _, l := range recording(tb, "tool_turn") {
		if !bytes.Contains(l, []byte(`"type":"result"`)) {
			turn = append(turn, l)
		}
	}
	return []lineMix{
		{name: "delta", body: [][]byte{delta}, final: final},
		{name: "transcript", body: turn, final: final},
	}
}

// stampedDelta returns a text delta line whose text is stampMark.
func stampedDelta(tb testing.TB) []byte {
	for _, l := range recording(tb, "text") {
		if bytes.Contains(l, []byte(`"type":"text_delta"`)) {
			var v map[string]any
			if err := json.Unmarshal(l, &v); err != nil {
				tb.Fatal(err)
			}
			v["event"].(map[string]any)["delta"].(map[string]any)["text"] = stampMark
			b, err := json.Marshal(v)
			if err != nil {
				tb.Fatal(err)
			}
			return b
		}
	}
	tb.Fatal("no text delta in the text recording")
	return nil
}

func writeLines(tb testing.TB, lines [][]byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "lines.jsonl")
	if err := os.WriteFile(p, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// expand returns the count lines a fake run writes, final included.
func (m lineMix) expand(count int) [][]byte {
	out := make([][]byte, 0, count+1)
	for i := range count {
		out = append(out, m.body[i%len(m.body)])
	}
	return append(out, m.final)
}

func linesBytes(lines [][]byte) int64 {
	var n int64
	for _, l := range lines {
		n += int64(len(l)) + 1
	}
	return n
}

// decodeAll decodes lines as the supervisor does for one run, Finish
// included, and returns the number of events.
func decodeAll(lines [][]byte) int {
	d := claude.New().NewDecoder(runs.Invocation{})
	n := 0
	for _, l := range lines {
		n += len(d.Decode(l))
	}
	return n + len(d.Finish(runs.Exit{}, nil).Events)
}

// envelopeEvents are the events the supervisor adds to every run:
// run.queued, run.started and run.completed.
const envelopeEvents = 3

// benchGatewayEnv returns the AGENTGATE_* settings of a benchmark's
// gateway, with its store where BENCH_NATS says (benchNATS).
func benchGatewayEnv(tb testing.TB, bin string) map[string]string {
	env := map[string]string{
		"AGENTGATE_ADDR":        "127.0.0.1:0",
		"AGENTGATE_DATA_DIR":    tb.TempDir(),
		"AGENTGATE_CLAUDE_BIN":  bin,
		"AGENTGATE_REPLICA_ID":  "bench-replica",
		"AGENTGATE_KILL_GRACE":  "1s",
		"AGENTGATE_LOG_LEVEL":   "warn",
		"AGENTGATE_RUN_TIMEOUT": "2m",
	}
	benchNATS(tb, env)
	return env
}

// benchNATS points a benchmark's gateway at its store, by BENCH_NATS:
// unset or "embedded", the gateway's embedded server, as the single binary
// runs; "server", one nats-server beside the gateway; "cluster", a 3-node
// cluster keeping 3 copies of everything, as replicas behind a load
// balancer run. The servers run in the benchmark's process on 127.0.0.1,
// so a gateway's own CPU figure (procCPU) leaves theirs out.
func benchNATS(tb testing.TB, env map[string]string) {
	switch mode := os.Getenv("BENCH_NATS"); mode {
	case "", "embedded":
	case "server":
		env["AGENTGATE_NATS_URL"] = startNATS(tb)
	case "cluster":
		c := natstest.Start(tb, 3)
		env["AGENTGATE_NATS_URL"] = c.URLs()
		env["AGENTGATE_NATS_REPLICAS"] = "3"
	default:
		tb.Fatalf("BENCH_NATS=%q: want embedded, server or cluster", mode)
	}
}

// benchClient returns an HTTP client whose connections are closed when the
// benchmark ends, so that no goroutine outlives it (TestMain checks).
func benchClient(tb testing.TB) *http.Client {
	tr := &http.Transport{}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// create posts a run and returns its id.
func (g *gateway) create(tb testing.TB, c *http.Client, req map[string]any) string {
	body, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := c.Post(g.URL+"/v1/runs", "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		tb.Fatalf("POST /v1/runs = %d %s", resp.StatusCode, b)
	}
	var r struct{ ID string }
	if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
		tb.Fatalf("POST /v1/runs answered %s (%v)", b, err)
	}
	return r.ID
}

// follow reads the run's SSE stream from its start to run.completed, as a
// client would, calling onEvent with each event's type, its data line and
// the time that line was read. data is valid only during the call. It
// returns the number of events and run.completed's data.
func (g *gateway) follow(tb testing.TB, c *http.Client, id string, onEvent func(typ string, data []byte, at time.Time)) (int, runs.RunCompletedData) {
	ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/v1/runs/"+id+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET events of %s = %d", id, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var typ string
	var data []byte
	var at time.Time
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if typ == "" {
				continue // the retry: preamble or a ping
			}
			n++
			if onEvent != nil {
				onEvent(typ, data, at)
			}
			if typ == string(runs.EventRunCompleted) {
				var env struct{ Data runs.RunCompletedData }
				if err := json.Unmarshal(data, &env); err != nil {
					tb.Fatalf("run.completed of %s: %v", id, err)
				}
				return n, env.Data
			}
			typ, data = "", data[:0]
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			at = time.Now()
			data = append(data[:0], line[len("data: "):]...)
		}
	}
	tb.Fatalf("the stream of %s ended after %d events without run.completed (%v)", id, n, sc.Err())
	return 0, runs.RunCompletedData{}
}

// pipeRun is the baseline without the gateway: fakeclaude started directly,
// its stdout read line by line from a pipe. onLine gets each line (valid
// only during the call) and the time it was read.
func pipeRun(tb testing.TB, bin string, s fakeSettings, onLine func(line []byte, at time.Time)) int {
	return pipeRunArgv(tb, []string{bin, "-p"}, s, onLine)
}

// pipeRunArgv is pipeRun with the command line given whole: fakeclaude
// under the processes that wrap it.
func pipeRunArgv(tb testing.TB, argv []string, s fakeSettings, onLine func(line []byte, at time.Time)) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(s.prompt(tb))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReaderSize(out, 64<<10)
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			n++
			if onLine != nil {
				onLine(line, time.Now())
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				tb.Fatal(err)
			}
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("fakeclaude: %v: %s", err, stderr.Bytes())
	}
	return n
}

// BenchmarkGatewayThroughput measures events per second through the whole
// gateway, as run() builds it: fakeclaude writes throughputLines stream-json
// lines as fast as it can; the supervisor reads, decodes, stamps and
// appends them to the embedded JetStream store; one SSE client on 127.0.0.1
// reads the run from POST to run.completed. One op is one run; bytes/s is
// the agent's stdout. In the same iterations, with the timer stopped, it
// measures the baselines: the decoder alone over the same lines, and the
// same fakeclaude read from a bare pipe.
//
// Metrics: events/s (end to end, POST to run.completed), steady-events/s
// (from the client's first event of the agent's to its last, which leaves
// out process start and end), decode-events/s, pipe-lines/s, and the
// ratios e2e/decode and e2e/pipe (lines per second).
func BenchmarkGatewayThroughput(b *testing.B) {
	bin := buildFakeClaude(b)
	client := benchClient(b)
	// per=1 stores each event in a message of its own, as before the log
	// grouped them: the baseline of the default, per=256.
	for _, per := range []string{"256", "1"} {
		env := benchGatewayEnv(b, bin)
		env["AGENTGATE_EVENTS_PER_MESSAGE"] = per
		g := startGateway(b, env, nil)
		benchThroughput(b, g, client, bin, "per="+per+"/")
	}
}

func benchThroughput(b *testing.B, g *gateway, client *http.Client, bin, prefix string) {
	for _, mix := range mixes(b) {
		b.Run(prefix+"lines="+mix.name, func(b *testing.B) {
			lines := mix.expand(throughputLines)
			settings := fakeSettings{Lines: writeLines(b, mix.body), Count: throughputLines, Final: string(mix.final)}
			prompt := settings.prompt(b)
			want := decodeAll(lines) + envelopeEvents
			b.SetBytes(linesBytes(lines))
			var e2e, steady, dec, pipe time.Duration
			var events, steadyEvents, decoded, piped, iters int
			for b.Loop() {
				iters++
				start := time.Now()
				id := g.create(b, client, map[string]any{"agent": "claude", "prompt": prompt})
				var first, last time.Time
				agentEvents := 0
				n, done := g.follow(b, client, id, func(typ string, _ []byte, at time.Time) {
					switch runs.EventType(typ) {
					case runs.EventRunQueued, runs.EventRunStarted, runs.EventRunCompleted:
					default:
						if agentEvents == 0 {
							first = at
						}
						last = at
						agentEvents++
					}
				})
				e2e += time.Since(start)
				if n != want || done.Status != runs.Succeeded {
					b.Fatalf("run %s: %d events, status %s %+v; want %d events, succeeded", id, n, done.Status, done.Error, want)
				}
				events += n
				if agentEvents > 1 {
					steady += last.Sub(first)
					steadyEvents += agentEvents - 1
				}

				b.StopTimer()
				t := time.Now()
				decoded += decodeAll(lines)
				dec += time.Since(t)
				t = time.Now()
				if got := pipeRun(b, bin, settings, nil); got != len(lines) {
					b.Fatalf("pipe read %d lines, want %d", got, len(lines))
				}
				pipe += time.Since(t)
				piped += len(lines)
				b.StartTimer()
			}
			rate := float64(events) / e2e.Seconds()
			decRate := float64(decoded) / dec.Seconds()
			pipeRate := float64(piped) / pipe.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(float64(steadyEvents)/steady.Seconds(), "steady-events/s")
			b.ReportMetric(e2e.Seconds()*1e6/float64(events), "µs/event")
			b.ReportMetric(decRate, "decode-events/s")
			b.ReportMetric(pipeRate, "pipe-lines/s")
			b.ReportMetric(rate/decRate, "e2e/decode")
			b.ReportMetric(float64(iters*len(lines))/e2e.Seconds()/pipeRate, "e2e/pipe")
		})
	}
}

// stampOf reads the Unix-nanosecond stamp fakeclaude wrote into a text
// field, from a raw line or from an event's envelope.
func stampOf(b []byte) (int64, bool) {
	const key = `"text":"`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := bytes.IndexByte(b, '"')
	if j < 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(string(b[:j]), 10, 64)
	return ns, err == nil
}

// emitTime reads an envelope's time, which the supervisor stamps when it
// emits the event.
func emitTime(env []byte) (time.Time, bool) {
	const key = `"time":"`
	i := bytes.Index(env, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	env = env[i+len(key):]
	j := bytes.IndexByte(env, '"')
	if j < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(env[:j]))
	return t, err == nil
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100 + 0.999999999)
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkGatewayLatency measures the time from a line's write to the
// child's stdout to its event's arrival at an SSE client, through the whole
// gateway: fakeclaude writes a text delta every latencyInterval, its text
// the write's wall-clock time, and the client subtracts it from the time it
// read the event's data line. The baseline is the same fakeclaude read from
// a bare pipe. A third path splits the gateway's: the same run through a
// Supervisor on its own JetStream store, read by a store cursor in the
// process, without HTTP. The gateway's runs write nothing until their
// reader has received run.started, so no line waits for a reader to
// connect. The three alternate in rotating order; one op is one run of
// each.
//
// The envelope's time, stamped where the supervisor emits the event, splits
// each gateway sample in two: write to emit (pipe, line reader, decoder) and
// emit to client (store append, cursor, SSE writer, HTTP).
//
// Metrics: p50-µs and p99-µs through the gateway, pipe-p50-µs and
// pipe-p99-µs, the ratios x-pipe-p50 and x-pipe-p99, the halves' medians
// to-emit-p50-µs and from-emit-p50-µs, and through the cursor alone
// cursor-p50-µs, cursor-p99-µs and cursor-from-emit-p50-µs.
func BenchmarkGatewayLatency(b *testing.B) {
	bin := buildFakeClaude(b)
	g := startGateway(b, benchGatewayEnv(b, bin), nil)
	client := benchClient(b)
	js := openJetStream(b)
	cs := newCountingStore(js)
	sup := startSupervisor(b, cs, bin)
	final := recording(b, "text")
	// Each line's text is "<stamp>": the gateway's redaction regroups a
	// streamed text's deltas (it holds back each tail), so the stamps are
	// read from the text, not one an event.
	linesFile := writeLines(b, [][]byte{bracketedDelta(b)})
	base := fakeSettings{Lines: linesFile, Count: latencyLines, IntervalNS: int64(latencyInterval), Stamp: true,
		Final: string(final[len(final)-1])}
	gates := b.TempDir()
	var viaGateway, viaPipe, viaCursor, toEmit, fromEmit, cursorFromEmit []time.Duration
	// sample records the latency of each stamp an event completes, read at
	// at, in total, and its emit-to-read part in fromEmitted; it returns
	// how many it completed.
	sample := func(st *stampText, data []byte, at time.Time, total, fromEmitted *[]time.Duration) int {
		emitted, ok := emitTime(data)
		if !ok {
			b.Fatalf("no envelope time in %s", data)
		}
		stamps := st.take(data)
		for _, ns := range stamps {
			written := time.Unix(0, ns)
			*total = append(*total, at.Sub(written))
			*fromEmitted = append(*fromEmitted, at.Sub(emitted))
			if total == &viaGateway {
				toEmit = append(toEmit, emitted.Sub(written))
			}
		}
		return len(stamps)
	}
	open := func(gate string) {
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	launched := 0
	gatewayRun := func() {
		s := base
		s.Gate = filepath.Join(gates, fmt.Sprintf("go-%d", launched))
		launched++
		id := g.create(b, client, map[string]any{"agent": "claude", "prompt": s.prompt(b)})
		got := 0
		var st stampText
		n, done := g.follow(b, client, id, func(typ string, data []byte, at time.Time) {
			switch runs.EventType(typ) {
			case runs.EventRunStarted:
				open(s.Gate)
			case runs.EventMessageDelta:
				got += sample(&st, data, at, &viaGateway, &fromEmit)
			}
		})
		if got != latencyLines || done.Status != runs.Succeeded {
			b.Fatalf("run %s: %d of %d stamped events in %d, status %s %+v", id, got, latencyLines, n, done.Status, done.Error)
		}
	}
	cursorRun := func() {
		s := base
		s.Gate = filepath.Join(gates, fmt.Sprintf("go-%d", launched))
		launched++
		ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
		defer cancel()
		r, err := sup.Submit(ctx, runs.Spec{Agent: claude.Name, Prompt: s.prompt(b)})
		if err != nil {
			b.Fatal(err)
		}
		cur, err := js.OpenCursor(ctx, r.ID, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer cur.Close()
		got := 0
		var st stampText
		for completed := false; !completed; {
			evs, err := cur.Next(ctx, 256)
			at := time.Now()
			if err != nil {
				b.Fatalf("run %s: %v", r.ID, err)
			}
			for _, ev := range evs {
				switch ev.Type {
				case runs.EventRunStarted:
					open(s.Gate)
				case runs.EventMessageDelta:
					got += sample(&st, ev.JSON, at, &viaCursor, &cursorFromEmit)
				case runs.EventRunCompleted:
					completed = true
				}
			}
		}
		select {
		case done := <-cs.done:
			if done.Status != runs.Succeeded || got != latencyLines {
				b.Fatalf("run %s: %d of %d stamped events, status %s %+v", r.ID, got, latencyLines, done.Status, done.Error)
			}
		case <-ctx.Done():
			b.Fatalf("run %s did not end", r.ID)
		}
	}
	pipeRunOnce := func() {
		got := 0
		pipeRun(b, bin, base, func(line []byte, at time.Time) {
			if ns, ok := bracketStamp(line); ok {
				viaPipe = append(viaPipe, at.Sub(time.Unix(0, ns)))
				got++
			}
		})
		if got != latencyLines {
			b.Fatalf("pipe: %d of %d stamped lines", got, latencyLines)
		}
	}
	order := []func(){gatewayRun, pipeRunOnce, cursorRun}
	i := 0
	for b.Loop() {
		for k := range order {
			order[(i+k)%len(order)]()
		}
		i++
	}
	for _, ds := range [][]time.Duration{viaGateway, viaPipe, viaCursor, toEmit, fromEmit, cursorFromEmit} {
		slices.Sort(ds)
	}
	p50, p99 := percentile(viaGateway, 50), percentile(viaGateway, 99)
	pp50, pp99 := percentile(viaPipe, 50), percentile(viaPipe, 99)
	b.ReportMetric(micros(p50), "p50-µs")
	b.ReportMetric(micros(p99), "p99-µs")
	b.ReportMetric(micros(pp50), "pipe-p50-µs")
	b.ReportMetric(micros(pp99), "pipe-p99-µs")
	b.ReportMetric(float64(p50)/float64(pp50), "x-pipe-p50")
	b.ReportMetric(float64(p99)/float64(pp99), "x-pipe-p99")
	b.ReportMetric(micros(percentile(toEmit, 50)), "to-emit-p50-µs")
	b.ReportMetric(micros(percentile(fromEmit, 50)), "from-emit-p50-µs")
	b.ReportMetric(micros(percentile(viaCursor, 50)), "cursor-p50-µs")
	b.ReportMetric(micros(percentile(viaCursor, 99)), "cursor-p99-µs")
	b.ReportMetric(micros(percentile(cursorFromEmit, 50)), "cursor-from-emit-p50-µs")
}

// countingStore wraps a runs.Store: it times AppendEvents and reports the
// end of each run, once both its terminal record and its run.completed are
// stored, whichever the supervisor writes first.
type countingStore struct {
	runs.Store
	done chan runs.Run

	mu       sync.Mutex
	appends  int
	events   int
	inAppend time.Duration
	ending   map[string]int // run id → how many of the two ends were stored
	final    map[string]runs.Run
}

func newCountingStore(s runs.Store) *countingStore {
	return &countingStore{Store: s, done: make(chan runs.Run, 1), ending: map[string]int{}, final: map[string]runs.Run{}}
}

// ended notes one of the two ends of run id; r is its record, when this
// end is the record.
func (s *countingStore) ended(id string, r *runs.Run) {
	s.mu.Lock()
	s.ending[id]++
	if r != nil {
		s.final[id] = *r
	}
	n, final := s.ending[id], s.final[id]
	if n == 2 {
		delete(s.ending, id)
		delete(s.final, id)
	}
	s.mu.Unlock()
	if n == 2 {
		s.done <- final
	}
}

func (s *countingStore) AppendEvents(ctx context.Context, id string, evs []runs.StoredEvent) error {
	start := time.Now()
	err := s.Store.AppendEvents(ctx, id, evs)
	d := time.Since(start)
	s.mu.Lock()
	s.appends++
	s.events += len(evs)
	s.inAppend += d
	s.mu.Unlock()
	for _, ev := range evs {
		if ev.Type == runs.EventRunCompleted {
			s.ended(id, nil)
		}
	}
	return err
}

func (s *countingStore) UpdateRun(ctx context.Context, r runs.Run) error {
	err := s.Store.UpdateRun(ctx, r)
	if r.Status.Terminal() {
		s.ended(r.ID, &r)
	}
	return err
}

// take returns and resets the counts.
func (s *countingStore) take() (appends, events int, inAppend time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	appends, events, inAppend = s.appends, s.events, s.inAppend
	s.appends, s.events, s.inAppend = 0, 0, 0
	return appends, events, inAppend
}

// discardStore keeps runs in memory and drops events: the supervisor with
// a store that costs nothing.
type discardStore struct {
	mu    sync.Mutex
	runs  map[string]runs.Run
	queue chan string // made on first use
}

func (s *discardStore) q() chan string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queue == nil {
		s.queue = make(chan string, 4096)
	}
	return s.queue
}

func (s *discardStore) Enqueue(_ context.Context, id string, _ runs.Spec) error {
	select {
	case s.q() <- id:
		return nil
	default:
		return runs.ErrCapacity
	}
}
func (s *discardStore) Requeue(ctx context.Context, id string, spec runs.Spec) error {
	return s.Enqueue(ctx, id, spec)
}
func (s *discardStore) Unqueue(context.Context, string) error { return nil }
func (s *discardStore) Dequeue(ctx context.Context) (runs.QueuedRun, error) {
	select {
	case id := <-s.q():
		nop := func() error { return nil }
		return runs.QueuedRun{RunID: id, Ack: nop, Nak: nop}, nil
	case <-ctx.Done():
		return runs.QueuedRun{}, ctx.Err()
	}
}
func (s *discardStore) QueueLength(context.Context) (int, error) { return len(s.q()), nil }
func (s *discardStore) QueuePosition(context.Context, string) (int, error) {
	return 0, nil
}
func (s *discardStore) ClaimRun(_ context.Context, id, replica string) (runs.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.Owner != "" {
		return r, runs.ErrClaimed
	}
	r.Owner = replica
	s.runs[id] = r
	return r, nil
}
func (s *discardStore) TakeOverRun(context.Context, string, string, string) (runs.Run, error) {
	return runs.Run{}, runs.ErrClaimed // the benchmark's replica never dies
}
func (s *discardStore) ClaimHibernated(context.Context, string, string, string, runs.Activity) (runs.Run, error) {
	return runs.Run{}, runs.ErrClaimed // the benchmark's runs never hibernate
}
func (s *discardStore) DeleteRun(context.Context, string) error { return nil }
func (s *discardStore) ClaimIdempotencyKey(_ context.Context, _ string, rec runs.IdempotencyRecord) (runs.IdempotencyRecord, bool, error) {
	return rec, true, nil
}

func (s *discardStore) CreateRun(_ context.Context, r runs.Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[r.ID] = r
	return nil
}

func (s *discardStore) UpdateRun(ctx context.Context, r runs.Run) error { return s.CreateRun(ctx, r) }

func (s *discardStore) GetRun(_ context.Context, id string) (runs.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
	}
	return r, nil
}

func (s *discardStore) ListRuns(context.Context, runs.Filter) (runs.Page, error) {
	return runs.Page{}, nil
}

func (s *discardStore) AppendEvents(context.Context, string, []runs.StoredEvent) error { return nil }
func (s *discardStore) RequestCancel(context.Context, string, runs.Actor) error        { return nil }
func (s *discardStore) TenantUsage(context.Context, string) (tenants.Usage, uint64, error) {
	return tenants.Usage{}, 0, nil
}
func (s *discardStore) SetTenantUsage(context.Context, string, tenants.Usage, uint64) error {
	return nil
}
func (s *discardStore) LastEvent(context.Context, string) (runs.StoredEvent, error) {
	return runs.StoredEvent{}, nil
}
func (s *discardStore) Session(context.Context, string, string) (runs.SessionRecord, bool, error) {
	return runs.SessionRecord{}, false, nil
}
func (s *discardStore) SetSession(context.Context, string, string, runs.SessionRecord) error {
	return nil
}
func (s *discardStore) Heartbeat(context.Context, string) error               { return nil }
func (s *discardStore) LiveReplicas(context.Context) (map[string]bool, error) { return nil, nil }

func (s *discardStore) OpenCursor(context.Context, string, uint64) (runs.Cursor, error) {
	return nil, errors.New("the discard store keeps no events")
}

func (s *discardStore) CancelRequests(ctx context.Context) (<-chan runs.CancelRequest, error) {
	ch := make(chan runs.CancelRequest)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch, nil
}

func (s *discardStore) SendInput(context.Context, string, string, []byte) ([]byte, error) {
	return nil, runs.ErrOwnerUnavailable
}

func (s *discardStore) Inputs(ctx context.Context, _ string) (<-chan runs.InputRequest, error) {
	ch := make(chan runs.InputRequest)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch, nil
}

// openJetStream opens the store on an embedded NATS server of its own, as
// run() does without AGENTGATE_NATS_URL.
func openJetStream(b *testing.B) *store.Store {
	emb, err := store.StartEmbedded(filepath.Join(b.TempDir(), "nats"), zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(emb.Shutdown)
	nc, err := emb.Connect()
	if err != nil {
		b.Fatal(err)
	}
	js, err := store.Open(context.Background(), nc, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return js
}

// startSupervisor starts a supervisor over st with fakeclaude as claude,
// as run() builds it but without HTTP.
func startSupervisor(b *testing.B, st runs.Store, bin string) *supervisor.Supervisor {
	reg := metrics.NewRegistry()
	rec, err := metrics.New(reg, metrics.Options{Agents: []string{claude.Name}})
	if err != nil {
		b.Fatal(err)
	}
	agent := &supervisor.Agent{Adapter: claude.New(), Bin: bin, Home: b.TempDir()}
	sup := supervisor.New(supervisor.Config{
		Replica: "bench", WorkspaceRoot: b.TempDir(), Path: os.Getenv("PATH"), KillGrace: time.Second,
	}, st, []*supervisor.Agent{agent}, rec, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		cancel()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := sup.Shutdown(sctx); err != nil {
			b.Errorf("supervisor shutdown: %v", err)
		}
		cancel()
	})
	return sup
}

// BenchmarkSupervisorStore splits the pipeline's cost without HTTP: the
// same fakeclaude run (throughputLines text deltas, as fast as it can)
// through the real Supervisor over two stores, in turns every iteration:
// the embedded JetStream store as the gateway uses it, and a store that
// drops events (the baseline: process, pipe, decoder, stamping and
// encoding, nothing stored). One op is one run on each. (Its third store,
// a write-behind wrapper, was the experiment that led to the supervisor's
// appender; once the appender measured the same, it was retired.)
//
// Metrics: jetstream-events/s, discard-events/s; x-discard (over
// jetstream); append-µs (the mean AppendEvents call on JetStream, which
// the supervisor's appender makes once per batch) and append-share (the
// fraction of the JetStream run's wall time spent inside AppendEvents).
func BenchmarkSupervisorStore(b *testing.B) {
	bin := buildFakeClaude(b)
	js := openJetStream(b)

	mix := mixes(b)[0]
	lines := mix.expand(throughputLines)
	want := decodeAll(lines) + envelopeEvents
	prompt := fakeSettings{Lines: writeLines(b, mix.body), Count: throughputLines, Final: string(mix.final)}.prompt(b)

	type variant struct {
		st       *countingStore
		sup      *supervisor.Supervisor
		stored   func(id string) uint64 // the events the store holds, 0 when it keeps none
		wall     time.Duration
		appends  int
		events   int
		inAppend time.Duration
	}
	lastSeq := func(st *store.Store) func(id string) uint64 {
		return func(id string) uint64 {
			last, err := st.LastEvent(context.Background(), id)
			if err != nil {
				b.Fatal(err)
			}
			return last.Seq
		}
	}
	newVariant := func(s runs.Store, stored func(string) uint64) *variant {
		st := newCountingStore(s)
		return &variant{st: st, sup: startSupervisor(b, st, bin), stored: stored}
	}
	jet := newVariant(js, lastSeq(js))
	discard := newVariant(&discardStore{runs: map[string]runs.Run{}}, nil)
	measure := func(v *variant) {
		v.st.take()
		start := time.Now()
		r, err := v.sup.Submit(context.Background(), runs.Spec{Agent: claude.Name, Prompt: prompt})
		if err != nil {
			b.Fatal(err)
		}
		var done runs.Run
		select {
		case done = <-v.st.done:
		case <-time.After(benchDeadline):
			b.Fatalf("run %s did not finish", r.ID)
		}
		v.wall += time.Since(start)
		appends, events, in := v.st.take()
		if done.ID != r.ID || done.Status != runs.Succeeded || events != want {
			b.Fatalf("run %s: %s %+v, %d events appended; want succeeded, %d", done.ID, done.Status, done.Error, events, want)
		}
		if v.stored != nil {
			if n := v.stored(r.ID); n != uint64(want) {
				b.Fatalf("run %s: the store holds %d events, want %d", r.ID, n, want)
			}
		}
		v.appends += appends
		v.events += events
		v.inAppend += in
	}
	order := []*variant{jet, discard}
	i := 0
	for b.Loop() {
		for k := range order {
			measure(order[(i+k)%len(order)])
		}
		i++
	}
	rate := func(v *variant) float64 { return float64(v.events) / v.wall.Seconds() }
	b.ReportMetric(rate(jet), "jetstream-events/s")
	b.ReportMetric(rate(discard), "discard-events/s")
	b.ReportMetric(rate(discard)/rate(jet), "x-discard")
	b.ReportMetric(micros(jet.inAppend)/float64(jet.appends), "append-µs")
	b.ReportMetric(jet.inAppend.Seconds()/jet.wall.Seconds(), "append-share")
}

// reportVersus reports n runs launched directly (total d) against n through
// the gateway (total gw).
func reportVersus(b *testing.B, n int, d, gw time.Duration) {
	b.ReportMetric(d.Seconds()*1e3/float64(n), "direct-ms")
	b.ReportMetric(gw.Seconds()*1e3/float64(n), "gateway-ms")
	b.ReportMetric((gw-d).Seconds()*1e3/float64(n), "overhead-ms")
	b.ReportMetric((gw.Seconds()/d.Seconds()-1)*100, "overhead-%")
	b.ReportMetric(gw.Seconds()/d.Seconds(), "x-direct")
}

// BenchmarkGatewayRunOverhead measures what the gateway adds to every run,
// whatever the agent: a fakeclaude run that writes only its result line,
// through the gateway (POST to run.completed at an SSE client) against the
// same fakeclaude started directly and read from a pipe, alternated and
// swapped every iteration. One op is one of each.
//
// Metrics: as BenchmarkClaudeRun.
func BenchmarkGatewayRunOverhead(b *testing.B) {
	bin := buildFakeClaude(b)
	g := startGateway(b, benchGatewayEnv(b, bin), nil)
	client := benchClient(b)
	mix := mixes(b)[0]
	settings := fakeSettings{Lines: writeLines(b, mix.body), Final: string(mix.final)}
	prompt := settings.prompt(b)
	want := decodeAll(mix.expand(0)) + envelopeEvents
	direct := func() time.Duration {
		start := time.Now()
		if n := pipeRun(b, bin, settings, nil); n != 1 {
			b.Fatalf("direct run wrote %d lines, want 1", n)
		}
		return time.Since(start)
	}
	viaGateway := func() time.Duration {
		start := time.Now()
		id := g.create(b, client, map[string]any{"agent": claude.Name, "prompt": prompt})
		n, done := g.follow(b, client, id, nil)
		took := time.Since(start)
		if n != want || done.Status != runs.Succeeded {
			b.Fatalf("run %s: %d events, %s %+v; want %d, succeeded", id, n, done.Status, done.Error, want)
		}
		return took
	}
	alternate(b, direct, viaGateway)
}

// BenchmarkClaudeRun measures the wall time of a real claude run through
// the gateway against the same run launched directly, with the adapter's
// own arguments and environment, against the same mock model server and
// scenario. Direct: start to exit and end of stdout. Gateway: POST to
// run.completed at an SSE client. The two alternate, and swap order every
// iteration, so that they share the machine's noise; one op is one of each.
//
// Metrics: direct-ms, gateway-ms (means), overhead-ms, overhead-% and
// x-direct (gateway over direct).
func BenchmarkClaudeRun(b *testing.B) {
	bin := agenttest.ClaudeBin(b)
	for _, sc := range []struct {
		name     string
		scenario anthropic.Scenario
		prompt   string
	}{
		{"text", anthropic.TextAnswer("Hello from the mock."), "Say hello."},
		{"tool", anthropic.ToolTurn("echo hello > out.txt", "I wrote out.txt."), "Write hello to out.txt."},
	} {
		b.Run("scenario="+sc.name, func(b *testing.B) {
			mock, err := anthropic.Start("127.0.0.1:0", sc.scenario)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(mock.Close)
			creds := mockCreds(mock)
			g := startGateway(b, benchGatewayEnv(b, bin), creds)
			client := benchClient(b)
			home := b.TempDir()
			a := claude.New()
			spec := runs.Spec{Agent: claude.Name, Prompt: sc.prompt, Permission: runs.WorkspaceWrite}

			direct := func() time.Duration {
				inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: b.TempDir(),
					Bin: bin, Home: home, Timeout: benchDeadline, CLIVersion: claude.VerifiedVersion}
				cmd, err := a.Command(inv)
				if err != nil {
					b.Fatal(err)
				}
				env := append(agenttest.MinimalEnv(home), cmd.Env...)
				for _, name := range cmd.PassEnv {
					if v, ok := creds[name]; ok {
						env = append(env, name+"="+v)
					}
				}
				start := time.Now()
				p := agenttest.Start(b, bin, cmd.Args, env, inv.Dir, cmd.Stdin)
				kill := time.AfterFunc(benchDeadline, p.Kill)
				res := p.Wait()
				took := time.Since(start)
				kill.Stop()
				dec := a.NewDecoder(inv)
				for _, l := range res.Stdout {
					dec.Decode(l)
				}
				if out := dec.Finish(res.Exit, res.Stderr); out.Status != runs.Succeeded {
					b.Fatalf("direct run: %s %+v (exit %+v)", out.Status, out.Error, res.Exit)
				}
				return took
			}
			viaGateway := func() time.Duration {
				start := time.Now()
				id := g.create(b, client, map[string]any{"agent": claude.Name, "prompt": sc.prompt, "permission": runs.WorkspaceWrite})
				_, done := g.follow(b, client, id, nil)
				took := time.Since(start)
				if done.Status != runs.Succeeded {
					b.Fatalf("gateway run %s: %s %+v", id, done.Status, done.Error)
				}
				return took
			}
			alternate(b, direct, viaGateway)
		})
	}
}

// BenchmarkCodexRun is BenchmarkClaudeRun for codex: a real codex run
// through the gateway against the same run launched directly, against the
// same mock Responses API and scenario, with the same Codex home (its
// config.toml names the mock as the model provider). Codex is driven over
// stdin (codex app-server), so the direct run is driven the same way, by
// the adapter's own decoder as a runs.Conversation (see converse), and is
// timed from start to exit and end of stdout. Both run the native binary,
// which the adapter resolves from the npm launcher.
//
// Metrics: as BenchmarkClaudeRun.
func BenchmarkCodexRun(b *testing.B) {
	a := codex.New()
	bin, err := a.ResolveBinary(agenttest.Bin(b, "codex"))
	if err != nil {
		b.Fatal(err)
	}
	for _, sc := range []struct {
		name     string
		scenario openai.Scenario
		prompt   string
	}{
		{"text", openai.TextAnswer("Hello from the mock."), "Say hello."},
		{"tool", openai.ToolTurn("echo hello > out.txt", "I wrote out.txt."), "Write hello to out.txt."},
	} {
		b.Run("scenario="+sc.name, func(b *testing.B) {
			mock := startOpenAI(b, sc.scenario)
			home := codexHome(b, mock.URL, codexKeyEnv)
			creds := map[string]string{codexKeyEnv: codexKey}
			settings := benchGatewayEnv(b, "")
			settings["AGENTGATE_CODEX_BIN"], settings["AGENTGATE_CODEX_HOME"] = bin, home
			g := startGateway(b, settings, creds)
			client := benchClient(b)
			spec := runs.Spec{Agent: codex.Name, Prompt: sc.prompt, Model: "mock-model", Permission: runs.WorkspaceWrite}

			direct := func() time.Duration {
				inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: b.TempDir(),
					Bin: bin, Home: home, Timeout: benchDeadline, CLIVersion: codex.VerifiedVersion}
				cmd, err := a.Command(inv)
				if err != nil {
					b.Fatal(err)
				}
				// The environment the supervisor gives it (childEnv).
				env := append(agenttest.MinimalEnv(home), "TERM=dumb")
				for _, name := range cmd.PassEnv {
					if v, ok := creds[name]; ok {
						env = append(env, name+"="+v)
					}
				}
				env = append(env, cmd.Env...)
				dec, ok := a.NewDecoder(inv).(runs.Conversation)
				if !ok {
					b.Fatal("the codex decoder is not a runs.Conversation")
				}
				start := time.Now()
				exit, stderr := converse(b, bin, cmd.Args, env, inv.Dir, dec)
				took := time.Since(start)
				if out := dec.Finish(exit, stderr); out.Status != runs.Succeeded {
					b.Fatalf("direct run: %s %+v (exit %+v)", out.Status, out.Error, exit)
				}
				return took
			}
			viaGateway := func() time.Duration {
				start := time.Now()
				id := g.create(b, client, map[string]any{"agent": codex.Name, "prompt": sc.prompt, "model": "mock-model",
					"permission": runs.WorkspaceWrite})
				_, done := g.follow(b, client, id, nil)
				took := time.Since(start)
				if done.Status != runs.Succeeded {
					b.Fatalf("gateway run %s: %s %+v", id, done.Status, done.Error)
				}
				return took
			}
			alternate(b, direct, viaGateway)
		})
	}
}

// converse runs a CLI that is driven over stdin, as the supervisor does
// for a decoder that is a runs.Conversation: it writes conv.Open() at the
// start, decodes each stdout line and writes what conv.Pending() returns
// after it, and closes stdin when the conversation is over. It returns
// once the process exited and stdout ended, with the exit and stderr.
func converse(b *testing.B, bin string, args, env []string, dir string, conv runs.Conversation) (runs.Exit, []byte) {
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	// A tool process that outlives the CLI must not hold Wait on stderr.
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	kill := time.AfterFunc(benchDeadline, func() { _ = cmd.Process.Kill() })
	defer kill.Stop()
	// The messages are small and the CLI reads them as they come, so
	// writing from the reading loop cannot fill the pipe.
	open := true
	write := func(msg []byte) {
		if open && len(msg) > 0 {
			if _, err := stdin.Write(msg); err != nil {
				b.Fatalf("write to the CLI's stdin: %v", err)
			}
		}
	}
	write(conv.Open())
	br := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if l := bytes.TrimRight(line, "\r\n"); len(l) > 0 {
			conv.Decode(l)
			msg, done := conv.Pending()
			write(msg)
			if done && open {
				stdin.Close()
				open = false
			}
		}
		if err != nil {
			break
		}
	}
	if open {
		stdin.Close()
	}
	_ = cmd.Wait() // how it ended is read from ProcessState
	exit := runs.Exit{Code: cmd.ProcessState.ExitCode()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		exit = runs.Exit{Code: -1, Signal: ws.Signal().String()}
	}
	return exit, stderr.Bytes()
}

// alternate runs one of each untimed (a CLI's first start in a HOME sets
// it up), then times both once per op, swapping their order every op so
// that they share the machine's noise, and reports them with reportVersus.
func alternate(b *testing.B, direct, viaGateway func() time.Duration) {
	direct()
	viaGateway()
	var d, gw time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			d += direct()
			gw += viaGateway()
		} else {
			gw += viaGateway()
			d += direct()
		}
		i++
	}
	reportVersus(b, i, d, gw)
}

// TestBenchHelpers checks the arithmetic and parsing the benchmarks rest
// on; it runs in the ordinary test command and takes microseconds.
func TestBenchHelpers(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i))
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 100}, {99, 198}, {100, 200}, {0, 1}, {0.1, 1}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("percentile(1..200, %v) = %d, want %d", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of nothing = %d", got)
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("percentile of one = %d", got)
	}
	line := []byte(`{"type":"stream_event","event":{"delta":{"text":"1764448932123456789","type":"text_delta"}}}`)
	if ns, ok := stampOf(line); !ok || ns != 1764448932123456789 {
		t.Errorf("stampOf(line) = %d, %v", ns, ok)
	}
	env := []byte(`{"v":1,"type":"message.delta","data":{"message_id":"m","text":"42"}}`)
	if ns, ok := stampOf(env); !ok || ns != 42 {
		t.Errorf("stampOf(envelope) = %d, %v", ns, ok)
	}
	for _, bad := range []string{`{"text":"hello"}`, `{"text":"12`, `{}`} {
		if _, ok := stampOf([]byte(bad)); ok {
			t.Errorf("stampOf(%s) found a stamp", bad)
		}
	}
	at, ok := emitTime([]byte(`{"v":1,"seq":3,"time":"2026-11-29T20:22:17.375936408Z","type":"message.delta"}`))
	if want := time.Date(2026, 11, 29, 20, 22, 17, 375936408, time.UTC); !ok || !at.Equal(want) {
		t.Errorf("emitTime = %v, %v; want %v", at, ok, want)
	}
	if _, ok := emitTime([]byte(`{"v":1,"time":"yesterday"}`)); ok {
		t.Error("emitTime read a time from \"yesterday\"")
	}
	m := lineMix{body: [][]byte{[]byte("a"), []byte("b")}, final: []byte("r")}
	if got := bytes.Join(m.expand(5), nil); string(got) != "ababar" {
		t.Errorf("expand = %q, want ababar", got)
	}
	// procCPU counts this process's CPU: it grows while the test spins,
	// and a process that does not exist has none.
	before, spun := procCPU(os.Getpid()), time.Now()
	for procCPU(os.Getpid()) <= before {
		if time.Since(spun) > time.Minute { // a hang guard: a tick is 10 ms of CPU
			t.Fatal("procCPU did not grow in a minute of spinning")
		}
	}
	if got := procCPU(-1); got != 0 {
		t.Errorf("procCPU of no process = %v", got)
	}
}
