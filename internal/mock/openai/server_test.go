package openai

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

// codexBody returns a request body Codex sent, from testdata.
func codexBody(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// body is a small request in Codex's shape: developer and user messages,
// the prompt, then extra items.
func body(stream bool, extra ...map[string]any) []byte {
	input := []any{
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "You are a test."}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<environment_context>\n  <cwd>/x</cwd>\n</environment_context>"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "say hi"}}},
	}
	for _, e := range extra {
		input = append(input, e)
	}
	b, _ := json.Marshal(map[string]any{
		"model": "gpt-test", "stream": stream, "input": input, "tool_choice": "auto", "parallel_tool_calls": true,
		"reasoning": map[string]any{"effort": "medium", "summary": "auto"}, "store": false,
		"include": []any{"reasoning.encrypted_content"}, "prompt_cache_key": "thread-1",
		"tools": []any{
			map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object"}},
			map[string]any{"type": "namespace", "name": "multi_agent_v1", "tools": []any{
				map[string]any{"type": "function", "name": "spawn_agent"}, map[string]any{"type": "function", "name": "wait_agent"}}},
			map[string]any{"type": "web_search", "external_web_access": false},
		},
	})
	return b
}

func callItem(callID, name, args string) map[string]any {
	return map[string]any{"type": "function_call", "id": "fc_x", "status": "completed", "call_id": callID, "name": name, "arguments": args}
}

func outputItem(callID, output string) map[string]any {
	return map[string]any{"type": "function_call_output", "id": "fco_x", "call_id": callID, "output": output}
}

func post(t *testing.T, c *http.Client, url string, b []byte, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/responses", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k1")
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
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
// a data line and a blank line, LF only; the data's type is the event's
// name and sequence_number counts from 0.
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
		if d["type"] != name || d["sequence_number"] != float64(len(out)) {
			t.Fatalf("event %q carries type %v, sequence_number %v (want %d)", name, d["type"], d["sequence_number"], len(out))
		}
		out = append(out, frame{name, d})
	}
}

func names(fs []frame) string {
	var n []string
	for _, f := range fs {
		n = append(n, strings.TrimPrefix(f.event, "response."))
	}
	return strings.Join(n, ",")
}

// field walks nested maps: field(m, "response", "usage").
func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
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

func TestStreamedText(t *testing.T) {
	s := start(t, TextAnswer("hello there"))
	resp := post(t, mocktest.Client(t), s.URL, body(true))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	fs := readSSE(t, resp.Body)
	want := "created,in_progress,output_item.added,content_part.added,output_text.delta,output_text.delta," +
		"output_text.done,content_part.done,output_item.done,completed"
	if got := names(fs); got != want {
		t.Fatalf("events = %s\nwant %s", got, want)
	}
	created := field(fs[0].data, "response").(map[string]any)
	if created["status"] != "in_progress" || created["model"] != "gpt-test" || created["object"] != "response" ||
		len(created["output"].([]any)) != 0 || created["usage"] != nil {
		t.Errorf("response.created = %v", created)
	}
	added := field(fs[2].data, "item").(map[string]any)
	if added["type"] != "message" || added["status"] != "in_progress" || added["role"] != "assistant" || len(added["content"].([]any)) != 0 {
		t.Errorf("output_item.added = %v", added)
	}
	var text string
	for _, f := range fs {
		if f.event == "response.output_text.delta" {
			text += f.data["delta"].(string)
			if f.data["item_id"] != added["id"] || f.data["output_index"] != 0.0 || f.data["content_index"] != 0.0 {
				t.Errorf("delta = %v", f.data)
			}
		}
	}
	if text != "hello there" || fs[6].data["text"] != "hello there" || field(fs[7].data, "part", "text") != "hello there" {
		t.Errorf("text = %q, done %v, part %v", text, fs[6].data, fs[7].data)
	}
	done := field(fs[8].data, "item").(map[string]any)
	if done["status"] != "completed" || field(done["content"].([]any)[0].(map[string]any), "text") != "hello there" {
		t.Errorf("output_item.done = %v", done)
	}
	completed := field(fs[9].data, "response").(map[string]any)
	if completed["status"] != "completed" || len(completed["output"].([]any)) != 1 || usageOf(t, completed["usage"]) != textUsage() {
		t.Errorf("response.completed = %v", completed)
	}
	if total := field(completed, "usage", "total_tokens"); total != float64(textUsage().InputTokens+textUsage().OutputTokens) {
		t.Errorf("total_tokens = %v", total)
	}

	l := s.Ledger()
	if len(l) != 1 {
		t.Fatalf("ledger = %d entries", len(l))
	}
	e := l[0]
	r := e.Request
	if r.Model != "gpt-test" || !r.Stream || r.Effort != "medium" || r.Summary != "auto" || r.PromptCacheKey != "thread-1" ||
		r.Header.Get("Authorization") != "Bearer k1" || r.Path != "/v1/responses" || r.Seq != 1 || r.BodyBytes == 0 || r.Format != nil {
		t.Errorf("request = %+v", r)
	}
	if got := strings.Join(r.Tools, ","); got != "exec_command,multi_agent_v1,multi_agent_v1.spawn_agent,multi_agent_v1.wait_agent,web_search" {
		t.Errorf("tools = %s", got)
	}
	if r.LastUserText() != "say hi" || r.Developer() != "You are a test." || r.HasFunctionOutput() || len(r.Input) != 3 {
		t.Errorf("input = %+v", r.Input)
	}
	if e.Status != 200 || e.Billed != textUsage() || l.Billed() != textUsage() || e.Hung || e.Stalled {
		t.Errorf("entry = %+v", e)
	}
}

