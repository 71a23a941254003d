package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

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
type Server struct {
	// URL is the base URL, "http://127.0.0.1:PORT", for ANTHROPIC_BASE_URL.
	URL string

	host *mockhttp.Host

	mu       sync.Mutex
	seq      int
	toolSeq  int
	ledger   []*Entry
	limit    int
	scMu     sync.Mutex // serialises Scenario.Respond
	scenario Scenario
}

// Option configures a Server.
type Option func(*Server)

// LedgerLimit keeps only the last n entries of the ledger (n > 0), for a
// long-running server; by default every entry is kept.
func LedgerLimit(n int) Option { return func(s *Server) { s.limit = n } }

// Start serves sc on addr, which must be a loopback address
// ("127.0.0.1:0" picks a free port). The caller must Close the server.
func Start(addr string, sc Scenario, opts ...Option) (*Server, error) {
	if sc == nil {
		return nil, errors.New("mock anthropic: nil scenario")
	}
	s := &Server{
		scenario: sc,
	}
	for _, o := range opts {
		o(s)
	}
	host, err := mockhttp.Listen("mock anthropic", addr)
	if err != nil {
		return nil, err
	}
	s.host, s.URL = host, host.URL
	host.Serve(s)
	return s, nil
}

// Close stops the server: hung requests are dropped without an answer, and
// Close returns once every handler has returned. It is safe to call more
// than once.
func (s *Server) Close() {
	s.host.Close()
}

// Ledger returns a copy of the entries kept so far, oldest first.
func (s *Server) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(Ledger, len(s.ledger))
	for i, e := range s.ledger {
		out[i] = *e
	}
	return out
}

// Reset empties the ledger.
func (s *Server) Reset() {
	s.mu.Lock()
	s.ledger = nil
	s.mu.Unlock()
}

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
	var out Ledger
	for _, e := range l {
		if e.Request.Method == http.MethodPost && e.Request.Path == "/v1/messages" {
			out = append(out, e)
		}
	}
	return out
}

// Seen reports whether a request of the ledger contains text (see
// Request.Contains): where a test checks that a message reached the
// model.
func (l Ledger) Seen(text string) bool {
	for _, e := range l {
		if e.Request.Contains(text) {
			return true
		}
	}
	return false
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
	if !s.host.Enter() {
		panic(http.ErrAbortHandler)
	}
	defer s.host.Leave()
	s.mu.Lock()
	s.seq++
	e := &Entry{Request: Request{
		Seq: s.seq, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(),
	}}
	s.mu.Unlock()

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	e.Request.BodyBytes = len(body)
	isMessages := r.Method == http.MethodPost && r.URL.Path == "/v1/messages"
	if isMessages && err == nil {
		if perr := e.Request.parseBody(body); perr != nil {
			e.Request.ParseError = perr.Error()
		}
	}
	s.record(e)

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
		s.scMu.Lock()
		resp := s.scenario.Respond(&e.Request)
		s.scMu.Unlock()
		s.answer(w, r, e, resp)
	}
}

func (s *Server) record(e *Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger = append(s.ledger, e)
	if s.limit > 0 && len(s.ledger) > s.limit {
		s.ledger = append([]*Entry(nil), s.ledger[len(s.ledger)-s.limit:]...)
	}
}

func (s *Server) setStatus(e *Entry, status int, billed Usage) {
	s.mu.Lock()
	e.Status, e.Billed = status, billed
	s.mu.Unlock()
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
		s.mu.Lock()
		e.Hung = true
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-s.host.Done():
		}
		// Abort so that net/http drops the connection instead of
		// sending the empty 200 a returning handler implies.
		panic(http.ErrAbortHandler)
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
	s.mu.Lock()
	for i := range content {
		if content[i].Type != "tool_use" {
			continue
		}
		hasTool = true
		if content[i].ID == "" {
			s.toolSeq++
			content[i].ID = fmt.Sprintf("toolu_mock_%04d", s.toolSeq)
		}
		if len(content[i].Input) == 0 {
			content[i].Input = json.RawMessage("{}")
		}
	}
	s.mu.Unlock()
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
	b, _ := json.Marshal(map[string]any{"type": "error", "error": ae})
	s.setStatus(e, status, Usage{})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *Server) sendJSON(w http.ResponseWriter, e *Entry, m Message) {
	content := make([]map[string]any, 0, len(m.Content))
	for _, b := range m.Content {
		content = append(content, blockJSON(b, true))
	}
	body, _ := json.Marshal(map[string]any{
		"id": messageID(e), "type": "message", "role": "assistant", "model": m.Model,
		"content": content, "stop_reason": m.StopReason, "stop_sequence": nil, "usage": m.Usage,
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err == nil {
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

// sse writes server-sent events, flushing each, and remembers the first
// write error.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
	err error
}

func (o *sse) event(name string, data any) {
	if o.err != nil {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		o.err = err
		return
	}
	o.buf.Reset()
	fmt.Fprintf(&o.buf, "event: %s\ndata: %s\n\n", name, b)
	if _, o.err = o.w.Write(o.buf.Bytes()); o.err == nil {
		o.err = o.rc.Flush()
	}
}

func (s *Server) sendStream(w http.ResponseWriter, e *Entry, m Message, streamErr *APIError) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	o := &sse{w: w, rc: http.NewResponseController(w)}
	start := m.Usage
	start.OutputTokens = 1
	o.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": messageID(e), "type": "message", "role": "assistant", "model": m.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": start,
	}})
	if streamErr != nil {
		o.event("error", map[string]any{"type": "error", "error": streamErr})
		// The client has seen message_start's usage, and Claude Code
		// counts it, so the ledger does too.
		if o.err != nil {
			start = Usage{}
		}
		s.setStatus(e, http.StatusOK, start)
		return
	}
	o.event("ping", map[string]any{"type": "ping"})
	for i, b := range m.Content {
		o.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": blockJSON(b, false)})
		for _, d := range deltas(b) {
			o.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		o.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	o.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": nil}, "usage": m.Usage})
	o.event("message_stop", map[string]any{"type": "message_stop"})
	if o.err != nil {
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
