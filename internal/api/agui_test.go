package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/agui"
	"github.com/agentgate/agentgate/internal/agui/aguitest"
	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/runs"
)

// aguiSampleLog is the log of a realistic run of id: reasoning, text, a
// tool call that asks for an approval, its answer, a file change, more
// text, usage, and success.
func aguiSampleLog(t testing.TB, id string) []runs.StoredEvent {
	t.Helper()
	var evs []runs.StoredEvent
	add := func(typ runs.EventType, data any) {
		evs = append(evs, storedEvent(t, id, uint64(len(evs)+1), typ, data))
	}
	input := json.RawMessage(`{"command":"touch one.txt","description":"make the file"}`)
	add(runs.EventRunQueued, runs.RunQueuedData{Agent: "claude", Position: 1})
	add(runs.EventRunStarted, runs.RunStartedData{Prompt: "Make one.txt", Permission: runs.WorkspaceWrite, Cwd: "/w", VersionStatus: "verified"})
	add(runs.EventSessionStarted, runs.SessionStartedData{SessionID: "sess-1", Model: "claude-opus", Tools: []string{"Bash"}})
	add(runs.EventTurnStarted, runs.TurnStartedData{Turn: 1, MessageID: "turn-1", Text: "Make one.txt"})
	add(runs.EventReasoningDelta, runs.DeltaData{ID: "th_1", Text: "The user wants "})
	add(runs.EventReasoningDelta, runs.DeltaData{ID: "th_1", Text: "a file."})
	add(runs.EventReasoningCompleted, runs.ReasoningData{Text: "The user wants a file.", Visibility: runs.VisibilityFull})
	add(runs.EventMessageDelta, runs.MessageData{MessageID: "msg_1", Text: "I will "})
	add(runs.EventMessageDelta, runs.MessageData{MessageID: "msg_1", Text: "create it."})
	add(runs.EventMessageCompleted, runs.MessageData{MessageID: "msg_1", Text: "I will create it."})
	add(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: "toolu_1", Name: "Bash", Input: input})
	add(runs.EventUsageUpdated, runs.UsageData{Usage: runs.Usage{InputTokens: 1200, CacheReadTokens: 1000, OutputTokens: 40}})
	add(runs.EventApprovalRequested, runs.ApprovalRequestedData{ID: "approval_1", ToolCallID: "toolu_1", Tool: "Bash",
		Input: input, Options: runs.Decisions, ExpiresAt: t0.Add(5 * time.Minute)})
	add(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: "approval_1", Decision: runs.Allow, Reason: runs.ResolvedByClient})
	add(runs.EventToolCallOutput, runs.DeltaData{ID: "toolu_1", Text: ""})
	add(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: "toolu_1", Output: ""})
	add(runs.EventFileChanged, runs.FileChangedData{Path: "one.txt", Kind: runs.ChangeAdd, ToolCallID: "toolu_1"})
	add(runs.EventMessageDelta, runs.MessageData{MessageID: "msg_2", Text: "Done: "})
	add(runs.EventMessageDelta, runs.MessageData{MessageID: "msg_2", Text: "one.txt exists."})
	add(runs.EventMessageCompleted, runs.MessageData{MessageID: "msg_2", Text: "Done: one.txt exists."})
	add(runs.EventUsageUpdated, runs.UsageData{Usage: runs.Usage{InputTokens: 2500, CacheReadTokens: 2000, OutputTokens: 70}, CostUSD: floatPtr(0.012)})
	add(runs.EventTurnCompleted, runs.TurnCompletedData{Turn: 1, Status: runs.Succeeded})
	add(runs.EventRunCompleted, runs.RunCompletedData{Status: runs.Succeeded, Result: "Done: one.txt exists.",
		Usage: runs.Usage{InputTokens: 2500, CacheReadTokens: 2000, OutputTokens: 70}, CostUSD: floatPtr(0.012), DurationMS: 900})
	return evs
}

// aguiFailedLog is the log of a run that fails to authenticate.
func aguiFailedLog(t testing.TB, id string) []runs.StoredEvent {
	t.Helper()
	return []runs.StoredEvent{
		storedEvent(t, id, 1, runs.EventRunQueued, runs.RunQueuedData{Agent: "claude", Position: 1}),
		storedEvent(t, id, 2, runs.EventRunStarted, runs.RunStartedData{Prompt: "hi", Permission: runs.ReadOnly, Cwd: "/w", VersionStatus: "verified"}),
		storedEvent(t, id, 3, runs.EventWarning, runs.WarningData{Code: "api_error", Message: "401 from the model server"}),
		storedEvent(t, id, 4, runs.EventRunCompleted, runs.RunCompletedData{Status: runs.Failed, DurationMS: 10,
			Error: runs.NewRunError(runs.NotAuthenticated, "Failed to authenticate", "run `claude setup-token` or set ANTHROPIC_API_KEY")}),
	}
}

func floatPtr(v float64) *float64 { return &v }

// aguiFrame is one AG-UI event as an EventSource reads it.
type aguiFrame struct {
	id   string
	data string
}

// aguiFrames parses an AG-UI stream, failing unless each event is a
// message (no event field), has an id, and passes the Checker.
func aguiFrames(t *testing.T, b []byte) []aguiFrame {
	t.Helper()
	p := newEventSource()
	p.feed(b)
	var c aguitest.Checker
	var out []aguiFrame
	for _, e := range p.events {
		if e.typ != "message" || e.lastEventID == "" {
			t.Fatalf("event %+v: want a message with an id", e)
		}
		if err := c.Check([]byte(e.data)); err != nil {
			t.Fatalf("%v\n%s", err, e.data)
		}
		out = append(out, aguiFrame{e.lastEventID, e.data})
	}
	return out
}

// aguiWant is what the stream of evs must be: the Translator's events, each
// with its id.
func aguiWant(evs []runs.StoredEvent, opts agui.Options) []aguiFrame {
	tr := agui.New(opts)
	var out []aguiFrame
	for _, ev := range evs {
		got := tr.Translate(ev.JSON)
		for k, e := range got {
			id := strconv.FormatUint(ev.Seq, 10)
			if k < len(got)-1 {
				id += "." + strconv.Itoa(k+1)
			}
			out = append(out, aguiFrame{id, string(e.JSON)})
		}
	}
	return out
}

