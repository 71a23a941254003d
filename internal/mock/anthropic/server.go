package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentgate/agentgate/internal/mock/mockhttp"
)

// DefaultModel is the model a response names when the request named none.
const DefaultModel = "claude-opus-5-5"

// maxBody bounds a request body; the CLI's own limit is 32 MB.
const maxBody = 64 << 20

// Server is a mock Anthropic Messages API on a loopback address. It answers
// POST /v1/messages (with or without ?beta=true) from its Scenario, HEAD and
// GET /api/hello with 200, and everything else with a 404 not_found_error.
// Every request is kept in its ledger.
// Its URL, "http://127.0.0.1:PORT", is the base URL for ANTHROPIC_BASE_URL.
type Server struct {
	mockhttp.Core[Entry, Request, Response]
	toolSeq mockhttp.Counter
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
	if err := s.Listen("mock anthropic", addr, "", sc); err != nil {
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
	// Status is the status sent; 0 while the request is unanswered, and
	// for a hung request.
	Status int
	// Hung is set for a request the scenario left unanswered.
	Hung bool
	// Billed is the usage the answer reported to the client: a
	// message's usage once it was sent in full, message_start's usage
	// (output_tokens 1) for a stream cut by StreamError, zero for error
	// statuses and hung requests.
	Billed Usage
}

// Ledger is the server's record of requests.
type Ledger []Entry

// Messages returns the entries for POST /v1/messages.
func (l Ledger) Messages() Ledger {
	return mockhttp.Filter(l, func(e Entry) bool { return e.Request.Method == http.MethodPost && e.Request.Path == "/v1/messages" })
}

// Seen reports whether a request of the ledger contains text (see
// Request.Contains): where a test checks that a message reached the
// model.
func (l Ledger) Seen(text string) bool {
	return mockhttp.Any(l, func(e Entry) bool { return e.Request.Contains(text) })
}

// Billed returns the sum of the usage billed by the entries.
func (l Ledger) Billed() Usage {
	var u Usage
	for _, e := range l {
		u = u.Add(e.Billed)
	}
	return u
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := mockhttp.Begin(s.Book(), r)
	e := &Entry{Request: Request{Seq: f.Seq, Method: f.Method, Path: f.Path, RawQuery: f.RawQuery, Header: f.Header}}
	body, err := mockhttp.ReadBody(w, r, maxBody)
	e.Request.BodyBytes = len(body)
	isMessages := r.Method == http.MethodPost && r.URL.Path == "/v1/messages"
	if isMessages && err == nil {
		if perr := e.Request.parseBody(body); perr != nil {
			e.Request.ParseError = perr.Error()
		}
	}
	s.Book().Record(e)

	switch {
	case err != nil:
		s.sendError(w, e, http.StatusRequestEntityTooLarge, &APIError{Type: "request_too_large", Message: err.Error()})
	case r.URL.Path == "/api/hello" && (r.Method == http.MethodHead || r.Method == http.MethodGet):
		s.setStatus(e, http.StatusOK, Usage{})
		w.WriteHeader(http.StatusOK)
	case !isMessages:
		s.sendError(w, e, http.StatusNotFound, &APIError{Type: "not_found_error", Message: "mock: no route for " + r.Method + " " + r.URL.Path})
	case e.Request.ParseError != "":
		s.sendError(w, e, http.StatusBadRequest, &APIError{Type: "invalid_request_error", Message: "mock: body is not JSON: " + e.Request.ParseError})
	default:
		s.answer(w, r, e, s.Respond(&e.Request))
	}
}

func (s *Server) setStatus(e *Entry, status int, billed Usage) {
	s.Book().Update(func() { e.Status, e.Billed = status, billed })
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, e *Entry, resp Response) {
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("request-id", fmt.Sprintf("req_mock_%04d", e.Request.Seq))
	switch {
	case resp.Hang:
		s.Book().Update(func() { e.Hung = true })
		s.Host().Hang(r)
	case resp.Status >= 400:
		s.sendError(w, e, resp.Status, resp.Error)
	default:
		msg := s.complete(resp.Message, &e.Request)
		if !e.Request.Stream {
			s.sendJSON(w, e, msg)
			return
		}
		s.sendStream(w, e, msg, resp.StreamError)
	}
}

// complete fills the defaults of a message: model, stop reason, tool ids.
func (s *Server) complete(m Message, req *Request) Message {
	if m.Model == "" {
		m.Model = req.Model
	}
	if m.Model == "" {
		m.Model = DefaultModel
	}
	content := make([]Block, len(m.Content))
	copy(content, m.Content)
	hasTool := false
	for i := range content {
		if content[i].Type != "tool_use" {
			continue
		}
		hasTool = true
		if content[i].ID == "" {
			content[i].ID = fmt.Sprintf("toolu_mock_%04d", s.toolSeq.Next())
		}
		if len(content[i].Input) == 0 {
			content[i].Input = json.RawMessage("{}")
		}
	}
	m.Content = content
	if m.StopReason == "" {
		m.StopReason = "end_turn"
		if hasTool {
			m.StopReason = "tool_use"
		}
	}
	return m
}

// ErrorType returns the Anthropic error type the API uses for status.
func ErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

func (s *Server) sendError(w http.ResponseWriter, e *Entry, status int, ae *APIError) {
	if ae == nil {
		ae = &APIError{Type: ErrorType(status), Message: fmt.Sprintf("mock error %d", status)}
	}
	s.setStatus(e, status, Usage{})
	mockhttp.WriteJSON(w, status, map[string]any{"type": "error", "error": ae})
}

func (s *Server) sendJSON(w http.ResponseWriter, e *Entry, m Message) {
	content := make([]map[string]any, 0, len(m.Content))
	for _, b := range m.Content {
		content = append(content, blockJSON(b, true))
	}
	if mockhttp.WriteJSON(w, http.StatusOK, map[string]any{
		"id": messageID(e), "type": "message", "role": "assistant", "model": m.Model,
		"content": content, "stop_reason": m.StopReason, "stop_sequence": nil, "usage": m.Usage,
	}) {
		s.setStatus(e, http.StatusOK, m.Usage)
		return
	}
	s.setStatus(e, http.StatusOK, Usage{})
}

func messageID(e *Entry) string { return fmt.Sprintf("msg_mock_%04d", e.Request.Seq) }

// blockJSON is a block as content_block_start announces it (full=false:
// empty text, thinking and input, filled by deltas) or as a non-streamed
// message holds it (full=true).
func blockJSON(b Block, full bool) map[string]any {
	switch b.Type {
	case "thinking":
		if !full {
			return map[string]any{"type": "thinking", "thinking": "", "signature": ""}
		}
		return map[string]any{"type": "thinking", "thinking": b.Thinking, "signature": b.Signature}
	case "redacted_thinking":
		return map[string]any{"type": "redacted_thinking", "data": b.Data}
	case "tool_use":
		input := json.RawMessage("{}")
		if full {
			input = b.Input
		}
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": input}
	default:
		if !full {
			return map[string]any{"type": b.Type, "text": ""}
		}
		return map[string]any{"type": b.Type, "text": b.Text}
	}
}

func (s *Server) sendStream(w http.ResponseWriter, e *Entry, m Message, streamErr *APIError) {
	o := mockhttp.StartSSE(w)
	start := m.Usage
	start.OutputTokens = 1
	o.Event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": messageID(e), "type": "message", "role": "assistant", "model": m.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": start,
	}})
	if streamErr != nil {
		o.Event("error", map[string]any{"type": "error", "error": streamErr})
		// The client has seen message_start's usage, and Claude Code
		// counts it, so the ledger does too.
		if o.Err() != nil {
			start = Usage{}
		}
		s.setStatus(e, http.StatusOK, start)
		return
	}
	o.Event("ping", map[string]any{"type": "ping"})
	for i, b := range m.Content {
		o.Event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": blockJSON(b, false)})
		for _, d := range deltas(b) {
			o.Event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		o.Event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	o.Event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": nil}, "usage": m.Usage})
	o.Event("message_stop", map[string]any{"type": "message_stop"})
	if o.Err() != nil {
		s.setStatus(e, http.StatusOK, Usage{})
		return
	}
	s.setStatus(e, http.StatusOK, m.Usage)
}

// deltas are the content_block_delta payloads that fill b. Text is split
// after each space so that a client sees several deltas.
func deltas(b Block) []map[string]any {
	switch b.Type {
	case "thinking":
		var out []map[string]any
		for _, part := range strings.SplitAfter(b.Thinking, " ") {
			if part != "" {
				out = append(out, map[string]any{"type": "thinking_delta", "thinking": part})
			}
		}
		return append(out, map[string]any{"type": "signature_delta", "signature": b.Signature})
	case "tool_use":
		return []map[string]any{{"type": "input_json_delta", "partial_json": string(b.Input)}}
	case "redacted_thinking":
		return nil
	default:
		var out []map[string]any
		for _, part := range strings.SplitAfter(b.Text, " ") {
			if part != "" {
				out = append(out, map[string]any{"type": "text_delta", "text": part})
			}
		}
		return out
	}
}
