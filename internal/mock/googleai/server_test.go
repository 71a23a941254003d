package googleai

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

// cliBody reads a request body the real Gemini CLI 0.61.0 sent:
// gemini_first (a prompt, 16 tools), gemini_followup (the same turn with
// a run_shell_command call and its functionResponse) and gemini_router
// (the model router's request when the CLI has no model).
func cliBody(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// body is a small request shaped like the CLI's: a system instruction,
// function declarations, thinking config and contents.
func body(contents ...map[string]any) []byte {
	if len(contents) == 0 {
		contents = []map[string]any{{"role": "user", "parts": []any{map[string]any{"text": "say hi"}}}}
	}
	b, _ := json.Marshal(map[string]any{
		"contents":          contents,
		"systemInstruction": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "You are a test."}}},
		"tools": []any{map[string]any{"functionDeclarations": []any{
			map[string]any{"name": "run_shell_command", "parametersJsonSchema": map[string]any{"type": "object"}},
			map[string]any{"name": "read_file"},
		}}},
		"generationConfig": map[string]any{"temperature": 1, "thinkingConfig": map[string]any{"includeThoughts": true, "thinkingBudget": 8192}},
	})
	return b
}

func user(text string) map[string]any {
	return map[string]any{"role": "user", "parts": []any{map[string]any{"text": text}}}
}

func functionResponse(name, output string) map[string]any {
	return map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{
		"id": "call_1", "name": name, "response": map[string]any{"output": output}}}}}
}

