package chat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// openCodeBody returns a request body OpenCode 1.18.33 sent, from
// testdata: its title request, the first request of a turn, and the
// follow-up carrying a bash call's result.
func openCodeBody(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "opencode_"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// body is a small request: a system and a user message, then extra
// messages, with two tools.
func body(stream bool, extra ...map[string]any) []byte {
	msgs := []any{
		map[string]any{"role": "system", "content": "You are a test."},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "say hi"}}},
	}
	for _, e := range extra {
		msgs = append(msgs, e)
	}
	b, _ := json.Marshal(map[string]any{
		"model": "gpt-test", "stream": stream, "stream_options": map[string]any{"include_usage": true},
		"max_tokens": 32000, "reasoning_effort": "high", "messages": msgs, "tool_choice": "auto",
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "bash", "parameters": map[string]any{"type": "object"}}},
			map[string]any{"type": "function", "function": map[string]any{"name": "read"}},
		},
	})
	return b
}

// noUsage is body with stream_options.include_usage off.
func noUsage(stream bool) []byte {
	var m map[string]any
	_ = json.Unmarshal(body(stream), &m)
	delete(m, "stream_options")
	b, _ := json.Marshal(m)
	return b
}

func assistantCall(id, name, args string) map[string]any {
	return map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
		map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}
}

func toolResult(id, output string) map[string]any {
	return map[string]any{"role": "tool", "tool_call_id": id, "content": output}
}

func post(t *testing.T, c *http.Client, url string, b []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/chat/completions", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readSSE parses a chunk stream strictly: every frame is one "data: "
// line and a blank line, LF only, no event names, and the last frame is
// [DONE]. It returns the JSON chunks and whether [DONE] came.
func readSSE(t *testing.T, r io.Reader) (chunks []map[string]any, done bool) {
	t.Helper()
	br := bufio.NewReader(r)
	for {
		data, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) && data == "" {
			return chunks, done
		}
		blank, err2 := br.ReadString('\n')
		if err != nil || err2 != nil || blank != "\n" || !strings.HasPrefix(data, "data: ") || done {
			t.Fatalf("malformed frame %q %q (after [DONE]: %v)", data, blank, done)
		}
		payload := strings.TrimSuffix(strings.TrimPrefix(data, "data: "), "\n")
		if payload == "[DONE]" {
			done = true
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			t.Fatalf("frame data %q: %v", payload, err)
		}
		chunks = append(chunks, m)
	}
}

// field walks nested maps and lists: field(m, "choices", 0, "delta").
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func usageOf(t *testing.T, v any) Usage {
	t.Helper()
	b, _ := json.Marshal(v)
	var u Usage
	if err := json.Unmarshal(b, &u); err != nil {
		t.Fatalf("usage %s: %v", b, err)
	}
	return u
}