func frameType(t *testing.T, f aguiFrame) string {
	t.Helper()
	var e struct{ Type string }
	if err := json.Unmarshal([]byte(f.data), &e); err != nil {
		t.Fatal(err)
	}
	return e.Type
}

func frameTypes(t *testing.T, fs []aguiFrame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, frameType(t, f))
	}
	return out
}

// TestAGUIFormatSelection: ?format=ag-ui or an Accept with AG-UI's media
// type gets AG-UI events; anything else the native stream, unchanged.
func TestAGUIFormatSelection(t *testing.T) {
	evs := aguiSampleLog(t, runA)
	h := newHarness(t, Config{}, streamService(newMemLog(evs...), fixed(runs.Running)))
	want := aguiWant(evs, agui.Options{})
	for _, c := range []struct {
		name  string
		query string
		hdr   []string
		agui  bool
	}{
		{"format", "?format=ag-ui", nil, true},
		{"format beats ndjson", "?format=ag-ui", []string{"Accept", "application/x-ndjson"}, true},
		{"accept", "", []string{"Accept", "text/event-stream, application/vnd.ag-ui.event+proto"}, true},
		{"accept alone", "", []string{"Accept", "application/vnd.ag-ui.event+proto;q=0.5"}, true},
		{"accept refused", "", []string{"Accept", "text/event-stream, application/vnd.ag-ui.event+proto;q=0"}, false},
		{"plain sse", "", []string{"Accept", "text/event-stream"}, false},
		{"empty format", "?format=", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events"+c.query, "", c.hdr...)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != contentTypeSSE || resp.Header.Get("Cache-Control") != "no-cache" {
				t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
			}
			if !bytes.HasPrefix(b, []byte("retry: 2000\n\n")) {
				t.Errorf("stream starts %q", b[:min(len(b), 40)])
			}
			if !c.agui {
				var native bytes.Buffer
				native.WriteString("retry: 2000\n\n")
				for _, ev := range evs {
					fmt.Fprintf(&native, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, ev.JSON)
				}
				if string(b) != native.String() {
					t.Errorf("the native stream changed:\n%s", b)
				}
				return
			}
			if got := aguiFrames(t, b); !slices.Equal(got, want) {
				t.Fatalf("stream =\n%v\nwant\n%v", got, want)
			}
			if bytes.Contains(b, []byte("\nevent:")) {
				t.Error("an AG-UI event has an event field")
			}
		})
	}
	for _, q := range []string{"?format=agui", "?format=ag-ui&format=ag-ui", "?format=native"} {
		resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events"+q, "")
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d", q, resp.StatusCode)
			continue
		}
		if e := errorBody(t, b); e.Code != CodeInvalidField || e.Field != "format" {
			t.Errorf("%s: %+v", q, e)
		}
	}
}

// TestAGUIStreamIDs: a stored event's AG-UI events have ids "seq.1",
// "seq.2", …, and the last of them "seq"; the stream is the Translator's.
func TestAGUIStreamIDs(t *testing.T) {
	evs := aguiSampleLog(t, runA)
	h := newHarness(t, Config{BatchSize: 3}, streamService(newMemLog(evs...), fixed(runs.Succeeded)))
	_, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?format=ag-ui", "")
	got := aguiFrames(t, b)
	if len(got) < 30 {
		t.Fatalf("%d AG-UI events", len(got))
	}
	seen := map[string]bool{}
	for i, f := range got {
		if seen[f.id] {
			t.Fatalf("id %s twice", f.id)
		}
		seen[f.id] = true
		seq, sub, dotted := strings.Cut(f.id, ".")
		next := ""
		if i+1 < len(got) {
			next, _, _ = strings.Cut(got[i+1].id, ".")
		}
		// Only the last of a stored event's has the bare seq.
		if dotted != (next == seq) || (dotted && sub == "0") {
			t.Fatalf("event %d has id %s, the next %s", i, f.id, next)
		}
	}
	if !slices.Equal(got, aguiWant(evs, agui.Options{})) {
		t.Fatal("the stream is not the translation")
	}
	// The run.queued event alone makes nothing; the run starts with run.started.
	if got[0].id != "2.1" || frameType(t, got[0]) != "RUN_STARTED" {
		t.Errorf("first event %+v", got[0])
	}
}

// TestAGUIResumeEveryPoint resumes the stream after each of its events, by
// Last-Event-ID and by ?after=, and gets exactly the rest: no event twice,
// none lost.
func TestAGUIResumeEveryPoint(t *testing.T) {
	evs := aguiSampleLog(t, runA)
	l := newMemLog(evs...)
	h := newHarness(t, Config{}, streamService(l, fixed(runs.Running)))
	all := aguiWant(evs, agui.Options{})
	for i, f := range all {
		for _, how := range []string{"header", "query"} {
			path, hdr := "/v1/runs/"+runA+"/events?format=ag-ui", []string{"Last-Event-ID", f.id}
			if how == "query" {
				path, hdr = path+"&after="+f.id, nil
			}
			resp, b := h.do(t, "GET", path, "", hdr...)
			if resp.StatusCode != 200 {
				t.Fatalf("after %s (%s): status %d", f.id, how, resp.StatusCode)
			}
			p := newEventSource()
			p.feed(b)
			var got []aguiFrame
			for _, e := range p.events {
				got = append(got, aguiFrame{e.lastEventID, e.data})
			}
			if !slices.Equal(got, all[i+1:]) {
				t.Fatalf("after %s (%s): %d events from %v, want the %d from %v", f.id, how, len(got), got[:min(1, len(got))], len(all)-i-1, all[i+1:min(i+2, len(all))])
			}
		}
	}
	// The later of the header and the query wins, as on the native stream.
	at := func(id string) int {
		return slices.IndexFunc(all, func(f aguiFrame) bool { return f.id == id })
	}
	partial := all[at("13")-1].id // the last but one of seq 13's events
	for _, c := range []struct{ query, header, from string }{
		{"after=11", partial, partial}, {"after=13", partial, "13"}, {"after=" + partial, "2", partial},
	} {
		_, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?format=ag-ui&"+c.query, "", "Last-Event-ID", c.header)
		if got := aguiFrames2(b); !slices.Equal(got, all[at(c.from)+1:]) {
			t.Errorf("%s and Last-Event-ID %s resumed at %v, want after %s", c.query, c.header, got[:min(1, len(got))], c.from)
		}
	}
	// Every stream read the log from its first event.
	for _, after := range l.cursorAfters() {
		if after != 0 {
			t.Fatalf("a cursor opened after %d", after)
		}
	}
}