func post(t *testing.T, c *http.Client, url string, b []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", "k1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func streamURL(s *Server, model string) string {
	return s.URL + "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
}

// chunkJSON is the part of a GenerateContentResponse the tests read.
type chunkJSON struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         string `json:"text"`
				Thought      bool   `json:"thought"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				ThoughtSignature string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *Usage `json:"usageMetadata"`
	ModelVersion  string `json:"modelVersion"`
	ResponseID    string `json:"responseId"`
}

// readSSE parses an event stream strictly: every frame is one data line
// and a blank line, CRLF, as the API frames them.
func readSSE(t *testing.T, r io.Reader) []chunkJSON {
	t.Helper()
	var out []chunkJSON
	br := bufio.NewReader(r)
	for {
		data, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) && data == "" {
			return out
		}
		blank, err2 := br.ReadString('\n')
		if err != nil || err2 != nil || blank != "\r\n" || !strings.HasPrefix(data, "data: ") || !strings.HasSuffix(data, "\r\n") {
			t.Fatalf("malformed frame %q %q", data, blank)
		}
		var c chunkJSON
		if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(data, "data: "), "\r\n")), &c); err != nil {
			t.Fatalf("frame data: %v", err)
		}
		if len(c.Candidates) != 1 || c.Candidates[0].Content.Role != "model" {
			t.Fatalf("frame without one model candidate: %q", data)
		}
		out = append(out, c)
	}
}

func TestStreamedText(t *testing.T) {
	s := start(t, TextAnswer("hello there"))
	resp := post(t, mocktest.Client(t), streamURL(s, "gemini-test"), body())
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	cs := readSSE(t, resp.Body)
	if len(cs) != 3 {
		t.Fatalf("chunks = %d, want a thought and two text chunks", len(cs))
	}
	var text string
	for i, c := range cs {
		p := c.Candidates[0].Content.Parts
		if len(p) != 1 || c.ModelVersion != "gemini-test" || c.ResponseID == "" {
			t.Errorf("chunk %d = %+v", i, c)
		}
		last := i == len(cs)-1
		if (c.UsageMetadata != nil) != last || (c.Candidates[0].FinishReason != "") != last {
			t.Errorf("chunk %d: usage %v, finish %q; want them on the last chunk only", i, c.UsageMetadata, c.Candidates[0].FinishReason)
		}
		if i == 0 {
			if !p[0].Thought || p[0].Text == "" {
				t.Errorf("first part = %+v, want a thought", p[0])
			}
			continue
		}
		text += p[0].Text
	}
	if text != "hello there" {
		t.Errorf("text = %q", text)
	}
	u := *cs[len(cs)-1].UsageMetadata
	if u != textUsage() || u.TotalTokenCount != u.PromptTokenCount+u.CandidatesTokenCount+u.ThoughtsTokenCount || u.ThoughtsTokenCount == 0 {
		t.Errorf("usage = %+v", u)
	}
	if cs[len(cs)-1].Candidates[0].FinishReason != "STOP" {
		t.Errorf("finish = %q", cs[len(cs)-1].Candidates[0].FinishReason)
	}

	l := s.Ledger()
	if len(l) != 1 {
		t.Fatalf("ledger = %d entries", len(l))
	}
	e := l[0]
	r := e.Request
	if r.Model != "gemini-test" || r.Call != MethodStream || !r.Stream || r.APIVersion != "v1beta" || r.RawQuery != "alt=sse" ||
		r.Header.Get("X-Goog-Api-Key") != "k1" || r.Seq != 1 || r.BodyBytes == 0 || !r.IsModelCall() {
		t.Errorf("request = %+v", r)
	}
	if strings.Join(r.Tools, ",") != "run_shell_command,read_file" || !r.HasTool(ShellTool) || r.HasTool("write_file") {
		t.Errorf("tools = %v", r.Tools)
	}
	if r.System != "You are a test." || r.UserText() != "say hi" || !r.IncludeThoughts || r.ThinkingBudget == nil || *r.ThinkingBudget != 8192 {
		t.Errorf("summary = %+v", r)
	}
	if e.Status != 200 || e.Billed != textUsage() || l.Billed() != textUsage() || len(l.Calls()) != 1 {
		t.Errorf("entry = %+v", e)
	}
}

func TestToolTurn(t *testing.T) {
	s := start(t, ToolTurn("echo hello > out.txt", "done"))
	c := mocktest.Client(t)
	cs := readSSE(t, post(t, c, streamURL(s, "m"), body()).Body)
	var kinds []string
	var call *chunkJSON
	for i := range cs {
		p := cs[i].Candidates[0].Content.Parts[0]
		switch {
		case p.FunctionCall != nil:
			kinds = append(kinds, "call")
			call = &cs[i]
		case p.Thought:
			kinds = append(kinds, "thought")
		default:
			kinds = append(kinds, "text")
		}
	}
	if strings.Join(kinds, ",") != "thought,text,text,text,call" {
		t.Fatalf("parts = %v", kinds)
	}
	p := call.Candidates[0].Content.Parts[0]
	var args map[string]string
	if err := json.Unmarshal(p.FunctionCall.Args, &args); err != nil || args["command"] != "echo hello > out.txt" ||
		p.FunctionCall.Name != ShellTool || p.FunctionCall.ID != "" || p.ThoughtSignature == "" {
		t.Errorf("call = %+v, args %v (%v)", p, args, err)
	}
	if call.Candidates[0].FinishReason != "STOP" || call.UsageMetadata == nil || *call.UsageMetadata != firstCallUsage() {
		t.Errorf("last chunk = %+v", call)
	}

	// The answer to the tool's response.
	cs = readSSE(t, post(t, c, streamURL(s, "m"), body(user("say hi"), map[string]any{"role": "model", "parts": []any{
		map[string]any{"functionCall": map[string]any{"name": ShellTool, "args": map[string]any{"command": "x"}}},
	}}, functionResponse(ShellTool, "hello"))).Body)
	var text string
	for _, ch := range cs {
		if pt := ch.Candidates[0].Content.Parts[0]; !pt.Thought {
			text += pt.Text
		}
	}
	if text != "done" {
		t.Errorf("answer = %q", text)
	}
	l := s.Ledger()
	frs := l[1].Request.FunctionResponses()
	if len(frs) != 1 || frs[0].Name != ShellTool || frs[0].ID != "call_1" || frs[0].Output() != "hello" {
		t.Errorf("function responses = %+v", frs)
	}
	if c := l[1].Request.Contents[1].Parts[0].FunctionCall; c == nil || c.Name != ShellTool {
		t.Errorf("replayed call = %+v", l[1].Request.Contents[1])
	}
	if l.Billed() != firstCallUsage().Add(followUpUsage()) {
		t.Errorf("billed = %+v", l.Billed())
	}
}

// TestCLIBodies checks the parser and the scenarios against bodies the
// real CLI sent.
func TestCLIBodies(t *testing.T) {
	var first, followup, router Request
	for _, c := range []struct {
		name string
		r    *Request
	}{{"gemini_first", &first}, {"gemini_followup", &followup}, {"gemini_router", &router}} {
		c.r.Call = MethodStream
		if c.name == "gemini_router" {
			c.r.Call = MethodGenerate
		}
		if err := c.r.parseBody(cliBody(t, c.name)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	if len(first.Tools) != 16 || !first.HasTool(ShellTool) || len(first.Contents) != 1 || first.System == "" ||
		!strings.HasSuffix(first.UserText(), "Write hello to out.txt.") || !first.IncludeThoughts || first.Router() {
		t.Errorf("first = tools %v, %d contents, user text …%q", first.Tools, len(first.Contents), tail(first.UserText(), 40))
	}
	if len(first.FunctionResponses()) != 0 {
		t.Error("the first request counts as a follow-up")
	}
	frs := followup.FunctionResponses()
	if len(frs) != 1 || frs[0].Name != ShellTool || !strings.Contains(frs[0].Output(), "Output: (empty)") {
		t.Errorf("follow-up's function responses = %+v", frs)
	}
	if !router.Router() || len(router.Tools) != 0 || router.ResponseMIMEType != "application/json" || router.ThinkingLevel != "HIGH" {
		t.Errorf("router = %+v", router)
	}
	sc := ToolTurn("echo hello > out.txt", "answer")
	if r := sc.Respond(&first); len(r.Parts) != 3 || r.Parts[2].FunctionCall == nil {
		t.Errorf("first answered with %+v", r)
	}
	if r := sc.Respond(&followup); len(r.Parts) != 2 || r.Parts[1].Text != "answer" {
		t.Errorf("follow-up answered with %+v", r)
	}
	if r := sc.Respond(&router); !strings.Contains(r.Parts[0].Text, `"complexity_score":10`) {
		t.Errorf("router answered with %+v", r)
	}
}

func TestGenerateContentAndRouter(t *testing.T) {
	s := start(t, TextAnswer("plain"))
	c := mocktest.Client(t)
	resp := post(t, c, s.URL+"/v1beta/models/gemini-3.5-flash-lite:generateContent", cliBody(t, "gemini_router"))
	var got chunkJSON
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	var judged struct {
		Score int `json:"complexity_score"`
	}
	if err := json.Unmarshal([]byte(got.Candidates[0].Content.Parts[0].Text), &judged); err != nil || judged.Score != 10 ||
		got.UsageMetadata == nil || *got.UsageMetadata != routerUsage() || got.Candidates[0].FinishReason != "STOP" {
		t.Errorf("router answer = %+v (%v)", got, err)
	}
	resp = post(t, c, s.URL+"/v1beta/models/m:generateContent", body())
	got = chunkJSON{}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Candidates[0].Content.Parts) != 2 ||
		got.Candidates[0].Content.Parts[1].Text != "plain" {
		t.Errorf("answer = %+v (%v)", got, err)
	}
	l := s.Ledger()
	if !l[0].Request.Router() || l[1].Request.Router() || l[0].Request.Stream || l.Billed() != routerUsage().Add(textUsage()) {
		t.Errorf("ledger = %+v", l)
	}
}

func TestStreamWithoutSSE(t *testing.T) {
	s := start(t, TextAnswer("a b"))
	resp := post(t, mocktest.Client(t), s.URL+"/v1beta/models/m:streamGenerateContent", body())
	var cs []chunkJSON
	if err := json.NewDecoder(resp.Body).Decode(&cs); err != nil || len(cs) != 3 || cs[2].UsageMetadata == nil {
		t.Fatalf("array = %+v (%v)", cs, err)
	}
	if s.Ledger().Billed() != textUsage() {
		t.Errorf("billed %+v", s.Ledger().Billed())
	}
}

func TestCountTokens(t *testing.T) {
	s := start(t, Failure(500))
	resp := post(t, mocktest.Client(t), s.URL+"/v1beta/models/m:countTokens", body())
	var got struct {
		TotalTokens int `json:"totalTokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || got.TotalTokens <= 0 {
		t.Fatalf("status %d, %+v (%v)", resp.StatusCode, got, err)
	}
	l := s.Ledger()
	if len(l) != 1 || l[0].Request.Call != MethodCountTokens || !l[0].Billed.IsZero() || len(l.Calls()) != 0 {
		t.Errorf("ledger = %+v", l)
	}
}

