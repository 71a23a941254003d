package main

// agentgate acp against a fake gateway (httptest): the mapping of ACP
// requests to the API and of a run's events to session updates.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeRunGateway is a gateway of scripted runs: each handler may append
// events to a run, which its event stream then sends. Function fields
// script the answers to a run's inputs.
type fakeRunGateway struct {
	t *testing.T

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every append
	runs    map[string][]envelope
	created []map[string]any
	calls   []string // "METHOD path body", in order
	uploads [][]byte

	// onCreate, onMessage, onDecision, onInterrupt script a run's events.
	onCreate    func(g *fakeRunGateway, id string, body map[string]any)
	onMessage   func(g *fakeRunGateway, id, msgID string, body map[string]any)
	onDecision  func(g *fakeRunGateway, id, approval, decision string)
	onInterrupt func(g *fakeRunGateway, id string)
}

func newFakeRunGateway(t *testing.T) (*fakeRunGateway, *httptest.Server) {
	g := &fakeRunGateway{t: t, changed: make(chan struct{}), runs: map[string][]envelope{}}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv
}

// emit appends an event to a run's log.
func (g *fakeRunGateway) emit(id, typ string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runs[id] = append(g.runs[id], envelope{V: 1, RunID: id, Seq: uint64(len(g.runs[id]) + 1), Type: typ, Agent: "codex", Data: b})
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *fakeRunGateway) callLog() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

func (g *fakeRunGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var obj map[string]any
	_ = json.Unmarshal(body, &obj)
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	if r.Method == http.MethodGet && len(parts) == 3 && parts[2] == "events" {
		g.stream(w, r, parts[1])
		return
	}
	g.mu.Lock()
	if r.URL.Path == "/v1/files" {
		g.uploads = append(g.uploads, body)
		g.calls = append(g.calls, "POST /v1/files "+r.Header.Get("Content-Type"))
	} else {
		g.calls = append(g.calls, r.Method+" "+r.URL.Path+" "+strings.TrimSpace(string(body)))
	}
	g.mu.Unlock()
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.URL.Path == "/v1/files":
		reply(http.StatusCreated, map[string]any{"id": "file-1", "kind": "image"})
	case r.URL.Path == "/v1/runs" && obj["agent"] == "nope":
		reply(http.StatusBadRequest, map[string]any{"error": map[string]string{"code": "unknown_agent", "message": `unknown agent "nope"`}})
	case r.URL.Path == "/v1/runs":
		g.mu.Lock()
		g.created = append(g.created, obj)
		id := "run-" + strconv.Itoa(len(g.created))
		g.mu.Unlock()
		reply(http.StatusCreated, map[string]any{"id": id, "agent": obj["agent"], "status": "queued", "interactive": true})
		if g.onCreate != nil {
			g.onCreate(g, id, obj)
		}
	case len(parts) == 3 && parts[2] == "messages":
		g.mu.Lock()
		msgID := fmt.Sprintf("msg-%d", len(g.calls))
		g.mu.Unlock()
		reply(http.StatusAccepted, map[string]any{"id": msgID, "mode": "queue"})
		if g.onMessage != nil {
			g.onMessage(g, parts[1], msgID, obj)
		}
	case len(parts) == 4 && parts[2] == "approvals":
		d, _ := obj["decision"].(string)
		reply(http.StatusOK, map[string]any{"id": parts[3], "decision": d})
		if g.onDecision != nil {
			g.onDecision(g, parts[1], parts[3], d)
		}
	case len(parts) == 3 && parts[2] == "interrupt":
		reply(http.StatusAccepted, map[string]any{"status": "interrupting"})
		if g.onInterrupt != nil {
			g.onInterrupt(g, parts[1])
		}
	case len(parts) == 3 && parts[2] == "close":
		reply(http.StatusAccepted, map[string]any{"status": "closing"})
		g.emit(parts[1], "run.completed", map[string]any{"status": "succeeded"})
	default:
		reply(http.StatusNotFound, map[string]any{"error": map[string]string{"code": "not_found", "message": "no such route"}})
	}
}

