package chat

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Response is a scenario's answer to one request. The zero value is a 200
// with an empty assistant message (finish_reason stop, zero usage).
type Response struct {
	// Status is the HTTP status of an error: 400 or more, sent with Error
	// as an OpenAI error body, or with RawBody verbatim. Anything lower
	// means 200.
	Status int
	// Header holds extra response headers, such as Retry-After.
	Header http.Header
	// Error is the body of an error status; nil means StatusError(Status).
	Error *APIError
	// RawBody, when not empty, is the body of an error status as is, for
	// a body that is not the usual error object.
	RawBody string
	// Delay holds the answer back (no status line, no headers) for this
	// long. A client that goes away meanwhile gets nothing.
	Delay time.Duration
	// Hang accepts the request and never answers: no status line, no
	// headers, until the client goes away or the server closes.
	Hang bool
	// Stall sends the 200 headers and the first chunk (the assistant
	// role), then nothing until the client goes away or the server
	// closes. A non-streamed request gets nothing at all, as with Hang.
	Stall bool
	// Model names the model in the response; empty means the request's.
	Model string
	// Reasoning is streamed as reasoning_content deltas before the text,
	// and sent as message.reasoning_content when not streamed.
	Reasoning string
	// Text is the assistant message's content.
	Text string
	// Calls are the message's tool calls, in order.
	Calls []Call
	// FinishReason is the choice's finish_reason; empty means
	// "tool_calls" when there are calls and "stop" otherwise.
	FinishReason string
	// Usage is billed once the answer was sent in full, whether or not
	// the client asked for it (stream_options.include_usage), as the API
	// bills: a client that does not ask cannot report it.
	Usage Usage
	// Failed, on a streamed 200, ends the stream after the first chunk
	// with an error chunk {"error":{…}} and no [DONE], in place of the
	// answer; a non-streamed request gets it as an HTTP 500. Nothing is
	// billed.
	Failed *APIError
}

// APIError is the body of an OpenAI HTTP error:
// {"error":{"message","type","param":null,"code"}}.
type APIError struct {
	Message string
	Type    string
	// Code is sent as null when empty.
	Code string
}

// MarshalJSON writes the error object, with param and an empty code as
// null, as the API does.
func (e APIError) MarshalJSON() ([]byte, error) {
	var code any
	if e.Code != "" {
		code = e.Code
	}
	return json.Marshal(map[string]any{"message": e.Message, "type": e.Type, "param": nil, "code": code})
}

// Call is one tool call of an answer.
type Call struct {
	// ID is the call's id; the server assigns a unique one when empty.
	ID   string
	Name string
	// Arguments is a JSON text; "{}" when empty.
	Arguments string
}

// Usage is Chat Completions token usage: PromptTokens includes
// CachedTokens (prompt_tokens_details.cached_tokens) and
// CompletionTokens includes ReasoningTokens
// (completion_tokens_details.reasoning_tokens).
type Usage struct {
	PromptTokens     int64
	CachedTokens     int64
	CompletionTokens int64
	ReasoningTokens  int64
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + v.PromptTokens,
		CachedTokens:     u.CachedTokens + v.CachedTokens,
		CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
	}
}

// wireUsage is Usage as the API writes it.
type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// MarshalJSON writes the API's usage object: prompt_tokens,
// completion_tokens, total_tokens, prompt_tokens_details.cached_tokens and
// completion_tokens_details.reasoning_tokens.
func (u Usage) MarshalJSON() ([]byte, error) {
	var w wireUsage
	w.PromptTokens, w.PromptTokensDetails.CachedTokens = u.PromptTokens, u.CachedTokens
	w.CompletionTokens, w.CompletionTokensDetails.ReasoningTokens = u.CompletionTokens, u.ReasoningTokens
	w.TotalTokens = u.PromptTokens + u.CompletionTokens
	return json.Marshal(w)
}

// UnmarshalJSON reads the API's usage object.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var w wireUsage
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*u = Usage{PromptTokens: w.PromptTokens, CachedTokens: w.PromptTokensDetails.CachedTokens,
		CompletionTokens: w.CompletionTokens, ReasoningTokens: w.CompletionTokensDetails.ReasoningTokens}
	return nil
}

// FunctionCall returns a call of the function name with args, which must
// marshal to a JSON object.
func FunctionCall(name string, args any) Call {
	// Without HTML escaping, so that "echo hi > f" stays readable in
	// the arguments a client shows and replays.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		return Call{Name: name, Arguments: "{}"}
	}
	return Call{Name: name, Arguments: strings.TrimSuffix(buf.String(), "\n")}
}

// BashTool is the name of the shell tool of the agents that call it bash
// (OpenCode among them), whose arguments hold the command line in
// "command".
const BashTool = "bash"

// Bash returns a call of BashTool running command.
func Bash(command string) Call {
	return FunctionCall(BashTool, map[string]string{"command": command})
}
