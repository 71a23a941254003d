package api

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// esEvent is an event as an EventSource dispatches it to a listener.
type esEvent struct {
	typ         string // the event's type; "message" when none was given
	data        string
	lastEventID string
}

// eventSource interprets an event stream exactly as the WHATWG HTML
// standard's "event stream interpretation" section says a browser's
// EventSource does: lines end in CRLF, LF or CR; a leading BOM is dropped;
// a line starting with ":" is a comment; "field: value" loses one leading
// space of the value; event, data, id and retry are the fields, others are
// ignored; an empty line dispatches; an event without data is not
// dispatched; the last event id survives dispatch; an incomplete event at
// the end of the stream is discarded.
type eventSource struct {
	events      []esEvent
	comments    []string
	lastEventID string // the event source's last event ID string
	retry       int    // reconnection time in ms; -1 until a valid retry field

	idBuffer  string // the last event ID buffer
	dataBuf   string
	eventType string

	pending []byte
	started bool // the BOM check is done
	skipLF  bool // the previous chunk ended in CR: a leading LF belongs to it
}

func newEventSource() *eventSource { return &eventSource{retry: -1} }

// feed interprets the next bytes of the stream; lines may span calls.
func (p *eventSource) feed(b []byte) {
	p.pending = append(p.pending, b...)
	if !p.started {
		bom := []byte("\xef\xbb\xbf")
		if len(p.pending) < len(bom) && bytes.HasPrefix(bom, p.pending) {
			return
		}
		p.pending = bytes.TrimPrefix(p.pending, bom)
		p.started = true
	}
	for {
		if p.skipLF && len(p.pending) > 0 {
			if p.pending[0] == '\n' {
				p.pending = p.pending[1:]
			}
			p.skipLF = false
		}
		i := bytes.IndexAny(p.pending, "\r\n")
		if i < 0 {
			return
		}
		line := strings.ToValidUTF8(string(p.pending[:i]), "\uFFFD")
		if p.pending[i] == '\r' {
			if i+1 < len(p.pending) {
				if p.pending[i+1] == '\n' {
					i++
				}
			} else {
				p.skipLF = true
			}
		}
		p.pending = p.pending[i+1:]
		p.line(line)
	}
}

func (p *eventSource) line(l string) {
	switch {
	case l == "":
		p.dispatch()
	case l[0] == ':':
		p.comments = append(p.comments, l[1:])
	default:
		name, value := l, ""
		if i := strings.IndexByte(l, ':'); i >= 0 {
			name, value = l[:i], strings.TrimPrefix(l[i+1:], " ")
		}
		p.field(name, value)
	}
}

func (p *eventSource) field(name, value string) {
	switch name {
	case "event":
		p.eventType = value
	case "data":
		p.dataBuf += value + "\n"
	case "id":
		if !strings.Contains(value, "\x00") {
			p.idBuffer = value
		}
	case "retry":
		if value != "" && strings.Trim(value, "0123456789") == "" {
			if n, err := strconv.Atoi(value); err == nil {
				p.retry = n
			}
		}
	}
}

func (p *eventSource) dispatch() {
	p.lastEventID = p.idBuffer
	if p.dataBuf == "" {
		p.eventType = ""
		return
	}
	data := strings.TrimSuffix(p.dataBuf, "\n")
	typ := p.eventType
	if typ == "" {
		typ = "message"
	}
	p.events = append(p.events, esEvent{typ: typ, data: data, lastEventID: p.lastEventID})
	p.dataBuf, p.eventType = "", ""
}

