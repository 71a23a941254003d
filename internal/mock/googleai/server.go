package googleai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentgate/agentgate/internal/mock/mockhttp"
)

// DefaultModel is the model a response names when the request's path
// names none that can be read.
const DefaultModel = "mock-model"

// jsonType is the Content-Type of the API's JSON answers.
const jsonType = "application/json; charset=UTF-8"

// maxBody bounds a request body; a Gemini CLI request is about 40 KB and
// grows with the history it replays.
const maxBody = 64 << 20

// Server is a mock Gemini API on a loopback address. It answers
// generateContent and streamGenerateContent from its Scenario, countTokens
// itself, and everything else with a 404 Google error. Every request is
// kept in its ledger.
// Its URL, "http://127.0.0.1:PORT", is the base URL for GOOGLE_GEMINI_BASE_URL.
type Server struct {
	mockhttp.Core[Entry, Request, Response]
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
	if err := s.Listen("mock googleai", addr, "", sc); err != nil {
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
	return mockhttp.Any(l, func(e Entry) bool { return e.Request.Contains(text) })
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := mockhttp.Begin(s.Book(), r)
	e := &Entry{Request: Request{Seq: f.Seq, Method: f.Method, Path: f.Path, RawQuery: f.RawQuery, Header: f.Header}}

	body, err := mockhttp.ReadBody(w, r, maxBody)
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
	s.Book().Record(e)

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
	if resp.Hang {
		s.Book().Update(func() { e.Hung = true })
		s.Host().Hang(r)
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
	mockhttp.WriteBody(w, status, jsonType, body)
}

// sendJSON sends v as a 200 and bills usage once it was written in full.
func (s *Server) sendJSON(w http.ResponseWriter, e *Entry, v any, usage Usage) {
	body, _ := json.Marshal(v)
	if !mockhttp.WriteBody(w, http.StatusOK, jsonType, body) {
		usage = Usage{}
	}
	s.setStatus(e, http.StatusOK, usage)
}

// sendStream sends chunks as server-sent events, one "data:" frame each,
// ended by a blank line with CRLFs as the API frames them, flushing each,
// and bills usage once every frame was written.
func (s *Server) sendStream(w http.ResponseWriter, e *Entry, chunks []map[string]any, usage Usage) {
	o := mockhttp.StartSSE(w)
	o.CRLF()
	s.setStatus(e, http.StatusOK, Usage{})
	for _, c := range chunks {
		o.Data(c)
	}
	if o.Err() == nil {
		s.setStatus(e, http.StatusOK, usage)
	}
}
