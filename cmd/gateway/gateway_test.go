package main

// End-to-end tests: the whole gateway, as run() builds it, driving the real
// `claude` CLI against the mock Anthropic server on 127.0.0.1.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/mocktest"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/netns"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/testproc"
)

// asGatewayEnv makes the test binary run the gateway itself, so that a test
// can SIGKILL a gateway mid-run.
const asGatewayEnv = "AGENTGATE_TEST_AS_GATEWAY"

func TestMain(m *testing.M) {
	mcptest.Main() // the MCP server of TestGivenAndLeftEndToEnd is this binary
	if len(os.Args) > 1 && os.Args[1] == proctree.ReaperArg {
		testproc.Exit(proctree.Reap(os.Args[2:])) // the gateway runs agents under its own binary
	}
	if len(os.Args) > 1 && os.Args[1] == netns.ShimArg {
		testproc.Exit(netns.RunShim(os.Args[2:])) // a sandboxed run's network shim
	}
	if os.Getenv(asGatewayEnv) != "" {
		main()
		return
	}
	// run() must leave nothing behind: no goroutine of the store, the
	// supervisor or the HTTP server outlives it.
	goleak.VerifyTestMain(m)
}

// gateway is one gateway started by a test.
type gateway struct {
	URL     string
	DataDir string
	stop    func() error
	// deadlines strikes a run's deadline when a test says (a gateway of
	// startGateway's; nil for one in a process of its own).
	deadlines *runstest.Deadlines
}

// gatewayEnv returns the AGENTGATE_* settings of a test gateway.
func gatewayEnv(t *testing.T, dataDir string) map[string]string {
	return map[string]string{
		"AGENTGATE_ADDR":       "127.0.0.1:0",
		"AGENTGATE_DATA_DIR":   dataDir,
		"AGENTGATE_CLAUDE_BIN": agenttest.ClaudeBin(t),
		"AGENTGATE_CODEX_BIN":  agenttest.Bin(t, "codex"),
		// The agents these tests run; TestAllAgentsAreListed probes all.
		"AGENTGATE_AGENTS":     "claude,codex",
		"AGENTGATE_REPLICA_ID": "test-replica",
		"AGENTGATE_KILL_GRACE": "1s",
		"AGENTGATE_LOG_LEVEL":  "warn",
		// A bound against a hang, not a target: a real CLI's short run
		// took over 2 minutes with two suites and more on the machine.
		"AGENTGATE_RUN_TIMEOUT": "10m",
	}
}

// startGateway runs the gateway in-process, as run() builds it, listening
// on 127.0.0.1. passEnv is the rest of the gateway's environment as the
// claude adapter reads it (ANTHROPIC_*); nothing of the test process's own
// environment reaches the CLI.
func startGateway(t testing.TB, settings, passEnv map[string]string) *gateway {
	t.Helper()
	for k, v := range settings {
		t.Setenv(k, v)
	}
	getenv := func(k string) string {
		if v, ok := passEnv[k]; ok {
			return v
		}
		return settings[k]
	}
	// The tests' gateways ask each CLI its version once between them,
	// and strike a run's deadline when the run is where the test needs it.
	deadlines := &runstest.Deadlines{}
	sm := seams{versionOutput: runstest.Versions.Output, runDeadline: deadlines.Arm}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	// done is closed once run has returned runErr: both the start below
	// and stop wait on it.
	done := make(chan struct{})
	var runErr error
	go func() {
		runErr = runWith(ctx, sm, nil, getenv, pw)
		pw.CloseWithError(fmt.Errorf("gateway stopped: %v", runErr))
		close(done)
	}()
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "agentgate listening on "); ok {
				url <- u
			} else if testing.Verbose() {
				t.Log(sc.Text())
			}
		}
	}()
	g := &gateway{DataDir: settings["AGENTGATE_DATA_DIR"], deadlines: deadlines}
	var once sync.Once
	var stopErr error
	g.stop = func() error {
		once.Do(func() { cancel(); <-done; stopErr = runErr; pr.Close() })
		return stopErr
	}
	t.Cleanup(func() {
		if err := g.stop(); err != nil {
			t.Errorf("gateway stopped with %v", err)
		}
	})
	// The start probes every agent's CLI, which on a loaded machine takes
	// a while (OpenCode's alone, seconds of CPU): the guard only catches a
	// start that hangs.
	select {
	case g.URL = <-url:
	case <-done:
		t.Fatalf("gateway did not start: %v", runErr)
	case <-time.After(startGuard):
		t.Fatalf("gateway did not start within %s", startGuard)
	}
	return g
}

