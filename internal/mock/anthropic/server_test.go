package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/mock/mocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, sc Scenario, opts ...Option) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0", sc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// body is a request as Claude Code shapes it: a system role inside
// messages, adaptive thinking, context management, effort, and a JSON
// string in metadata.user_id.
func body(stream bool, extra ...map[string]any) []byte {
	msgs := []any{
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "<system-reminder>x</system-reminder>"},
			map[string]any{"type": "text", "text": "say hi"},
		}},
		map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "# Environment"}}},
	}
	for _, m := range extra {
		msgs = append(msgs, m)
	}
	b, _ := json.Marshal(map[string]any{
		"model": "claude-test", "max_tokens": 128000, "stream": stream,
		"thinking":           map[string]any{"type": "adaptive", "display": "updates"},
		"context_management": map[string]any{"edits": []any{map[string]any{"type": "clear_thinking_20251015", "keep": "all"}}},
		"output_config":      map[string]any{"effort": "medium"},
		"metadata":           map[string]any{"user_id": `{"device_id":"d","session_id":"s"}`},
		"system": []any{
			map[string]any{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332"},
			map[string]any{"type": "text", "text": "You are a test.", "cache_control": map[string]any{"type": "ephemeral"}},
		},
		"tools": []any{
			map[string]any{"name": "Bash", "description": "d", "input_schema": map[string]any{"type": "object"}},
			map[string]any{"name": "DeferredToolPlaceholder", "defer_loading": true},
		},
		"messages": msgs,
	})
	return b
}

func toolResult(id string) map[string]any {
	return map[string]any{"role": "user", "content": []any{map[string]any{
		"type": "tool_result", "tool_use_id": id, "content": "(Bash completed with no output)", "is_error": false,
		"cache_control": map[string]any{"type": "ephemeral"},
	}}}
}

func post(t *testing.T, c *http.Client, url string, b []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/messages?beta=true", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", "k1")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type frame struct {
	event string
	data  map[string]any
}

// readSSE parses an event stream strictly: every frame is an event line,
// a data line and a blank line, LF only.
func readSSE(t *testing.T, r io.Reader) []frame {
	t.Helper()
	var out []frame
	br := bufio.NewReader(r)
	for {
		ev, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) && ev == "" {
			return out
		}
		data, err2 := br.ReadString('\n')
		blank, err3 := br.ReadString('\n')
		if err != nil || err2 != nil || err3 != nil || blank != "\n" ||
			!strings.HasPrefix(ev, "event: ") || !strings.HasPrefix(data, "data: ") {
			t.Fatalf("malformed frame %q %q %q", ev, data, blank)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &d); err != nil {
			t.Fatalf("frame data: %v", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(ev, "event: "), "\n")
		if d["type"] != name {
			t.Fatalf("event %q carries type %v", name, d["type"])
		}
		out = append(out, frame{name, d})
	}
}

func names(fs []frame) string {
	var n []string
	for _, f := range fs {
		n = append(n, f.event)
	}
	return strings.Join(n, ",")
}

func TestStreamedText(t *testing.T) {
	s := start(t, TextAnswer("hello there"))
	resp := post(t, mocktest.Client(t), s.URL, body(true))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("request-id") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	fs := readSSE(t, resp.Body)
	want := "message_start,ping,content_block_start,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	if got := names(fs); got != want {
		t.Fatalf("frames = %s\nwant %s", got, want)
	}
	msg := fs[0].data["message"].(map[string]any)
	if msg["model"] != "claude-test" || msg["role"] != "assistant" {
		t.Errorf("message_start = %v", msg)
	}
	startUsage := msg["usage"].(map[string]any)
	endUsage := fs[6].data["usage"].(map[string]any)
	if startUsage["output_tokens"] != 1.0 || endUsage["output_tokens"] != float64(textUsage().OutputTokens) ||
		startUsage["cache_read_input_tokens"] != float64(textUsage().CacheReadInputTokens) ||
		endUsage["cache_creation_input_tokens"] != float64(textUsage().CacheCreationInputTokens) {
		t.Errorf("usage start %v end %v", startUsage, endUsage)
	}
	if fs[6].data["delta"].(map[string]any)["stop_reason"] != "end_turn" {
		t.Errorf("message_delta = %v", fs[6].data)
	}
	var text string
	for _, f := range fs {
		if d, ok := f.data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			text += d["text"].(string)
		}
	}
	if text != "hello there" {
		t.Errorf("text = %q", text)
	}

	l := s.Ledger()
	if len(l) != 1 {
		t.Fatalf("ledger = %d entries", len(l))
	}
	e := l[0]
	r := e.Request
	if r.Model != "claude-test" || !r.Stream || r.MaxTokens != 128000 || r.Effort != "medium" || r.Thinking != "adaptive" ||
		r.Header.Get("X-Api-Key") != "k1" || r.RawQuery != "beta=true" || r.Seq != 1 || r.BodyBytes == 0 {
		t.Errorf("request = %+v", r)
	}
	if strings.Join(r.Tools, ",") != "Bash,DeferredToolPlaceholder" || !r.HasTool("Bash") || r.HasTool("Write") {
		t.Errorf("tools = %v", r.Tools)
	}
	if len(r.Messages) != 2 || r.Messages[1].Role != "system" || r.UserText() != "<system-reminder>x</system-reminder>\nsay hi" {
		t.Errorf("messages = %+v", r.Messages)
	}
	if !strings.HasSuffix(r.System, "\nYou are a test.") {
		t.Errorf("system = %q", r.System)
	}
	if e.Status != 200 || e.Billed != textUsage() || l.Billed() != textUsage() {
		t.Errorf("entry = %+v", e)
	}
}

