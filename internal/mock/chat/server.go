package chat

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentgate/agentgate/internal/mock/mockhttp"
)

// DefaultModel is the model a response names when the request named none.
const DefaultModel = "mock-model"

// maxBody bounds a request body.
const maxBody = 64 << 20

// created is the fixed created time of every response, so that answers
// do not depend on the clock.
const created = 1790000000

// Server is a mock OpenAI Chat Completions API on a loopback address. It
// answers POST /v1/chat/completions (and /chat/completions) from its
// Scenario and everything else with a 404 OpenAI error. Every request is
// kept in its ledger.
// Its URL, "http://127.0.0.1:PORT/v1", is the base URL for a client's base URL setting.
type Server struct {
	mockhttp.Core[Entry, Request, Response]
	callSeq mockhttp.Counter
}

// Option configures a Server.
type Option func(*Server)

// LedgerLimit keeps only the last n entries of the ledger (n > 0), for a
// long-running server; by default every entry is kept.
func LedgerLimit(n int) Option { return func(s *Server) { s.Book().Limit(n) } }

// Start serves sc on addr, which must be a loopback address
// ("127.0.0.1:0" picks a free port). The caller must Close the server.
func Start(addr string, sc Scenario, opts ...Option) (*Server, error) {
	s := &Server{}
	for _, o := range opts {
		o(s)
	}
	if err := s.Listen("mock chat", addr, "/v1", sc); err != nil {
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
	// Billed is the usage charged for the answer: its Usage once the
	// answer was written in full (to [DONE], or the whole JSON object);
	// zero for everything else.
	Billed Usage
}

// Ledger is the server's record of requests.
type Ledger []Entry

// Completions returns the entries for POST /v1/chat/completions and
// /chat/completions.
func (l Ledger) Completions() Ledger {
	return l.Filter(func(e Entry) bool { return e.Request.Method == http.MethodPost && isCompletions(e.Request.Path) })
}

// Titles returns the completion entries that are title requests (see
// Request.TitleRequest).
func (l Ledger) Titles() Ledger {
	return l.Completions().Filter(func(e Entry) bool { return e.Request.TitleRequest() })
}

// Turns returns the completion entries that are not title requests: the
// model requests of the turns themselves.
func (l Ledger) Turns() Ledger {
	return l.Completions().Filter(func(e Entry) bool { return !e.Request.TitleRequest() })
}

// Filter returns the entries keep accepts.
func (l Ledger) Filter(keep func(Entry) bool) Ledger { return mockhttp.Filter(l, keep) }

// Billed returns the sum of the usage billed by the entries.
func (l Ledger) Billed() Usage {
	var u Usage
	for _, e := range l {
		u = u.Add(e.Billed)
	}
	return u
}

// Seen reports whether a request of the ledger contains text (see
// Request.Contains).
func (l Ledger) Seen(text string) bool {
	return mockhttp.Any(l, func(e Entry) bool { return e.Request.Contains(text) })
}

func isCompletions(path string) bool {
	return path == "/v1/chat/completions" || path == "/chat/completions"
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := mockhttp.Begin(s.Book(), r)
	e := &Entry{Request: Request{Seq: f.Seq, Method: f.Method, Path: f.Path, RawQuery: f.RawQuery, Header: f.Header}}
	body, err := mockhttp.ReadBody(w, r, maxBody)
	e.Request.BodyBytes = len(body)
	isPost := r.Method == http.MethodPost && isCompletions(r.URL.Path)
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
	a := s.complete(resp, &e.Request)
	if !e.Request.Stream {
		if a.failed != nil {
			s.sendError(w, e, http.StatusInternalServerError, a.failed, "")
			return
		}
		s.sendJSON(w, e, a)
		return
	}
	s.sendStream(w, r, e, a)
}

// reply is a 200 answer with its defaults filled in.
type reply struct {
	id        string
	model     string
	reasoning string
	text      string
	calls     []Call
	finish    string
	usage     Usage
	failed    *APIError
	stall     bool
}

// complete fills the defaults of a 200 answer: model, call ids and
// arguments, and the finish reason.
func (s *Server) complete(resp Response, req *Request) reply {
	a := reply{id: fmt.Sprintf("chatcmpl-mock-%04d", req.Seq), model: resp.Model, reasoning: resp.Reasoning, text: resp.Text,
		finish: resp.FinishReason, usage: resp.Usage, failed: resp.Failed, stall: resp.Stall}
	if a.model == "" {
		a.model = req.Model
	}
	if a.model == "" {
		a.model = DefaultModel
	}
	a.calls = make([]Call, len(resp.Calls))
	copy(a.calls, resp.Calls)
	for i := range a.calls {
		if a.calls[i].ID == "" {
			a.calls[i].ID = fmt.Sprintf("call_mock_%04d", s.callSeq.Next())
		}
		if a.calls[i].Arguments == "" {
			a.calls[i].Arguments = "{}"
		}
	}
	if a.finish == "" {
		a.finish = "stop"
		if len(a.calls) > 0 {
			a.finish = "tool_calls"
		}
	}
	return a
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

// callJSON is a tool call as a message holds it.
func callJSON(c Call) map[string]any {
	return map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
}

func (s *Server) sendJSON(w http.ResponseWriter, e *Entry, a reply) {
	msg := map[string]any{"role": "assistant", "content": nil}
	if a.text != "" || len(a.calls) == 0 {
		msg["content"] = a.text
	}
	if a.reasoning != "" {
		msg["reasoning_content"] = a.reasoning
	}
	if len(a.calls) > 0 {
		calls := make([]any, 0, len(a.calls))
		for _, c := range a.calls {
			calls = append(calls, callJSON(c))
		}
		msg["tool_calls"] = calls
	}
	if mockhttp.WriteJSON(w, http.StatusOK, map[string]any{
		"id": a.id, "object": "chat.completion", "created": created, "model": a.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": a.finish, "logprobs": nil}},
		"usage":   a.usage,
	}) {
		s.setStatus(e, http.StatusOK, a.usage)
		return
	}
	s.setStatus(e, http.StatusOK, Usage{})
}

// chunk is one chat.completion.chunk with a single choice carrying
// delta, and finish_reason (nil while the message goes on).
func chunk(a reply, delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": a.id, "object": "chat.completion.chunk", "created": created, "model": a.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}
}

func (s *Server) sendStream(w http.ResponseWriter, r *http.Request, e *Entry, a reply) {
	o := mockhttp.StartSSE(w)
	s.setStatus(e, http.StatusOK, Usage{})
	o.Data(chunk(a, map[string]any{"role": "assistant", "content": ""}, nil))
	if a.stall {
		s.Book().Update(func() { e.Stalled = true })
		s.Host().Hang(r)
	}
	if a.failed != nil {
		o.Data(map[string]any{"error": a.failed})
		return
	}
	for _, d := range mockhttp.Chunks(a.reasoning) {
		o.Data(chunk(a, map[string]any{"reasoning_content": d}, nil))
	}
	for _, d := range mockhttp.Chunks(a.text) {
		o.Data(chunk(a, map[string]any{"content": d}, nil))
	}
	for i, c := range a.calls {
		o.Data(chunk(a, map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
		o.Data(chunk(a, map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "function": map[string]any{"arguments": c.Arguments}}}}, nil))
	}
	o.Data(chunk(a, map[string]any{}, a.finish))
	if e.Request.IncludeUsage {
		o.Data(map[string]any{
			"id": a.id, "object": "chat.completion.chunk", "created": created, "model": a.model,
			"choices": []any{}, "usage": a.usage,
		})
	}
	o.Raw([]byte("[DONE]"))
	if o.Err() == nil {
		s.setStatus(e, http.StatusOK, a.usage)
	}
}