func TestFailures(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 429, 500, 503, 504, 418} {
		s := start(t, Failure(status))
		resp := post(t, mocktest.Client(t), streamURL(s, "m"), body())
		var got struct {
			Error APIError `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != status {
			t.Fatalf("%d: status %d (%v)", status, resp.StatusCode, err)
		}
		if got.Error.Code != status || got.Error.Message == "" || got.Error.Status == "" {
			t.Errorf("%d: body %+v", status, got.Error)
		}
		if status == 429 {
			var retry bool
			for _, d := range got.Error.Details {
				retry = retry || d["@type"] == typeRetryInfo && d["retryDelay"] == "1s"
			}
			if !retry || got.Error.Status != "RESOURCE_EXHAUSTED" {
				t.Errorf("429 body %+v has no RetryInfo", got.Error)
			}
		}
		if l := s.Ledger(); l[0].Status != status || !l.Billed().IsZero() {
			t.Errorf("%d: ledger %+v", status, l)
		}
	}
	s := start(t, InvalidKey())
	var got struct {
		Error APIError `json:"error"`
	}
	resp := post(t, mocktest.Client(t), streamURL(s, "m"), body())
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 400 ||
		got.Error.Details[0]["reason"] != "API_KEY_INVALID" || got.Error.Status != "INVALID_ARGUMENT" {
		t.Errorf("invalid key: %d %+v (%v)", resp.StatusCode, got.Error, err)
	}
}

func TestAlwaysToolAndSequence(t *testing.T) {
	s := start(t, Sequence(Failure(429), AlwaysTool("echo again")))
	c := mocktest.Client(t)
	if resp := post(t, c, streamURL(s, "m"), body()); resp.StatusCode != 429 {
		t.Fatalf("first status %d", resp.StatusCode)
	}
	for range 2 {
		cs := readSSE(t, post(t, c, streamURL(s, "m"), body(user("x"), functionResponse(ShellTool, "again"))).Body)
		if fc := cs[len(cs)-1].Candidates[0].Content.Parts[0].FunctionCall; fc == nil || !strings.Contains(string(fc.Args), "echo again") {
			t.Errorf("last chunk = %+v", cs[len(cs)-1])
		}
	}
	if got := Sequence().Respond(&Request{}); got.Status != 500 {
		t.Errorf("empty sequence = %+v", got)
	}
}

func TestDelay(t *testing.T) {
	s := start(t, Func(func(*Request) Response {
		return Response{Delay: 200 * time.Millisecond, Parts: []Part{Text("late")}, Usage: textUsage()}
	}))
	t0 := time.Now()
	b, _ := io.ReadAll(post(t, mocktest.Client(t), streamURL(s, "m"), body()).Body)
	if d := time.Since(t0); d < 150*time.Millisecond || !strings.Contains(string(b), "late") {
		t.Errorf("answered after %v: %s", d, b)
	}
}

func TestOtherRoutes(t *testing.T) {
	s := start(t, TextAnswer("x"))
	c := mocktest.Client(t)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1beta/models"},
		{http.MethodGet, "/v1beta/models/m:generateContent"},
		{http.MethodPost, "/v1beta/models/m:embedContent"},
		{http.MethodPost, "/v1beta/tunedModels/m:generateContent"},
		{http.MethodPost, "/"},
	} {
		req, _ := http.NewRequest(r.method, s.URL+r.path, bytes.NewReader(body()))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Error APIError `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != 404 || err != nil || got.Error.Status != "NOT_FOUND" {
			t.Errorf("%s %s: %d %+v (%v)", r.method, r.path, resp.StatusCode, got, err)
		}
	}
	for _, b := range []string{"not json", "[1]", ""} {
		resp := post(t, c, streamURL(s, "m"), []byte(b))
		if resp.StatusCode != 400 {
			t.Errorf("body %q: status %d", b, resp.StatusCode)
		}
	}
	for _, e := range s.Ledger() {
		if !e.Billed.IsZero() {
			t.Errorf("billed %+v for %s", e.Billed, e.Request.Path)
		}
	}
}