// startGuard bounds a test gateway's start, against a hang.
const startGuard = 5 * time.Minute

func startMock(t *testing.T, sc anthropic.Scenario) *anthropic.Server {
	t.Helper()
	m, err := anthropic.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func mockCreds(m *anthropic.Server) map[string]string {
	return map[string]string{"ANTHROPIC_BASE_URL": m.URL, "ANTHROPIC_API_KEY": "test-key"}
}

func (g *gateway) post(t *testing.T, body string) runs.Run {
	t.Helper()
	resp, err := http.Post(g.URL+"/v1/runs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/runs = %d %s", resp.StatusCode, b)
	}
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/v1/runs/") {
		t.Fatalf("Location = %q", loc)
	}
	var r runs.Run
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (g *gateway) get(t *testing.T, id string) runs.Run {
	t.Helper()
	resp, err := http.Get(g.URL + "/v1/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r runs.Run
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// sseEvent is one event as an SSE client sees it.
type sseEvent struct {
	ID   uint64
	Type string
	Data string
	Env  runs.Event
	Raw  json.RawMessage
}

func (e sseEvent) data(v any) error { return json.Unmarshal(e.Raw, v) }

// stream reads the run's SSE stream until it ends (after run.completed).
func (g *gateway) stream(t *testing.T, id string, lastEventID string) (int, []sseEvent) {
	t.Helper()
	return g.streamWith(t, id, testKey{}, lastEventID)
}

// streamWith is stream with key, on a gateway with keys.
func (g *gateway) streamWith(t *testing.T, id string, key testKey, lastEventID string) (int, []sseEvent) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/v1/runs/"+id+"/events", nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	if key.secret != "" {
		req.Header.Set("Authorization", "Bearer "+key.secret)
	}
	req.Header.Set("Accept", "text/event-stream")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Type != "" {
				if err := json.Unmarshal([]byte(cur.Data), &cur.Env); err != nil {
					t.Fatalf("event %d data is not JSON: %v", cur.ID, err)
				}
				var raw struct{ Data json.RawMessage }
				json.Unmarshal([]byte(cur.Data), &raw)
				cur.Raw = raw.Data
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID, _ = strconv.ParseUint(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			cur.Type = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		}
	}
	if len(out) == 0 || out[len(out)-1].Type != string(runs.EventRunCompleted) {
		t.Fatalf("stream ended without run.completed (%d events, err %v)", len(out), sc.Err())
	}
	return resp.StatusCode, out
}

