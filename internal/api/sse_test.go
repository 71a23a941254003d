package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// waitFor polls cond until it holds or a few seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEventsWireFormat checks the bytes of a full replay: headers, the
// retry line, each event's id, event and data (the stored JSON verbatim),
// and that the stream ends after run.completed even though the run is
// still listed as running and the log has more.
func TestEventsWireFormat(t *testing.T) {
	evs := runLog(t, runA, 5)
	stray := storedEvent(t, runA, 6, runs.EventWarning, runs.WarningData{Code: "late", Message: "after the end"})
	l := newMemLog(append(evs, stray)...)
	h := newHarness(t, Config{}, streamService(l, fixed(runs.Running)))

	resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	for k, v := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache",
		"X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if _, ok := resp.Header["Connection"]; ok {
		t.Errorf("Connection header sent: %q", resp.Header["Connection"])
	}
	var want bytes.Buffer
	want.WriteString("retry: 2000\n\n")
	for _, ev := range evs {
		fmt.Fprintf(&want, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, ev.JSON)
	}
	if string(b) != want.String() {
		t.Errorf("stream =\n%s\nwant\n%s", b, want.String())
	}
	waitFor(t, "the cursor to close", func() bool { return l.closed.Load() == 1 })
	waitFor(t, "the client count to drop", func() bool { return h.obs.clients.Load() == 0 })
	if h.obs.maxSeen.Load() != 1 {
		t.Errorf("client count peaked at %d, want 1", h.obs.maxSeen.Load())
	}
}

// TestEventsNoConnectionHeaderOnWire reads the raw response, since the
// client library hides hop-by-hop headers.
func TestEventsNoConnectionHeaderOnWire(t *testing.T) {
	l := newMemLog(runLog(t, runA, 3)...)
	h := newHarness(t, Config{}, streamService(l, fixed(runs.Succeeded)))
	conn, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/runs/%s/events HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n", runA)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("status line %q: %v", status, err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
		if strings.HasPrefix(strings.ToLower(line), "connection:") {
			t.Errorf("sent %q", line)
		}
	}
}

// TestEventsResume checks where a stream starts: after Last-Event-ID,
// after ?after=N, after the larger of both.
func TestEventsResume(t *testing.T) {
	all := runLog(t, runA, 12)
	for _, c := range []struct {
		name   string
		header string
		query  string
		after  uint64
	}{
		{"from the start", "", "", 0},
		{"Last-Event-ID", "5", "", 5},
		{"after", "", "after=7", 7},
		{"header larger", "9", "after=3", 9},
		{"query larger", "2", "after=8", 8},
		{"zero", "0", "after=0", 0},
		{"empty values", "", "after=", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newMemLog(all...)
			h := newHarness(t, Config{BatchSize: 5}, streamService(l, fixed(runs.Running)))
			var hdr []string
			if c.header != "" {
				hdr = []string{"Last-Event-ID", c.header}
			}
			resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?"+c.query, "", hdr...)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			p := newEventSource()
			p.feed(b)
			if got := l.cursorAfters(); len(got) != 1 || got[0] != c.after {
				t.Errorf("cursor opened after %v, want %d", got, c.after)
			}
			if len(p.events) != len(all)-int(c.after) {
				t.Fatalf("%d events, want %d", len(p.events), len(all)-int(c.after))
			}
			for i, ev := range p.events {
				if want := strconv.FormatUint(c.after+uint64(i)+1, 10); ev.lastEventID != want {
					t.Errorf("event %d has id %s, want %s", i, ev.lastEventID, want)
				}
			}
		})
	}
}

func TestEventsBadResume(t *testing.T) {
	l := newMemLog(runLog(t, runA, 3)...)
	h := newHarness(t, Config{}, streamService(l, fixed(runs.Running)))
	for _, c := range []struct{ header, query, field string }{
		{"abc", "", "Last-Event-ID"},
		{"-1", "", "Last-Event-ID"},
		{"1.5", "", "Last-Event-ID"},
		{"+3", "", "Last-Event-ID"},
		{"18446744073709551616", "", "Last-Event-ID"},
		{"", "after=x", "after"},
		{"", "after=-2", "after"},
		{"", "after=1&after=2", "after"},
		{"4", "after=1e3", "after"},
	} {
		var hdr []string
		if c.header != "" {
			hdr = []string{"Last-Event-ID", c.header}
		}
		resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?"+c.query, "", hdr...)
		if resp.StatusCode != 400 {
			t.Errorf("%q %q: status %d", c.header, c.query, resp.StatusCode)
			continue
		}
		if e := errorBody(t, b); e.Code != CodeInvalidField || e.Field != c.field {
			t.Errorf("%q %q: %+v", c.header, c.query, e)
		}
	}
	if l.opened.Load() != 0 {
		t.Error("a cursor was opened for an invalid request")
	}
}