func TestParsePath(t *testing.T) {
	for path, want := range map[string][3]string{
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent": {"v1beta", "gemini-2.5-flash", "streamGenerateContent"},
		"/v1/models/a:b:countTokens":                            {"v1", "a:b", "countTokens"},
	} {
		v, m, c, ok := parsePath(path)
		if !ok || [3]string{v, m, c} != want {
			t.Errorf("parsePath(%q) = %q %q %q %v", path, v, m, c, ok)
		}
	}
	for _, path := range []string{"", "/", "v1/models/m:x", "//models/m:x", "/v1/models/:x", "/v1/models/a/b:x", "/v1/other/m:x", "/v1/models/m"} {
		if _, _, _, ok := parsePath(path); ok {
			t.Errorf("parsePath(%q) accepted", path)
		}
	}
}

func TestNamed(t *testing.T) {
	names := Names()
	if len(names) != 16 || names[0] != "always-tool" {
		t.Errorf("names = %v", names)
	}
	for _, n := range names {
		if sc, err := Named(n, ""); err != nil || sc == nil {
			t.Errorf("Named(%q) = %v, %v", n, sc, err)
		}
	}
	sc, _ := Named("tool", "ls -la")
	if r := sc.Respond(&Request{}); !strings.Contains(string(r.Parts[2].FunctionCall.Args), "ls -la") {
		t.Errorf("tool with command = %+v", r)
	}
	if _, err := Named("nope", ""); err == nil || !strings.Contains(err.Error(), "text") {
		t.Errorf("unknown name: %v", err)
	}
}