func TestToolTurn(t *testing.T) {
	s := start(t, ToolTurn("echo hi > out.txt", "done"))
	c := mocktest.Client(t)
	fs := readSSE(t, post(t, c, s.URL, body(true)).Body)
	const summaryText = "The user wants a command run. I will use exec_command."
	n := len(strings.Fields(summaryText)) // one delta per word
	want := "created,in_progress,output_item.added,reasoning_summary_part.added," +
		strings.Repeat("reasoning_summary_text.delta,", n) + "reasoning_summary_text.done,reasoning_summary_part.done,output_item.done," +
		"output_item.added,function_call_arguments.delta,function_call_arguments.done,output_item.done,completed"
	if got := names(fs); got != want {
		t.Fatalf("events = %s\nwant %s", got, want)
	}
	var summary string
	for _, f := range fs {
		if f.event == "response.reasoning_summary_text.delta" {
			summary += f.data["delta"].(string)
		}
	}
	rs := field(fs[6+n].data, "item").(map[string]any)
	if summary != summaryText || fs[4+n].data["text"] != summaryText || field(fs[5+n].data, "part", "text") != summaryText ||
		field(rs["summary"].([]any)[0].(map[string]any), "text") != summary || rs["type"] != "reasoning" {
		t.Errorf("reasoning %q, done %v", summary, rs)
	}
	added, done := field(fs[7+n].data, "item").(map[string]any), field(fs[10+n].data, "item").(map[string]any)
	callID, _ := done["call_id"].(string)
	if added["arguments"] != "" || added["status"] != "in_progress" || added["call_id"] != callID || added["name"] != "exec_command" ||
		done["arguments"] != `{"cmd":"echo hi > out.txt"}` || done["status"] != "completed" || fs[8+n].data["delta"] != done["arguments"] ||
		fs[9+n].data["arguments"] != done["arguments"] || !strings.HasPrefix(callID, "call_mock_") || done["namespace"] != nil {
		t.Errorf("function call added %v, delta %v, done %v", added, fs[8+n].data, done)
	}
	if field(fs[11+n].data, "response", "output").([]any)[1].(map[string]any)["call_id"] != callID {
		t.Errorf("completed output = %v", fs[11+n].data)
	}

	// Codex's follow-up replays the call and adds its output.
	follow := body(true, callItem(callID, "exec_command", `{"cmd":"echo hi > out.txt"}`),
		outputItem(callID, "Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\n"))
	fs = readSSE(t, post(t, c, s.URL, follow).Body)
	if got := field(fs[len(fs)-1].data, "response", "output").([]any); len(got) != 1 ||
		field(got[0].(map[string]any)["content"].([]any)[0].(map[string]any), "text") != "done" {
		t.Errorf("follow-up output = %v", got)
	}
	// A command still running is polled with write_stdin.
	running := body(true, callItem(callID, "exec_command", `{"cmd":"echo hi > out.txt"}`),
		outputItem(callID, "Chunk ID: 2\nWall time: 10.0 seconds\nProcess running with session ID 4242\nOutput:\n"))
	fs = readSSE(t, post(t, c, s.URL, running).Body)
	poll := field(fs[len(fs)-1].data, "response", "output").([]any)[0].(map[string]any)
	var args map[string]any
	_ = json.Unmarshal([]byte(poll["arguments"].(string)), &args)
	if poll["name"] != "write_stdin" || args["session_id"] != 4242.0 || args["chars"] != "" || args["yield_time_ms"] != float64(pollWait) {
		t.Errorf("poll = %v", poll)
	}
	// Another command's output is not this turn's: a new call.
	other := body(true, callItem("c9", "exec_command", `{"cmd":"ls"}`), outputItem("c9", "x"))
	fs = readSSE(t, post(t, c, s.URL, other).Body)
	if got := field(fs[len(fs)-1].data, "response", "output").([]any); len(got) != 2 {
		t.Errorf("foreign output answered with %v", got)
	}

	l := s.Ledger()
	if len(l) != 4 || l[1].Request.FunctionOutputs()[0].CallID != callID || l[0].Request.HasFunctionOutput() {
		t.Fatalf("ledger = %+v", l)
	}
	if got, want := l.Billed(), firstCallUsage().Add(followUpUsage()).Add(followUpUsage()).Add(firstCallUsage()); got != want {
		t.Errorf("billed = %+v, want %+v", got, want)
	}
}