func aguiFrames2(b []byte) []aguiFrame {
	p := newEventSource()
	p.feed(b)
	var out []aguiFrame
	for _, e := range p.events {
		out = append(out, aguiFrame{e.lastEventID, e.data})
	}
	return out
}

// TestAGUIResumeLive drops a client in the middle of a running run and
// has it reconnect, as an EventSource does, while the log grows.
func TestAGUIResumeLive(t *testing.T) {
	evs := aguiSampleLog(t, runA)
	l := newMemLog(evs[:12]...)
	h := newHarness(t, Config{}, streamService(l, fixed(runs.Running)))
	all := aguiWant(evs, agui.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.srv.URL+"/v1/runs/"+runA+"/events?format=ag-ui", nil)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := newEventSource()
	br := bufio.NewReader(resp.Body)
	for len(p.events) < 7 {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		p.feed(line)
	}
	resp.Body.Close()
	var first []aguiFrame
	for _, e := range p.events {
		first = append(first, aguiFrame{e.lastEventID, e.data})
	}
	waitFor(t, "the dropped stream's cursor to close", func() bool { return l.closed.Load() == 1 })
	l.append(evs[12:]...)
	_, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?format=ag-ui", "", "Last-Event-ID", p.lastEventID)
	rest := aguiFrames2(b)
	if got := append(first, rest...); !slices.Equal(got, all) {
		t.Fatalf("%d events then %d after %s; want the %d of the run once each", len(first), len(rest), p.lastEventID, len(all))
	}
}

func TestAGUIEndAndBadResume(t *testing.T) {
	evs := aguiSampleLog(t, runA)
	l := newMemLog(evs...)
	h := newHarness(t, Config{}, streamService(l, fixed(runs.Succeeded)))
	last := strconv.Itoa(len(evs))
	for _, id := range []string{last, "99", "99.3"} {
		resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?format=ag-ui", "", "Last-Event-ID", id)
		if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
			t.Errorf("after %s of a finished run: %d %q", id, resp.StatusCode, b)
		}
	}
	// The run.completed event makes several: after its first, the rest.
	resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?format=ag-ui", "", "Last-Event-ID", last+".1")
	if got := aguiFrames2(b); resp.StatusCode != 200 || len(got) != 1 || frameType(t, got[0]) != "RUN_FINISHED" || got[0].id != last {
		t.Errorf("after %s.1: %d %v", last, resp.StatusCode, got)
	}
	opened := l.opened.Load()
	for _, c := range []struct{ hdr, query, field string }{
		{"x", "", "Last-Event-ID"}, {"1.", "", "Last-Event-ID"}, {".1", "", "Last-Event-ID"}, {"1.2.3", "", "Last-Event-ID"},
		{"1.-1", "", "Last-Event-ID"}, {"1.99999999", "", "Last-Event-ID"}, {"", "after=1.x", "after"}, {"", "after=1&after=2", "after"},
	} {
		var hdr []string
		if c.hdr != "" {
			hdr = []string{"Last-Event-ID", c.hdr}
		}
		resp, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?format=ag-ui&"+c.query, "", hdr...)
		if resp.StatusCode != 400 {
			t.Errorf("%+v: status %d", c, resp.StatusCode)
			continue
		}
		if e := errorBody(t, b); e.Code != CodeInvalidField || e.Field != c.field {
			t.Errorf("%+v: %+v", c, e)
		}
	}
	// The native stream still takes only integers.
	if resp, _ := h.do(t, "GET", "/v1/runs/"+runA+"/events", "", "Last-Event-ID", "3.1"); resp.StatusCode != 400 {
		t.Errorf("native stream with an AG-UI id: %d", resp.StatusCode)
	}
	if l.opened.Load() != opened {
		t.Error("a cursor was opened for a bad request")
	}
}

// TestAGUIStreamTokens: the AG-UI stream takes a stream token as the
// native one does, for its own run only; POST /v1/ag-ui needs a key that
// may write.
func TestAGUIStreamTokens(t *testing.T) {
	ts := newTenants(t)
	c := &calls{}
	logs := map[string]*memLog{runA: newMemLog(aguiSampleLog(t, runA)...), runB: newMemLog(aguiSampleLog(t, runB)...)}
	h := newHarness(t, ts.config(), tenantService(t, c, logs))
	tok := issueToken(t, h, ts, runA, keyID(tenantAcme, auth.RoleRead))
	resp, b := h.do(t, "GET", tok.URL+"&format=ag-ui", "")
	if resp.StatusCode != 200 {
		t.Fatalf("AG-UI events by token: %d %s", resp.StatusCode, b)
	}
	if got := aguiFrames(t, b); !slices.Equal(got, aguiWant(aguiSampleLog(t, runA), agui.Options{})) {
		t.Error("the stream by token is not the run's translation")
	}
	resp, b = h.do(t, "GET", "/v1/runs/"+runB+"/events?format=ag-ui&token="+tok.Token, "")
	if e := errorBody(t, b); resp.StatusCode != 401 || e.Code != CodeInvalidToken {
		t.Errorf("another run's stream by token: %d %+v", resp.StatusCode, e)
	}
	resp, b = h.do(t, "GET", "/v1/runs/"+runB+"/events?format=ag-ui", "", ts.bearer(t, keyID(tenantAcme, auth.RoleRead))...)
	if e := errorBody(t, b); resp.StatusCode != 404 || e.Code != CodeNotFound {
		t.Errorf("another tenant's run: %d %+v", resp.StatusCode, e)
	}
	body := `{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}],"forwardedProps":{"agent":"claude"}}`
	resp, b = h.do(t, "POST", "/v1/ag-ui?token="+tok.Token, body, "Content-Type", "application/json")
	if e := errorBody(t, b); resp.StatusCode != 401 || e.Code != CodeInvalidToken {
		t.Errorf("POST /v1/ag-ui by token: %d %+v", resp.StatusCode, e)
	}
	resp, b = h.do(t, "POST", "/v1/ag-ui", body, append(ts.bearer(t, keyID(tenantAcme, auth.RoleRead)), "Content-Type", "application/json")...)
	if e := errorBody(t, b); resp.StatusCode != 403 || e.Code != CodeForbidden {
		t.Errorf("POST /v1/ag-ui with a read key: %d %+v", resp.StatusCode, e)
	}
	if c.submit.Load() != 0 {
		t.Error("a run was submitted")
	}
	resp, b = h.do(t, "POST", "/v1/ag-ui", body, append(ts.bearer(t, keyID(tenantAcme, auth.RoleWrite)), "Content-Type", "application/json")...)
	if resp.StatusCode != 200 || c.submit.Load() != 1 {
		t.Fatalf("POST /v1/ag-ui with a write key: %d %s", resp.StatusCode, b)
	}
	if got := frameTypes(t, aguiFrames(t, b)); got[0] != "RUN_STARTED" || got[len(got)-1] != "RUN_FINISHED" {
		t.Errorf("the run's AG-UI run: %v", got)
	}
}

