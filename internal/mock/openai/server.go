package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentgate/agentgate/internal/mock/mockhttp"
)

// DefaultModel is the model a response names when the request named none.
const DefaultModel = "mock-model"

// maxBody bounds a request body; a Codex request is about 41 KB and grows
// with the history it replays.
const maxBody = 64 << 20

// createdAt is the fixed created_at of every response, so that answers
// do not depend on the clock.
const createdAt = 1790000000

// Server is a mock OpenAI Responses API on a loopback address. It answers
// POST /v1/responses (and /responses) from its Scenario and everything else
// with a 404 OpenAI error. Every request is kept in its ledger.
// Its URL, "http://127.0.0.1:PORT/v1", is the base URL for a Codex model provider's base_url.
type Server struct {
	mockhttp.Core[Entry, Request, Response]
	callSeq mockhttp.Counter
	key     string // RequireKey's; empty accepts any request
}

// Option configures a Server.
type Option func(*Server)

// LedgerLimit keeps only the last n entries of the ledger (n > 0), for a
// long-running server; by default every entry is kept.
func LedgerLimit(n int) Option { return func(s *Server) { s.Book().Limit(n) } }

// RequireKey makes the server answer a request whose Authorization
// header is not "Bearer key" with 401 invalid_api_key, as the API does,
// without asking the scenario. By default any request is answered.
func RequireKey(key string) Option { return func(s *Server) { s.key = key } }

// Start serves sc on addr, which must be a loopback address
// ("127.0.0.1:0" picks a free port). The caller must Close the server.
func Start(addr string, sc Scenario, opts ...Option) (*Server, error) {
	s := &Server{}
	for _, o := range opts {
		o(s)
	}
	if err := s.Listen("mock openai", addr, "/v1", sc); err != nil {
		return nil, err
	}
	s.Serve(s)
	return s, nil
}

// Ledger returns a copy of the entries kept so far, oldest first.
func (s *Server) Ledger() Ledger { return s.Book().Entries() }

// Entry is one request the server received and what it answered.
type Entry struct {
	Request Request
	// Status is the status sent: 0 while the request is unanswered and
	// for a hung one, 200 for a stalled stream.
	Status int
	// Hung is set for a request the scenario left unanswered (Hang, or
	// Stall on a non-streamed request).
	Hung bool
	// Stalled is set for a stream the scenario stalled.
	Stalled bool
	// Billed is the usage the answer reported to the client: the usage
	// of response.completed (or of the non-streamed response object)
	// once it was written in full; zero for everything else.
	Billed Usage
}

// Ledger is the server's record of requests.
type Ledger []Entry

// Responses returns the entries for POST /v1/responses and /responses.
func (l Ledger) Responses() Ledger {
	var out Ledger
	for _, e := range l {
		if e.Request.Method == http.MethodPost && isResponses(e.Request.Path) {
			out = append(out, e)
		}
	}
	return out
}

// Billed returns the sum of the usage billed by the entries.
func (l Ledger) Billed() Usage {
	var u Usage
	for _, e := range l {
		u = u.Add(e.Billed)
	}
	return u
}

func isResponses(path string) bool { return path == "/v1/responses" || path == "/responses" }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := mockhttp.Begin(s.Book(), r)
	e := &Entry{Request: Request{Seq: f.Seq, Method: f.Method, Path: f.Path, RawQuery: f.RawQuery, Header: f.Header}}

	body, err := mockhttp.ReadBody(w, r, maxBody)
	e.Request.BodyBytes = len(body)
	isPost := r.Method == http.MethodPost && isResponses(r.URL.Path)
	if isPost && err == nil {
		if perr := e.Request.parseBody(body); perr != nil {
			e.Request.ParseError = perr.Error()
		}
	}
	s.Book().Record(e)

	switch {
	case err != nil:
		s.sendError(w, e, http.StatusRequestEntityTooLarge, &APIError{Type: "invalid_request_error", Message: err.Error()}, "")
	case !isPost:
		// The API's own answer to an unknown route.
		s.sendError(w, e, http.StatusNotFound, &APIError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)}, "")
	case s.key != "" && r.Header.Get("Authorization") != "Bearer "+s.key:
		s.sendError(w, e, http.StatusUnauthorized, StatusError(http.StatusUnauthorized), "")
	case e.Request.ParseError != "":
		s.sendError(w, e, http.StatusBadRequest, &APIError{Type: "invalid_request_error",
			Message: "We could not parse the JSON body of your request: " + e.Request.ParseError}, "")
	default:
		s.answer(w, r, e, s.Respond(&e.Request))
	}
}

