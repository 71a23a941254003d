package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/adapters/claude"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// wakeSlack is how much longer than a live turn's a woken turn's first
// answer may take, besides the CLI's own start: the goal of hibernation.
const wakeSlack = 1.5

// BenchmarkClaudeWake measures, with the real claude CLI through the
// gateway against the mock Messages API, the time from a message to the
// first event of its answer (message.delta, message.completed, reasoning
// or a tool call: what the model said) at the client, alternating:
//
//   - live-ms: a message to an interactive run whose CLI waits idle;
//   - woken-ms: a message to a hibernated run: the gateway claims it,
//     restores its home and directory, and starts its CLI again resuming
//     the kept session;
//   - cli-resume-start-ms: of woken-ms, the CLI's own start: from the
//     woken turn's turn.started, once its home and directory are back, to
//     the CLI's first event (session.started), as the gateway stamped
//     them; the CLI loading its session is its own work;
//   - cli-start-ms: for comparison, a new run's CLI start, from its
//     run.started to its session.started.
//
// It fails unless woken <= 1.5 × live + cli-resume-start (medians): what
// waking adds of its own (claiming the run, restoring its files) must fit
// in half a live turn's answer. The runs each wait 5 s idle before they
// sleep: it runs its scenario once, whatever b.N.
func BenchmarkClaudeWake(b *testing.B) {
	bin := agenttest.ClaudeBin(b)
	mock, err := anthropic.Start("127.0.0.1:0", anthropic.TextAnswer("Hello from the mock."))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mock.Close)
	samples := 5
	if testing.Short() {
		samples = 3
	}
	env := benchGatewayEnv(b, bin)
	env["AGENTGATE_HIBERNATE_AFTER"] = "0" // only the runs that ask
	env["AGENTGATE_MAX_CONCURRENT_RUNS"] = "16"
	g := startGateway(b, env, mockCreds(mock))
	client := benchClient(b)

	live := g.startConversation(b, client, 0)
	sleepers := make([]*watchedRun, samples)
	for i := range sleepers {
		sleepers[i] = g.startConversation(b, client, 5)
	}
	live.waitFor(b, "turn 1 to end", time.Time{}, isType(runs.EventTurnCompleted))
	for _, r := range sleepers {
		r.waitFor(b, "hibernation", time.Time{}, isType(runs.EventRunHibernated))
	}
	var woken, baseline, starts, resumedStarts []time.Duration
	for i, r := range sleepers {
		starts = append(starts, g.cliStart(b, client))
		baseline = append(baseline, g.firstAnswer(b, client, live, fmt.Sprintf("Say hello again (%d).", i)))
		sent := time.Now()
		woken = append(woken, g.firstAnswer(b, client, r, "Say hello once more."))
		launched := r.waitFor(b, "turn.started", sent, isType(runs.EventTurnStarted))
		spoke := r.waitFor(b, "session.started", sent, isType(runs.EventSessionStarted))
		resumedStarts = append(resumedStarts, spoke.stamp.Sub(launched.stamp))
		g.closeRun(b, client, r.id)
	}
	w, l, c, rc := medianOf(woken), medianOf(baseline), medianOf(starts), medianOf(resumedStarts)
	b.ReportMetric(0, "ns/op") // one scenario, not an op repeated b.N times
	b.ReportMetric(ms(w), "woken-ms")
	b.ReportMetric(ms(l), "live-ms")
	b.ReportMetric(ms(c), "cli-start-ms")
	b.ReportMetric(ms(rc), "cli-resume-start-ms")
	b.ReportMetric(ms(w-rc), "woken-less-start-ms")
	b.Logf("first answer of a woken turn %s, %s of it the CLI's start resuming its session; of a live turn %s; a new run's CLI starts in %s (medians of %d)",
		w, rc, l, c, samples)
	if limit := time.Duration(wakeSlack*float64(l)) + rc; w > limit {
		b.Errorf("a woken turn's first answer took %s, over %.1f × a live turn's %s + the CLI's start %s = %s",
			w, wakeSlack, l, rc, limit)
	}
}

// watchedRun is a run whose events a background SSE client reads, with
// the time each arrived.
type watchedRun struct {
	id      string
	mu      sync.Mutex
	seen    []seenEvent
	changed chan struct{} // kicked at each event
}