// aguiService serves run id with log l and records submissions and
// inputs; more are other runs it knows (for threads to continue).
type aguiService struct {
	*fakeService
	mu     sync.Mutex
	specs  []runs.Spec
	inputs []runs.Input
	ctxs   []context.Context
}

func newAGUIService(id string, l *memLog, more ...runs.Run) *aguiService {
	s := &aguiService{}
	s.fakeService = &fakeService{
		get: func(_ context.Context, rid string) (runs.Run, error) {
			if rid == id {
				return sampleRun(id, runs.Running), nil
			}
			for _, r := range more {
				if r.ID == rid {
					return r, nil
				}
			}
			return runs.Run{}, fmt.Errorf("run %s: %w", rid, runs.ErrNotFound)
		},
		submit: func(ctx context.Context, spec runs.Spec) (runs.Run, error) {
			s.mu.Lock()
			s.specs = append(s.specs, spec)
			s.ctxs = append(s.ctxs, ctx)
			s.mu.Unlock()
			return sampleRun(id, runs.Queued), nil
		},
		input: func(_ context.Context, rid string, in runs.Input) (runs.InputResult, error) {
			s.mu.Lock()
			s.inputs = append(s.inputs, in)
			s.mu.Unlock()
			return runs.InputResult{Approval: &runs.ResolvedApproval{Approval: runs.Approval{ID: in.ApprovalID}, Decision: in.Decision}}, nil
		},
		events: func(_ context.Context, rid string, after uint64) (runs.Cursor, error) {
			if rid != id {
				return nil, fmt.Errorf("events of %s: %w", rid, runs.ErrNotFound)
			}
			return l.cursor(after), nil
		},
		lastEventSeq: func(context.Context, string) (uint64, error) { return l.last(), nil },
	}
	return s
}

func (s *aguiService) spec(t *testing.T) runs.Spec {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.specs) != 1 {
		t.Fatalf("%d runs submitted, want 1", len(s.specs))
	}
	return s.specs[0]
}

func postAGUI(t *testing.T, h *harness, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return h.do(t, "POST", "/v1/ag-ui", body, append([]string{"Content-Type", "application/json", "Accept", "text/event-stream"}, hdr...)...)
}

var aguiImageBytes = []byte("\x89PNG\r\n\x1a\n fake image")

// aguiRunInput is a RunAgentInput as an AG-UI HttpAgent posts it.
func aguiRunInput(extra string) string {
	img := base64.StdEncoding.EncodeToString(aguiImageBytes)
	return `{"threadId":"thread-1","runId":"client-run-1","state":{},
	  "messages":[{"id":"s1","role":"system","content":"be brief"},{"id":"u0","role":"user","content":"an old question"},
	    {"id":"a0","role":"assistant","content":"an old answer"},
	    {"id":"u1","role":"user","content":[{"type":"text","text":"Make one.txt"},
	      {"type":"image","source":{"type":"data","value":"` + img + `","mimeType":"image/png"}},{"type":"text","text":"like this"}]}],
	  "tools":[{"name":"frontend_tool","description":"not for a CLI","parameters":{}}],"context":[]` + extra + `}`
}

// TestAGUIPostRun: a RunAgentInput makes a run of its last user message and
// forwardedProps, and the answer is its first AG-UI run, which here ends
// with the approval's interrupt though the log goes on.
func TestAGUIPostRun(t *testing.T) {
	evs := aguiSampleLog(t, runA)
	l := newMemLog(evs...)
	svc := newAGUIService(runA, l)
	h := newHarness(t, Config{}, svc)
	resp, b := postAGUI(t, h, aguiRunInput(`,"forwardedProps":{"agent":"claude","permission":"read_only","approvals":"ask","model":"opus","metadata":{"app":"copilot"}}`),
		"Idempotency-Key", "k-1")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != contentTypeSSE {
		t.Fatalf("POST /v1/ag-ui: %d %s", resp.StatusCode, b)
	}
	spec := svc.spec(t)
	if spec.Agent != "claude" || spec.Prompt != "Make one.txt\nlike this" || spec.Permission != runs.ReadOnly ||
		spec.Approvals != runs.ApprovalsAsk || spec.Model != "opus" || spec.Metadata["app"] != "copilot" ||
		spec.IdempotencyKey != "k-1" || spec.ResumeSessionID != "" || spec.Interactive {
		t.Errorf("spec = %+v", spec)
	}
	if len(spec.Attachments) != 1 || !bytes.Equal(spec.Attachments[0].Data, aguiImageBytes) || spec.Attachments[0].MediaType != "image/png" {
		t.Errorf("attachments = %+v", spec.Attachments)
	}
	got := aguiFrames(t, b)
	want := aguiWant(evs, agui.Options{ThreadID: "thread-1", RunID: "client-run-1", PromptMessageID: "u1"})
	end := slices.IndexFunc(want, func(f aguiFrame) bool { return frameType(t, f) == "RUN_FINISHED" })
	if !slices.Equal(got, want[:end+1]) {
		t.Fatalf("stream =\n%v\nwant the first AG-UI run\n%v", got, want[:end+1])
	}
	var started struct {
		ThreadID, RunID string
		Input           struct {
			Messages []struct{ ID, Content string }
		}
	}
	json.Unmarshal([]byte(got[0].data), &started)
	if started.ThreadID != "thread-1" || started.RunID != "client-run-1" || len(started.Input.Messages) != 1 ||
		started.Input.Messages[0].ID != "u1" {
		t.Errorf("RUN_STARTED = %s", got[0].data)
	}
	if !strings.Contains(got[len(got)-1].data, `"outcome":{"type":"interrupt"`) {
		t.Errorf("the run ends %s", got[len(got)-1].data)
	}
	waitFor(t, "the cursor to close", func() bool { return l.closed.Load() == 1 })
	waitFor(t, "the client count to drop", func() bool { return h.obs.clients.Load() == 0 })
}