// waitRun polls until the run is terminal.
func (g *gateway) waitRun(t *testing.T, id string, within time.Duration) runs.Run {
	t.Helper()
	within = max(within, waitFloor)
	deadline := time.Now().Add(within)
	for {
		r := g.get(t, id)
		if r.Status.Terminal() {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after %s", id, r.Status, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFloor is the least time waitRun and waitEvent give a run: their
// bounds catch a hang and are no targets, and a real CLI's start alone
// took tens of seconds on a machine running two suites at once.
const waitFloor = 2 * time.Minute

// waitEvent polls the stored log until an event of type typ appears.
func (g *gateway) waitEvent(t *testing.T, id string, typ runs.EventType, within time.Duration) {
	t.Helper()
	within = max(within, waitFloor)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/v1/runs/"+id+"/events", nil)
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	var seen []string
	var last []byte
	for sc.Scan() {
		var ev runs.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			if ev.Type == typ {
				return
			}
			seen = append(seen, string(ev.Type))
			last = append(last[:0], sc.Bytes()...)
		}
	}
	t.Fatalf("no %s event in run %s within %s (status %d, read error %v; events %v; the last %s)",
		typ, id, within, resp.StatusCode, sc.Err(), seen, last)
}

func normalized(u anthropic.Usage) runs.Usage {
	return runs.Usage{
		InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
		OutputTokens:     u.OutputTokens,
	}
}

func types(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// subsequence reports whether want appears in got in order.
func subsequence(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func TestClaudeToolRunEndToEnd(t *testing.T) {
	mock := startMock(t, anthropic.ToolTurn("echo hello > out.txt", "I wrote out.txt."))
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))
	r := g.post(t, `{"agent":"claude","prompt":"Write hello to out.txt","permission":"workspace_write","metadata":{"ticket":"T-1"}}`)
	if r.Status != runs.Queued || r.Agent != "claude" || r.Metadata["ticket"] != "T-1" {
		t.Fatalf("created run = %+v", r)
	}
	code, evs := g.stream(t, r.ID, "")
	if code != http.StatusOK {
		t.Fatalf("events = %d", code)
	}
	want := []string{"run.queued", "run.started", "session.started", "reasoning.completed", "message.delta",
		"message.completed", "tool_call.started", "tool_call.completed", "message.completed", "usage.updated", "run.completed"}
	if !subsequence(types(evs), want) {
		t.Fatalf("events %v\ndo not contain, in order, %v", types(evs), want)
	}
	for i, e := range evs {
		if e.ID != uint64(i+1) || e.Env.Seq != e.ID || e.Env.RunID != r.ID || e.Env.Agent != "claude" || e.Env.V != 1 {
			t.Fatalf("event %d: id %d envelope %+v", i, e.ID, e.Env)
		}
	}
	var sawTool, sawResult bool
	for _, e := range evs {
		switch e.Type {
		case "tool_call.started":
			var d runs.ToolCallStartedData
			e.data(&d)
			var input struct{ Command string }
			json.Unmarshal(d.Input, &input)
			sawTool = d.Name == "Bash" && input.Command == "echo hello > out.txt"
		case "tool_call.completed":
			var d runs.ToolCallCompletedData
			e.data(&d)
			sawResult = !d.IsError
		case "reasoning.completed":
			var d runs.ReasoningData
			e.data(&d)
			if !strings.Contains(d.Text, "I will use Bash") || d.Visibility != runs.VisibilityFull {
				t.Errorf("reasoning = %+v", d)
			}
		}
	}
	if !sawTool || !sawResult {
		for _, e := range evs {
			t.Log(e.Data)
		}
		t.Fatalf("Bash tool call not seen in full (started %v, completed ok %v)", sawTool, sawResult)
	}
	done := g.get(t, r.ID)
	if done.Status != runs.Succeeded || done.Result != "I wrote out.txt." || done.Error != nil {
		t.Fatalf("run = %+v, error %+v", done, done.Error)
	}
	if done.Exit == nil || done.Exit.Code != 0 || done.StartedAt == nil || done.FinishedAt == nil || done.SessionID == "" || done.AgentVersion == "" {
		t.Fatalf("run = %+v", done)
	}
	billed := normalized(mock.Ledger().Messages().Billed())
	if done.Usage != billed {
		t.Fatalf("usage %+v, the mock billed %+v", done.Usage, billed)
	}
	var completed runs.RunCompletedData
	evs[len(evs)-1].data(&completed)
	if completed.Usage != billed || completed.CostUSD == nil || done.CostUSD == nil || *completed.CostUSD != *done.CostUSD || *done.CostUSD <= 0 {
		t.Fatalf("run.completed usage %+v cost %v; run cost %v", completed.Usage, completed.CostUSD, done.CostUSD)
	}
	out, err := os.ReadFile(filepath.Join(g.DataDir, "workspaces", r.ID, "out.txt"))
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("the tool did not run in the run's directory: %q %v", out, err)
	}
	// The finished stream answers 204 from its last event on, so that a
	// browser's EventSource stops reconnecting.
	if code, _ := g.stream(t, r.ID, strconv.FormatUint(evs[len(evs)-1].ID, 10)); code != http.StatusNoContent {
		t.Fatalf("stream after the end = %d, want 204", code)
	}
	// And resumes after any earlier id with exactly the rest.
	_, rest := g.stream(t, r.ID, "3")
	if len(rest) != len(evs)-3 || rest[0].ID != 4 {
		t.Fatalf("resume after 3 gave %d events from %d; want %d from 4", len(rest), rest[0].ID, len(evs)-3)
	}
	assertNoProcesses(t, r.ID)
	assertMetrics(t, g, billed, *done.CostUSD)
}

// assertMetrics scrapes /metrics and checks that the token series split the
// run's usage into disjoint parts that add up to it, and that the run, its
// cost and the agent's version were counted.
func assertMetrics(t *testing.T, g *gateway, u runs.Usage, cost float64) {
	t.Helper()
	sum := g.metrics(t)
	claude := map[string]string{"agent": "claude"}
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"input tokens, all parts", sum("agentgate_input_tokens_total", claude), float64(u.InputTokens)},
		{"input tokens, cache read", sum("agentgate_input_tokens_total", map[string]string{"agent": "claude", "cache": "read"}), float64(u.CacheReadTokens)},
		{"input tokens, cache write", sum("agentgate_input_tokens_total", map[string]string{"agent": "claude", "cache": "write"}), float64(u.CacheWriteTokens)},
		{"output tokens", sum("agentgate_output_tokens_total", claude), float64(u.OutputTokens)},
		{"cost", sum("agentgate_cost_usd_total", claude), cost},
		{"runs succeeded", sum("agentgate_runs_finished_total", map[string]string{"agent": "claude", "status": "succeeded"}), 1},
		{"agent info", sum("agentgate_agent_info", map[string]string{"agent": "claude", "version": "2.1.332", "compatibility": "verified"}), 1},
		{"tool events", sum("agentgate_events_total", map[string]string{"agent": "claude", "type": "tool_call.started"}), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("metrics: %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if sum("agentgate_http_requests_total", map[string]string{"route": "/v1/runs/{id}/events"}) == 0 {
		t.Error("metrics: SSE requests not counted by route pattern")
	}
	// The finished run is in a pack, which the streams after its end read.
	if n := sum("agentgate_store_packs_sent_total", nil); n < 1 {
		t.Errorf("metrics: %v packs sent, want the finished run's", n)
	}
	if n := sum("agentgate_store_packs_reads_total", map[string]string{"result": "read"}); n < 1 {
		t.Errorf("metrics: %v packs read, want the replays' after the run's end", n)
	}
}

// metrics scrapes /metrics and returns a function that sums the counters
// or gauges of one family whose labels include match.
func (g *gateway) metrics(t testing.TB) func(name string, match map[string]string) float64 {
	t.Helper()
	resp, err := http.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return func(name string, match map[string]string) float64 {
		t.Helper()
		var total float64
		fam := families[name]
		if fam == nil {
			t.Fatalf("metric %s missing", name)
		}
	next:
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if labels[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				total += m.GetCounter().GetValue()
			case m.Gauge != nil:
				total += m.GetGauge().GetValue()
			}
		}
		return total
	}
}