// stream sends a run's events after Last-Event-ID as they are appended,
// until run.completed.
func (g *fakeRunGateway) stream(w http.ResponseWriter, r *http.Request, id string) {
	next, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		g.mu.Lock()
		evs, changed := g.runs[id][next:], g.changed
		g.mu.Unlock()
		for _, ev := range evs {
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", ev.Seq, b)
			next++
			if ev.Type == "run.completed" {
				w.(http.Flusher).Flush()
				return
			}
		}
		w.(http.Flusher).Flush()
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// editor is the test's side of agentgate acp: it writes requests to its
// stdin and reads what it writes to its stdout.
type editor struct {
	t      *testing.T
	in     *io.PipeWriter
	out    *bufio.Reader
	nextID int
	done   chan int
	stderr *syncBuffer
	// signal cancels the command's context, as SIGTERM does.
	signal context.CancelFunc
}

// startACP runs agentgate acp in-process against the gateway at url.
func startACP(t *testing.T, url string, args ...string) *editor {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	e := &editor{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan int, 1), stderr: &syncBuffer{}, signal: cancel}
	go func() {
		code := run(ctx, append([]string{"--url", url, "acp"}, args...), inR, outW, e.stderr, envOf(nil))
		cancel()
		outW.Close()
		e.done <- code
	}()
	t.Cleanup(func() {
		inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		<-e.done
	})
	return e
}

func (e *editor) write(v any) {
	e.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.in.Write(append(b, '\n')); err != nil {
		e.t.Fatalf("write to agentgate acp: %v", err)
	}
}

// request sends a request and returns its id.
func (e *editor) request(method string, params any) int {
	e.nextID++
	e.write(map[string]any{"jsonrpc": "2.0", "id": e.nextID, "method": method, "params": params})
	return e.nextID
}

// rpcLine is one message agentgate acp wrote.
type rpcLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// next reads the next message agentgate acp wrote.
func (e *editor) next() rpcLine {
	e.t.Helper()
	line, err := e.out.ReadBytes('\n')
	if err != nil {
		e.t.Fatalf("read agentgate acp's output: %v; stderr:\n%s", err, e.stderr)
	}
	var m rpcLine
	if err := json.Unmarshal(line, &m); err != nil {
		e.t.Fatalf("agentgate acp wrote %q: %v", line, err)
	}
	return m
}

// answer reads until the answer to request id, and returns it with the
// session updates seen on the way (as "kind" or "kind:detail").
func (e *editor) answer(id int) (rpcLine, []string) {
	e.t.Helper()
	var updates []string
	for {
		m := e.next()
		if m.Method == "session/update" {
			updates = append(updates, describeUpdate(e.t, m.Params))
			continue
		}
		if m.Method != "" {
			e.t.Fatalf("agentgate acp sent %s %s while the test waited for answer %d", m.Method, m.Params, id)
		}
		if string(m.ID) != strconv.Itoa(id) {
			e.t.Fatalf("answer to %s while the test waited for %d", m.ID, id)
		}
		return m, updates
	}
}