// TestEvents204 checks that an ended run with nothing after the cursor
// answers 204 without opening a cursor, and one with more streams it.
func TestEvents204(t *testing.T) {
	l := newMemLog(runLog(t, runA, 10)...)
	h := newHarness(t, Config{}, streamService(l, fixed(runs.Succeeded)))
	for _, c := range []struct{ header, query string }{{"10", ""}, {"", "after=10"}, {"3", "after=12"}} {
		var hdr []string
		if c.header != "" {
			hdr = []string{"Last-Event-ID", c.header}
		}
		resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?"+c.query, "", hdr...)
		if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
			t.Errorf("%+v: status %d body %q", c, resp.StatusCode, b)
		}
	}
	if l.opened.Load() != 0 {
		t.Error("a cursor was opened for a 204")
	}
	resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events", "", "Last-Event-ID", "9")
	p := newEventSource()
	p.feed(b)
	if resp.StatusCode != 200 || len(p.events) != 1 || p.events[0].lastEventID != "10" || p.events[0].typ != "run.completed" {
		t.Errorf("after 9: status %d events %+v", resp.StatusCode, p.events)
	}

	// An ended run with no events at all.
	empty := newMemLog()
	h = newHarness(t, Config{}, streamService(empty, fixed(runs.Failed)))
	if resp, _ := h.do(t, "GET", "/v1/runs/"+runA+"/events", ""); resp.StatusCode != http.StatusNoContent {
		t.Errorf("empty ended run: status %d", resp.StatusCode)
	}
	// NDJSON follows the same rule.
	if resp, _ := h.do(t, "GET", "/v1/runs/"+runA+"/events", "", "Accept", "application/x-ndjson"); resp.StatusCode != http.StatusNoContent {
		t.Errorf("empty ended run, NDJSON: status %d", resp.StatusCode)
	}
}

// readComments reads an event stream until it has held n comments, and
// returns what it read.
func readComments(t *testing.T, body io.Reader, n int) *eventSource {
	t.Helper()
	p := newEventSource()
	buf := make([]byte, 512)
	for len(p.comments) < n {
		k, err := body.Read(buf)
		p.feed(buf[:k])
		if err != nil {
			t.Fatalf("read: %v (comments %q)", err, p.comments)
		}
	}
	return p
}