func TestToolTurn(t *testing.T) {
	s := start(t, ToolTurn("echo hello > out.txt", "done"))
	c := mocktest.Client(t)
	fs := readSSE(t, post(t, c, s.URL, body(true)).Body)
	var kinds []string
	var input, toolID string
	for _, f := range fs {
		switch f.event {
		case "content_block_start":
			cb := f.data["content_block"].(map[string]any)
			kinds = append(kinds, cb["type"].(string))
			if cb["type"] == "tool_use" {
				toolID = cb["id"].(string)
				if cb["name"] != "Bash" || len(cb["input"].(map[string]any)) != 0 {
					t.Errorf("tool_use start = %v", cb)
				}
			}
		case "content_block_delta":
			if d := f.data["delta"].(map[string]any); d["type"] == "input_json_delta" {
				input += d["partial_json"].(string)
			}
		case "message_delta":
			if f.data["delta"].(map[string]any)["stop_reason"] != "tool_use" {
				t.Errorf("stop reason = %v", f.data)
			}
		}
	}
	if strings.Join(kinds, ",") != "thinking,text,tool_use" {
		t.Errorf("blocks = %v", kinds)
	}
	var in map[string]string
	if err := json.Unmarshal([]byte(input), &in); err != nil || in["command"] != "echo hello > out.txt" {
		t.Errorf("tool input %q: %v", input, err)
	}
	if !strings.HasPrefix(toolID, "toolu_") {
		t.Errorf("tool id %q", toolID)
	}
	if !strings.Contains(names(fs), "content_block_delta") {
		t.Error("no deltas")
	}

	fs = readSSE(t, post(t, c, s.URL, body(true, toolResult(toolID))).Body)
	if fs[2].data["content_block"].(map[string]any)["type"] != "text" {
		t.Errorf("follow-up = %v", fs[2].data)
	}
	l := s.Ledger()
	if len(l) != 2 || len(l[1].Request.ToolResults()) != 1 || l[1].Request.ToolResults()[0].ToolUseID != toolID ||
		l[1].Request.ToolResults()[0].Text != "(Bash completed with no output)" {
		t.Fatalf("ledger = %+v", l)
	}
	if got, want := l.Billed(), firstCallUsage().Add(followUpUsage()); got != want {
		t.Errorf("billed = %+v, want %+v", got, want)
	}
}

func TestNonStreamedAnswer(t *testing.T) {
	s := start(t, ToolTurn("ls", "done"))
	resp := post(t, mocktest.Client(t), s.URL, body(false))
	var m struct {
		Type       string           `json:"type"`
		Model      string           `json:"model"`
		StopReason string           `json:"stop_reason"`
		Content    []map[string]any `json:"content"`
		Usage      Usage            `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || m.Model != "claude-test" || m.StopReason != "tool_use" || len(m.Content) != 3 ||
		m.Content[0]["thinking"] == "" || m.Content[2]["input"].(map[string]any)["command"] != "ls" || m.Usage != firstCallUsage() {
		t.Errorf("message = %+v", m)
	}
	if s.Ledger().Billed() != firstCallUsage() {
		t.Errorf("billed = %+v", s.Ledger().Billed())
	}
}

func TestFailures(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"} {
		s := start(t, Failure(status))
		resp := post(t, mocktest.Client(t), s.URL, body(true))
		var e struct {
			Type  string   `json:"type"`
			Error APIError `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != status || e.Type != "error" || e.Error.Type != typ || e.Error.Message == "" {
			t.Errorf("%d: got %d %+v", status, resp.StatusCode, e)
		}
		if ra := resp.Header.Get("Retry-After"); (status == 429) != (ra == "1") {
			t.Errorf("%d: retry-after %q", status, ra)
		}
		if l := s.Ledger(); l[0].Status != status || !l.Billed().isZero() {
			t.Errorf("%d: ledger %+v", status, l)
		}
	}
}

