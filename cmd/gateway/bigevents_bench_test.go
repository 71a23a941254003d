package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Sizes of BenchmarkBigEvents' runs.
const (
	bigEventsClients = 50
	bigEventsCount   = 3000
	bigEventSize     = 64 << 10
	// bigEventsDeadline bounds the clients' reading of one run: 50
	// clients of 192 MiB are 9.6 GB through SSE on the machine's two
	// cores, beside the gateway's own work.
	bigEventsDeadline = 10 * time.Minute
)

// BenchmarkBigEvents: bigEventsClients SSE clients read one run of
// bigEventsCount text deltas of 64 KiB each, and, as the baseline in the
// same iterations, the same clients read a run of as many small deltas
// (the 275-byte line of BenchmarkGatewayThroughput). Each run has a
// gateway process of its own, so that its memory is read from /proc apart
// from the clients' and from the other run's.
//
// The figure is the gateway's peak RSS (VmHWM, reset before each phase
// through /proc/PID/clear_refs): first while the run is written with no
// client reading it, then while the same gateway writes the same run again
// to its clients. MiB/client is the second peak less the first, over the
// clients: what reading costs beyond writing, per client. Between the two,
// the same clients read the first run, finished, from its start, a replay
// with no writer beside it: replay-MiB/client is that peak less the first, over
// the clients, what a client holds without the writer's backlog (its
// queue of events for the store grows while readers slow the store,
// and counts in the second peak). The process's
// peak RSS is what a machine must have, which is why it is measured rather
// than the Go heap: the embedded store's server and the NATS client's
// buffers are in it too.
//
// Every client checks that it got every event once, in order, and that
// the text of its deltas adds up to what the agent wrote; all clients'
// streams must be the same bytes.
func BenchmarkBigEvents(b *testing.B) {
	bin := buildFakeClaude(b)
	final := recording(b, "text")
	sizes := []struct {
		name string
		line []byte
	}{
		{"small", stampedDelta(b)},
		{"64KiB", bigDelta(b, bigEventSize)},
	}
	peak := map[string][]float64{}
	perClient := map[string][]float64{}
	replayPerClient := map[string][]float64{}
	var readTime time.Duration
	for b.Loop() {
		for _, sz := range sizes {
			s := fakeSettings{Lines: writeLines(b, [][]byte{sz.line}), Count: bigEventsCount, Final: string(final[len(final)-1])}
			start := time.Now()
			alone, read, replay := bigEventsRound(b, bin, s, deltaTextLen(b, sz.line))
			if sz.name == "64KiB" {
				readTime += time.Since(start)
			}
			peak[sz.name] = append(peak[sz.name], read)
			perClient[sz.name] = append(perClient[sz.name], (read-alone)/bigEventsClients)
			replayPerClient[sz.name] = append(replayPerClient[sz.name], (replay-alone)/bigEventsClients)
		}
	}
	for _, sz := range sizes {
		slices.Sort(peak[sz.name])
		slices.Sort(perClient[sz.name])
		slices.Sort(replayPerClient[sz.name])
	}
	med := func(v []float64) float64 { return v[len(v)/2] }
	b.ReportMetric(float64(bigEventSize)/1024, "event-KiB")
	b.ReportMetric(med(peak["64KiB"]), "peak-MiB")
	b.ReportMetric(med(perClient["64KiB"]), "MiB/client")
	b.ReportMetric(med(peak["small"]), "small-peak-MiB")
	b.ReportMetric(med(perClient["small"])*1024, "small-KiB/client")
	b.ReportMetric(med(perClient["64KiB"])/max(med(perClient["small"]), 1.0/1024), "x-small")
	b.ReportMetric(med(replayPerClient["64KiB"]), "replay-MiB/client")
	b.ReportMetric(med(replayPerClient["small"])*1024, "small-replay-KiB/client")
	// The round of 64 KiB events, both runs: for scale, on a shared
	// machine.
	b.ReportMetric(readTime.Seconds()/float64(len(peak["64KiB"])), "64KiB-round-s")
}

// bigEventsRound starts a gateway, writes the run s once with no client,
// has bigEventsClients clients replay it, writes it again to the same
// clients, and returns the gateway's peak RSS in MiB in each phase. textLen
// is the text of one of s's deltas.
func bigEventsRound(b *testing.B, bin string, s fakeSettings, textLen int) (alone, read, replay float64) {
	g, cmd := startGatewayProcess(b, scaleEnv(b, bin, 1), nil)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	hc := benchClient(b)
	pid := cmd.Process.Pid

	resetPeakRSS(b, pid)
	id := g.create(b, hc, map[string]any{"agent": "claude", "prompt": s.prompt(b)})
	waitRunEnded(b, hc, g.URL, id)
	alone = float64(peakRSSKiB(b, pid)) / 1024

	resetPeakRSS(b, pid)
	cs := connectBigClients(b, hc, g.URL+"/v1/runs/"+id+"/events", bigEventsClients)
	waitBigText(b, cs, s.Count*textLen)
	replay = float64(peakRSSKiB(b, pid)) / 1024

	gated := s
	gated.Gate = filepath.Join(b.TempDir(), "go")
	resetPeakRSS(b, pid)
	id = g.create(b, hc, map[string]any{"agent": "claude", "prompt": gated.prompt(b)})
	cs = connectBigClients(b, hc, g.URL+"/v1/runs/"+id+"/events", bigEventsClients)
	if err := os.WriteFile(gated.Gate, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	waitBigText(b, cs, s.Count*textLen)
	read = float64(peakRSSKiB(b, pid)) / 1024

	hc.CloseIdleConnections()
	return alone, read, replay
}

// bigDelta is a text delta line whose text is size bytes of words.
func bigDelta(tb testing.TB, size int) []byte {
	words := strings.Repeat("lorem ipsum dolor sit amet ", size/27+1)[:size]
	return bytes.Replace(stampedDelta(tb), []byte(stampMark), []byte(words), 1)
}

// deltaTextLen is the length of the text of the delta line l.
func deltaTextLen(tb testing.TB, l []byte) int {
	var v struct {
		Event struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		} `json:"event"`
	}
	if err := json.Unmarshal(l, &v); err != nil || v.Event.Delta.Text == "" {
		tb.Fatalf("not a text delta line (%v): %.200s", err, l)
	}
	return len(v.Event.Delta.Text)
}