// TestEventsHeartbeat waits on a quiet run for the ping comment.
func TestEventsHeartbeat(t *testing.T) {
	l := newMemLog(runLog(t, runA, 3)[:1]...)
	h := newHarness(t, Config{PingInterval: 20 * time.Millisecond}, streamService(l, fixed(runs.Running)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp := connectES(ctx, t, h.srv.Client(), h.srv.URL+"/v1/runs/"+runA+"/events", "")
	defer resp.Body.Close()
	p := readComments(t, resp.Body, 2)
	for _, c := range p.comments {
		if c != " ping" {
			t.Errorf("comment %q, want \" ping\"", c)
		}
	}
	if len(p.events) != 1 || p.events[0].typ != "run.queued" {
		t.Errorf("events %+v", p.events)
	}
	cancel()
	waitFor(t, "the stream to end", func() bool { return h.obs.clients.Load() == 0 && l.closed.Load() == 1 })
}

// TestEventsTwoClients follows one run live from two clients at once; both
// get every event.
func TestEventsTwoClients(t *testing.T) {
	const n = 300
	all := runLog(t, runA, n)
	l := newMemLog(all[0])
	h := newHarness(t, Config{BatchSize: 16}, streamService(l, fixed(runs.Running)))
	url := h.srv.URL + "/v1/runs/" + runA + "/events"

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	results := make([]*eventSource, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
			if err != nil {
				errs[i] = err
				return
			}
			resp, err := h.srv.Client().Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			p := newEventSource()
			b, err := io.ReadAll(resp.Body)
			p.feed(b)
			results[i], errs[i] = p, err
		}()
	}
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	waitFor(t, "two clients", func() bool { return h.obs.clients.Load() == 2 })
	for i := 1; i < n; i += 7 {
		l.append(all[i:min(i+7, n)]...)
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	for i, p := range results {
		if errs[i] != nil {
			t.Fatalf("client %d: %v", i, errs[i])
		}
		if len(p.events) != n {
			t.Fatalf("client %d got %d events, want %d", i, len(p.events), n)
		}
		for j, ev := range p.events {
			if ev.lastEventID != strconv.Itoa(j+1) || ev.data != string(all[j].JSON) {
				t.Fatalf("client %d event %d = %+v", i, j, ev)
			}
		}
	}
}

// TestEventsSlowClientDropped connects a client that never reads, over
// real TCP with a tiny receive buffer, to a run whose log produces data
// without end. Meanwhile another client follows another run and gets every
// event; then the write deadline drops the stuck client.
func TestEventsSlowClientDropped(t *testing.T) {
	const writeTimeout = 2 * time.Second
	payload := strings.Repeat("x", 16<<10)
	var produced atomicCounter
	slowClosed := make(chan struct{})
	endless := &fakeCursor{
		next: func(ctx context.Context, max int) ([]runs.StoredEvent, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			out := make([]runs.StoredEvent, max)
			for i := range out {
				seq := produced.add()
				out[i] = storedEvent(t, runA, seq, runs.EventMessageDelta, runs.MessageData{Text: payload})
			}
			return out, nil
		},
		close: func() error { close(slowClosed); return nil },
	}
	all := runLog(t, runB, 50)
	fast := newMemLog(all[0])
	svc := &fakeService{
		get: func(_ context.Context, id string) (runs.Run, error) { return sampleRun(id, runs.Running), nil },
		events: func(_ context.Context, id string, after uint64) (runs.Cursor, error) {
			if id == runA {
				return endless, nil
			}
			return fast.cursor(after), nil
		},
	}
	h := newHarness(t, Config{WriteTimeout: writeTimeout, BatchSize: 32}, svc)

	d := net.Dialer{}
	conn, err := d.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(1024); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/runs/%s/events HTTP/1.1\r\nHost: test\r\n\r\n", runA)
	stuckAt := time.Now()
	// The server has filled the socket buffers once it stops producing.
	waitFor(t, "the slow stream to block", func() bool {
		before := produced.load()
		time.Sleep(100 * time.Millisecond)
		return before > 0 && produced.load() == before
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp := connectES(ctx, t, h.srv.Client(), h.srv.URL+"/v1/runs/"+runB+"/events", "")
	defer resp.Body.Close()
	go func() {
		for i := 1; i < len(all); i += 5 {
			fast.append(all[i:min(i+5, len(all))]...)
		}
	}()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := newEventSource()
	p.feed(b)
	if len(p.events) != len(all) {
		t.Fatalf("the other client got %d events, want %d", len(p.events), len(all))
	}
	for i, ev := range p.events {
		if ev.data != string(all[i].JSON) {
			t.Fatalf("the other client's event %d = %+v", i, ev)
		}
	}
	select {
	case <-slowClosed:
		t.Log("the stuck client was dropped before the other client finished")
	default:
	}

	select {
	case <-slowClosed:
	case <-time.After(writeTimeout + 5*time.Second):
		t.Fatalf("the stuck client's handler did not return within %v", writeTimeout+5*time.Second)
	}
	if took := time.Since(stuckAt); took < writeTimeout/2 {
		t.Errorf("the stuck client was dropped after %v, before its write timeout", took)
	}
	waitFor(t, "no clients", func() bool { return h.obs.clients.Load() == 0 })
	dropped := h.logs.FilterMessage("event stream client dropped").All()
	if len(dropped) != 1 || dropped[0].ContextMap()["run_id"] != runA {
		t.Errorf("drop log lines: %+v", dropped)
	}
}

type atomicCounter struct {
	mu sync.Mutex
	n  uint64
}

func (c *atomicCounter) add() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

func (c *atomicCounter) load() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestEventsDeadlineReset makes sure a stream's per-batch write deadline
// does not outlive it on a kept-alive connection (net/http clears it after
// each request; the design relies on that).
func TestEventsDeadlineReset(t *testing.T) {
	l := newMemLog(runLog(t, runA, 4)...)
	h := newHarness(t, Config{WriteTimeout: 50 * time.Millisecond}, streamService(l, fixed(runs.Succeeded)))
	client := h.srv.Client()
	resp, err := client.Get(h.srv.URL + "/v1/runs/" + runA + "/events")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	time.Sleep(200 * time.Millisecond)

	reused := false
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	})
	req, _ := http.NewRequestWithContext(ctx, "GET", h.srv.URL+"/healthz", nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatalf("next request on the connection: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !reused {
		t.Errorf("status %d, connection reused %v", resp.StatusCode, reused)
	}
}

// TestEventsNDJSON checks the JSON lines alternative: same envelopes, one
// per line, verbatim, no pings, ends at run.completed.
func TestEventsNDJSON(t *testing.T) {
	all := runLog(t, runA, 8)
	l := newMemLog(all[:3]...)
	h := newHarness(t, Config{PingInterval: 5 * time.Millisecond}, streamService(l, fixed(runs.Running)))
	go func() {
		time.Sleep(60 * time.Millisecond) // long enough for pings, were there any
		l.append(all[3:]...)
	}()
	resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events", "", "Accept", "text/event-stream;q=0.5, application/x-ndjson")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(all) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(all), b)
	}
	for i, line := range lines {
		if line != string(all[i].JSON) {
			t.Errorf("line %d = %s\nwant %s", i, line, all[i].JSON)
		}
		validateOpenAPI(t, "ndjson-line", []byte(line))
	}
}

func TestPrefersNDJSON(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                     false,
		"*/*":                  false,
		"text/event-stream":    false,
		"application/x-ndjson": true,
		"application/json, application/x-ndjson;q=0.9":  true,
		"application/x-ndjson, text/event-stream":       false,
		"application/x-ndjson;q=0.4, text/event-stream": false,
		"text/event-stream;q=0.1, application/x-ndjson": true,
		"application/x-ndjson;q=0":                      false,
		"application/x-ndjson;q=bad":                    false,
	} {
		var hdr []string
		if accept != "" {
			hdr = []string{accept}
		}
		if got := prefersNDJSON(hdr); got != want {
			t.Errorf("Accept %q: ndjson %v, want %v", accept, got, want)
		}
	}
}

// TestEventsMultilineEnvelope checks an envelope with line breaks (which
// the store should never hold) still reaches both kinds of client as the
// same JSON.
func TestEventsMultilineEnvelope(t *testing.T) {
	ev := storedEvent(t, runA, 1, runs.EventRunCompleted, runs.RunCompletedData{Status: runs.Succeeded})
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, ev.JSON, "", "\r\n  "); err != nil {
		t.Fatal(err)
	}
	ev.JSON = bytes.ReplaceAll(pretty.Bytes(), []byte("\r\n  \"agent\""), []byte("\r  \"agent\""))
	l := newMemLog(ev)
	h := newHarness(t, Config{}, streamService(l, fixed(runs.Running)))

	var compact bytes.Buffer
	if err := json.Compact(&compact, ev.JSON); err != nil {
		t.Fatal(err)
	}
	_, b := h.do(t, "GET", "/v1/runs/"+runA+"/events", "")
	p := newEventSource()
	p.feed(b)
	if len(p.events) != 1 {
		t.Fatalf("events %+v", p.events)
	}
	var got bytes.Buffer
	if err := json.Compact(&got, []byte(p.events[0].data)); err != nil || got.String() != compact.String() {
		t.Errorf("SSE data %q (%v), want the JSON %s", p.events[0].data, err, compact.String())
	}
	_, b = h.do(t, "GET", "/v1/runs/"+runA+"/events", "", "Accept", "application/x-ndjson")
	if string(b) != compact.String()+"\n" {
		t.Errorf("NDJSON %q, want %q", b, compact.String()+"\n")
	}
}