func (u Usage) isZero() bool { return u == Usage{} }

func TestStreamFailure(t *testing.T) {
	s := start(t, StreamFailure("ok"))
	c := mocktest.Client(t)
	fs := readSSE(t, post(t, c, s.URL, body(true)).Body)
	if names(fs) != "message_start,error" || fs[1].data["error"].(map[string]any)["type"] != "overloaded_error" {
		t.Fatalf("frames = %s %v", names(fs), fs)
	}
	b, _ := io.ReadAll(post(t, c, s.URL, body(false)).Body)
	if !strings.Contains(string(b), `"text":"ok"`) {
		t.Errorf("fallback = %s", b)
	}
	started := textUsage()
	started.OutputTokens = 1
	if got := s.Ledger().Billed(); got != started.Add(textUsage()) {
		t.Errorf("billed = %+v: want message_start's usage for the cut stream plus the fallback's", got)
	}
}

func TestStructured(t *testing.T) {
	s := start(t, Structured(map[string]string{"name": "Bob"}))
	c := mocktest.Client(t)
	b, _ := json.Marshal(map[string]any{"model": "m", "tools": []any{map[string]any{"name": "StructuredOutput"}},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	b2, _ := io.ReadAll(post(t, c, s.URL, b).Body)
	if !strings.Contains(string(b2), `"name":"StructuredOutput"`) || !strings.Contains(string(b2), `"input":{"name":"Bob"}`) {
		t.Errorf("with the tool: %s", b2)
	}
	b3, _ := io.ReadAll(post(t, c, s.URL, body(false)).Body)
	if !strings.Contains(string(b3), `"text":"{\"name\":\"Bob\"}"`) {
		t.Errorf("without the tool: %s", b3)
	}
	if s.Ledger()[0].Request.UserText() != "hi" {
		t.Errorf("string content = %+v", s.Ledger()[0].Request.Messages)
	}
}

func TestAlwaysToolAndSequence(t *testing.T) {
	s := start(t, Sequence(Failure(429), AlwaysTool("echo x")))
	c := mocktest.Client(t)
	if resp := post(t, c, s.URL, body(false)); resp.StatusCode != 429 {
		t.Fatalf("first = %d", resp.StatusCode)
	}
	for i := 0; i < 2; i++ {
		b, _ := io.ReadAll(post(t, c, s.URL, body(false, toolResult("t"))).Body)
		if !strings.Contains(string(b), `"command":"echo x"`) {
			t.Errorf("request %d: %s", i+2, b)
		}
	}
	if got := Sequence().Respond(&Request{}); got.Status != 500 {
		t.Errorf("empty sequence = %+v", got)
	}
}

func TestOtherRoutes(t *testing.T) {
	s := start(t, TextAnswer("x"))
	c := mocktest.Client(t)
	req, _ := http.NewRequest(http.MethodHead, s.URL+"/api/hello", nil)
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD /api/hello: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = c.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), `"not_found_error"`) {
		t.Errorf("GET /v1/models: %d %s", resp.StatusCode, b)
	}
	resp = post(t, c, s.URL, []byte("{not json"))
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "invalid_request_error") {
		t.Errorf("bad JSON: %d %s", resp.StatusCode, b)
	}
	l := s.Ledger()
	if len(l) != 3 || l[0].Request.Method != "HEAD" || l[2].Request.ParseError == "" || len(l.Messages()) != 1 {
		t.Errorf("ledger = %+v", l)
	}
	s.Reset()
	if len(s.Ledger()) != 0 {
		t.Error("Reset kept entries")
	}
}

func TestNamed(t *testing.T) {
	for _, n := range Names() {
		sc, err := Named(n, "")
		if err != nil || sc == nil {
			t.Errorf("Named(%q) = %v, %v", n, sc, err)
		}
	}
	if _, err := Named("nope", ""); err == nil || !strings.Contains(err.Error(), "text") {
		t.Errorf("unknown name: %v", err)
	}
	if r := LongTool().Respond(&Request{}); string(r.Message.Content[2].Input) != `{"command":"perl -e 'sleep 60'","description":"mock command"}` {
		t.Errorf("LongTool input: %s", r.Message.Content[2].Input)
	}
	sc, _ := Named("tool", "touch x")
	r := sc.Respond(&Request{})
	if string(r.Message.Content[2].Input) != `{"command":"touch x","description":"mock command"}` {
		t.Errorf("command override: %s", r.Message.Content[2].Input)
	}
}