// deltas concatenates the key of every chunk's delta.
func deltas(chunks []map[string]any, key string) string {
	var b strings.Builder
	for _, c := range chunks {
		if s, ok := field(c, "choices", 0, "delta", key).(string); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}

func TestStreamedText(t *testing.T) {
	s := start(t, TextAnswer("hello there"))
	resp := post(t, mocktest.Client(t), s.URL, body(true))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	chunks, done := readSSE(t, resp.Body)
	if !done || len(chunks) != 5 {
		t.Fatalf("%d chunks, [DONE] %v: %v", len(chunks), done, chunks)
	}
	for _, c := range chunks {
		if c["object"] != "chat.completion.chunk" || c["id"] != "chatcmpl-mock-0001" || c["model"] != "gpt-test" || c["created"] != float64(created) {
			t.Errorf("chunk envelope = %v", c)
		}
	}
	if d := field(chunks[0], "choices", 0, "delta"); field(d, "role") != "assistant" || field(d, "content") != "" ||
		field(chunks[0], "choices", 0, "finish_reason") != nil {
		t.Errorf("first chunk = %v", chunks[0])
	}
	if got := deltas(chunks, "content"); got != "hello there" {
		t.Errorf("content = %q", got)
	}
	if field(chunks[3], "choices", 0, "finish_reason") != "stop" || len(field(chunks[3], "choices", 0, "delta").(map[string]any)) != 0 {
		t.Errorf("finish chunk = %v", chunks[3])
	}
	last := chunks[4]
	if len(last["choices"].([]any)) != 0 || usageOf(t, last["usage"]) != textUsage() {
		t.Errorf("usage chunk = %v", last)
	}
	if total := field(last, "usage", "total_tokens"); total != float64(textUsage().PromptTokens+textUsage().CompletionTokens) {
		t.Errorf("total_tokens = %v", total)
	}

	l := s.Ledger()
	if len(l) != 1 {
		t.Fatalf("ledger = %d entries", len(l))
	}
	e := l[0]
	r := e.Request
	if r.Model != "gpt-test" || !r.Stream || !r.IncludeUsage || r.MaxTokens != 32000 || r.ReasoningEffort != "high" ||
		r.ToolChoice != "auto" || r.Header.Get("Authorization") != "Bearer k1" || r.Path != "/v1/chat/completions" ||
		r.Seq != 1 || r.BodyBytes == 0 || r.Format != nil || r.TitleRequest() {
		t.Errorf("request = %+v", r)
	}
	if got := strings.Join(r.Tools, ","); got != "bash,read" || !r.HasTool("read") || r.HasTool("write") {
		t.Errorf("tools = %s", got)
	}
	if r.LastUserText() != "say hi" || r.System() != "You are a test." || len(r.ToolResults()) != 0 || len(r.Messages) != 2 {
		t.Errorf("messages = %+v", r.Messages)
	}
	if e.Status != 200 || e.Billed != textUsage() || l.Billed() != textUsage() || e.Hung || e.Stalled {
		t.Errorf("entry = %+v", e)
	}
}

// TestUsageNotAsked checks that a stream without include_usage carries
// no usage chunk, and is billed all the same.
func TestUsageNotAsked(t *testing.T) {
	s := start(t, TextAnswer("hi"))
	chunks, done := readSSE(t, post(t, mocktest.Client(t), s.URL, noUsage(true)).Body)
	for _, c := range chunks {
		if _, ok := c["usage"]; ok {
			t.Errorf("usage chunk without include_usage: %v", c)
		}
	}
	if !done || s.Ledger().Billed() != textUsage() || s.Ledger()[0].Request.IncludeUsage {
		t.Errorf("done %v, ledger %+v", done, s.Ledger())
	}
}

func TestToolTurn(t *testing.T) {
	s := start(t, ToolTurn(Bash("echo hi > out.txt"), "done"))
	c := mocktest.Client(t)
	chunks, _ := readSSE(t, post(t, c, s.URL, body(true)).Body)
	const reasoning = "The user wants a command run. I will call bash."
	if got := deltas(chunks, "reasoning_content"); got != reasoning {
		t.Errorf("reasoning = %q", got)
	}
	var header, args map[string]any
	for _, ch := range chunks {
		tc, ok := field(ch, "choices", 0, "delta", "tool_calls", 0).(map[string]any)
		if !ok {
			continue
		}
		if header == nil {
			header = tc
		} else {
			args = tc
		}
	}
	callID, _ := header["id"].(string)
	if !strings.HasPrefix(callID, "call_mock_") || header["type"] != "function" || header["index"] != 0.0 ||
		field(header, "function", "name") != "bash" || field(header, "function", "arguments") != "" {
		t.Errorf("call header = %v", header)
	}
	if _, hasID := args["id"]; hasID || args["index"] != 0.0 || field(args, "function", "arguments") != `{"command":"echo hi > out.txt"}` {
		t.Errorf("call arguments = %v", args)
	}
	finish := chunks[len(chunks)-2]
	if field(finish, "choices", 0, "finish_reason") != "tool_calls" || usageOf(t, chunks[len(chunks)-1]["usage"]) != firstCallUsage() {
		t.Errorf("finish %v, usage %v", finish, chunks[len(chunks)-1])
	}

	// The follow-up replays the call and adds its result.
	follow := body(true, assistantCall(callID, "bash", `{"command":"echo hi > out.txt"}`), toolResult(callID, "(no output)"))
	chunks, _ = readSSE(t, post(t, c, s.URL, follow).Body)
	if got := deltas(chunks, "content"); got != "done" || field(chunks[len(chunks)-2], "choices", 0, "finish_reason") != "stop" {
		t.Errorf("follow-up = %q, %v", got, chunks)
	}
	// A call the client answered through a tool of its own ("invalid")
	// is still answered: the model gives up on it.
	invalid := body(true, assistantCall("c9", "invalid", `{"tool":"bash"}`), toolResult("c9", "unavailable tool"))
	chunks, _ = readSSE(t, post(t, c, s.URL, invalid).Body)
	if got := deltas(chunks, "content"); got != "done" {
		t.Errorf("answer to the invalid call = %q", got)
	}
	// Results of an earlier turn do not count.
	earlier := body(true, assistantCall("c1", "bash", "{}"), toolResult("c1", "x"),
		map[string]any{"role": "assistant", "content": "ok"}, map[string]any{"role": "user", "content": "again"})
	chunks, _ = readSSE(t, post(t, c, s.URL, earlier).Body)
	if deltas(chunks, "content") != "" || deltas(chunks, "reasoning_content") != reasoning {
		t.Errorf("a new turn after an earlier tool result = %v", chunks)
	}

	l := s.Ledger()
	res, call, ok := l[1].Request.LastToolResult()
	if len(l) != 4 || !ok || res.ToolCallID != callID || res.Text != "(no output)" || call.Name != "bash" || call.ID != callID {
		t.Fatalf("ledger = %+v", l)
	}
	if got, want := l.Billed(), firstCallUsage().Add(followUpUsage()).Add(followUpUsage()).Add(firstCallUsage()); got != want {
		t.Errorf("billed = %+v, want %+v", got, want)
	}
}

func TestToolStepsAndChain(t *testing.T) {
	a, b, c := Bash("a"), Bash("b"), FunctionCall("read", map[string]string{"filePath": "x"})
	steps := ToolSteps([][]Call{{a, b}, {c}}, "fin")
	var r Request
	if err := r.parseBody(body(true)); err != nil {
		t.Fatal(err)
	}
	if got := steps.Respond(&r); len(got.Calls) != 2 || got.Calls[1].Arguments != `{"command":"b"}` || got.Usage != firstCallUsage() ||
		got.Reasoning != "The user wants a command run. I will call bash and bash." {
		t.Errorf("step 1 = %+v", got)
	}
	two := body(true, assistantCall("1", "bash", "{}"), toolResult("1", "x"), assistantCall("2", "bash", "{}"), toolResult("2", "y"))
	var r2 Request
	if err := r2.parseBody(two); err != nil {
		t.Fatal(err)
	}
	if got := steps.Respond(&r2); len(got.Calls) != 1 || got.Calls[0].Name != "read" || got.Usage != followUpUsage() {
		t.Errorf("step 2 = %+v", got)
	}
	if got := ToolChain([]Call{a, b}, "fin").Respond(&r2); got.Text != "fin" || len(got.Calls) != 0 {
		t.Errorf("chain after both = %+v", got)
	}
	one := body(true, assistantCall("1", "bash", "{}"), toolResult("1", "x"))
	var r1 Request
	if err := r1.parseBody(one); err != nil {
		t.Fatal(err)
	}
	if got := ToolChain([]Call{a, b}, "fin").Respond(&r1); len(got.Calls) != 1 || got.Calls[0].Arguments != `{"command":"b"}` {
		t.Errorf("chain after one = %+v", got)
	}
	if got := LongTool().Respond(&r); got.Calls[0].Arguments != `{"command":"sleep 60; echo done"}` {
		t.Errorf("LongTool = %+v", got)
	}
}

func TestNonStreamed(t *testing.T) {
	s := start(t, ToolTurn(Bash("ls"), "done"))
	resp := post(t, mocktest.Client(t), s.URL, body(false))
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var r map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	msg := field(r, "choices", 0, "message")
	if r["object"] != "chat.completion" || r["model"] != "gpt-test" || field(msg, "role") != "assistant" || field(msg, "content") != nil ||
		field(msg, "reasoning_content") != "The user wants a command run. I will call bash." ||
		field(msg, "tool_calls", 0, "function", "arguments") != `{"command":"ls"}` || field(msg, "tool_calls", 0, "type") != "function" ||
		field(r, "choices", 0, "finish_reason") != "tool_calls" || usageOf(t, r["usage"]) != firstCallUsage() {
		t.Errorf("response = %v", r)
	}
	s2 := start(t, TextAnswer("plain"))
	var r2 map[string]any
	if err := json.NewDecoder(post(t, mocktest.Client(t), s2.URL, noUsage(false)).Body).Decode(&r2); err != nil {
		t.Fatal(err)
	}
	if field(r2, "choices", 0, "message", "content") != "plain" || field(r2, "choices", 0, "message", "tool_calls") != nil {
		t.Errorf("text response = %v", r2)
	}
	if s.Ledger().Billed() != firstCallUsage() || s2.Ledger().Billed() != textUsage() {
		t.Errorf("billed = %+v, %+v", s.Ledger().Billed(), s2.Ledger().Billed())
	}
}

// TestOpenCodeBodies checks the summary of request bodies OpenCode
// 1.18.33 really sent, and that the built-in scenarios tell its title
// request from its turn.
func TestOpenCodeBodies(t *testing.T) {
	var title, first, follow Request
	for _, c := range []struct {
		r    *Request
		name string
	}{{&title, "title"}, {&first, "first"}, {&follow, "followup"}} {
		if err := c.r.parseBody(openCodeBody(t, c.name)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	if !title.TitleRequest() || first.TitleRequest() || follow.TitleRequest() {
		t.Errorf("title request: %v %v %v", title.TitleRequest(), first.TitleRequest(), follow.TitleRequest())
	}
	if title.Model != "mock-model" || !title.Stream || !title.IncludeUsage || title.MaxTokens != 32000 || len(title.Tools) != 0 ||
		!strings.HasPrefix(title.System(), "You are a title generator") || title.LastUserText() != `"Write hi to out.txt."` {
		t.Errorf("title = %+v", title)
	}
	wantTools := "bash,edit,glob,grep,read,skill,task,todowrite,webfetch,write"
	if got := strings.Join(first.Tools, ","); got != wantTools || first.ToolChoice != "auto" || len(first.Messages) != 2 ||
		!strings.HasPrefix(first.System(), "You are opencode") || first.LastUserText() != `"Write hi to out.txt."` {
		t.Errorf("first: tools %s, choice %q, %d messages, prompt %q", got, first.ToolChoice, len(first.Messages), first.LastUserText())
	}
	res, call, ok := follow.LastToolResult()
	if !ok || call.Name != "bash" || call.Arguments != `{"command":"echo hi > out.txt"}` || res.Text != "(no output)" ||
		follow.Messages[2].Reasoning != "The user wants a command run. I will call bash." {
		t.Errorf("follow-up: %+v %+v %+v", res, call, follow.Messages[2])
	}
	sc := ToolTurn(Bash("echo hi > out.txt"), "answered")
	if got := sc.Respond(&title); got.Text != Title || got.Usage != titleUsage() || len(got.Calls) != 0 {
		t.Errorf("title answer = %+v", got)
	}
	if got := sc.Respond(&first); len(got.Calls) != 1 {
		t.Errorf("first answer = %+v", got)
	}
	if got := sc.Respond(&follow); got.Text != "answered" {
		t.Errorf("follow-up answer = %+v", got)
	}

	s := start(t, sc)
	c := mocktest.Client(t)
	for _, name := range []string{"title", "first"} {
		resp := post(t, c, s.URL, openCodeBody(t, name))
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	l := s.Ledger()
	if len(l.Titles()) != 1 || len(l.Turns()) != 1 || l.Titles().Billed() != titleUsage() || l.Turns().Billed() != firstCallUsage() ||
		l.Billed() != titleUsage().Add(firstCallUsage()) {
		t.Errorf("titles %+v, turns %+v", l.Titles(), l.Turns())
	}
}

func TestFailures(t *testing.T) {
	for status, want := range map[int]struct{ typ, code string }{
		400: {"invalid_request_error", "invalid_request"}, 401: {"invalid_request_error", "invalid_api_key"},
		403: {"invalid_request_error", "unsupported_country_region_territory"}, 404: {"invalid_request_error", "model_not_found"},
		429: {"requests", "rate_limit_exceeded"}, 500: {"server_error", ""}, 503: {"server_error", "server_is_overloaded"},
		418: {"invalid_request_error", ""},
	} {
		s := start(t, Failure(status))
		resp := post(t, mocktest.Client(t), s.URL, body(true))
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Error map[string]any `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%d: %s: %v", status, b, err)
		}
		code := e.Error["code"]
		param, hasParam := e.Error["param"]
		if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" || e.Error["type"] != want.typ ||
			e.Error["message"] == "" || !hasParam || param != nil || (want.code == "" && code != nil) || (want.code != "" && code != want.code) {
			t.Errorf("%d: got %d %s", status, resp.StatusCode, b)
		}
		if ra := resp.Header.Get("Retry-After"); (status == 429) != (ra == "1") {
			t.Errorf("%d: Retry-After %q", status, ra)
		}
		if l := s.Ledger(); l[0].Status != status || l.Billed() != (Usage{}) {
			t.Errorf("%d: ledger %+v", status, l)
		}
	}
	s := start(t, Func(func(*Request) Response { return Response{Status: 502, RawBody: "<html>bad gateway</html>"} }))
	resp := post(t, mocktest.Client(t), s.URL, body(true))
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 502 || string(b) != "<html>bad gateway</html>" {
		t.Errorf("raw body: %d %q", resp.StatusCode, b)
	}
	s = start(t, ContextExceeded())
	b, _ := io.ReadAll(post(t, mocktest.Client(t), s.URL, body(true)).Body)
	if !strings.Contains(string(b), `"code":"context_length_exceeded"`) || s.Ledger()[0].Status != 400 {
		t.Errorf("context exceeded: %s", b)
	}
}

func TestStreamError(t *testing.T) {
	s := start(t, StreamError())
	c := mocktest.Client(t)
	chunks, done := readSSE(t, post(t, c, s.URL, body(true)).Body)
	if done || len(chunks) != 2 || field(chunks[1], "error", "type") != "server_error" || field(chunks[1], "error", "message") == nil {
		t.Errorf("chunks %v, [DONE] %v", chunks, done)
	}
	resp := post(t, c, s.URL, body(false))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(b), "invalid content") {
		t.Errorf("non-streamed: %d %s", resp.StatusCode, b)
	}
	if l := s.Ledger(); l[0].Status != 200 || l.Billed() != (Usage{}) {
		t.Errorf("ledger %+v", l)
	}
}

func TestStructured(t *testing.T) {
	s := start(t, Structured(map[string]string{"name": "Bob"}))
	c := mocktest.Client(t)
	var m map[string]any
	_ = json.Unmarshal(body(false), &m)
	m["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{
		"name": "out", "strict": true, "schema": map[string]any{"type": "object"}}}
	withSchema, _ := json.Marshal(m)
	b, _ := io.ReadAll(post(t, c, s.URL, withSchema).Body)
	if !strings.Contains(string(b), `"content":"{\"name\":\"Bob\"}"`) {
		t.Errorf("with a schema: %s", b)
	}
	b, _ = io.ReadAll(post(t, c, s.URL, body(false)).Body)
	if !strings.Contains(string(b), NoSchemaText) {
		t.Errorf("without a schema: %s", b)
	}
	f := s.Ledger()[0].Request.Format
	if f == nil || f.Type != "json_schema" || f.Name != "out" || !f.Strict || string(f.Schema) != `{"type":"object"}` {
		t.Errorf("format = %+v", f)
	}
}

func TestRequestHelpers(t *testing.T) {
	var r Request
	err := r.parseBody([]byte(`{"model":"m","messages":[
		{"role":"developer","content":[{"type":"text","text":"dev"},{"type":"image_url"},{"type":"text","text":"more"}]},
		{"role":"user","content":"first"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"read","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"file"}]},
		{"role":"user","content":"second"},
		{"role":"assistant","reasoning_content":"think","tool_calls":[{"id":"b","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},
		{"role":"tool","tool_call_id":"b","content":"out"},
		7],
		"tool_choice":{"type":"function","function":{"name":"bash"}},"max_completion_tokens":10,"max_tokens":99}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.System() != "dev\nmore" || r.LastUserText() != "second" || strings.Join(r.UserTexts(), ",") != "first,second" ||
		r.ToolChoice != "bash" || r.MaxTokens != 10 || len(r.Messages) != 7 {
		t.Errorf("request = %+v", r)
	}
	res := r.ToolResults()
	if len(res) != 1 || res[0].ToolCallID != "b" || res[0].Text != "out" {
		t.Errorf("results of this turn = %+v", res)
	}
	if c, ok := r.Call("a"); !ok || c.Name != "read" || r.Messages[3].Text != "file" || r.Messages[4].Reasoning != "" || r.Messages[5].Reasoning != "think" {
		t.Errorf("call a = %+v, %v; messages %+v", c, ok, r.Messages)
	}
	if _, ok := r.Call("z"); ok {
		t.Error("found a call that is not there")
	}
	var odd Request
	if err := odd.parseBody([]byte(`{"messages":"x","tools":[{"type":"function","function":{"name":5}},"x",{"type":"web_search"}],"response_format":{"type":"json_object"},"stream":"yes"}`)); err != nil {
		t.Fatal(err)
	}
	if len(odd.Messages) != 0 || strings.Join(odd.Tools, ",") != "function,web_search" || odd.Format == nil || odd.Format.Type != "json_object" ||
		odd.Format.Schema != nil || odd.Stream || odd.TitleRequest() {
		t.Errorf("odd body = %+v", odd)
	}
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"messages":[{"role":"system","content":"Generate a short Title."},{"role":"user","content":"x"}]}`, true},
		{`{"messages":[{"role":"user","content":"Write a title for: x"}]}`, true},
		{`{"messages":[{"role":"system","content":"Generate a short title."}],"tools":[{"type":"function","function":{"name":"bash"}}]}`, false},
		{`{"messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"title please"}]}`, false},
	} {
		var q Request
		if err := q.parseBody([]byte(c.body)); err != nil {
			t.Fatal(err)
		}
		if q.TitleRequest() != c.want {
			t.Errorf("TitleRequest(%s) = %v", c.body, !c.want)
		}
	}
	for _, bad := range []string{"", "null", "[]", `"x"`, "{", `{"model":"m"} x`} {
		var q Request
		if err := q.parseBody([]byte(bad)); err == nil {
			t.Errorf("parseBody(%q) accepted", bad)
		}
	}
}

func TestSequence(t *testing.T) {
	s := start(t, Sequence(Failure(429), AlwaysTool(Bash("echo x"))))
	c := mocktest.Client(t)
	if resp := post(t, c, s.URL, body(false)); resp.StatusCode != 429 {
		t.Fatalf("first = %d", resp.StatusCode)
	}
	for i := 0; i < 2; i++ {
		b, _ := io.ReadAll(post(t, c, s.URL, body(false, assistantCall("c", "bash", "{}"), toolResult("c", "ok"))).Body)
		if !strings.Contains(string(b), `"arguments":"{\"command\":\"echo x\"}"`) {
			t.Errorf("request %d: %s", i+2, b)
		}
	}
	if got := Sequence().Respond(&Request{}); got.Status != 500 {
		t.Errorf("empty sequence = %+v", got)
	}
}

func TestDelay(t *testing.T) {
	s := start(t, Func(func(*Request) Response {
		return Response{Delay: 150 * time.Millisecond, Text: "late", Usage: textUsage()}
	}))
	t0 := time.Now()
	b, _ := io.ReadAll(post(t, mocktest.Client(t), s.URL, body(true)).Body)
	if d := time.Since(t0); d < 150*time.Millisecond || !strings.Contains(string(b), "late") {
		t.Errorf("answered after %v: %s", d, b)
	}
}

func TestHangCloseIsPrompt(t *testing.T) {
	for _, c := range []struct {
		name   string
		sc     Scenario
		stream bool
		// want is the first line the client sees before Close: the
		// first chunk of a stall, nothing for a hang.
		want string
	}{
		{"hang", Hang(), true, ""},
		{"stall", Stall(), true, "data: "},
		{"stall_not_streamed", Stall(), false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Start("127.0.0.1:0", c.sc)
			if err != nil {
				t.Fatal(err)
			}
			cl := mocktest.Client(t)
			got := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, s.URL+"/chat/completions", bytes.NewReader(body(c.stream)))
				resp, err := cl.Do(req)
				if err != nil {
					done <- err
					return
				}
				defer resp.Body.Close()
				line, _ := bufio.NewReader(resp.Body).ReadString('\n')
				got <- line
				_, err = io.ReadAll(resp.Body)
				done <- err
			}()
			mocktest.WaitFor(t, func() bool { l := s.Ledger(); return len(l) == 1 && (l[0].Hung || l[0].Stalled) })
			if c.want != "" {
				select {
				case line := <-got:
					if !strings.HasPrefix(line, c.want) || !strings.Contains(line, `"role":"assistant"`) {
						t.Errorf("first line %q, want the role chunk", line)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("no first chunk")
				}
			}
			select {
			case err := <-done:
				t.Fatalf("request ended early: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			t0 := time.Now()
			s.Close()
			if d := time.Since(t0); d > time.Second {
				t.Errorf("Close took %v", d)
			}
			if err := <-done; err == nil {
				t.Error("the client saw a complete answer, want the connection dropped")
			}
			if l := s.Ledger(); l[0].Billed != (Usage{}) || (c.want == "") != (l[0].Status == 0) {
				t.Errorf("entry = %+v", l[0])
			}
			s.Close() // twice is fine
		})
	}
}

func TestOtherRoutes(t *testing.T) {
	s := start(t, TextAnswer("x"))
	c := mocktest.Client(t)
	base := strings.TrimSuffix(s.URL, "/v1")
	resp, err := c.Get(s.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), `"message":"Invalid URL (GET /v1/models)"`) || !strings.Contains(string(b), `"param":null`) {
		t.Errorf("GET /v1/models: %d %s", resp.StatusCode, b)
	}
	resp, err = c.Post(base+"/chat/completions", "application/json", bytes.NewReader(body(false)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("POST /chat/completions: %d", resp.StatusCode)
	}
	for _, bad := range []string{"{not json", "null"} {
		resp = post(t, c, s.URL, []byte(bad))
		b, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), "invalid_request_error") {
			t.Errorf("body %q: %d %s", bad, resp.StatusCode, b)
		}
	}
	l := s.Ledger()
	if len(l) != 4 || l[0].Request.Method != "GET" || l[1].Request.Path != "/chat/completions" || l[2].Request.ParseError == "" ||
		l[3].Request.ParseError == "" || len(l.Completions()) != 3 || l[0].Status != 404 {
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
	if _, err := Named("nope", ""); err == nil || !strings.Contains(err.Error(), "long-tool") {
		t.Errorf("unknown name: %v", err)
	}
	sc, _ := Named("tool", "touch x")
	if r := sc.Respond(&Request{}); r.Calls[0].Arguments != `{"command":"touch x"}` {
		t.Errorf("command override: %+v", r.Calls)
	}
	sc, _ = Named("error-429", "")
	if r := sc.Respond(&Request{}); r.Status != 429 || r.Header.Get("Retry-After") != "1" {
		t.Errorf("error-429 = %+v", r)
	}
}

func TestUsageJSON(t *testing.T) {
	u := Usage{PromptTokens: 10, CachedTokens: 4, CompletionTokens: 7, ReasoningTokens: 2}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}`
	if string(b) != want {
		t.Errorf("usage = %s\nwant %s", b, want)
	}
	var back Usage
	if err := json.Unmarshal(b, &back); err != nil || back != u {
		t.Errorf("round trip = %+v, %v", back, err)
	}
	if got := u.Add(u); got != (Usage{20, 8, 14, 4}) {
		t.Errorf("Add = %+v", got)
	}
	for _, f := range []func() Usage{firstCallUsage, followUpUsage, textUsage, titleUsage} {
		u := f()
		if u.CachedTokens <= 0 || u.ReasoningTokens <= 0 || u.PromptTokens <= u.CachedTokens || u.CompletionTokens <= u.ReasoningTokens {
			t.Errorf("built-in usage %+v does not keep its fields apart", u)
		}
	}
}

// FuzzParseRequest feeds arbitrary bodies to the request parser: it must
// not panic, a body it accepts is a JSON object, and the helpers and the
// built-in scenarios work on whatever it made of it.
func FuzzParseRequest(f *testing.F) {
	for _, name := range []string{"title", "first", "followup"} {
		f.Add(openCodeBody(f, name))
	}
	f.Add(body(true, assistantCall("c", "bash", "{}"), toolResult("c", "x")))
	f.Add([]byte(`{"messages":[{"role":"user","content":5},{"role":"tool","content":[1,{"text":2}]},7],"tools":[{"function":null}],"tool_choice":{"function":5}}`))
	f.Add([]byte(`{"messages":[],"response_format":null,"stream_options":{"include_usage":"x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		err := r.parseBody(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		if err == nil && bytes.TrimSpace(b)[0] != '{' {
			t.Fatalf("accepted a body that is not an object: %q", b)
		}
		_ = r.System()
		_ = r.LastUserText()
		_ = r.UserTexts()
		_, _, _ = r.LastToolResult()
		_ = r.TitleRequest()
		_ = ToolSteps([][]Call{{Bash("a"), Bash("b")}, {Bash("c")}}, "x").Respond(&r)
		_ = Structured(1).Respond(&r)
		_ = TextAnswer("t").Respond(&r)
	})
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
		URL:  func(s *Server) string { return s.URL + "/chat/completions" },
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