func TestNonStreamed(t *testing.T) {
	s := start(t, ToolTurn("ls", "done"))
	resp := post(t, mocktest.Client(t), s.URL, body(false))
	var r struct {
		ID     string           `json:"id"`
		Object string           `json:"object"`
		Status string           `json:"status"`
		Model  string           `json:"model"`
		Output []map[string]any `json:"output"`
		Usage  Usage            `json:"usage"`
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Object != "response" || r.Status != "completed" || r.Model != "gpt-test" || len(r.Output) != 2 ||
		r.Output[0]["type"] != "reasoning" || r.Output[1]["arguments"] != `{"cmd":"ls"}` || r.Usage != firstCallUsage() {
		t.Errorf("response = %+v", r)
	}
	if s.Ledger().Billed() != firstCallUsage() {
		t.Errorf("billed = %+v", s.Ledger().Billed())
	}
}

func TestFailures(t *testing.T) {
	for status, want := range map[int]struct{ typ, code string }{
		401: {"invalid_request_error", "invalid_api_key"}, 403: {"invalid_request_error", "unsupported_country_region_territory"},
		429: {"requests", "rate_limit_exceeded"}, 500: {"server_error", ""}, 503: {"server_error", "server_is_overloaded"},
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
		code, hasParam := e.Error["code"], false
		_, hasParam = e.Error["param"]
		if resp.StatusCode != status || e.Error["type"] != want.typ || e.Error["message"] == "" || !hasParam || e.Error["param"] != nil ||
			(want.code == "" && code != nil) || (want.code != "" && code != want.code) {
			t.Errorf("%d: got %d %s", status, resp.StatusCode, b)
		}
		if ra := resp.Header.Get("Retry-After"); (status == 429) != (ra == "1") {
			t.Errorf("%d: Retry-After %q", status, ra)
		}
		if l := s.Ledger(); l[0].Status != status || l.Billed() != (Usage{}) {
			t.Errorf("%d: ledger %+v", status, l)
		}
	}
	s := start(t, Failure(400))
	b, _ := io.ReadAll(post(t, mocktest.Client(t), s.URL, body(true)).Body)
	if want := `{"error":{"code":"invalid_request","message":"Invalid request: unsupported parameter","param":null,"type":"invalid_request_error"}}` + "\n"; string(b) != want {
		t.Errorf("400 body = %q, want %q", b, want)
	}
	s = start(t, Func(func(*Request) Response { return Response{Status: 502, RawBody: "<html>bad gateway</html>"} }))
	resp := post(t, mocktest.Client(t), s.URL, body(true))
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 502 || string(b) != "<html>bad gateway</html>" {
		t.Errorf("raw body: %d %q", resp.StatusCode, b)
	}
}

func TestContextExceeded(t *testing.T) {
	s := start(t, ContextExceeded())
	c := mocktest.Client(t)
	fs := readSSE(t, post(t, c, s.URL, body(true)).Body)
	if names(fs) != "created,in_progress,failed" {
		t.Fatalf("events = %s", names(fs))
	}
	r := field(fs[2].data, "response").(map[string]any)
	if r["status"] != "failed" || field(r, "error", "code") != "context_length_exceeded" || field(r, "error", "message") == "" || r["usage"] != nil {
		t.Errorf("response.failed = %v", r)
	}
	b, _ := io.ReadAll(post(t, c, s.URL, body(false)).Body)
	if !strings.Contains(string(b), `"status":"failed"`) || !strings.Contains(string(b), `"code":"context_length_exceeded"`) {
		t.Errorf("non-streamed: %s", b)
	}
	if l := s.Ledger(); l[0].Status != 200 || l.Billed() != (Usage{}) {
		t.Errorf("ledger %+v", l)
	}
}

func TestStructured(t *testing.T) {
	s := start(t, Structured(map[string]string{"name": "Bob"}))
	c := mocktest.Client(t)
	b, _ := io.ReadAll(post(t, c, s.URL, codexBody(t, "codex_first")).Body)
	if !strings.Contains(string(b), `"text":"{\"name\":\"Bob\"}"`) {
		t.Errorf("with a schema: %s", b)
	}
	b, _ = io.ReadAll(post(t, c, s.URL, body(true)).Body)
	if !strings.Contains(string(b), NoSchemaText) {
		t.Errorf("without a schema: %s", b)
	}
	f := s.Ledger()[0].Request.Format
	if f == nil || f.Type != "json_schema" || f.Name != "codex_output_schema" || !f.Strict ||
		string(f.Schema) != `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}` {
		t.Errorf("format = %+v", f)
	}
}

// TestCodexBodies checks the summary of request bodies Codex really sent.
func TestCodexBodies(t *testing.T) {
	var first, follow, helper Request
	for _, c := range []struct {
		r    *Request
		name string
	}{{&first, "codex_first"}, {&follow, "codex_followup"}, {&helper, "codex_helper_root"}} {
		b := codexBody(t, c.name)
		if err := c.r.parseBody(b); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	if first.Model != "mock-model" || !first.Stream || first.Effort != "high" || first.Summary != "auto" || first.PromptCacheKey == "" {
		t.Errorf("first = %+v", first)
	}
	wantTools := "exec_command,write_stdin,request_user_input,view_image,multi_agent_v1,multi_agent_v1.close_agent," +
		"multi_agent_v1.resume_agent,multi_agent_v1.send_input,multi_agent_v1.spawn_agent,multi_agent_v1.wait_agent," +
		"get_goal,create_goal,update_goal,web_search"
	if got := strings.Join(first.Tools, ","); got != wantTools {
		t.Errorf("tools = %s\nwant %s", got, wantTools)
	}
	if first.LastUserText() != "Write hi to out.txt, then give a name." || !strings.HasPrefix(first.Developer(), "You are a coding agent running in the Codex CLI") ||
		len(first.Input) != 4 || !first.Input[2].Injected() || first.Input[3].Injected() || first.HasFunctionOutput() {
		t.Errorf("first input = %+v", first.Input)
	}
	out, call, ok := follow.LastOutput()
	if !ok || call.Name != "exec_command" || call.Arguments != `{"cmd": "echo hi > out.txt"}` || out.CallID != call.CallID ||
		!strings.Contains(out.Output, "Process exited with code 0") || len(follow.AnsweredCalls()) != 1 {
		t.Errorf("follow-up: %+v %+v", out, call)
	}
	if o, ok := follow.Output(call.CallID); !ok || o != out.Output {
		t.Errorf("Output(%s) = %q, %v", call.CallID, o, ok)
	}
	outs := helper.FunctionOutputs()
	if len(outs) != 2 || helper.LastUserText() != "spawn a helper" {
		t.Fatalf("helper root: outputs %+v, prompt %q", outs, helper.LastUserText())
	}
	spawn, _ := helper.Call(outs[0].CallID)
	wait, _ := helper.Call(outs[1].CallID)
	last := helper.Input[len(helper.Input)-1]
	if spawn.Name != "spawn_agent" || spawn.Namespace != AgentNamespace || wait.Name != "wait_agent" ||
		!strings.Contains(outs[0].Output, `"agent_id"`) || !last.Injected() || !strings.HasPrefix(last.Text, "<subagent_notification>") {
		t.Errorf("helper root: spawn %+v, wait %+v, last %+v", spawn, wait, last)
	}
	if helper.Input[4].Type != "reasoning" || helper.Input[4].Text != "I will spawn a helper." {
		t.Errorf("reasoning replay = %+v", helper.Input[4])
	}
}

func TestRequestHelpers(t *testing.T) {
	var r Request
	b := body(true,
		callItem("c1", "exec_command", `{"cmd":"ls"}`), outputItem("c1", "old"),
		map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "first answer"}}},
		map[string]any{"type": "message", "role": "user", "content": "second prompt"},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<turn_aborted>\nx\n</turn_aborted>"}}},
		callItem("c2", "exec_command", `{"cmd":"pwd"}`),
		map[string]any{"type": "function_call_output", "call_id": "c2", "output": []any{
			map[string]any{"type": "input_text", "text": "a"}, map[string]any{"type": "input_image", "image_url": "x"}, map[string]any{"type": "input_text", "text": "b"}}},
	)
	if err := r.parseBody(b); err != nil {
		t.Fatal(err)
	}
	if r.LastUserText() != "second prompt" {
		t.Errorf("prompt = %q", r.LastUserText())
	}
	outs := r.FunctionOutputs()
	if len(outs) != 1 || outs[0].CallID != "c2" || outs[0].Output != "a\nb" {
		t.Errorf("outputs of this turn = %+v", outs)
	}
	if ids := r.AnsweredCalls(); strings.Join(ids, ",") != "c1,c2" {
		t.Errorf("answered = %v", ids)
	}
	if _, ok := r.Call("c3"); ok {
		t.Error("found a call that is not there")
	}
	if r.answeredAfterOutputs() {
		t.Error("answeredAfterOutputs with no answer after the last output")
	}
	for text, want := range map[string]bool{
		"<environment_context>\n</environment_context>": true, "  <a_b>x</a_b>\n": true, "<x>y</z>": false,
		"<b>bold</b> text": false, "plain": false, "<>": false, "<Tag>x</Tag>": false,
	} {
		if got := (InputItem{Type: "message", Role: "user", Text: text}).Injected(); got != want {
			t.Errorf("Injected(%q) = %v", text, got)
		}
	}
	if (InputItem{Type: "message", Role: "developer", Text: "<a>x</a>"}).Injected() {
		t.Error("a developer message counted as injected")
	}
	var s Request
	if err := s.parseBody([]byte(`{"input":"just text","tools":[{"type":"function","name":5},"x",{"type":"custom","name":"apply_patch"}],"text":{"format":{"type":"text"}},"reasoning":"bad"}`)); err != nil {
		t.Fatal(err)
	}
	if s.LastUserText() != "just text" || strings.Join(s.Tools, ",") != "function,apply_patch" || s.Format == nil || s.Format.Type != "text" || s.Format.Schema != nil {
		t.Errorf("odd body = %+v", s)
	}
	for _, bad := range []string{"", "null", "[]", `"x"`, "{", `{"model":"m"} x`} {
		var q Request
		if err := q.parseBody([]byte(bad)); err == nil {
			t.Errorf("parseBody(%q) accepted", bad)
		}
	}
}