// TestAGUIPostContinuesThread: a thread whose state or threadId names an
// earlier run of the caller's goes on in that run's session.
func TestAGUIPostContinuesThread(t *testing.T) {
	prev := sampleRun(runB, runs.Succeeded)
	prev.Agent, prev.SessionID = "codex", "sess-b"
	theirs := sampleRun("0196a7c8-5a40-7d3f-9f2c-4b6e8dad3c5f", runs.Succeeded)
	theirs.SessionID, theirs.Tenant = "sess-x", "globex"
	input := func(thread, state, props string) string {
		return `{"threadId":"` + thread + `","runId":"r2","state":` + state + `,"forwardedProps":` + props +
			`,"messages":[{"id":"u","role":"user","content":"and then?"}]}`
	}
	for _, c := range []struct {
		name, body     string
		agent, session string
	}{
		{"state", input("thread-1", `{"run_id":"`+runB+`","status":"succeeded"}`, `{}`), "codex", "sess-b"},
		{"thread id", input(runB, `null`, `null`), "codex", "sess-b"},
		{"agent given", input(runB, `{}`, `{"agent":"claude"}`), "claude", "sess-b"},
		{"session given", input(runB, `{}`, `{"agent":"claude","resume_session_id":"sess-z"}`), "claude", "sess-z"},
		{"no such run", input("thread-1", `{"run_id":"`+runA+`x"}`, `{"agent":"claude"}`), "claude", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := newAGUIService(runA, newMemLog(aguiSampleLog(t, runA)...), prev, theirs)
			h := newHarness(t, Config{}, svc)
			resp, b := postAGUI(t, h, c.body)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if s := svc.spec(t); s.Agent != c.agent || s.ResumeSessionID != c.session || s.Prompt != "and then?" {
				t.Errorf("spec agent %q session %q prompt %q", s.Agent, s.ResumeSessionID, s.Prompt)
			}
		})
	}
	// Another tenant's run is not one to continue: without one, the agent
	// must be named.
	svc := newAGUIService(runA, newMemLog(), prev, theirs)
	h := newHarness(t, Config{}, svc)
	resp, b := postAGUI(t, h, input(theirs.ID, `{}`, `{}`))
	if e := errorBody(t, b); resp.StatusCode != 400 || e.Field != "forwardedProps.agent" {
		t.Errorf("continuing another tenant's run: %d %+v", resp.StatusCode, e)
	}
}

// TestAGUIPostResume: a resume answers the interrupt's approval and the
// answer is the AG-UI run that follows; an approval answered already still
// shows that run.
func TestAGUIPostResume(t *testing.T) {
	evs := aguiSampleLog(t, runA)
	interrupt := runA + "/approval_1"
	want := aguiWant(evs, agui.Options{ThreadID: "thread-1", RunID: "client-run-2"})
	start := slices.IndexFunc(want, func(f aguiFrame) bool {
		return frameType(t, f) == "RUN_STARTED" && !strings.Contains(f.data, `"input"`)
	})
	resume := func(entry string) string {
		return `{"threadId":"thread-1","runId":"client-run-2","messages":[{"id":"u1","role":"user","content":"Make one.txt"}],"resume":[` + entry + `]}`
	}
	for _, c := range []struct {
		name, entry string
		decision    runs.Decision
		message     string
		answer      error
	}{
		{"approved", `{"interruptId":"` + interrupt + `","status":"resolved","payload":{"approved":true}}`, runs.Allow, "", nil},
		{"refused with a message", `{"interruptId":"` + interrupt + `","status":"resolved","payload":{"approved":false,"message":"not now"}}`, runs.Deny, "not now", nil},
		{"by name", `{"interruptId":"` + interrupt + `","status":"resolved","payload":{"decision":"allow_session"}}`, runs.AllowSession, "", nil},
		{"bare boolean", `{"interruptId":"` + interrupt + `","status":"resolved","payload":true}`, runs.Allow, "", nil},
		{"cancelled", `{"interruptId":"` + interrupt + `","status":"cancelled"}`, runs.Deny, "", nil},
		{"answered before", `{"interruptId":"` + interrupt + `","status":"resolved","payload":{"approved":true}}`, runs.Allow, "",
			runs.Conflict(runs.ConflictApprovalResolved, "the approval was resolved")},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newMemLog(evs...)
			svc := newAGUIService(runA, l)
			if c.answer != nil {
				svc.input = func(context.Context, string, runs.Input) (runs.InputResult, error) {
					return runs.InputResult{}, c.answer
				}
			}
			h := newHarness(t, Config{}, svc)
			resp, b := postAGUI(t, h, resume(c.entry))
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if c.answer == nil {
				svc.mu.Lock()
				in := svc.inputs
				svc.mu.Unlock()
				if len(in) != 1 || in[0].Kind != runs.InputDecision || in[0].ApprovalID != "approval_1" ||
					in[0].Decision != c.decision || in[0].Message != c.message {
					t.Errorf("inputs = %+v", in)
				}
			}
			got := aguiFrames(t, b)
			if !slices.Equal(got, want[start:]) {
				t.Fatalf("stream =\n%v\nwant the AG-UI run after the answer\n%v", got, want[start:])
			}
			if len(svc.specs) != 0 {
				t.Error("a resume submitted a run")
			}
		})
	}
	svc := newAGUIService(runA, newMemLog(evs...))
	svc.input = func(context.Context, string, runs.Input) (runs.InputResult, error) {
		return runs.InputResult{}, fmt.Errorf("approval nope: %w", runs.ErrNotFound)
	}
	h := newHarness(t, Config{}, svc)
	resp, b := postAGUI(t, h, resume(`{"interruptId":"`+runA+`/nope","status":"cancelled"}`))
	if e := errorBody(t, b); resp.StatusCode != 404 || e.Code != CodeNotFound {
		t.Errorf("an unknown approval: %d %+v", resp.StatusCode, e)
	}
	resp, b = postAGUI(t, h, resume(`{"interruptId":"`+runB+`/approval_1","status":"cancelled"}`))
	if e := errorBody(t, b); resp.StatusCode != 404 || e.Code != CodeNotFound {
		t.Errorf("an interrupt of an unknown run: %d %+v", resp.StatusCode, e)
	}
}