func assertNoProcesses(t *testing.T, id string) {
	t.Helper()
	pids, err := proctree.New().Find(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 0 {
		t.Fatalf("%d processes of run %s left: %v", len(pids), id, pids)
	}
}

// TestClaudeFailuresAreClassified runs Claude against failing model APIs.
// A failure must be classified within seconds of the first request: the
// CLI's start before it is CPU work, which a busy machine stretches. The
// timeouts strike once the run is where they are about (the request
// unanswered, the tool running), which a timer from the start cannot
// promise.
func TestClaudeFailuresAreClassified(t *testing.T) {
	// strike waits until the run is where its deadline must strike.
	type strike func(t *testing.T, mock *anthropic.Server, id string)
	requested := func(t *testing.T, mock *anthropic.Server, id string) {
		waitFor(t, "a request at the mock", func() bool { return len(mock.Ledger().Messages()) > 0 })
	}
	toolRuns := func(t *testing.T, _ *anthropic.Server, id string) { waitForProcess(t, id, "perl") }
	for _, tc := range []struct {
		name      string
		scenario  anthropic.Scenario
		creds     func(m *anthropic.Server) map[string]string
		body      string
		strike    strike
		status    runs.State
		class     runs.Class
		retryable bool
	}{
		{name: "401", scenario: anthropic.Failure(401), class: runs.NotAuthenticated},
		{name: "no credentials", scenario: anthropic.TextAnswer("unreachable"),
			creds: func(*anthropic.Server) map[string]string { return map[string]string{} }, class: runs.NotAuthenticated},
		{name: "429 exhausted", scenario: anthropic.Failure(429), class: runs.RateLimited, retryable: true},
		{name: "500", scenario: anthropic.Failure(500), class: runs.TransientAPIError, retryable: true},
		{name: "529", scenario: anthropic.Failure(529), class: runs.TransientAPIError, retryable: true},
		{name: "400", scenario: anthropic.Failure(400), class: runs.APIError},
		{name: "max turns", scenario: anthropic.AlwaysTool("echo again"), body: `"max_turns":1`, class: runs.MaxTurns},
		{name: "budget", scenario: anthropic.AlwaysTool("echo again"), body: `"max_budget_usd":0.0001`, class: runs.BudgetExceeded},
		{name: "hung server", scenario: anthropic.Hang(), body: `"timeout_seconds":3600`, strike: requested, status: runs.TimedOut, class: runs.Timeout, retryable: true},
		{name: "timeout mid-tool", scenario: anthropic.LongTool(), body: `"timeout_seconds":3600`, strike: toolRuns, status: runs.TimedOut, class: runs.Timeout, retryable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := startMock(t, tc.scenario)
			creds := mockCreds(mock)
			if tc.creds != nil {
				creds = tc.creds(mock)
			}
			g := startGateway(t, gatewayEnv(t, t.TempDir()), creds)
			body := `{"agent":"claude","prompt":"go"`
			if tc.body != "" {
				body += "," + tc.body
			}
			first := mocktest.WatchFirstRequest(t, func() int { return len(mock.Ledger().Messages()) })
			r := g.post(t, body+"}")
			from := first
			if tc.strike != nil {
				tc.strike(t, mock, r.ID)
				g.deadlines.Strike(r.ID)
				struck := time.Now()
				from = func() time.Time { return struck }
			}
			done := g.waitRun(t, r.ID, 2*time.Minute) // against a hang: it includes the CLI's start
			want := tc.status
			if want == "" {
				want = runs.Failed
			}
			if done.Status != want || done.Error == nil || done.Error.Class != tc.class || done.Error.Retryable != tc.retryable {
				t.Fatalf("run %s %+v; want %s %s retryable=%v", done.Status, done.Error, want, tc.class, tc.retryable)
			}
			if done.Error.Message == "" {
				t.Fatal("error without a message")
			}
			// A run that never reached the mock retried nothing: its time
			// is the CLI's start, bounded above against a hang only.
			if took := done.FinishedAt.Sub(from()); took > 20*time.Second && len(mock.Ledger().Messages()) > 0 {
				t.Fatalf("classified %s after the first request (or the deadline); it must take seconds", took)
			}
			assertNoProcesses(t, r.ID)
			sum := g.metrics(t)
			if n := sum("agentgate_run_errors_total", map[string]string{"agent": "claude", "class": string(tc.class)}); n != 1 {
				t.Fatalf("agentgate_run_errors_total{class=%q} = %v, want 1", tc.class, n)
			}
			if n := sum("agentgate_runs_finished_total", map[string]string{"agent": "claude", "status": string(want)}); n != 1 {
				t.Fatalf("agentgate_runs_finished_total{status=%q} = %v, want 1", want, n)
			}
		})
	}
}