func TestSubAgent(t *testing.T) {
	for _, c := range []struct {
		h    http.Header
		want bool
	}{
		{http.Header{"Session-Id": {"a"}, "Thread-Id": {"a"}}, false},
		{http.Header{"Session-Id": {"a"}, "Thread-Id": {"b"}}, true},
		{http.Header{"Session-Id": {"a"}, "Thread-Id": {"a"}, "X-Codex-Parent-Thread-Id": {"p"}}, true},
		{http.Header{}, false},
	} {
		r := Request{Header: c.h}
		if r.SubAgent() != c.want {
			t.Errorf("SubAgent(%v) = %v", c.h, !c.want)
		}
	}
}

func TestHelperThreadScenario(t *testing.T) {
	sc := HelperThread("helper says", "root says")
	root := http.Header{"Session-Id": {"r"}, "Thread-Id": {"r"}}
	sub := http.Header{"Session-Id": {"r"}, "Thread-Id": {"h"}, "X-Codex-Parent-Thread-Id": {"r"}}
	respond := func(h http.Header, extra ...map[string]any) Response {
		var r Request
		if err := r.parseBody(body(true, extra...)); err != nil {
			t.Fatal(err)
		}
		r.Header = h
		return sc.Respond(&r)
	}
	first := respond(root)
	if len(first.Items) != 2 || first.Items[1].Name != "spawn_agent" || first.Items[1].Namespace != AgentNamespace ||
		first.Items[1].Arguments != `{"message":"`+HelperPrompt+`"}` {
		t.Fatalf("first = %+v", first)
	}
	spawnCall := callItem("s1", "spawn_agent", first.Items[1].Arguments)
	spawnCall["namespace"] = AgentNamespace
	spawned := outputItem("s1", `{"agent_id":"agent-7","nickname":"Ada"}`)
	wait := respond(root, spawnCall, spawned)
	if len(wait.Items) != 1 || wait.Items[0].Name != "wait_agent" || wait.Items[0].Namespace != AgentNamespace ||
		wait.Items[0].Arguments != `{"targets":["agent-7"],"timeout_ms":30000}` {
		t.Fatalf("wait = %+v", wait)
	}
	if h := respond(sub); len(h.Items) != 2 || h.Items[1].Text != "helper says" || h.Usage != helperUsage() {
		t.Errorf("helper = %+v", h)
	}
	waitCall := callItem("w1", "wait_agent", wait.Items[0].Arguments)
	timedOut := respond(root, spawnCall, spawned, waitCall, outputItem("w1", `{"status":{},"timed_out":true}`))
	if len(timedOut.Items) != 1 || timedOut.Items[0].Name != "wait_agent" {
		t.Errorf("after a timed out wait = %+v", timedOut)
	}
	waited := outputItem("w1", `{"status":{"agent-7":{"completed":"helper says"}},"timed_out":false}`)
	final := respond(root, spawnCall, spawned, waitCall, waited)
	if len(final.Items) != 1 || final.Items[0].Text != "root says" || final.Delay != rootDelay {
		t.Errorf("final = %+v", final)
	}
	notice := map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text",
		"text": "<subagent_notification>\n{\"status\":{\"completed\":\"helper says\"}}\n</subagent_notification>"}}}
	answered := map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "root says"}}}
	if again := respond(root, spawnCall, spawned, waitCall, waited, notice); len(again.Items) != 1 || again.Items[0].Text != "root says" {
		t.Errorf("final with the notification = %+v", again)
	}
	if late := respond(root, spawnCall, spawned, waitCall, waited, answered, notice); len(late.Items) != 0 || late.Status != 0 || late.Usage == (Usage{}) {
		t.Errorf("late notification = %+v", late)
	}
	if bad := respond(root, spawnCall, outputItem("s1", "no json")); len(bad.Items) != 1 || !strings.Contains(bad.Items[0].Text, "no agent id") {
		t.Errorf("spawn without id = %+v", bad)
	}
}