// TestAGUIPostBadInput: what cannot run is a 400 naming the member at
// fault, as the RunAgentInput spells it.
func TestAGUIPostBadInput(t *testing.T) {
	svc := newAGUIService(runA, newMemLog())
	svc.submit = func(_ context.Context, spec runs.Spec) (runs.Run, error) {
		if spec.Agent == "nobody" {
			return runs.Run{}, fmt.Errorf("agent %q: %w", spec.Agent, runs.ErrUnknownAgent)
		}
		if spec.Model == "unsupported" {
			return runs.Run{}, runs.Unsupported(spec.Agent, runs.FieldModel, "no models here")
		}
		return runs.Run{}, errors.New("unexpected submission")
	}
	h := newHarness(t, Config{}, svc)
	user := `[{"id":"u","role":"user","content":"hi"}]`
	in := func(messages, props string, rest ...string) string {
		return `{"threadId":"t","runId":"r","messages":` + messages + `,"forwardedProps":` + props + strings.Join(rest, "") + `}`
	}
	interrupt := runA + "/approval_1"
	for _, c := range []struct {
		name, body, code, field string
	}{
		{"not json", `{"threadId":`, CodeInvalidJSON, ""},
		{"no thread", `{"runId":"r","messages":[]}`, CodeInvalidField, "threadId"},
		{"no user message", in(`[{"id":"s","role":"system","content":"x"}]`, `{"agent":"claude"}`), CodeInvalidField, "messages"},
		{"blank prompt", in(`[{"id":"u","role":"user","content":"  "}]`, `{"agent":"claude"}`), CodeInvalidField, "messages[0].content"},
		{"bad part", in(`[{"id":"u","role":"user","content":[{"type":"audio"}]}]`, `{}`), CodeInvalidField, "messages[0].content[0].type"},
		{"bad image bytes", in(`[{"id":"u","role":"user","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"data","value":"!!","mimeType":"image/png"}}]}]`, `{"agent":"claude"}`),
			CodeInvalidAttachment, "messages[0].content[1].data"},
		{"props not an object", in(user, `["claude"]`), CodeInvalidField, "forwardedProps"},
		{"unknown prop", in(user, `{"agent":"claude","permision":"full"}`), CodeUnknownField, "forwardedProps.permision"},
		{"prompt prop", in(user, `{"agent":"claude","prompt":"x"}`), CodeInvalidField, "forwardedProps.prompt"},
		{"interactive prop", in(user, `{"agent":"claude","interactive":true}`), CodeInvalidField, "forwardedProps.interactive"},
		{"repeated prop", in(user, `{"agent":"claude","agent":"codex"}`), CodeInvalidField, "forwardedProps.agent"},
		{"no agent", in(user, `{}`), CodeInvalidField, "forwardedProps.agent"},
		{"bad permission", in(user, `{"agent":"claude","permission":"root"}`), CodeInvalidField, "forwardedProps.permission"},
		{"unknown agent", in(user, `{"agent":"nobody"}`), CodeUnknownAgent, "forwardedProps.agent"},
		{"unsupported", in(user, `{"agent":"claude","model":"unsupported"}`), CodeUnsupportedOption, "forwardedProps.model"},
		{"two resumes", in(user, `{}`, `,"resume":[{"interruptId":"a","status":"cancelled"},{"interruptId":"b","status":"cancelled"}]`), CodeInvalidField, "resume"},
		{"foreign interrupt", in(user, `{}`, `,"resume":[{"interruptId":"i-1","status":"cancelled"}]`), CodeInvalidField, "resume[0].interruptId"},
		{"no payload", in(user, `{}`, `,"resume":[{"interruptId":"`+interrupt+`","status":"resolved"}]`), CodeInvalidField, "resume[0].payload"},
		{"payload typo", in(user, `{}`, `,"resume":[{"interruptId":"`+interrupt+`","status":"resolved","payload":{"aproved":true}}]`), CodeUnknownField, "resume[0].payload.aproved"},
		{"payload contradicts", in(user, `{}`, `,"resume":[{"interruptId":"`+interrupt+`","status":"resolved","payload":{"approved":false,"decision":"allow"}}]`), CodeInvalidField, "resume[0].payload.approved"},
		{"bad decision", in(user, `{}`, `,"resume":[{"interruptId":"`+interrupt+`","status":"resolved","payload":{"decision":"maybe"}}]`), CodeInvalidField, "resume[0].payload.decision"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := postAGUI(t, h, c.body)
			if resp.StatusCode/100 != 4 {
				t.Fatalf("status %d %s", resp.StatusCode, b)
			}
			e := errorBody(t, b)
			if e.Code != c.code || e.Field != c.field {
				t.Errorf("error %+v, want code %s field %q", e, c.code, c.field)
			}
			if c.field != "" && !strings.Contains(e.Message, c.field) {
				t.Errorf("message %q does not name %s", e.Message, c.field)
			}
		})
	}
	resp, b := h.do(t, "POST", "/v1/ag-ui", in(user, `{"agent":"claude"}`), "Content-Type", "text/plain")
	if e := errorBody(t, b); resp.StatusCode != http.StatusUnsupportedMediaType || e.Code != CodeUnsupportedMediaType {
		t.Errorf("text/plain: %d %+v", resp.StatusCode, e)
	}
	if resp, _ := h.do(t, "GET", "/v1/ag-ui", ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/ag-ui: %d", resp.StatusCode)
	}
}