// waitFor waits until cond holds, within a minute (a bound against a
// hang, not a target).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestClaudeCancelMidTool(t *testing.T) {
	mock := startMock(t, anthropic.LongTool())
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))
	r := g.post(t, `{"agent":"claude","prompt":"run the long command"}`)
	g.waitEvent(t, r.ID, runs.EventToolCallStarted, 30*time.Second)
	waitForProcess(t, r.ID, "perl")
	resp, err := http.Post(g.URL+"/v1/runs/"+r.ID+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel = %v %v", resp, err)
	}
	resp.Body.Close()
	done := g.waitRun(t, r.ID, 20*time.Second)
	if done.Status != runs.Cancelled || done.Error == nil || done.Error.Class != runs.ClassCancelled {
		t.Fatalf("run %s %+v", done.Status, done.Error)
	}
	assertNoProcesses(t, r.ID)
	// Cancel is idempotent.
	resp, err = http.Post(g.URL+"/v1/runs/"+r.ID+"/cancel", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("second cancel = %v %v", resp, err)
	}
	resp.Body.Close()
}

// waitForProcess waits until a process of the run runs a command line
// containing name: the tool really started.
func waitForProcess(t *testing.T, id, name string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang: it may include the CLI's start
	for time.Now().Before(deadline) {
		pids, _ := proctree.New().Find(id)
		for _, pid := range pids {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if bytes.Contains(cmdline, []byte(name)) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s process in run %s", name, id)
}

// TestRestartMarksRunInterrupted kills a gateway mid-run, with SIGKILL so
// it cannot clean up, and starts another on the same data: the run's
// events are still there, it ends as interrupted, and the tool process the
// dead gateway left behind is gone.
func TestRestartMarksRunInterrupted(t *testing.T) {
	mock := startMock(t, anthropic.LongTool())
	dataDir := t.TempDir()
	settings := gatewayEnv(t, dataDir)
	first, cmd := startGatewayProcess(t, settings, mockCreds(mock))
	r := first.post(t, `{"agent":"claude","prompt":"run the long command"}`)
	first.waitEvent(t, r.ID, runs.EventToolCallStarted, 30*time.Second)
	waitForProcess(t, r.ID, "perl")
	cli := processOf(t, r.ID, "claude")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The CLI dies with its gateway, through its reaper; only the tool in
	// its own session is left for the next start to find.
	deadline := time.Now().Add(30 * time.Second) // against a hang
	for syscall.Kill(cli, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the CLI (pid %d) outlived its gateway", cli)
		}
		time.Sleep(20 * time.Millisecond)
	}

	second := startGateway(t, settings, mockCreds(mock))
	done := second.get(t, r.ID)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.Interrupted || !done.Error.Retryable {
		t.Fatalf("run after restart: %s %+v", done.Status, done.Error)
	}
	_, evs := second.stream(t, r.ID, "")
	if !subsequence(types(evs), []string{"run.queued", "run.started", "session.started", "tool_call.started", "run.completed"}) {
		t.Fatalf("events after restart: %v", types(evs))
	}
	assertNoProcesses(t, r.ID)
}

// TestClaudeKilledBySignal kills the CLI from outside, as the OOM killer
// would: the run fails as process_killed, which is never retryable, and
// the tool the CLI left running is gone too.
func TestClaudeKilledBySignal(t *testing.T) {
	mock := startMock(t, anthropic.LongTool())
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))
	r := g.post(t, `{"agent":"claude","prompt":"run the long command"}`)
	g.waitEvent(t, r.ID, runs.EventToolCallStarted, 30*time.Second)
	waitForProcess(t, r.ID, "perl")
	pid := processOf(t, r.ID, "claude")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := g.waitRun(t, r.ID, 20*time.Second)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.ProcessKilled || done.Error.Retryable {
		t.Fatalf("run %s %+v", done.Status, done.Error)
	}
	if done.Exit == nil || done.Exit.Signal != "SIGKILL" || done.Exit.Reason != "" {
		t.Fatalf("exit = %+v", done.Exit)
	}
	assertNoProcesses(t, r.ID)
}

