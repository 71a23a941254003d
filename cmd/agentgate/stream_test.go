package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

func httpResponse(status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
}

// readAll reads every event of the stream.
func readAll(r *sseReader) ([]sseEvent, error) {
	var evs []sseEvent
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// sseCases are streams and the events an EventSource makes of them.
var sseCases = []struct {
	name  string
	in    string
	want  []sseEvent
	retry time.Duration
}{
	{"gateway", "retry: 2000\n\nid: 1\nevent: run.queued\ndata: {\"seq\":1}\n\n: ping\n\nid: 2\nevent: run.started\ndata: {\"seq\":2}\n\n",
		[]sseEvent{{ID: "1", Type: "run.queued", Data: []byte(`{"seq":1}`)}, {ID: "2", Type: "run.started", Data: []byte(`{"seq":2}`)}}, 2 * time.Second},
	{"crlf and cr", "id: 1\r\ndata: a\r\n\r\nid: 2\rdata: b\r\r",
		[]sseEvent{{ID: "1", Data: []byte("a")}, {ID: "2", Data: []byte("b")}}, 0},
	{"data lines join", "data: a\ndata: b\ndata\n\n", []sseEvent{{Data: []byte("a\nb\n")}}, 0},
	{"comments", ": ping\n\n:x\ndata: y\n\n", []sseEvent{{Data: []byte("y")}}, 0},
	{"one space dropped", "data:x\ndata:  y\n\n", []sseEvent{{Data: []byte("x\n y")}}, 0},
	{"id persists", "id: 5\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
		[]sseEvent{{ID: "5", Data: []byte("a")}, {ID: "5", Data: []byte("b")}, {ID: "", Data: []byte("c")}}, 0},
	{"id with NUL ignored", "id: 7\ndata: a\n\nid: 8\x00\ndata: b\n\n",
		[]sseEvent{{ID: "7", Data: []byte("a")}, {ID: "7", Data: []byte("b")}}, 0},
	{"byte order mark", "\xEF\xBB\xBFdata: a\n\n", []sseEvent{{Data: []byte("a")}}, 0},
	{"incomplete at the end", "data: a\n\ndata: b\n", []sseEvent{{Data: []byte("a")}}, 0},
	{"incomplete line at the end", "data: a\n\ndata: b", []sseEvent{{Data: []byte("a")}}, 0},
	{"unknown fields", "foo: bar\nDATA: x\ndata: a\n\n", []sseEvent{{Data: []byte("a")}}, 0},
	{"type resets", "event: x\ndata: a\n\ndata: b\n\n", []sseEvent{{Type: "x", Data: []byte("a")}, {Data: []byte("b")}}, 0},
	{"no data, no event", "event: x\nid: 3\n\ndata: a\n\n", []sseEvent{{ID: "3", Data: []byte("a")}}, 0},
	{"empty data dispatches", "data\n\n", []sseEvent{{Data: []byte("")}}, 0},
	{"retry digits only", "retry: 1s\nretry: 15x\ndata: a\n\n", []sseEvent{{Data: []byte("a")}}, 0},
	{"retry", "retry: 250\ndata: a\n\n", []sseEvent{{Data: []byte("a")}}, 250 * time.Millisecond},
	{"empty", "", nil, 0},
}

func TestSSEReader(t *testing.T) {
	for _, tc := range sseCases {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.in)
			if oneByte {
				// Every line end and BOM split across reads.
				r = iotest.OneByteReader(r)
			}
			rd := newSSEReader(r, 1024)
			got, err := readAll(rd)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !sameEvents(got, tc.want) {
				t.Errorf("%s (one byte a read %v):\n got %q\nwant %q", tc.name, oneByte, got, tc.want)
			}
			if retry, ok := rd.Retry(); retry != tc.retry || ok != (tc.retry != 0) {
				t.Errorf("%s: retry %v %v, want %v", tc.name, retry, ok, tc.retry)
			}
		}
	}
}