// describeUpdate is a session/update in short: its kind and what tells
// it apart.
func describeUpdate(t *testing.T, params json.RawMessage) string {
	t.Helper()
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			Kind       string `json:"sessionUpdate"`
			Content    json.RawMessage
			ToolCallID string          `json:"toolCallId"`
			Title      string          `json:"title"`
			ToolKind   string          `json:"kind"`
			Status     string          `json:"status"`
			RawInput   json.RawMessage `json:"rawInput"`
			Entries    []struct {
				Content string `json:"content"`
				Status  string `json:"status"`
			} `json:"entries"`
		} `json:"update"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		t.Fatalf("session/update %s: %v", params, err)
	}
	u := p.Update
	s := p.SessionID + " " + u.Kind
	switch u.Kind {
	case "agent_message_chunk", "agent_thought_chunk":
		var c struct{ Type, Text string }
		_ = json.Unmarshal(u.Content, &c)
		s += ":" + c.Type + ":" + c.Text
	case "tool_call":
		s += fmt.Sprintf(":%s:%s:%s:%s:%s", u.ToolCallID, u.ToolKind, u.Title, u.Status, u.RawInput)
	case "tool_call_update":
		s += ":" + u.ToolCallID + ":" + u.Status
		var cs []struct {
			Type    string
			Content struct{ Type, Text string }
		}
		if json.Unmarshal(u.Content, &cs) == nil && len(cs) > 0 {
			s += ":" + cs[0].Type + ":" + cs[0].Content.Text
		}
	case "plan":
		for _, e := range u.Entries {
			s += ":" + e.Content + "=" + e.Status
		}
	}
	return s
}

// onePixelPNG is a valid 1×1 PNG.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

func TestACPMapsARunToTheEditor(t *testing.T) {
	g, srv := newFakeRunGateway(t)
	g.onCreate = func(g *fakeRunGateway, id string, _ map[string]any) {
		g.emit(id, "run.queued", map[string]any{"position": 1})
		g.emit(id, "turn.started", map[string]any{"turn": 1, "message_id": "m1", "text": "hi"})
		g.emit(id, "reasoning.delta", map[string]any{"id": "r1", "text": "thinking"})
		g.emit(id, "message.delta", map[string]any{"message_id": "a1", "text": "Running it."})
		g.emit(id, "usage.updated", map[string]any{"usage": map[string]int{"input_tokens": 5}})
		g.emit(id, "tool_call.started", map[string]any{"id": "tc1", "name": "Bash", "input": map[string]string{"command": "touch a.txt"}})
		g.emit(id, "approval.requested", map[string]any{"id": "ap1", "tool_call_id": "tc1", "tool": "Bash",
			"input": map[string]string{"command": "touch a.txt"}, "options": []string{"allow", "allow_session", "deny", "deny_and_stop"}})
	}
	g.onDecision = func(g *fakeRunGateway, id, approval, decision string) {
		g.emit(id, "approval.resolved", map[string]any{"id": approval, "decision": decision, "reason": "client"})
		g.emit(id, "tool_call.completed", map[string]any{"id": "tc1", "output": "done", "is_error": false})
		g.emit(id, "plan.updated", map[string]any{"steps": []map[string]string{{"step": "touch", "status": "completed"}, {"step": "check", "status": "in_progress"}}})
		g.emit(id, "turn.completed", map[string]any{"turn": 1, "status": "succeeded"})
	}
	turn := 1
	g.onMessage = func(g *fakeRunGateway, id, msgID string, body map[string]any) {
		turn++
		g.emit(id, "turn.started", map[string]any{"turn": turn, "message_id": msgID, "text": body["text"]})
		switch body["text"] {
		case "wait":
			g.emit(id, "message.delta", map[string]any{"message_id": "a2", "text": "Waiting."})
		case "fail":
			g.emit(id, "turn.completed", map[string]any{"turn": turn, "status": "failed",
				"error": map[string]any{"class": "rate_limited", "message": "the model's rate limit", "retryable": true, "hint": "retry later"}})
		}
	}
	g.onInterrupt = func(g *fakeRunGateway, id string) {
		g.emit(id, "turn.completed", map[string]any{"turn": turn, "status": "cancelled"})
	}

	e := startACP(t, srv.URL, "--agent", "codex", "--workspace", "run:run-0")
	init, _ := e.answer(e.request("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}))
	var ir struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession        bool            `json:"loadSession"`
			PromptCapabilities map[string]bool `json:"promptCapabilities"`
		} `json:"agentCapabilities"`
		AgentInfo struct{ Name, Version string } `json:"agentInfo"`
	}
	if err := json.Unmarshal(init.Result, &ir); err != nil || ir.ProtocolVersion != 1 || ir.AgentInfo.Name != "agentgate" ||
		ir.AgentInfo.Version == "" || ir.AgentCapabilities.LoadSession || !ir.AgentCapabilities.PromptCapabilities["image"] {
		t.Fatalf("initialize answered %s (%v)", init.Result, err)
	}

	newRes, _ := e.answer(e.request("session/new", map[string]any{"cwd": "/home/me/project", "mcpServers": []any{},
		"_meta": map[string]any{"agentgate": map[string]any{"model": "gpt-x", "metadata": map[string]string{"ticket": "T-1"}}}}))
	var ns struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(newRes.Result, &ns); err != nil || ns.SessionID == "" {
		t.Fatalf("session/new answered %s", newRes.Result)
	}
	sid := ns.SessionID
	if calls := g.callLog(); len(calls) != 0 {
		t.Fatalf("session/new made a run before the first prompt: %v", calls)
	}

	// The first prompt: an image uploaded, the run created with it.
	first := e.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{
		map[string]any{"type": "text", "text": "hi"},
		map[string]any{"type": "image", "mimeType": "image/png", "data": onePixelPNG},
	}})
	var updates []string
	var perm rpcLine
	for perm.Method == "" {
		m := e.next()
		if m.Method == "session/update" {
			updates = append(updates, describeUpdate(t, m.Params))
			continue
		}
		if m.Method != "session/request_permission" {
			t.Fatalf("before the permission request: %+v", m)
		}
		perm = m
	}
	want := []string{
		sid + " agent_thought_chunk:text:thinking",
		sid + " agent_message_chunk:text:Running it.",
		sid + ` tool_call:tc1:execute:Bash: touch a.txt:pending:{"command":"touch a.txt"}`,
	}
	if strings.Join(updates, "\n") != strings.Join(want, "\n") {
		t.Fatalf("updates:\n%s\nwant:\n%s", strings.Join(updates, "\n"), strings.Join(want, "\n"))
	}
	var pr struct {
		SessionID string `json:"sessionId"`
		ToolCall  struct {
			ToolCallID string `json:"toolCallId"`
			Kind       string `json:"kind"`
		} `json:"toolCall"`
		Options []struct{ OptionID, Kind string } `json:"options"`
	}
	if err := json.Unmarshal(perm.Params, &pr); err != nil || pr.SessionID != sid || pr.ToolCall.ToolCallID != "tc1" || pr.ToolCall.Kind != "execute" {
		t.Fatalf("session/request_permission %s (%v)", perm.Params, err)
	}
	if got := fmt.Sprint(pr.Options); got != "[{allow allow_once} {allow_session allow_always} {deny reject_once}]" {
		t.Fatalf("options %s", got)
	}
	e.write(map[string]any{"jsonrpc": "2.0", "id": perm.ID, "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow_session"}}})
	res, updates := e.answer(first)
	want = []string{
		sid + " tool_call_update:tc1:in_progress",
		sid + " tool_call_update:tc1:completed:content:done",
		sid + " plan:touch=completed:check=in_progress",
	}
	if strings.Join(updates, "\n") != strings.Join(want, "\n") {
		t.Fatalf("updates:\n%s\nwant:\n%s", strings.Join(updates, "\n"), strings.Join(want, "\n"))
	}
	if string(res.Result) != `{"_meta":{"agentgate":{"run_id":"run-1"}},"stopReason":"end_turn"}` {
		t.Fatalf("the first prompt answered %s %+v", res.Result, res.Error)
	}
	g.mu.Lock()
	created, uploads := g.created[0], g.uploads
	g.mu.Unlock()
	if png, _ := base64.StdEncoding.DecodeString(onePixelPNG); len(uploads) != 1 || string(uploads[0]) != string(png) {
		t.Fatalf("uploads %q", uploads)
	}
	cb, _ := json.Marshal(created)
	if want := `{"agent":"codex","approvals":"ask","attachments":[{"file_id":"file-1"}],"interactive":true,` +
		`"metadata":{"acp_cwd":"/home/me/project","ticket":"T-1"},"model":"gpt-x","prompt":"hi","workspace":{"from_run":"run-0"}}`; string(cb) != want {
		t.Fatalf("POST /v1/runs\n got %s\nwant %s", cb, want)
	}

	// A follow-up prompt, cancelled by the editor once its turn runs.
	second := e.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "wait"}}})
	if m := e.next(); m.Method != "session/update" || !strings.HasSuffix(describeUpdate(t, m.Params), "agent_message_chunk:text:Waiting.") {
		t.Fatalf("the second turn's text: %+v", m)
	}
	e.write(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": sid}})
	if res, _ := e.answer(second); !strings.Contains(string(res.Result), `"stopReason":"cancelled"`) {
		t.Fatalf("the cancelled prompt answered %s %+v", res.Result, res.Error)
	}

	// A failed turn is a JSON-RPC error with the gateway's class.
	res, _ = e.answer(e.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "fail"}}}))
	if res.Error == nil || res.Error.Code != -32000 || res.Error.Message != "the model's rate limit" ||
		string(res.Error.Data) != `{"code":"rate_limited","hint":"retry later","retryable":true}` {
		t.Fatalf("the failed prompt answered %s %+v", res.Result, res.Error)
	}

	// The end of input closes the run, and the command exits 0.
	e.in.Close()
	if code := <-e.done; code != exitOK {
		t.Fatalf("agentgate acp exited %d; stderr:\n%s", code, e.stderr)
	}
	e.done <- exitOK // for the cleanup
	calls := g.callLog()
	wantCalls := []string{
		"POST /v1/files image/png",
		"POST /v1/runs",
		`POST /v1/runs/run-1/approvals/ap1 {"decision":"allow_session"}`,
		`POST /v1/runs/run-1/messages {"text":"wait"}`,
		"POST /v1/runs/run-1/interrupt ",
		`POST /v1/runs/run-1/messages {"text":"fail"}`,
		"POST /v1/runs/run-1/close ",
	}
	if len(calls) != len(wantCalls) {
		t.Fatalf("calls:\n%s", strings.Join(calls, "\n"))
	}
	for i, c := range calls {
		if !strings.HasPrefix(c, wantCalls[i]) {
			t.Fatalf("call %d = %q, want %q; all:\n%s", i, c, wantCalls[i], strings.Join(calls, "\n"))
		}
	}
}

func TestACPSessionsAreApart(t *testing.T) {
	g, srv := newFakeRunGateway(t)
	g.onCreate = func(g *fakeRunGateway, id string, body map[string]any) {
		g.emit(id, "turn.started", map[string]any{"turn": 1, "message_id": "m", "text": body["prompt"]})
		g.emit(id, "message.delta", map[string]any{"message_id": "a", "text": "answer to " + body["prompt"].(string)})
		g.emit(id, "turn.completed", map[string]any{"turn": 1, "status": "succeeded"})
	}
	e := startACP(t, srv.URL, "--approvals", "never")
	e.answer(e.request("initialize", map[string]any{"protocolVersion": 1}))
	var ids []string
	for range 2 {
		res, _ := e.answer(e.request("session/new", map[string]any{"cwd": "/w", "mcpServers": []any{}}))
		var ns struct{ SessionID string }
		_ = json.Unmarshal(res.Result, &ns)
		ids = append(ids, ns.SessionID)
	}
	if ids[0] == ids[1] || ids[0] == "" {
		t.Fatalf("session ids %q", ids)
	}
	for i, sid := range ids {
		res, updates := e.answer(e.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "q" + strconv.Itoa(i)}}}))
		if want := sid + " agent_message_chunk:text:answer to q" + strconv.Itoa(i); len(updates) != 1 || updates[0] != want {
			t.Fatalf("session %s's updates %q, want %q", sid, updates, want)
		}
		if !strings.Contains(string(res.Result), `"run_id":"run-`+strconv.Itoa(i+1)+`"`) {
			t.Fatalf("session %s answered %s", sid, res.Result)
		}
	}
	g.mu.Lock()
	approvals := []any{g.created[0]["approvals"], g.created[1]["approvals"]}
	g.mu.Unlock()
	if fmt.Sprint(approvals) != "[never never]" {
		t.Fatalf("approvals of the runs %v, want never from the flag", approvals)
	}

	// Wrong requests are answered, and the process goes on.
	bad, _ := e.answer(e.request("session/new", map[string]any{"cwd": "/w", "mcpServers": []any{}, "_meta": map[string]any{"agentgate": map[string]any{"agnet": "codex"}}}))
	if bad.Error == nil || bad.Error.Code != -32602 || !strings.Contains(bad.Error.Message, "agnet") {
		t.Fatalf("an unknown _meta key answered %+v", bad)
	}
	bad, _ = e.answer(e.request("session/prompt", map[string]any{"sessionId": "nope", "prompt": []any{map[string]any{"type": "text", "text": "x"}}}))
	if bad.Error == nil || bad.Error.Code != -32602 {
		t.Fatalf("a prompt to no session answered %+v", bad)
	}
	bad, _ = e.answer(e.request("session/prompt", map[string]any{"sessionId": ids[0], "prompt": []any{map[string]any{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}}}))
	if bad.Error == nil || bad.Error.Code != -32602 || !strings.Contains(bad.Error.Message, "audio") {
		t.Fatalf("an audio prompt answered %+v", bad)
	}
	// A run the gateway refuses answers the prompt with its code and sentence.
	res, _ := e.answer(e.request("session/new", map[string]any{"cwd": "/w", "mcpServers": []any{}, "_meta": map[string]any{"agentgate": map[string]any{"agent": "nope"}}}))
	var ns struct{ SessionID string }
	_ = json.Unmarshal(res.Result, &ns)
	bad, _ = e.answer(e.request("session/prompt", map[string]any{"sessionId": ns.SessionID, "prompt": []any{map[string]any{"type": "text", "text": "x"}}}))
	if bad.Error == nil || bad.Error.Code != -32000 || bad.Error.Message != `unknown agent "nope"` || string(bad.Error.Data) != `{"code":"unknown_agent","status":400}` {
		t.Fatalf("a refused run answered %+v", bad)
	}
	bad, _ = e.answer(e.request("session/load", map[string]any{"sessionId": ids[0]}))
	if bad.Error == nil || bad.Error.Code != -32601 {
		t.Fatalf("session/load answered %+v", bad)
	}
	e.in.Close()
	if code := <-e.done; code != exitOK {
		t.Fatalf("agentgate acp exited %d; stderr:\n%s", code, e.stderr)
	}
	e.done <- exitOK
	closes := 0
	for _, c := range g.callLog() {
		if strings.HasSuffix(strings.TrimSpace(c), "/close") {
			closes++
		}
	}
	if closes != 2 {
		t.Fatalf("%d runs closed at the end, want 2: %v", closes, g.callLog())
	}
}

func TestACPWithdrawsAPermissionRequestResolvedElsewhere(t *testing.T) {
	g, srv := newFakeRunGateway(t)
	g.onCreate = func(g *fakeRunGateway, id string, _ map[string]any) {
		g.emit(id, "turn.started", map[string]any{"turn": 1, "message_id": "m", "text": "x"})
		g.emit(id, "approval.requested", map[string]any{"id": "ap1", "tool": "Write",
			"input": map[string]string{"file_path": "a.txt"}, "options": []string{"allow", "deny"}})
	}
	e := startACP(t, srv.URL)
	e.answer(e.request("initialize", map[string]any{"protocolVersion": 1}))
	res, _ := e.answer(e.request("session/new", map[string]any{"cwd": "/w", "mcpServers": []any{}}))
	var ns struct{ SessionID string }
	_ = json.Unmarshal(res.Result, &ns)
	prompt := e.request("session/prompt", map[string]any{"sessionId": ns.SessionID, "prompt": []any{map[string]any{"type": "text", "text": "x"}}})
	perm := e.next()
	var pr struct {
		ToolCall struct {
			ToolCallID, Kind, Title string
		} `json:"toolCall"`
	}
	if err := json.Unmarshal(perm.Params, &pr); err != nil || perm.Method != "session/request_permission" ||
		pr.ToolCall.ToolCallID != "ap1" || pr.ToolCall.Kind != "edit" || pr.ToolCall.Title != "Write: a.txt" {
		t.Fatalf("the editor got %+v %s", perm, perm.Params)
	}
	// The approval's deadline passes before the editor answers.
	g.emit("run-1", "approval.resolved", map[string]any{"id": "ap1", "decision": "deny", "reason": "timeout"})
	g.emit("run-1", "turn.completed", map[string]any{"turn": 1, "status": "succeeded"})
	// The withdrawal and the prompt's answer come in either order.
	var withdrawn, answered bool
	for !withdrawn || !answered {
		m := e.next()
		if m.Method == "$/cancel_request" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if string(p.RequestID) != string(perm.ID) {
				t.Fatalf("$/cancel_request of %s, want %s", p.RequestID, perm.ID)
			}
			withdrawn = true
			continue
		}
		if m.Method == "session/update" {
			if d := describeUpdate(t, m.Params); !strings.HasSuffix(d, "tool_call_update:ap1:failed") {
				t.Fatalf("update %s", d)
			}
			continue
		}
		if string(m.ID) != strconv.Itoa(prompt) || !strings.Contains(string(m.Result), "end_turn") {
			t.Fatalf("the prompt answered %+v", m)
		}
		answered = true
	}
	// The editor's late answer changes nothing.
	e.write(map[string]any{"jsonrpc": "2.0", "id": perm.ID, "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}}})
	e.in.Close()
	if code := <-e.done; code != exitOK {
		t.Fatalf("agentgate acp exited %d; stderr:\n%s", code, e.stderr)
	}
	e.done <- exitOK
	for _, c := range g.callLog() {
		if strings.Contains(c, "/approvals/") {
			t.Fatalf("a decision was posted for a resolved approval: %v", g.callLog())
		}
	}
}

func TestACPSignalClosesTheRuns(t *testing.T) {
	g, srv := newFakeRunGateway(t)
	g.onCreate = func(g *fakeRunGateway, id string, _ map[string]any) {
		g.emit(id, "turn.started", map[string]any{"turn": 1, "message_id": "m", "text": "x"})
		g.emit(id, "message.delta", map[string]any{"message_id": "a", "text": "working"})
	}
	e := startACP(t, srv.URL)
	e.answer(e.request("initialize", map[string]any{"protocolVersion": 1}))
	res, _ := e.answer(e.request("session/new", map[string]any{"cwd": "/w", "mcpServers": []any{}}))
	var ns struct{ SessionID string }
	_ = json.Unmarshal(res.Result, &ns)
	e.request("session/prompt", map[string]any{"sessionId": ns.SessionID, "prompt": []any{map[string]any{"type": "text", "text": "x"}}})
	if m := e.next(); m.Method != "session/update" {
		t.Fatalf("want the turn's text first, got %+v", m)
	}
	e.signal()
	go func() { _, _ = io.Copy(io.Discard, e.out) }()
	if code := <-e.done; code != exitInterrupted {
		t.Fatalf("agentgate acp exited %d after a signal; stderr:\n%s", code, e.stderr)
	}
	e.done <- exitInterrupted
	if calls := g.callLog(); !strings.HasPrefix(calls[len(calls)-1], "POST /v1/runs/run-1/close") {
		t.Fatalf("the run was not closed: %v", calls)
	}
}