// processOf returns the pid of the run's process whose executable path
// contains name.
func processOf(t *testing.T, id, name string) int {
	t.Helper()
	pids, err := proctree.New().Find(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if strings.Contains(filepath.Base(exe), name) {
			return pid
		}
	}
	t.Fatalf("no %s process among the run's %v", name, pids)
	return 0
}

// TestGracefulShutdownInterruptsRuns stops a gateway with a run still
// going: the run gets the grace period, then is stopped and recorded as
// interrupted by the shutdown, with no process left, and a gateway started
// again on the same data still has it.
func TestGracefulShutdownInterruptsRuns(t *testing.T) {
	mock := startMock(t, anthropic.LongTool())
	settings := gatewayEnv(t, t.TempDir())
	settings["AGENTGATE_SHUTDOWN_GRACE"] = "500ms"
	g := startGateway(t, settings, mockCreds(mock))
	r := g.post(t, `{"agent":"claude","prompt":"run the long command"}`)
	g.waitEvent(t, r.ID, runs.EventToolCallStarted, 30*time.Second)
	waitForProcess(t, r.ID, "perl")
	if err := g.stop(); err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
	assertNoProcesses(t, r.ID)

	again := startGateway(t, settings, mockCreds(mock))
	done := again.get(t, r.ID)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.Interrupted || !done.Error.Retryable {
		t.Fatalf("run after a graceful shutdown: %s %+v", done.Status, done.Error)
	}
	if done.Exit == nil || done.Exit.Reason != "shutdown" {
		t.Fatalf("exit = %+v, want reason shutdown", done.Exit)
	}
	_, evs := again.stream(t, r.ID, "")
	if evs[len(evs)-1].Type != string(runs.EventRunCompleted) {
		t.Fatalf("events end with %s", evs[len(evs)-1].Type)
	}
}