// TestEventSourceParser checks the parser against the examples of the
// standard, so that the stream tests rest on a correct reading.
func TestEventSourceParser(t *testing.T) {
	parse := func(s string, chunk int) *eventSource {
		p := newEventSource()
		for len(s) > 0 {
			n := min(chunk, len(s))
			p.feed([]byte(s[:n]))
			s = s[n:]
		}
		return p
	}
	for _, chunk := range []int{1, 2, 3, 1 << 20} {
		p := parse("data: YHOO\ndata: +2\ndata: 10\n\n", chunk)
		if len(p.events) != 1 || p.events[0] != (esEvent{"message", "YHOO\n+2\n10", ""}) {
			t.Errorf("chunk %d: stock example: %+v", chunk, p.events)
		}

		p = parse(": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n", chunk)
		want := []esEvent{{"message", "first event", "1"}, {"message", "second event", ""}, {"message", " third event", ""}}
		if !equalEvents(p.events, want) || len(p.comments) != 1 || p.comments[0] != " test stream" {
			t.Errorf("chunk %d: id example: %+v %q", chunk, p.events, p.comments)
		}

		p = parse("data\n\ndata\ndata\n\ndata:", chunk)
		if want := []esEvent{{"message", "", ""}, {"message", "\n", ""}}; !equalEvents(p.events, want) {
			t.Errorf("chunk %d: empty data example: %+v", chunk, p.events)
		}

		p = parse("\xef\xbb\xbfdata:test\r\n\r\ndata: test\r\revent: add\rdata: x\r\nretry: 1500\nretry: 15x\n\n", chunk)
		want = []esEvent{{"message", "test", ""}, {"message", "test", ""}, {"add", "x", ""}}
		if !equalEvents(p.events, want) || p.retry != 1500 {
			t.Errorf("chunk %d: CR/CRLF/BOM: %+v retry %d", chunk, p.events, p.retry)
		}

		p = parse("id: 7\nevent: x\n\nid: 8\x00\ndata: d\n\n", chunk)
		if want := []esEvent{{"message", "d", "7"}}; !equalEvents(p.events, want) || p.lastEventID != "7" {
			t.Errorf("chunk %d: id without data, NUL id: %+v last %q", chunk, p.events, p.lastEventID)
		}
	}
}

func equalEvents(a, b []esEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// connectES opens the run's event stream as an EventSource would, with
// lastEventID when it has one.
func connectES(ctx context.Context, t *testing.T, client *http.Client, url, lastEventID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestEventSourceSemantics follows a run as a browser would: it drops the
// connection in the middle of an event, reconnects with the last event id,
// and must end with every event exactly once, in order, byte for byte;
// then a reconnection after the end gets 204, which stops an EventSource.
func TestEventSourceSemantics(t *testing.T) {
	const n = 60
	all := runLog(t, runA, n)
	l := newMemLog(all[:25]...)
	status := runs.Running
	done := make(chan struct{})
	svc := streamService(l, func() runs.State {
		select {
		case <-done:
			return runs.Succeeded
		default:
			return status
		}
	})
	h := newHarness(t, Config{BatchSize: 4}, svc)
	url := h.srv.URL + "/v1/runs/" + runA + "/events"
	client := h.srv.Client()
	p := newEventSource()

	// First connection: read byte by byte, stop 17 bytes into the event
	// after the tenth, as a network failure would.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, cancel1 := context.WithCancel(ctx)
	resp := connectES(c1, t, client, url, "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	extra := -1
	for extra != 0 {
		b, err := br.ReadByte()
		if err != nil {
			t.Fatalf("first connection: %v after %d events", err, len(p.events))
		}
		p.feed([]byte{b})
		if extra > 0 {
			extra--
		} else if extra < 0 && len(p.events) == 10 {
			extra = 17
		}
	}
	cancel1()
	resp.Body.Close()
	if p.lastEventID != "10" || p.retry != 2000 {
		t.Fatalf("after first connection: last id %q, retry %d", p.lastEventID, p.retry)
	}

	// The run goes on while the client is away.
	l.append(all[25:]...)
	close(done)

	// Reconnection, as the EventSource does: same URL, Last-Event-ID.
	resp = connectES(ctx, t, client, url, p.lastEventID)
	if resp.StatusCode != 200 {
		t.Fatalf("reconnect: status %d", resp.StatusCode)
	}
	for {
		buf := make([]byte, 1000)
		k, err := resp.Body.Read(buf)
		p.feed(buf[:k])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reconnect: %v", err)
		}
	}
	resp.Body.Close()

	if len(p.events) != n {
		t.Fatalf("got %d events, want %d", len(p.events), n)
	}
	for i, ev := range p.events {
		want := all[i]
		if ev.lastEventID != strconv.FormatUint(want.Seq, 10) || ev.typ != string(want.Type) || ev.data != string(want.JSON) {
			t.Errorf("event %d = %+v\nwant id %d type %s data %s", i, ev, want.Seq, want.Type, want.JSON)
		}
	}

	// The stream ended at run.completed; the EventSource reconnects once
	// more, and 204 tells it to stop.
	resp = connectES(ctx, t, client, url, p.lastEventID)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("reconnect after the end: status %d, want 204", resp.StatusCode)
	}
	if got := l.cursorAfters(); len(got) != 2 || got[0] != 0 || got[1] != 10 {
		t.Errorf("cursors opened after %v, want [0 10]", got)
	}
}