func sameEvents(a, b []sseEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Type != b[i].Type || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func TestSSEReaderBounds(t *testing.T) {
	for name, in := range map[string]string{
		"a long line":      "data: " + strings.Repeat("x", 200) + "\n\n",
		"a long event":     strings.Repeat("data: "+strings.Repeat("x", 30)+"\n", 10) + "\n",
		"a long comment":   ":" + strings.Repeat("x", 200) + "\n",
		"no line end ever": strings.Repeat("x", 500),
	} {
		_, err := readAll(newSSEReader(strings.NewReader(in), 100))
		if !errors.Is(err, errEventTooLarge) {
			t.Errorf("%s: %v, want errEventTooLarge", name, err)
		}
	}
	// Within the bound, the same stream reads.
	if evs, err := readAll(newSSEReader(strings.NewReader("data: "+strings.Repeat("x", 90)+"\n\n"), 100)); err != nil || len(evs) != 1 {
		t.Errorf("an event within the bound: %v %v", evs, err)
	}
}

// encodeSSE writes events so that a reader makes the same events again.
func encodeSSE(evs []sseEvent) []byte {
	var b bytes.Buffer
	for _, ev := range evs {
		fmt.Fprintf(&b, "id: %s\n", ev.ID)
		if ev.Type != "" {
			fmt.Fprintf(&b, "event: %s\n", ev.Type)
		}
		for _, line := range strings.Split(string(ev.Data), "\n") {
			fmt.Fprintf(&b, "data: %s\n", line)
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

func FuzzSSEReader(f *testing.F) {
	for _, tc := range sseCases {
		f.Add([]byte(tc.in), false)
		f.Add([]byte(tc.in), true)
	}
	f.Add([]byte("data: "+strings.Repeat("y", 5000)+"\n\n"), false)
	f.Add([]byte("\xEF\xBB\xBF\xEF\xBB\xBFdata: a\r\n\r\n"), true)
	f.Add([]byte("\xEF\xBBdata: a\n\n"), true)
	f.Fuzz(func(t *testing.T, in []byte, oneByte bool) {
		var r io.Reader = bytes.NewReader(in)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		evs, err := readAll(newSSEReader(r, 4096))
		if err != nil && !errors.Is(err, errEventTooLarge) {
			t.Fatalf("read error %v from a bytes.Reader", err)
		}
		for _, ev := range evs {
			if strings.ContainsAny(ev.ID, "\x00\r\n") || strings.ContainsAny(ev.Type, "\r\n") || bytes.ContainsAny(ev.Data, "\r") {
				t.Fatalf("event %q holds what a line cannot", ev)
			}
			if len(ev.Data) > 4096 {
				t.Fatalf("event of %d bytes past the bound", len(ev.Data))
			}
		}
		// What was read, written again, reads the same.
		again, err := readAll(newSSEReader(bytes.NewReader(encodeSSE(evs)), 1<<20))
		if err != nil || !sameEvents(evs, again) {
			t.Fatalf("round trip: %q\nthen %q (%v)", evs, again, err)
		}
	})
}

// fakeGateway serves a run's event stream from a script: the n-th
// request (from 0) gets script(n, w, r).
type fakeGateway struct {
	script func(n int, w http.ResponseWriter, r *http.Request)

	mu      sync.Mutex
	resumes []string
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	n := len(g.resumes)
	g.resumes = append(g.resumes, r.Header.Get("Last-Event-ID"))
	g.mu.Unlock()
	if r.URL.Path != "/v1/runs/run-1/events" || r.Header.Get("Accept") != "text/event-stream" {
		http.Error(w, "unexpected request "+r.URL.Path, http.StatusTeapot)
		return
	}
	g.script(n, w, r)
}

func (g *fakeGateway) requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.resumes...)
}

// sseEvents writes the events seqs of run-1, the last run.completed when
// completed.
func sseEvents(w http.ResponseWriter, completed bool, seqs ...uint64) {
	w.Header().Set("Content-Type", "text/event-stream")
	for i, seq := range seqs {
		typ := "message.delta"
		if completed && i == len(seqs)-1 {
			typ = "run.completed"
		}
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: {\"v\":1,\"run_id\":\"run-1\",\"seq\":%d,\"type\":%q,\"data\":{\"status\":\"succeeded\"}}\n\n", seq, typ, seq, typ)
	}
	w.(http.Flusher).Flush()
}

// testFollower follows run-1 on srv with a clock that only sleeps move.
func testFollower(t *testing.T, srv *httptest.Server) (*follower, *[]uint64, *[]time.Duration, *[]error) {
	t.Helper()
	c, err := newClient(srv.URL, "", "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	var got []uint64
	var waits []time.Duration
	var errs []error
	f := newFollower(c, "run-1", 0, func(ev streamEvent) error {
		got = append(got, ev.Env.Seq)
		return nil
	})
	clock := time.Unix(0, 0)
	f.now = func() time.Time { return clock }
	f.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		clock = clock.Add(d)
		return ctx.Err()
	}
	f.retrying = func(err error, _ time.Duration) { errs = append(errs, err) }
	return f, &got, &waits, &errs
}

func TestFollowerResumesWithoutRepeats(t *testing.T) {
	g := &fakeGateway{script: func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			sseEvents(w, false, 1, 2, 3)
			panic(http.ErrAbortHandler) // the connection drops
		case 1:
			sseEvents(w, false, 2, 3, 4) // a replica that resends what it had
		default:
			sseEvents(w, true, 5)
		}
	}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	f, got, waits, errs := testFollower(t, srv)
	done, err := f.follow(context.Background())
	if err != nil || done == nil || done.Seq != 5 {
		t.Fatalf("follow = %+v, %v", done, err)
	}
	if !reflect.DeepEqual(*got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("delivered %v, want each of 1..5 once", *got)
	}
	if want := []string{"", "3", "4"}; !reflect.DeepEqual(g.requests(), want) {
		t.Fatalf("Last-Event-ID of the requests %q, want %q", g.requests(), want)
	}
	var dropped *droppedError
	if len(*errs) != 2 || !errors.As((*errs)[0], &dropped) || !errors.Is((*errs)[1], errStreamEnded) {
		t.Fatalf("reconnections for %v", *errs)
	}
	// Each connection that brought events resets the backoff.
	if !reflect.DeepEqual(*waits, []time.Duration{reconnectMinDelay, reconnectMinDelay}) {
		t.Fatalf("waits %v", *waits)
	}
}

func TestFollowerEndsOn204(t *testing.T) {
	g := &fakeGateway{script: func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			sseEvents(w, false, 8, 9)
			return // the stream ends without run.completed
		}
		w.WriteHeader(http.StatusNoContent)
	}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	f, got, _, _ := testFollower(t, srv)
	f.last = 7
	done, err := f.follow(context.Background())
	if err != nil || done != nil || !reflect.DeepEqual(*got, []uint64{8, 9}) {
		t.Fatalf("follow = %+v, %v after %v", done, err, *got)
	}
	if want := []string{"7", "9"}; !reflect.DeepEqual(g.requests(), want) {
		t.Fatalf("Last-Event-ID of the requests %q, want %q", g.requests(), want)
	}
}

func TestFollowerDoesNotRetryClientErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{404, "not_found"}, {401, "unauthenticated"}, {400, "invalid_field"}} {
		g := &fakeGateway{script: func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":"no"}}`, tc.code)
		}}
		srv := httptest.NewServer(g)
		f, _, _, _ := testFollower(t, srv)
		_, err := f.follow(context.Background())
		var ae *apiError
		if !errors.As(err, &ae) || ae.Code != tc.code || len(g.requests()) != 1 {
			t.Errorf("%d: follow = %v after %d requests", tc.status, err, len(g.requests()))
		}
		srv.Close()
	}
}

func TestFollowerBacksOffAndGivesUp(t *testing.T) {
	g := &fakeGateway{script: func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			sseEvents(w, false, 1)
			panic(http.ErrAbortHandler)
		}
		if n >= 5 {
			w.Header().Set("Retry-After", "20")
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"code":"shutting_down","message":"draining"}}`)
	}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	f, _, waits, _ := testFollower(t, srv)
	_, err := f.follow(context.Background())
	var ae *apiError
	if !errors.As(err, &ae) || ae.Code != "shutting_down" || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("follow = %v", err)
	}
	// Doubling from the least wait to the most, then what Retry-After
	// asks, until giveUp has passed.
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}
	if len(*waits) < len(want)+1 || !reflect.DeepEqual((*waits)[:len(want)], want) {
		t.Fatalf("waits %v, want them to begin %v", *waits, want)
	}
	var total time.Duration
	for _, w := range (*waits)[len(want):] {
		if w != 20*time.Second {
			t.Fatalf("wait %v after Retry-After: 20", w)
		}
	}
	for _, w := range *waits {
		total += w
	}
	if total < reconnectGiveUp || total > reconnectGiveUp+30*time.Second {
		t.Fatalf("gave up after %v of waits, want about %v", total, reconnectGiveUp)
	}
}

func TestFollowerFirstConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	c, err := newClient(gone, "", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	f := newFollower(c, "run-1", 0, func(streamEvent) error { return nil })
	f.sleep = func(context.Context, time.Duration) error { t.Fatal("retried a gateway never reached"); return nil }
	_, err = f.follow(context.Background())
	var ce *connectError
	if !errors.As(err, &ce) {
		t.Fatalf("follow = %v, want a connectError", err)
	}
}

func TestFollowerReconnectsAnIdleStream(t *testing.T) {
	g := &fakeGateway{script: func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			sseEvents(w, false, 1)
			<-r.Context().Done() // then nothing, not even a ping, until the client goes
			return
		}
		sseEvents(w, true, 2)
	}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	f, got, _, errs := testFollower(t, srv)
	f.idle = 50 * time.Millisecond
	done, err := f.follow(context.Background())
	if err != nil || done == nil || !reflect.DeepEqual(*got, []uint64{1, 2}) {
		t.Fatalf("follow = %+v, %v after %v", done, err, *got)
	}
	if len(*errs) != 1 || !errors.Is((*errs)[0], errIdle) {
		t.Fatalf("reconnected for %v, want the idle timeout", *errs)
	}
}

func TestFollowerRejectsAMismatchedEnvelope(t *testing.T) {
	g := &fakeGateway{script: func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 3\ndata: {\"seq\":4,\"type\":\"x\"}\n\n")
	}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	f, got, _, _ := testFollower(t, srv)
	if _, err := f.follow(context.Background()); err == nil || !strings.Contains(err.Error(), "seq 4") || len(*got) != 0 {
		t.Fatalf("follow = %v after %v", err, *got)
	}
}