// FuzzParseBody feeds arbitrary bodies to the request parser: it must not
// panic, and a body it accepts is a JSON object.
func FuzzParseBody(f *testing.F) {
	f.Add(body(true))
	f.Add(body(false, toolResult("t")))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"a"},{"type":"image"}]}]}]}`))
	f.Add([]byte(`{"system":"plain","messages":[{"role":"user","content":5}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		if err := r.parseBody(b); err == nil && !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		_ = r.ToolResults()
		_ = r.UserText()
		_ = r.countToolResults()
		_ = r.Contains("x")
	})
}

func TestInteractiveScenarios(t *testing.T) {
	result := func(id string) ContentBlock { return ContentBlock{Type: "tool_result", ToolUseID: id, Text: "out"} }
	prompt := Turn{Role: "user", Blocks: []ContentBlock{{Type: "text", Text: "go"}}}
	withResults := func(n int) *Request {
		r := &Request{Messages: []Turn{prompt}}
		for i := 0; i < n; i++ {
			r.Messages = append(r.Messages, Turn{Role: "assistant", Blocks: []ContentBlock{{Type: "tool_use", ID: "t"}}},
				Turn{Role: "user", Blocks: []ContentBlock{result("t")}})
		}
		return r
	}
	command := func(r Response) string {
		for _, b := range r.Message.Content {
			if b.Type == "tool_use" {
				var in struct{ Command string }
				_ = json.Unmarshal(b.Input, &in)
				return in.Command
			}
		}
		return ""
	}

	two := TwoTools("echo one", "echo two", "both")
	if c := command(two.Respond(withResults(0))); c != "echo one" {
		t.Errorf("TwoTools first = %q", c)
	}
	if c := command(two.Respond(withResults(1))); c != "echo two" {
		t.Errorf("TwoTools second = %q", c)
	}
	if r := two.Respond(withResults(2)); command(r) != "" || r.Message.Content[0].Text != "both" {
		t.Errorf("TwoTools answer = %+v", r.Message)
	}

	long := ToolThenText("perl -e 'sleep 60' mark", "after")
	if c := command(long.Respond(withResults(0))); c != "perl -e 'sleep 60' mark" {
		t.Errorf("ToolThenText first = %q", c)
	}
	// A later turn after an interrupt: the history holds the refused
	// result, the last message is the new prompt.
	later := withResults(1)
	later.Messages = append(later.Messages, prompt)
	if r := long.Respond(later); command(r) != "" || r.Message.Content[0].Text != "after" {
		t.Errorf("ToolThenText later = %+v", r.Message)
	}

	turns := Turns("hi")
	for n := 1; n <= 3; n++ {
		if r := turns.Respond(&Request{}); r.Message.Usage != TurnUsage(n) {
			t.Errorf("Turns request %d billed %+v, want %+v", n, r.Message.Usage, TurnUsage(n))
		}
	}
	if TurnUsage(1) == TurnUsage(2) {
		t.Error("TurnUsage is not distinct per request")
	}
}

func TestSeen(t *testing.T) {
	srv, err := Start("127.0.0.1:0", TextAnswer("ok"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	b := []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"},{"type":"text","text":"STEER-123 now"}]}]}`)
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !srv.Ledger().Seen("STEER-123") {
		t.Error("Seen missed a text block")
	}
	if srv.Ledger().Seen("STEER-999") {
		t.Error("Seen found text that was not sent")
	}
}

// TestWiring checks what the server gets from the mocks' core.
func TestWiring(t *testing.T) {
	mocktest.Wiring(t, mocktest.Wire[*Server]{
		Start: func(addr string, hang, nilScenario bool, limit int) (*Server, error) {
			sc := TextAnswer("x")
			switch {
			case nilScenario:
				sc = nil
			case hang:
				sc = Hang()
			}
			var opts []Option
			if limit > 0 {
				opts = append(opts, LedgerLimit(limit))
			}
			return Start(addr, sc, opts...)
		},
		URL:  func(s *Server) string { return s.URL + "/v1/messages" },
		Body: body(true),
		Entries: func(s *Server) []mocktest.Entry {
			var out []mocktest.Entry
			for _, e := range s.Ledger() {
				out = append(out, mocktest.Entry{Seq: e.Request.Seq, Status: e.Status, Hung: e.Hung})
			}
			return out
		},
	})
}