// TestAGUIPostOutlivesRequestTimeout: the answer streams for as long as
// the AG-UI run lasts, past AGENTGATE_REQUEST_TIMEOUT, which bounds the
// submission.
func TestAGUIPostOutlivesRequestTimeout(t *testing.T) {
	evs := aguiFailedLog(t, runA)
	l := newMemLog(evs[:2]...)
	svc := newAGUIService(runA, l)
	h := newHarness(t, Config{RequestTimeout: 100 * time.Millisecond}, svc)
	done := make(chan []byte, 1)
	go func() {
		resp, err := h.srv.Client().Post(h.srv.URL+"/v1/ag-ui", "application/json",
			strings.NewReader(aguiRunInput(`,"forwardedProps":{"agent":"claude"}`)))
		var b []byte
		if err == nil {
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- b
	}()
	waitFor(t, "the submission", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return len(svc.ctxs) == 1
	})
	svc.mu.Lock()
	submitted := svc.ctxs[0]
	svc.mu.Unlock()
	select {
	case <-submitted.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the request timeout did not end the submission's context")
	}
	if !errors.Is(context.Cause(submitted), errRequestTimeout) {
		t.Fatalf("the submission ended by %v", context.Cause(submitted))
	}
	l.append(evs[2:]...)
	var b []byte
	select {
	case b = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end")
	}
	got := frameTypes(t, aguiFrames(t, b))
	if len(got) == 0 || got[len(got)-1] != "RUN_ERROR" || !slices.Contains(got, "CUSTOM") {
		t.Fatalf("stream %v, want it through the run's end", got)
	}
}

// TestAGUIPostClientGone: a client that goes away ends its stream, and the
// cursor is closed; the run is not the stream's.
func TestAGUIPostClientGone(t *testing.T) {
	l := newMemLog(aguiSampleLog(t, runA)[:5]...)
	svc := newAGUIService(runA, l)
	var cancelled atomic.Bool
	svc.cancel = func(context.Context, string) (runs.Run, error) {
		cancelled.Store(true)
		return runs.Run{}, nil
	}
	h := newHarness(t, Config{}, svc)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/v1/ag-ui", strings.NewReader(aguiRunInput(`,"forwardedProps":{"agent":"claude"}`)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "RUN_STARTED") {
			break
		}
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the cursor to close", func() bool { return l.closed.Load() == 1 })
	waitFor(t, "the client count to drop", func() bool { return h.obs.clients.Load() == 0 })
	if cancelled.Load() {
		t.Error("the run was cancelled")
	}
}

// nodeValidator is tools/agui/validate.mjs, or the test fails: the AG-UI
// stream is checked with AG-UI's own code or not at all.
func nodeValidator(t testing.TB) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (Node.js 20 or later is needed): install it, then run scripts/install-agui.sh")
	}
	dir, err := filepath.Abs("../../tools/agui")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"@ag-ui/core", "@ag-ui/client", "zod", "rxjs"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("%s is not installed in tools/agui: run scripts/install-agui.sh", pkg)
		}
	}
	return node, filepath.Join(dir, "validate.mjs")
}

// validateWithAGUI runs validate.mjs on stream (and input, if any) and
// returns its summary, or its complaint and false.
func validateWithAGUI(t *testing.T, stream []byte, input string) (map[string]any, string, bool) {
	t.Helper()
	node, script := nodeValidator(t)
	args := []string{script}
	if input != "" {
		path := filepath.Join(t.TempDir(), "input.json")
		if err := os.WriteFile(path, []byte(input), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--input", path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Stdin = bytes.NewReader(stream)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("validate.mjs: %v\n%s", err, stderr.Bytes())
		}
		return nil, stderr.String(), false
	}
	var sum map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("validate.mjs printed %q: %v", stdout.Bytes(), err)
	}
	return sum, "", true
}

