package anthropic

import (
	"encoding/json"
	"net/http"
)

// Response is a scenario's answer to one request. The zero value is a 200
// with an empty message.
type Response struct {
	// Status is the HTTP status; 0 means 200. A status of 400 or more is
	// sent with Error as an Anthropic error body.
	Status int
	// Header holds extra response headers, such as retry-after.
	Header http.Header
	// Error is the body of an error status.
	Error *APIError
	// Hang accepts the request and never answers: no status line, no
	// headers, until the client goes away or the server closes.
	Hang bool
	// Message is the content of a 200 answer, streamed as SSE when the
	// request asked for a stream and sent as one JSON object otherwise.
	Message Message
	// StreamError, on a streamed 200, is sent as an "event: error" frame
	// right after message_start in place of the content. Only
	// message_start's usage (Message.Usage with output_tokens 1) is
	// billed.
	StreamError *APIError
}

// APIError is an Anthropic error: {"type":"error","error":{type,message}}.
type APIError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Message is an assistant message the server sends.
type Message struct {
	// Model defaults to the request's model.
	Model   string
	Content []Block
	// StopReason defaults to "tool_use" when Content holds a tool_use
	// block and to "end_turn" otherwise.
	StopReason string
	// Usage is what the answer bills: message_start carries its input and
	// cache counts with output_tokens 1, message_delta carries all of it,
	// as the Anthropic API does.
	Usage Usage
}

// Block is one content block of an assistant message.
type Block struct {
	// Type is "text", "thinking", "redacted_thinking" or "tool_use".
	Type      string
	Text      string // text
	Thinking  string // thinking
	Signature string // thinking
	Data      string // redacted_thinking
	// ID of a tool_use; the server assigns a unique one when empty.
	ID    string
	Name  string          // tool_use
	Input json.RawMessage // tool_use; null means {}
}

// Usage is Anthropic token usage: InputTokens excludes both cache counts.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
	}
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: "text", Text: s} }

// Thinking returns a thinking block with a placeholder signature.
func Thinking(s string) Block {
	return Block{Type: "thinking", Thinking: s, Signature: "mock-signature"}
}

// RedactedThinking returns a redacted_thinking block.
func RedactedThinking() Block { return Block{Type: "redacted_thinking", Data: "mock-redacted"} }

// ToolUse returns a tool_use block calling name with input, which must
// marshal to a JSON object.
func ToolUse(name string, input any) Block {
	b, err := json.Marshal(input)
	if err != nil {
		b = []byte("{}")
	}
	return Block{Type: "tool_use", Name: name, Input: b}
}

// Bash returns a tool_use block asking Claude Code's Bash tool to run
// command.
func Bash(command string) Block {
	return ToolUse("Bash", map[string]string{"command": command, "description": "mock command"})
}