// resetPeakRSS resets process pid's VmHWM to its RSS now.
func resetPeakRSS(tb testing.TB, pid int) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		tb.Fatalf("reset the gateway's peak RSS: %v", err)
	}
}

// peakRSSKiB is process pid's VmHWM: its largest RSS since resetPeakRSS.
func peakRSSKiB(tb testing.TB, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("VmHWM %q: %v", v, err)
			}
			return n
		}
	}
	tb.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// waitRunEnded polls the run until its status is terminal.
func waitRunEnded(tb testing.TB, hc *http.Client, base, id string) {
	deadline := time.Now().Add(benchDeadline)
	for {
		resp, err := hc.Get(base + "/v1/runs/" + id)
		if err != nil {
			tb.Fatal(err)
		}
		var r struct{ Status runs.State }
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil {
			tb.Fatal(err)
		}
		if r.Status.Terminal() {
			if r.Status != runs.Succeeded {
				tb.Fatalf("run %s ended %s", id, r.Status)
			}
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("run %s still %s after %v", id, r.Status, benchDeadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bigClient reads one run's SSE stream from its start, checks that ids
// come 1, 2, 3… with none missing or repeated, adds up its deltas' text
// and hashes every data line.
type bigClient struct {
	started chan struct{}
	once    sync.Once
	text    int
	sum     [sha256.Size]byte
	err     error
}

func (c *bigClient) markStarted() { c.once.Do(func() { close(c.started) }) }

func (c *bigClient) follow(ctx context.Context, hc *http.Client, url string) {
	defer c.markStarted()
	resp, err := openSSE(ctx, hc, url, "")
	if err != nil {
		c.err = err
		return
	}
	defer resp.Body.Close()
	h := sha256.New()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var typ []byte
	want := uint64(1)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0 && len(typ) > 0:
			want++
			switch string(typ) {
			case string(runs.EventRunStarted):
				c.markStarted()
			case string(runs.EventRunCompleted):
				copy(c.sum[:], h.Sum(nil))
				return
			}
			typ = typ[:0]
		case bytes.HasPrefix(line, []byte("id: ")):
			if id, ok := parseSeqBytes(line[4:]); !ok || id != want {
				c.err = fmt.Errorf("event id %q, want %d", line[4:], want)
				return
			}
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = append(typ[:0], line[7:]...)
		case bytes.HasPrefix(line, []byte("data: ")):
			h.Write(line[6:])
			if string(typ) == string(runs.EventMessageDelta) {
				c.text += deltaEnvelopeTextLen(line[6:])
			}
		}
	}
	c.err = fmt.Errorf("the stream ended at event %d without run.completed (%v)", want, sc.Err())
}

// deltaEnvelopeTextLen is the length of a message.delta envelope's text.
func deltaEnvelopeTextLen(envelope []byte) int {
	if text, ok := deltaText(envelope); ok {
		return len(text)
	}
	var env struct {
		Data struct {
			Text string `json:"text"`
		} `json:"data"`
	}
	_ = json.Unmarshal(envelope, &env)
	return len(env.Data.Text)
}

// connectBigClients connects n clients to url, each streaming (its
// run.started read) before the next connects.
func connectBigClients(tb testing.TB, hc *http.Client, url string, n int) *clientSet[*bigClient] {
	return connectEach(tb, hc, url, n, bigEventsDeadline, func() *bigClient {
		return &bigClient{started: make(chan struct{})}
	})
}

func (c *bigClient) readFromStart(ctx context.Context, hc *http.Client, url string) {
	c.follow(ctx, hc, url)
}
func (c *bigClient) streaming() <-chan struct{} { return c.started }
func (c *bigClient) failure() error             { return c.err }

// wait waits for every client's stream to end and checks that each got
// text bytes of deltas and the same stream as the others.
func waitBigText(tb testing.TB, set *clientSet[*bigClient], text int) {
	set.wg.Wait()
	set.cancel()
	for i, c := range set.cs {
		switch {
		case c.err != nil:
			tb.Fatalf("client %d: %v", i, c.err)
		case c.text != text:
			tb.Fatalf("client %d got %d bytes of delta text, want %d", i, c.text, text)
		case c.sum != set.cs[0].sum:
			tb.Fatalf("client %d's stream differs from client 0's", i)
		}
	}
}