// TestAGUIValidatesWithAGUIClient pipes the AG-UI streams of a realistic
// run (reasoning, text, a tool call, an approval, its end), of a failed
// run and of POST /v1/ag-ui through AG-UI's own schemas and client.
func TestAGUIValidatesWithAGUIClient(t *testing.T) {
	nodeValidator(t)
	ok := aguiSampleLog(t, runA)
	failed := aguiFailedLog(t, runB)
	svc := streamService(newMemLog(ok...), fixed(runs.Succeeded))
	get := svc.get
	svc.get = func(ctx context.Context, id string) (runs.Run, error) {
		if id == runB {
			return sampleRun(id, runs.Failed), nil
		}
		return get(ctx, id)
	}
	events := svc.events
	svc.events = func(ctx context.Context, id string, after uint64) (runs.Cursor, error) {
		if id == runB {
			return newMemLog(failed...).cursor(after), nil
		}
		return events(ctx, id, after)
	}
	h := newHarness(t, Config{}, svc)

	_, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?format=ag-ui", "")
	sum, complaint, valid := validateWithAGUI(t, b, "")
	if !valid {
		t.Fatalf("the run's AG-UI stream is not valid: %s", complaint)
	}
	var st agui.State
	raw, _ := json.Marshal(sum["state"])
	json.Unmarshal(raw, &st)
	if st.Status != "succeeded" || st.SessionID != "sess-1" || len(st.FilesChanged) != 1 || st.Usage.OutputTokens != 70 {
		t.Errorf("the client's state %+v", st)
	}
	var msgs []struct {
		Role, Content string
		ToolCalls     []struct{ Function struct{ Name string } }
	}
	raw, _ = json.Marshal(sum["messages"])
	json.Unmarshal(raw, &msgs)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Role+": "+m.Content)
		for _, c := range m.ToolCalls {
			got = append(got, m.Role+" calls "+c.Function.Name)
		}
	}
	if want := []string{"user: Make one.txt", "reasoning: The user wants a file.", "assistant: I will create it.",
		"assistant: ", "assistant calls Bash", "tool: ", "assistant: Done: one.txt exists."}; !slices.Equal(got, want) {
		t.Errorf("the client's messages\n%q\nwant\n%q", got, want)
	}

	_, b = h.do(t, "GET", "/v1/runs/"+runB+"/events?format=ag-ui", "")
	if _, complaint, valid := validateWithAGUI(t, b, ""); !valid {
		t.Fatalf("the failed run's AG-UI stream is not valid: %s", complaint)
	}
	if got := frameTypes(t, aguiFrames(t, b)); got[len(got)-1] != "RUN_ERROR" {
		t.Errorf("the failed run ends %v", got)
	}

	// POST /v1/ag-ui: the input, and its answer up to the interrupt.
	post := newAGUIService(runA, newMemLog(ok...))
	hp := newHarness(t, Config{}, post)
	input := aguiRunInput(`,"forwardedProps":{"agent":"claude","approvals":"ask"}`)
	_, b = postAGUI(t, hp, input)
	sum, complaint, valid = validateWithAGUI(t, b, input)
	if !valid {
		t.Fatalf("the answer to POST /v1/ag-ui is not valid: %s", complaint)
	}
	if pending, _ := sum["pendingInterrupts"].([]any); len(pending) != 1 ||
		pending[0].(map[string]any)["id"] != runA+"/approval_1" {
		t.Errorf("the client's pending interrupts %v", sum["pendingInterrupts"])
	}

	// And the validator is not vacuous: a stream without its first
	// TEXT_MESSAGE_START is refused, naming the event after it.
	frames := aguiFrames2(b)
	var cut bytes.Buffer
	dropped := false
	for _, f := range frames {
		if !dropped && strings.Contains(f.data, `"TEXT_MESSAGE_START"`) {
			dropped = true
			continue
		}
		fmt.Fprintf(&cut, "id: %s\ndata: %s\n\n", f.id, f.data)
	}
	if _, complaint, valid := validateWithAGUI(t, cut.Bytes(), input); valid || !strings.Contains(complaint, "TEXT_MESSAGE_CONTENT") {
		t.Errorf("a broken stream passed, or was refused for another reason: %q", complaint)
	}
}

// FuzzAGUIRequest posts whatever a client may send to POST /v1/ag-ui:
// never a 5xx; a 4xx has the gateway's error shape and a code; a 200 is an
// AG-UI stream the Checker takes.
func FuzzAGUIRequest(f *testing.F) {
	f.Add([]byte(aguiRunInput(`,"forwardedProps":{"agent":"claude","approvals":"ask"}`)))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}],"forwardedProps":{"agent":"claude","permission":"full","max_turns":3}}`))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"` + runA + `/approval_1","status":"resolved","payload":{"approved":true,"message":"ok"}}]}`))
	f.Add([]byte(`{"threadId":"` + runA + `","runId":"r","state":{"run_id":"` + runA + `"},"messages":[{"id":"u","role":"user","content":[{"type":"binary","mimeType":"image/png","id":"file-x"}]}]}`))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"x"}],"forwardedProps":{"agent":"claude","attachments":[]}}`))
	evs := aguiSampleLog(f, runA)
	svc := &fakeService{
		get: func(_ context.Context, id string) (runs.Run, error) {
			if id != runA {
				return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
			}
			r := sampleRun(id, runs.Succeeded)
			r.SessionID = "sess-1"
			return r, nil
		},
		submit: func(_ context.Context, spec runs.Spec) (runs.Run, error) {
			if err := spec.Validate(); err != nil {
				return runs.Run{}, err
			}
			return sampleRun(runA, runs.Queued), nil
		},
		input: func(_ context.Context, _ string, in runs.Input) (runs.InputResult, error) {
			if err := in.Validate(); err != nil {
				return runs.InputResult{}, err
			}
			return runs.InputResult{}, runs.Conflict(runs.ConflictApprovalResolved, "resolved")
		},
		events:       func(context.Context, string, uint64) (runs.Cursor, error) { return newMemLog(evs...).cursor(0), nil },
		lastEventSeq: func(context.Context, string) (uint64, error) { return uint64(len(evs)), nil },
	}
	h := New(Config{}, svc, nil, nil, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v1/ag-ui", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch {
		case w.Code == http.StatusOK:
			var c aguitest.Checker
			for _, f := range aguiFrames2(w.Body.Bytes()) {
				if err := c.Check([]byte(f.data)); err != nil {
					t.Fatalf("%v\nbody %s", err, body)
				}
			}
		case w.Code >= 400 && w.Code < 500:
			if e := decodeError(t, w.Body.Bytes()); e.Code == "" || e.Message == "" {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		default:
			t.Fatalf("status %d for %s: %s", w.Code, body, w.Body)
		}
	})
}

// FuzzAGUIEventID: an id parses only as "N" or "N.K", and back to itself.
func FuzzAGUIEventID(f *testing.F) {
	for _, s := range []string{"0", "7", "7.1", "18446744073709551615.1048576", "1.", ".1", "1.2.3", "01.02", "-1", "1e3", "७"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parseAGUIID(s)
		if !ok {
			return
		}
		seq, count, dotted := strings.Cut(s, ".")
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil || n != p.Seq || dotted != p.Partial || !isDigits(seq) {
			t.Fatalf("%q parsed as %+v", s, p)
		}
		if dotted {
			k, err := strconv.Atoi(count)
			if err != nil || k != p.Count || !isDigits(count) || k > maxAGUIEventsPerEvent {
				t.Fatalf("%q parsed as %+v", s, p)
			}
		}
	})
}
