package googleai

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

// DefaultModel is the model a response names when the request's path
// names none that can be read.
const DefaultModel = "mock-model"

// maxBody bounds a request body; a Gemini CLI request is about 40 KB and
// grows with the history it replays.
const maxBody = 64 << 20

// Server is a mock Gemini API on a loopback address. It answers
// generateContent and streamGenerateContent from its Scenario, countTokens
// itself, and everything else with a 404 Google error. Every request is
// kept in its ledger.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:PORT", for
	// GOOGLE_GEMINI_BASE_URL.
	URL string

	host *mockhttp.Host

	mu       sync.Mutex
	seq      int
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
		return nil, errors.New("mock googleai: nil scenario")
	}
	s := &Server{
		scenario: sc,
	}
	for _, o := range opts {
		o(s)
	}
	host, err := mockhttp.Listen("mock googleai", addr)
	if err != nil {
		return nil, err
	}
	s.host, s.URL = host, host.URL
	host.Serve(s)
	return s, nil
}

// Close stops the server: hung requests are dropped without an answer,
// and Close returns once every handler has returned. It is safe to call
// more than once.
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
	// Status is the status sent: 0 while the request is unanswered and
	// for a hung one.
	Status int
	// Hung is set for a request the scenario left unanswered.
	Hung bool
	// Billed is the usage the answer reported to the client: the
	// usageMetadata of a model call's answer once it was written in full;
	// zero for everything else.
	Billed Usage
}

// Ledger is the server's record of requests.
type Ledger []Entry