type seenEvent struct {
	typ   string
	at    time.Time
	stamp time.Time
}

func isType(t runs.EventType) func(seenEvent) bool {
	return func(e seenEvent) bool { return e.typ == string(t) }
}

// isAnswer says the event is the model's answer reaching the client.
func isAnswer(e seenEvent) bool {
	switch runs.EventType(e.typ) {
	case runs.EventMessageDelta, runs.EventMessageCompleted, runs.EventReasoningDelta, runs.EventToolCallStarted:
		return true
	}
	return false
}

// startConversation creates an interactive claude run that hibernates
// after hibernateAfter seconds idle (0: the gateway's setting) and
// follows its events.
func (g *gateway) startConversation(b *testing.B, c *http.Client, hibernateAfter int) *watchedRun {
	req := map[string]any{"agent": claude.Name, "prompt": "Say hello.", "interactive": true, "idle_timeout_seconds": 3600}
	if hibernateAfter > 0 {
		req["hibernate_after_seconds"] = hibernateAfter
	}
	r := &watchedRun{id: g.create(b, c, req), changed: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		r.follow(ctx, c, g.URL+"/v1/runs/"+r.id+"/events")
	}()
	return r
}

// follow reads the run's SSE stream until it ends or ctx does, noting
// each event's type and when its data line was read.
func (r *watchedRun) follow(ctx context.Context, c *http.Client, url string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return // the waits say what never came
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var typ string
	var at, stamp time.Time
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0 && typ != "":
			r.mu.Lock()
			r.seen = append(r.seen, seenEvent{typ: typ, at: at, stamp: stamp})
			r.mu.Unlock()
			select {
			case r.changed <- struct{}{}:
			default:
			}
			typ = ""
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			at = time.Now()
			var env struct{ Time time.Time }
			_ = json.Unmarshal(line[len("data: "):], &env)
			stamp = env.Time
		}
	}
}

// waitFor returns the first event that ok takes, read after since.
func (r *watchedRun) waitFor(b *testing.B, what string, since time.Time, ok func(seenEvent) bool) seenEvent {
	b.Helper()
	guard := time.After(benchDeadline) // a hang guard, not a target
	for {
		r.mu.Lock()
		i := slices.IndexFunc(r.seen, func(e seenEvent) bool { return e.at.After(since) && ok(e) })
		var e seenEvent
		if i >= 0 {
			e = r.seen[i]
		}
		r.mu.Unlock()
		if i >= 0 {
			return e
		}
		select {
		case <-r.changed:
		case <-guard:
			b.Fatalf("run %s: no %s", r.id, what)
		}
	}
}

// firstAnswer sends text to r and returns how long its first answer took
// to reach the client.
func (g *gateway) firstAnswer(b *testing.B, c *http.Client, r *watchedRun, text string) time.Duration {
	b.Helper()
	body, _ := json.Marshal(map[string]string{"text": text})
	start := time.Now()
	resp, err := c.Post(g.URL+"/v1/runs/"+r.id+"/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b.Fatalf("message to %s = %d %s", r.id, resp.StatusCode, raw)
	}
	return r.waitFor(b, "answer to "+text, start, isAnswer).at.Sub(start)
}

// closeRun closes an interactive run.
func (g *gateway) closeRun(b *testing.B, c *http.Client, id string) {
	b.Helper()
	resp, err := c.Post(g.URL+"/v1/runs/"+id+"/close", "application/json", nil)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		b.Fatalf("close %s = %d", id, resp.StatusCode)
	}
}

// cliStart is how long claude takes to start as the gateway starts it,
// under its sandbox and reaper: from a new interactive run's run.started
// to its CLI's first event, session.started, as the gateway stamped them.
func (g *gateway) cliStart(b *testing.B, c *http.Client) time.Duration {
	b.Helper()
	r := g.startConversation(b, c, 0)
	started := r.waitFor(b, "run.started", time.Time{}, isType(runs.EventRunStarted))
	first := r.waitFor(b, "session.started", time.Time{}, isType(runs.EventSessionStarted))
	r.waitFor(b, "turn 1 to end", time.Time{}, isType(runs.EventTurnCompleted))
	g.closeRun(b, c, r.id)
	return first.stamp.Sub(started.stamp)
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