func TestUsageJSON(t *testing.T) {
	b, _ := json.Marshal(Usage{PromptTokenCount: 100, CandidatesTokenCount: 20}.withTotal())
	if string(b) != `{"promptTokenCount":100,"candidatesTokenCount":20,"totalTokenCount":120}` {
		t.Errorf("usage JSON = %s", b)
	}
	u := Usage{PromptTokenCount: 1, TotalTokenCount: 9}.withTotal()
	if u.TotalTokenCount != 9 {
		t.Errorf("withTotal replaced a total: %+v", u)
	}
	if Call("f", 42).FunctionCall == nil || string(Call("f", 42).FunctionCall.Args) != "{}" {
		t.Error("Call with a non-object accepted it")
	}
}

// FuzzParseBody feeds arbitrary bodies to the request parser: it must not
// panic, a body it accepts is a JSON object, and the helpers and
// scenarios work on whatever it made of it.
func FuzzParseBody(f *testing.F) {
	for _, name := range []string{"gemini_first", "gemini_followup", "gemini_router"} {
		f.Add(cliBody(f, name))
	}
	f.Add(body(user("x"), functionResponse(ShellTool, "y")))
	f.Add([]byte(`{"contents":[{"parts":[{"functionResponse":{"response":[1]}},{"functionCall":null}]},7],"tools":[{}]}`))
	f.Add([]byte(`{"generateContentRequest":{"contents":[{"role":"user","parts":[{"text":"x"}]}]}}`))
	f.Add([]byte(`{"generationConfig":{"thinkingConfig":{"thinkingBudget":"x"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := Request{Call: MethodGenerate}
		err := r.parseBody(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		if err == nil && bytes.TrimSpace(b)[0] != '{' {
			t.Fatalf("accepted a body that is not an object: %q", b)
		}
		_ = r.UserText()
		_ = r.Router()
		for _, fr := range r.FunctionResponses() {
			_ = fr.Output()
		}
		_ = ToolTurn("ls", "a").Respond(&r)
		_ = TextAnswer("a").Respond(&r)
	})
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func shellResponse() RequestPart {
	return RequestPart{FunctionResponse: &FunctionResponse{Name: ShellTool, Response: []byte(`{"output":"ok"}`)}}
}

func TestInteractiveScenarios(t *testing.T) {
	model := func(parts ...RequestPart) *Request {
		return &Request{Call: MethodStream, Contents: []Content{{Role: "user", Parts: append([]RequestPart{{Text: "go"}}, parts...)}}}
	}
	call := func(r Response) string {
		for _, p := range r.Parts {
			if p.FunctionCall != nil {
				var a struct{ Command string }
				_ = json.Unmarshal(p.FunctionCall.Args, &a)
				return a.Command
			}
		}
		return ""
	}
	two := TwoTools("echo one", "echo two", "both")
	if got := call(two.Respond(model())); got != "echo one" {
		t.Errorf("TwoTools first = %q", got)
	}
	if got := call(two.Respond(model(shellResponse()))); got != "echo two" {
		t.Errorf("TwoTools second = %q", got)
	}
	if r := two.Respond(model(shellResponse(), shellResponse())); call(r) != "" || r.Parts[0].Text != "both" {
		t.Errorf("TwoTools last = %+v", r)
	}
	long := ToolThenText("sleep 60", "after")
	if got := call(long.Respond(model())); got != "sleep 60" {
		t.Errorf("ToolThenText first = %q", got)
	}
	for i := 0; i < 2; i++ {
		if r := long.Respond(model()); call(r) != "" || r.Parts[0].Text != "after" {
			t.Errorf("ToolThenText later = %+v", r)
		}
	}
	turns := Turns("t")
	for n := 1; n <= 3; n++ {
		if u := TurnUsage(n); u.CachedContentTokenCount == 0 || u.ThoughtsTokenCount == 0 || u.TotalTokenCount != u.PromptTokenCount+u.CandidatesTokenCount+u.ThoughtsTokenCount {
			t.Errorf("TurnUsage(%d) = %+v: cached and thought tokens must be billed", n, u)
		}
		if r := turns.Respond(model()); r.Usage != TurnUsage(n) || TurnUsage(n) == TurnUsage(n+1) {
			t.Errorf("Turns %d billed %+v", n, r.Usage)
		}
	}
	if r := turns.Respond(&Request{Call: MethodGenerate, ResponseMIMEType: "application/json", ResponseSchema: []byte(`{"complexity_score":1}`)}); r.Usage != routerUsage() {
		t.Errorf("the router counted as a turn: %+v", r)
	}
}

func TestSeen(t *testing.T) {
	srv, err := Start("127.0.0.1:0", TextAnswer("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	body := `{"contents":[{"role":"user","parts":[{"text":"STEER \"quoted\" text"}]}]}`
	resp, err := http.Post(srv.URL+"/v1beta/models/m:generateContent", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	l := srv.Ledger()
	if !l.Seen(`STEER "quoted" text`) || !l.Seen(`STEER \"quoted`) || l.Seen("never sent") {
		t.Errorf("Seen is wrong for %s", body)
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
		URL:  func(s *Server) string { return streamURL(s, "m") },
		Body: body(),
		Entries: func(s *Server) []mocktest.Entry {
			var out []mocktest.Entry
			for _, e := range s.Ledger() {
				out = append(out, mocktest.Entry{Seq: e.Request.Seq, Status: e.Status, Hung: e.Hung})
			}
			return out
		},
	})
}
