package googleai

import (
	"encoding/json"
	"net/http"
	"time"
)

// Response is a scenario's answer to one request. The zero value is a 200
// with an empty candidate and zero usage.
type Response struct {
	// Status is the HTTP status of an error: 400 or more, sent with Error
	// as a Google error body, or with RawBody verbatim. Anything lower
	// means 200.
	Status int
	// Header holds extra response headers.
	Header http.Header
	// Error is the body of an error status; nil means StatusError(Status).
	Error *APIError
	// RawBody, when not empty, is the body of an error status as is.
	RawBody string
	// Delay holds the answer back (no status line, no headers) for this
	// long. A client that goes away meanwhile gets nothing.
	Delay time.Duration
	// Hang accepts the request and never answers: no status line, no
	// headers, until the client goes away or the server closes.
	Hang bool
	// Model is the response's modelVersion; empty means the request's.
	Model string
	// Parts are the candidate's content, in order. A streamed answer
	// sends each thought and each function call as a chunk of its own
	// and each text part in several chunks, split after spaces.
	Parts []Part
	// FinishReason defaults to "STOP", which Gemini sends for a function
	// call too.
	FinishReason string
	// Usage is the usageMetadata of the answer (of its last chunk when
	// streamed), billed once the answer was sent in full.
	Usage Usage
}

// APIError is the body of a Google API error:
// {"error":{"code","message","status","details"}}.
type APIError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Status is the canonical code's name: INVALID_ARGUMENT,
	// UNAUTHENTICATED, RESOURCE_EXHAUSTED, ...
	Status string `json:"status"`
	// Details are google.rpc detail objects (ErrorInfo, RetryInfo, ...),
	// each with its "@type".
	Details []map[string]any `json:"details,omitempty"`
}

// Part is one part of a candidate's content.
type Part struct {
	// Text is a text part's text, or a thought's when Thought is set.
	Text    string
	Thought bool
	// FunctionCall, when set, makes this a function call part.
	FunctionCall *FunctionCall
	// ThoughtSignature is sent with a function call part; Gemini 3
	// models require it back in the history, and the validator accepts
	// the placeholder the built-in parts use.
	ThoughtSignature string
}

// FunctionCall is a model's request to run a tool.
type FunctionCall struct {
	// ID is sent only when set: the Gemini API sends none, and the CLI
	// then makes one up.
	ID   string
	Name string
	Args json.RawMessage
}

// placeholderSignature is the thought signature the API's validator
// accepts without checking.
const placeholderSignature = "skip_thought_signature_validator"

// Text returns a text part.
func Text(s string) Part { return Part{Text: s} }

// Thought returns a thought part: the model's reasoning, which Gemini
// sends only when thinkingConfig.includeThoughts is set and bills as
// thoughtsTokenCount.
func Thought(s string) Part { return Part{Text: s, Thought: true} }

// Call returns a function call part calling name with args, which must
// marshal to a JSON object.
func Call(name string, args any) Part {
	b, err := json.Marshal(args)
	if err != nil || len(b) == 0 || b[0] != '{' {
		b = []byte("{}")
	}
	return Part{FunctionCall: &FunctionCall{Name: name, Args: b}, ThoughtSignature: placeholderSignature}
}

// ShellTool is the name of Gemini CLI's shell tool.
const ShellTool = "run_shell_command"

// Shell returns a call of Gemini CLI's shell tool running command.
func Shell(command string) Part {
	return Call(ShellTool, map[string]string{"command": command, "description": "mock command"})
}

// Usage is Gemini's usageMetadata. PromptTokenCount includes
// CachedContentTokenCount; CandidatesTokenCount excludes
// ThoughtsTokenCount; TotalTokenCount is the sum of prompt, candidates,
// thoughts and tool-use prompt tokens.
type Usage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount,omitempty"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount,omitempty"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount,omitempty"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokenCount:        u.PromptTokenCount + v.PromptTokenCount,
		CachedContentTokenCount: u.CachedContentTokenCount + v.CachedContentTokenCount,
		CandidatesTokenCount:    u.CandidatesTokenCount + v.CandidatesTokenCount,
		ThoughtsTokenCount:      u.ThoughtsTokenCount + v.ThoughtsTokenCount,
		ToolUsePromptTokenCount: u.ToolUsePromptTokenCount + v.ToolUsePromptTokenCount,
		TotalTokenCount:         u.TotalTokenCount + v.TotalTokenCount,
	}
}

// withTotal returns u with TotalTokenCount filled in when it is zero.
func (u Usage) withTotal() Usage {
	if u.TotalTokenCount == 0 {
		u.TotalTokenCount = u.PromptTokenCount + u.CandidatesTokenCount + u.ThoughtsTokenCount + u.ToolUsePromptTokenCount
	}
	return u
}

// IsZero reports whether nothing was counted.
func (u Usage) IsZero() bool { return u == Usage{} }