// TestEventsNoDuplicates checks that an event the cursor delivers twice
// is written once.
func TestEventsNoDuplicates(t *testing.T) {
	all := runLog(t, runA, 4)
	batches := [][]runs.StoredEvent{all[:3], all[2:]}
	cur := &fakeCursor{next: func(ctx context.Context, max int) ([]runs.StoredEvent, error) {
		if len(batches) == 0 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		b := batches[0]
		batches = batches[1:]
		return b, nil
	}}
	svc := &fakeService{
		get:    func(_ context.Context, id string) (runs.Run, error) { return sampleRun(id, runs.Running), nil },
		events: func(context.Context, string, uint64) (runs.Cursor, error) { return cur, nil },
	}
	h := newHarness(t, Config{}, svc)
	_, b := h.do(t, "GET", "/v1/runs/"+runA+"/events", "")
	p := newEventSource()
	p.feed(b)
	var ids []string
	for _, ev := range p.events {
		ids = append(ids, ev.lastEventID)
	}
	if strings.Join(ids, ",") != "1,2,3,4" {
		t.Errorf("ids %v, want 1,2,3,4", ids)
	}
}

func TestEventsErrors(t *testing.T) {
	svc := &fakeService{
		get: func(_ context.Context, id string) (runs.Run, error) {
			if id == runB {
				return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
			}
			return sampleRun(id, runs.Running), nil
		},
		events: func(context.Context, string, uint64) (runs.Cursor, error) {
			return nil, errors.New("stream lookup: nats: timeout")
		},
	}
	h := newHarness(t, Config{}, svc)
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/runs/" + runB + "/events", 404, CodeNotFound},
		{"/v1/runs/nope/events", 404, CodeNotFound},
	} {
		resp, b := h.do(t, "GET", c.path, "")
		if e := errorBody(t, b); resp.StatusCode != c.status || e.Code != c.code {
			t.Errorf("%s: %d %+v", c.path, resp.StatusCode, e)
		}
	}

	// A store that fails the open (here the cursor, then the log's last
	// event for a resume) gets an SSE client an empty 200 stream that
	// tells it to reconnect, since an EventSource gives up for good on
	// any other status; an NDJSON client, which does not reconnect by
	// itself, gets the error.
	svc.lastEventSeq = func(context.Context, string) (uint64, error) {
		return 0, errors.New("last event: nats: timeout")
	}
	for _, resume := range []string{"", "3"} {
		var header []string
		if resume != "" {
			header = []string{"Last-Event-ID", resume}
		}
		resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events", "", header...)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != contentTypeSSE ||
			!strings.Contains(string(b), "\nretry: 2000\n\n") || strings.Contains(string(b), "id:") {
			t.Errorf("resume %q, store down: %d %q %q, want 200, an SSE stream with a reconnect delay and no event", resume, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		resp, b = h.do(t, "GET", "/v1/runs/"+runA+"/events", "", append(header, "Accept", contentTypeNDJSON)...)
		if e := errorBody(t, b); resp.StatusCode != http.StatusInternalServerError || e.Code != CodeInternal {
			t.Errorf("resume %q, store down, NDJSON: %d %+v, want 500 %s", resume, resp.StatusCode, e, CodeInternal)
		}
	}
	// AG-UI events are server-sent events too, read by EventSources.
	resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?format=ag-ui", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "\nretry: 2000\n\n") || strings.Contains(string(b), "data:") {
		t.Errorf("AG-UI, store down: %d %q, want 200, an SSE stream with a reconnect delay and no event", resp.StatusCode, b)
	}
	if warned := h.logs.FilterMessage("event stream not opened; the client is told to reconnect").Len(); warned != 3 {
		t.Errorf("%d warnings of a stream not opened, want 3 (one per SSE attempt)", warned)
	}
	// So does a store that fails the tenant's check of the run, before
	// the stream's own handler; the run's other routes still get the
	// error.
	down := &fakeService{get: func(context.Context, string) (runs.Run, error) {
		return runs.Run{}, errors.New("get run: nats: timeout")
	}}
	hd := newHarness(t, Config{}, down)
	resp, b = hd.do(t, "GET", "/v1/runs/"+runA+"/events", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "\nretry: 2000\n\n") {
		t.Errorf("the run's record unreadable: %d %q, want 200, an SSE stream with a reconnect delay", resp.StatusCode, b)
	}
	resp, b = hd.do(t, "GET", "/v1/runs/"+runA, "")
	if e := errorBody(t, b); resp.StatusCode != http.StatusInternalServerError || e.Code != CodeInternal {
		t.Errorf("GET of the run, its record unreadable: %d %+v, want 500 %s", resp.StatusCode, e, CodeInternal)
	}

	// A cursor that fails mid-stream ends the stream; the client
	// reconnects with the last id it got.
	all := runLog(t, runA, 5)
	calls := 0
	cur := &fakeCursor{next: func(context.Context, int) ([]runs.StoredEvent, error) {
		calls++
		if calls == 1 {
			return all[:2], nil
		}
		return nil, errors.New("consumer deleted")
	}}
	svc.events = func(context.Context, string, uint64) (runs.Cursor, error) { return cur, nil }
	h = newHarness(t, Config{}, svc)
	resp, b = h.do(t, "GET", "/v1/runs/"+runA+"/events", "")
	p := newEventSource()
	p.feed(b)
	if resp.StatusCode != 200 || len(p.events) != 2 || p.lastEventID != "2" {
		t.Errorf("status %d, events %+v", resp.StatusCode, p.events)
	}
	warned := h.logs.FilterMessage("event stream ended early").All()
	if len(warned) != 1 || !strings.Contains(fmt.Sprint(warned[0].ContextMap()["error"]), "consumer deleted") {
		t.Errorf("warn lines %+v", warned)
	}
}