func (s *Server) setStatus(e *Entry, status int, billed Usage) {
	s.Book().Update(func() { e.Status, e.Billed = status, billed })
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, e *Entry, resp Response) {
	if resp.Delay > 0 && !s.Host().Wait(r, resp.Delay) {
		mockhttp.Abort()
	}
	if resp.Hang || (resp.Stall && !e.Request.Stream) {
		s.Book().Update(func() { e.Hung = true })
		s.Host().Hang(r)
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_mock_%04d", e.Request.Seq))
	if resp.Status >= 400 {
		s.sendError(w, e, resp.Status, resp.Error, resp.RawBody)
		return
	}
	out := s.complete(resp, &e.Request)
	if !e.Request.Stream {
		s.sendJSON(w, e, out)
		return
	}
	s.sendStream(w, r, e, out)
}

// reply is a 200 response with its defaults filled in.
type reply struct {
	id     string
	model  string
	items  []Item
	usage  Usage
	failed *ResponseError
	stall  bool
}

// complete fills the defaults of a 200 answer: model and call ids.
func (s *Server) complete(resp Response, req *Request) reply {
	a := reply{id: fmt.Sprintf("resp_mock_%04d", req.Seq), model: resp.Model, usage: resp.Usage,
		failed: resp.Failed, stall: resp.Stall}
	if a.model == "" {
		a.model = req.Model
	}
	if a.model == "" {
		a.model = DefaultModel
	}
	a.items = make([]Item, len(resp.Items))
	copy(a.items, resp.Items)
	for i := range a.items {
		if a.items[i].Type == "function_call" && a.items[i].CallID == "" {
			a.items[i].CallID = fmt.Sprintf("call_mock_%04d", s.callSeq.Next())
		}
		if a.items[i].Type == "function_call" && a.items[i].Arguments == "" {
			a.items[i].Arguments = "{}"
		}
	}
	return a
}

// itemID is the id of output item i of a response.
func itemID(a reply, i int, it Item) string {
	prefix := map[string]string{"reasoning": "rs", "message": "msg", "function_call": "fc"}[it.Type]
	if prefix == "" {
		prefix = "item"
	}
	return fmt.Sprintf("%s_%s_%d", prefix, strings.TrimPrefix(a.id, "resp_"), i)
}

// StatusError returns the error body the API sends with status.
func StatusError(status int) *APIError {
	switch status {
	case 400:
		return &APIError{Type: "invalid_request_error", Code: "invalid_request", Message: "Invalid request: unsupported parameter"}
	case 401:
		return &APIError{Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided"}
	case 403:
		return &APIError{Type: "invalid_request_error", Code: "unsupported_country_region_territory", Message: "Country, region, or territory not supported"}
	case 404:
		return &APIError{Type: "invalid_request_error", Code: "model_not_found", Message: "The model does not exist or you do not have access to it."}
	case 429:
		return &APIError{Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached for requests"}
	case 503:
		return &APIError{Type: "server_error", Code: "server_is_overloaded", Message: "The server is overloaded. Please try again later."}
	}
	if status >= 500 {
		return &APIError{Type: "server_error", Message: "The server had an error while processing your request. Sorry about that!"}
	}
	return &APIError{Type: "invalid_request_error", Message: fmt.Sprintf("mock error %d", status)}
}

func (s *Server) sendError(w http.ResponseWriter, e *Entry, status int, ae *APIError, raw string) {
	body := []byte(raw)
	if raw == "" {
		if ae == nil {
			ae = StatusError(status)
		}
		body, _ = json.Marshal(map[string]any{"error": ae})
	}
	s.setStatus(e, status, Usage{})
	mockhttp.WriteBody(w, status, "application/json", body)
}

// itemJSON is an output item as output_item.added announces it (full =
// false: in progress, text and arguments empty, filled by deltas) or as
// output_item.done, response.completed and a non-streamed response hold
// it (full = true).
func itemJSON(a reply, i int, it Item, full bool) map[string]any {
	id := itemID(a, i, it)
	status := "in_progress"
	if full {
		status = "completed"
	}
	switch it.Type {
	case "reasoning":
		summary := []any{}
		if full {
			summary = []any{map[string]any{"type": "summary_text", "text": it.Text}}
		}
		return map[string]any{"id": id, "type": "reasoning", "summary": summary}
	case "function_call":
		m := map[string]any{"id": id, "type": "function_call", "status": status, "call_id": it.CallID, "name": it.Name, "arguments": ""}
		if full {
			m["arguments"] = it.Arguments
		}
		if it.Namespace != "" {
			m["namespace"] = it.Namespace
		}
		return m
	default:
		content := []any{}
		if full {
			content = []any{textPart(it.Text)}
		}
		return map[string]any{"id": id, "type": "message", "status": status, "role": "assistant", "content": content}
	}
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

// responseJSON is the response object in the given status.
func responseJSON(a reply, status string) map[string]any {
	m := map[string]any{
		"id": a.id, "object": "response", "created_at": createdAt, "status": status, "model": a.model,
		"output": []any{}, "error": nil, "incomplete_details": nil, "parallel_tool_calls": true, "usage": nil,
	}
	switch status {
	case "completed":
		output := make([]any, 0, len(a.items))
		for i, it := range a.items {
			output = append(output, itemJSON(a, i, it, true))
		}
		m["output"], m["usage"] = output, a.usage
	case "failed":
		m["error"] = a.failed
	}
	return m
}

func (s *Server) sendJSON(w http.ResponseWriter, e *Entry, a reply) {
	status := "completed"
	if a.failed != nil {
		status = "failed"
	}
	if mockhttp.WriteJSON(w, http.StatusOK, responseJSON(a, status)) && a.failed == nil {
		s.setStatus(e, http.StatusOK, a.usage)
		return
	}
	s.setStatus(e, http.StatusOK, Usage{})
}

// sse writes server-sent events, numbering and flushing each, and
// remembers the first write error.
type sse struct {
	*mockhttp.SSE
	seq int
}

// event writes one event of type typ; fields go into its data next to
// type and sequence_number.
func (o *sse) event(typ string, fields map[string]any) {
	data := map[string]any{"type": typ, "sequence_number": o.seq}
	for k, v := range fields {
		data[k] = v
	}
	o.seq++
	o.Event(typ, data)
}

func (s *Server) sendStream(w http.ResponseWriter, r *http.Request, e *Entry, a reply) {
	o := &sse{SSE: mockhttp.StartSSE(w)}
	s.setStatus(e, http.StatusOK, Usage{})
	o.event("response.created", map[string]any{"response": responseJSON(a, "in_progress")})
	if a.stall {
		s.Book().Update(func() { e.Stalled = true })
		s.Host().Hang(r)
	}
	o.event("response.in_progress", map[string]any{"response": responseJSON(a, "in_progress")})
	if a.failed != nil {
		o.event("response.failed", map[string]any{"response": responseJSON(a, "failed")})
		return
	}
	for i, it := range a.items {
		streamItem(o, a, i, it)
	}
	o.event("response.completed", map[string]any{"response": responseJSON(a, "completed")})
	if o.Err() == nil {
		s.setStatus(e, http.StatusOK, a.usage)
	}
}

// streamItem writes the events of output item i: added, its part and
// delta events, done.
func streamItem(o *sse, a reply, i int, it Item) {
	id := itemID(a, i, it)
	at := map[string]any{"item_id": id, "output_index": i}
	with := func(kv ...any) map[string]any {
		m := make(map[string]any, len(at)+len(kv)/2)
		for k, v := range at {
			m[k] = v
		}
		for j := 0; j+1 < len(kv); j += 2 {
			m[kv[j].(string)] = kv[j+1]
		}
		return m
	}
	o.event("response.output_item.added", map[string]any{"output_index": i, "item": itemJSON(a, i, it, false)})
	switch it.Type {
	case "reasoning":
		o.event("response.reasoning_summary_part.added", with("summary_index", 0, "part", map[string]any{"type": "summary_text", "text": ""}))
		for _, d := range mockhttp.Chunks(it.Text) {
			o.event("response.reasoning_summary_text.delta", with("summary_index", 0, "delta", d))
		}
		o.event("response.reasoning_summary_text.done", with("summary_index", 0, "text", it.Text))
		o.event("response.reasoning_summary_part.done", with("summary_index", 0, "part", map[string]any{"type": "summary_text", "text": it.Text}))
	case "function_call":
		o.event("response.function_call_arguments.delta", with("delta", it.Arguments))
		o.event("response.function_call_arguments.done", with("arguments", it.Arguments))
	default:
		o.event("response.content_part.added", with("content_index", 0, "part", textPart("")))
		for _, d := range mockhttp.Chunks(it.Text) {
			o.event("response.output_text.delta", with("content_index", 0, "delta", d))
		}
		o.event("response.output_text.done", with("content_index", 0, "text", it.Text))
		o.event("response.content_part.done", with("content_index", 0, "part", textPart(it.Text)))
	}
	o.event("response.output_item.done", map[string]any{"output_index": i, "item": itemJSON(a, i, it, true)})
}
