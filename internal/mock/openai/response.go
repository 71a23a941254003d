package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Response is a scenario's answer to one request. The zero value is a 200
// with an empty response (no output items, zero usage).
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
	// Stall sends the 200 headers and response.created, then nothing
	// until the client goes away or the server closes. A non-streamed
	// request gets nothing at all, as with Hang.
	Stall bool
	// Model names the model in the response; empty means the request's.
	Model string
	// Items are the output items of a 200 answer, in order: streamed as
	// server-sent events when the request asked for a stream, and sent
	// as one response object otherwise.
	Items []Item
	// Usage is billed by response.completed (or the non-streamed
	// response object), and only once that was sent in full.
	Usage Usage
	// Failed, on a 200, ends the stream with response.failed carrying
	// this error right after response.in_progress, in place of the
	// items. Nothing is billed.
	Failed *ResponseError
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

// ResponseError is the error of a response that failed after the stream
// began: response.failed's response.error {code, message}.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Item is one output item of a response.
type Item struct {
	// Type is "reasoning", "message" or "function_call".
	Type string
	// Text is a reasoning item's summary text or a message's text.
	Text string
	// Name is a function_call's function name; Namespace is set for a
	// function of a namespace tool (Codex's multi_agent_v1): the API
	// sends the two apart, and Codex rejects "namespace.name" as one.
	Name      string
	Namespace string
	// Arguments is a function_call's arguments, a JSON text.
	Arguments string
	// CallID of a function_call; the server assigns a unique one when
	// empty.
	CallID string
}

// Usage is OpenAI token usage: InputTokens includes CachedTokens and
// OutputTokens includes ReasoningTokens.
type Usage struct {
	InputTokens     int64
	CachedTokens    int64
	OutputTokens    int64
	ReasoningTokens int64
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:     u.InputTokens + v.InputTokens,
		CachedTokens:    u.CachedTokens + v.CachedTokens,
		OutputTokens:    u.OutputTokens + v.OutputTokens,
		ReasoningTokens: u.ReasoningTokens + v.ReasoningTokens,
	}
}

// wireUsage is Usage as the Responses API writes it.
type wireUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// MarshalJSON writes the API's usage object: input_tokens,
// input_tokens_details.cached_tokens, output_tokens,
// output_tokens_details.reasoning_tokens and total_tokens.
func (u Usage) MarshalJSON() ([]byte, error) {
	var w wireUsage
	w.InputTokens, w.InputTokensDetails.CachedTokens = u.InputTokens, u.CachedTokens
	w.OutputTokens, w.OutputTokensDetails.ReasoningTokens = u.OutputTokens, u.ReasoningTokens
	w.TotalTokens = u.InputTokens + u.OutputTokens
	return json.Marshal(w)
}

// UnmarshalJSON reads the API's usage object.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var w wireUsage
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*u = Usage{InputTokens: w.InputTokens, CachedTokens: w.InputTokensDetails.CachedTokens,
		OutputTokens: w.OutputTokens, ReasoningTokens: w.OutputTokensDetails.ReasoningTokens}
	return nil
}

// Text returns an assistant message item with text.
func Text(s string) Item { return Item{Type: "message", Text: s} }

// Reasoning returns a reasoning item whose summary is s.
func Reasoning(s string) Item { return Item{Type: "reasoning", Text: s} }

// FunctionCall returns a function_call item calling name with args, which
// must marshal to a JSON object.
func FunctionCall(name string, args any) Item {
	// Without HTML escaping, so that "echo hi > f" stays readable in
	// the arguments Codex shows and replays.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		return Item{Type: "function_call", Name: name, Arguments: "{}"}
	}
	return Item{Type: "function_call", Name: name, Arguments: strings.TrimSuffix(buf.String(), "\n")}
}

// ExecCommand returns a call of Codex's exec_command tool running cmd.
func ExecCommand(cmd string) Item {
	return FunctionCall("exec_command", map[string]string{"cmd": cmd})
}

// AgentNamespace is the namespace tool through which Codex offers its
// sub-agent functions (spawn_agent, wait_agent, send_input, resume_agent,
// close_agent).
const AgentNamespace = "multi_agent_v1"

// AgentCall returns a call of the sub-agent function name (such as
// "spawn_agent") in AgentNamespace.
func AgentCall(name string, args any) Item {
	it := FunctionCall(name, args)
	it.Namespace = AgentNamespace
	return it
}