// Calls returns the entries for model calls: generateContent and
// streamGenerateContent.
func (l Ledger) Calls() Ledger {
	var out Ledger
	for _, e := range l {
		if e.Request.Method == http.MethodPost && e.Request.IsModelCall() {
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

// Seen reports whether a request of the ledger contains text (see
// Request.Contains).
func (l Ledger) Seen(text string) bool {
	for _, e := range l {
		if e.Request.Contains(text) {
			return true
		}
	}
	return false
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
	e.Request.BodyBytes, e.Request.Body = len(body), body
	version, model, call, routed := parsePath(r.URL.Path)
	known := routed && r.Method == http.MethodPost && (call == MethodStream || call == MethodGenerate || call == MethodCountTokens)
	if known {
		e.Request.APIVersion, e.Request.Model, e.Request.Call = version, model, call
		e.Request.Stream = call == MethodStream
		if err == nil {
			if perr := e.Request.parseBody(body); perr != nil {
				e.Request.ParseError = perr.Error()
			}
		}
	}
	s.record(e)

	switch {
	case err != nil:
		s.sendError(w, e, http.StatusRequestEntityTooLarge, &APIError{Code: 413, Status: "INVALID_ARGUMENT", Message: err.Error()}, "")
	case !known:
		s.sendError(w, e, http.StatusNotFound, &APIError{Code: 404, Status: "NOT_FOUND",
			Message: fmt.Sprintf("mock: no route for %s %s", r.Method, r.URL.Path)}, "")
	case e.Request.ParseError != "":
		s.sendError(w, e, http.StatusBadRequest, &APIError{Code: 400, Status: "INVALID_ARGUMENT",
			Message: "Invalid JSON payload received. " + e.Request.ParseError}, "")
	case call == MethodCountTokens:
		// A rough count; countTokens is free and bills nothing.
		s.sendJSON(w, e, map[string]any{"totalTokens": max(len(body)/4, 1)}, Usage{})
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

// abort ends a handler without an answer: net/http drops the connection
// instead of completing the response a returning handler implies.
func abort() { panic(http.ErrAbortHandler) }

func (s *Server) answer(w http.ResponseWriter, r *http.Request, e *Entry, resp Response) {
	if resp.Delay > 0 && !s.host.Wait(r, resp.Delay) {
		abort()
	}
	if resp.Hang {
		s.mu.Lock()
		e.Hung = true
		s.mu.Unlock()
		s.host.Wait(r, -1)
		abort()
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if resp.Status >= 400 {
		s.sendError(w, e, resp.Status, resp.Error, resp.RawBody)
		return
	}
	model := resp.Model
	if model == "" {
		model = e.Request.Model
	}
	if model == "" {
		model = DefaultModel
	}
	finish := resp.FinishReason
	if finish == "" {
		finish = "STOP"
	}
	usage := resp.Usage.withTotal()
	if resp.Usage.IsZero() {
		usage = Usage{}
	}
	id := fmt.Sprintf("mock-response-%04d", e.Request.Seq)
	if !e.Request.Stream {
		s.sendJSON(w, e, chunk(id, model, resp.Parts, finish, &usage), usage)
		return
	}
	var chunks []map[string]any
	for _, p := range resp.Parts {
		if p.FunctionCall != nil || p.Thought {
			chunks = append(chunks, chunk(id, model, []Part{p}, "", nil))
			continue
		}
		for _, piece := range pieces(p.Text) {
			chunks = append(chunks, chunk(id, model, []Part{Text(piece)}, "", nil))
		}
	}
	if len(chunks) == 0 {
		chunks = append(chunks, chunk(id, model, nil, "", nil))
	}
	// finishReason and usageMetadata ride on the last chunk only, as the
	// API sends them.
	last := chunks[len(chunks)-1]
	last["candidates"].([]any)[0].(map[string]any)["finishReason"] = finish
	last["usageMetadata"] = usage
	if !strings.Contains(e.Request.RawQuery, "alt=sse") {
		// Without alt=sse the API streams one JSON array.
		s.sendJSON(w, e, chunks, usage)
		return
	}
	s.sendStream(w, e, chunks, usage)
}

// chunk is one GenerateContentResponse: a single candidate with parts,
// and, when given, its finish reason and the usage.
func chunk(id, model string, parts []Part, finish string, usage *Usage) map[string]any {
	ps := make([]any, 0, len(parts))
	for _, p := range parts {
		ps = append(ps, partJSON(p))
	}
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": ps}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	m := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": id}
	if usage != nil {
		m["usageMetadata"] = *usage
	}
	return m
}

func partJSON(p Part) map[string]any {
	if fc := p.FunctionCall; fc != nil {
		call := map[string]any{"name": fc.Name, "args": json.RawMessage("{}")}
		if len(fc.Args) > 0 && json.Valid(fc.Args) {
			call["args"] = fc.Args
		}
		if fc.ID != "" {
			call["id"] = fc.ID
		}
		m := map[string]any{"functionCall": call}
		if p.ThoughtSignature != "" {
			m["thoughtSignature"] = p.ThoughtSignature
		}
		return m
	}
	if p.Thought {
		return map[string]any{"text": p.Text, "thought": true}
	}
	return map[string]any{"text": p.Text}
}

// pieces splits text after each space so that a client sees several
// chunks; an empty text is one empty piece.
func pieces(text string) []string {
	var out []string
	for _, part := range strings.SplitAfter(text, " ") {
		if part != "" {
			out = append(out, part)
		}
	}
	if len(out) == 0 {
		out = []string{text}
	}
	return out
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
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// sendJSON sends v as a 200 and bills usage once it was written in full.
func (s *Server) sendJSON(w http.ResponseWriter, e *Entry, v any, usage Usage) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err != nil {
		usage = Usage{}
	}
	s.setStatus(e, http.StatusOK, usage)
}

// sendStream sends chunks as server-sent events, one "data:" frame each,
// ended by a blank line with CRLFs as the API frames them, flushing each,
// and bills usage once every frame was written.
func (s *Server) sendStream(w http.ResponseWriter, e *Entry, chunks []map[string]any, usage Usage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s.setStatus(e, http.StatusOK, Usage{})
	rc := http.NewResponseController(w)
	var buf bytes.Buffer
	for _, c := range chunks {
		b, err := json.Marshal(c)
		if err != nil {
			return
		}
		buf.Reset()
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\r\n\r\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	s.setStatus(e, http.StatusOK, usage)
}