// A client resumed past the end of a running run's log (a Last-Event-ID
// beyond any event) waits for the run, gets only the events after its
// resume point, and its stream ends with the run, even when run.completed
// comes at or before that point.
func TestEventsResumePastEndOfRunningRun(t *testing.T) {
	all := runLog(t, runA, 10)
	for _, c := range []struct {
		name   string
		resume string
		want   []string // the ids written
	}{
		{"completed after the resume point", "8", []string{"9", "10"}},
		{"completed before the resume point", "50", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newMemLog(all[:5]...)
			var status atomic.Value
			status.Store(runs.Running)
			h := newHarness(t, Config{}, streamService(l, func() runs.State { return status.Load().(runs.State) }))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp := connectES(ctx, t, h.srv.Client(), h.srv.URL+"/v1/runs/"+runA+"/events", c.resume)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			waitFor(t, "the cursor to open", func() bool { return l.opened.Load() == 1 })
			if got := l.cursorAfters(); got[0] != 5 {
				t.Errorf("cursor opened after %d, want the log's end (5)", got[0])
			}
			l.append(all[5:]...)
			status.Store(runs.Succeeded)
			b, err := io.ReadAll(resp.Body) // ends only if the stream does
			if err != nil {
				t.Fatal(err)
			}
			p := newEventSource()
			p.feed(b)
			var ids []string
			for _, ev := range p.events {
				ids = append(ids, ev.lastEventID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(c.want) {
				t.Fatalf("events %v, want %v", ids, c.want)
			}
		})
	}
}

// When the gateway drains, an open stream ends at once with a hint to
// reconnect (a comment and a short retry), and a new stream is refused
// with 503 shutting_down, so that a load balancer sends it to another
// replica.
func TestEventsEndOnDrain(t *testing.T) {
	l := newMemLog(runLog(t, runA, 10)[:3]...)
	draining := make(chan struct{})
	h := newHarness(t, Config{Draining: draining}, streamService(l, fixed(runs.Running)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := connectES(ctx, t, h.srv.Client(), h.srv.URL+"/v1/runs/"+runA+"/events", "")
	defer resp.Body.Close()
	// The drain starts once the client has every stored event: a stream
	// that sees the drain first ends before sending them, which loses
	// nothing (the client resumes elsewhere) but is not what this tests.
	p := newEventSource()
	var b []byte
	buf := make([]byte, 4096)
	for len(p.events) < 3 {
		n, err := resp.Body.Read(buf)
		p.feed(buf[:n])
		b = append(b, buf[:n]...)
		if err != nil {
			t.Fatalf("stream ended after %d events: %v: %q", len(p.events), err, b)
		}
	}
	close(draining)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p.feed(rest)
	b = append(b, rest...)
	if len(p.events) != 3 || p.retry != 250 {
		t.Fatalf("events %d retry %d, want 3 events then retry 250: %q", len(p.events), p.retry, b)
	}
	if last := p.comments[len(p.comments)-1]; !strings.Contains(last, "reconnect with Last-Event-ID") {
		t.Errorf("last comment %q", last)
	}
	resp2, b2 := h.do(t, "GET", "/v1/runs/"+runA+"/events", "", "Last-Event-ID", "3")
	e := decodeError(t, b2)
	if resp2.StatusCode != http.StatusServiceUnavailable || e.Code != CodeShuttingDown || resp2.Header.Get("Retry-After") == "" {
		t.Fatalf("stream opened while draining: %d %+v", resp2.StatusCode, e)
	}
}