// TestClaudeResumeCountsOnlyItsOwnCost resumes a session: Claude Code
// reports the session's cost so far, and the gateway gives the resumed run
// only what it added, in the run and in the metrics.
func TestClaudeResumeCountsOnlyItsOwnCost(t *testing.T) {
	mock := startMock(t, anthropic.TextAnswer("hello again"))
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))
	first := g.waitRun(t, g.post(t, `{"agent":"claude","prompt":"say hello"}`).ID, 30*time.Second)
	if first.Status != runs.Succeeded || first.CostUSD == nil || first.SessionID == "" {
		t.Fatalf("first run: %s %+v", first.Status, first.Error)
	}
	mock.Reset()
	second := g.waitRun(t, g.post(t, `{"agent":"claude","prompt":"and again","resume_session_id":"`+first.SessionID+`"}`).ID, 30*time.Second)
	if second.Status != runs.Succeeded || second.SessionID != first.SessionID {
		t.Fatalf("resumed run: %s session %q %+v", second.Status, second.SessionID, second.Error)
	}
	if billed := normalized(mock.Ledger().Messages().Billed()); second.Usage != billed {
		t.Fatalf("resumed usage %+v, the mock billed %+v for it", second.Usage, billed)
	}
	// The same answer billed the same: the resumed run cost what the first
	// did, not the session's total.
	if second.CostUSD == nil || math.Abs(*second.CostUSD-*first.CostUSD) > 1e-9 {
		t.Fatalf("resumed run cost %v, want %v (the first run's, for the same billing)", second.CostUSD, *first.CostUSD)
	}
	total := g.metrics(t)("agentgate_cost_usd_total", map[string]string{"agent": "claude"})
	if math.Abs(total-*first.CostUSD-*second.CostUSD) > 1e-9 {
		t.Fatalf("agentgate_cost_usd_total = %v, want %v", total, *first.CostUSD+*second.CostUSD)
	}
}

// startGatewayProcess runs the gateway as a process of its own (the test
// binary as the gateway), so that a test can SIGKILL it.
func startGatewayProcess(t testing.TB, settings, passEnv map[string]string) (*gateway, *exec.Cmd) {
	t.Helper()
	return startGatewayUnder(t, nil, settings, passEnv)
}

// startGatewayUnder is startGatewayProcess with the gateway started by
// launcher (a command and its arguments, such as prlimit's), or directly
// when launcher is empty.
func startGatewayUnder(t testing.TB, launcher []string, settings, passEnv map[string]string) (*gateway, *exec.Cmd) {
	t.Helper()
	argv := append(append([]string(nil), launcher...), os.Args[0])
	cmd := exec.Command(argv[0], argv[1:]...)
	// A race-built gateway that exits 0 sleeps a second first; the tests
	// that stop one gracefully wait for it (see testproc.Exit).
	cmd.Env = []string{asGatewayEnv + "=1", "PATH=" + os.Getenv("PATH"), "GORACE=atexit_sleep_ms=0"}
	for k, v := range passEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	g := &gateway{DataDir: settings["AGENTGATE_DATA_DIR"]}
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "agentgate listening on "); ok {
			g.URL = u
			break
		}
	}
	if g.URL == "" {
		t.Fatal("the gateway process did not start")
	}
	go io.Copy(io.Discard, stdout)
	return g, cmd
}