func TestAlwaysToolAndSequence(t *testing.T) {
	s := start(t, Sequence(Failure(429), AlwaysTool("echo x")))
	c := mocktest.Client(t)
	if resp := post(t, c, s.URL, body(false)); resp.StatusCode != 429 {
		t.Fatalf("first = %d", resp.StatusCode)
	}
	for i := 0; i < 2; i++ {
		b, _ := io.ReadAll(post(t, c, s.URL, body(false, callItem("c", "exec_command", "{}"), outputItem("c", "ok"))).Body)
		if !strings.Contains(string(b), `"arguments":"{\"cmd\":\"echo x\"}"`) {
			t.Errorf("request %d: %s", i+2, b)
		}
	}
	if got := Sequence().Respond(&Request{}); got.Status != 500 {
		t.Errorf("empty sequence = %+v", got)
	}
}

func TestDelay(t *testing.T) {
	s := start(t, Func(func(*Request) Response {
		return Response{Delay: 150 * time.Millisecond, Items: []Item{Text("late")}, Usage: textUsage()}
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
		// want is what the client sees before Close: the first event
		// of a stall, nothing for a hang.
		want string
	}{
		{"hang", Hang(), true, ""},
		{"stall", Stall(), true, "event: response.created\n"},
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
				req, _ := http.NewRequest(http.MethodPost, s.URL+"/responses", bytes.NewReader(body(c.stream)))
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
					if line != c.want {
						t.Errorf("first line %q, want %q", line, c.want)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("no first event")
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
	resp, err = c.Post(base+"/responses", "application/json", bytes.NewReader(body(false)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("POST /responses: %d", resp.StatusCode)
	}
	for _, bad := range []string{"{not json", "null"} {
		resp = post(t, c, s.URL, []byte(bad))
		b, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), "invalid_request_error") {
			t.Errorf("body %q: %d %s", bad, resp.StatusCode, b)
		}
	}
	l := s.Ledger()
	if len(l) != 4 || l[0].Request.Method != "GET" || l[1].Request.Path != "/responses" || l[2].Request.ParseError == "" ||
		l[3].Request.ParseError == "" || len(l.Responses()) != 3 || l[0].Status != 404 {
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
	if _, err := Named("nope", ""); err == nil || !strings.Contains(err.Error(), "helper") {
		t.Errorf("unknown name: %v", err)
	}
	if r := LongTool().Respond(&Request{}); r.Items[1].Arguments != `{"cmd":"sleep 60; echo done"}` {
		t.Errorf("LongTool: %+v", r.Items)
	}
	sc, _ := Named("tool", "touch x")
	if r := sc.Respond(&Request{}); r.Items[1].Arguments != `{"cmd":"touch x"}` {
		t.Errorf("command override: %+v", r.Items)
	}
	sc, _ = Named("error-429", "")
	if r := sc.Respond(&Request{}); r.Status != 429 || r.Header.Get("Retry-After") != "1" {
		t.Errorf("error-429 = %+v", r)
	}
}

func TestUsageJSON(t *testing.T) {
	u := Usage{InputTokens: 10, CachedTokens: 4, OutputTokens: 7, ReasoningTokens: 2}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":17}`
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
	for _, f := range []func() Usage{firstCallUsage, followUpUsage, textUsage, helperUsage} {
		u := f()
		if u.CachedTokens <= 0 || u.ReasoningTokens <= 0 || u.InputTokens <= u.CachedTokens || u.OutputTokens <= u.ReasoningTokens {
			t.Errorf("built-in usage %+v does not keep its fields apart", u)
		}
	}
}

// FuzzParseRequest feeds arbitrary bodies to the request parser: it must
// not panic, a body it accepts is a JSON object, and the helpers work on
// whatever it made of it.
func FuzzParseRequest(f *testing.F) {
	for _, name := range []string{"codex_first", "codex_followup", "codex_helper_root"} {
		f.Add(codexBody(f, name))
	}
	f.Add(body(true, callItem("c", "exec_command", "{}"), outputItem("c", "x")))
	f.Add([]byte(`{"input":[{"role":"user","content":5},{"type":"function_call_output","output":[1,{"text":2}]},7],"tools":[{"type":"namespace","tools":[{}]}]}`))
	f.Add([]byte(`{"input":"x","text":{"format":null},"reasoning":{"effort":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		err := r.parseBody(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		if err == nil && bytes.TrimSpace(b)[0] != '{' {
			t.Fatalf("accepted a body that is not an object: %q", b)
		}
		_ = r.LastUserText()
		_ = r.FunctionOutputs()
		_, _, _ = r.LastOutput()
		_ = r.AnsweredCalls()
		_ = r.Developer()
		_ = r.answeredAfterOutputs()
		for _, it := range r.Input {
			_ = it.Injected()
		}
		_ = HelperThread("h", "r").Respond(&r)
		_ = ToolTurn("ls", "a").Respond(&r)
		_ = Structured(1).Respond(&r)
	})
}

// TestNamespaceOnTheWire checks that a namespaced call carries its
// namespace apart from its name: Codex rejects "multi_agent_v1.spawn_agent"
// as one name ("unsupported call").
func TestNamespaceOnTheWire(t *testing.T) {
	s := start(t, Func(func(*Request) Response {
		return Response{Items: []Item{AgentCall("spawn_agent", map[string]string{"message": "m"})}, Usage: firstCallUsage()}
	}))
	fs := readSSE(t, post(t, mocktest.Client(t), s.URL, body(true)).Body)
	for _, i := range []int{2, 5} {
		it := field(fs[i].data, "item").(map[string]any)
		if it["name"] != "spawn_agent" || it["namespace"] != AgentNamespace {
			t.Errorf("%s item = %v", fs[i].event, it)
		}
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
		URL:  func(s *Server) string { return s.URL + "/responses" },
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
