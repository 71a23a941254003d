package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// Request is what the server kept of one HTTP request: the headers and a
// parsed summary of a Chat Completions body. The raw body is not kept (an
// agent's request is tens of kilobytes and grows with the history).
type Request struct {
	// Seq counts every request the server received, from 1.
	Seq      int
	Method   string
	Path     string
	RawQuery string
	// Header holds the request headers (Authorization among them).
	Header http.Header
	// BodyBytes is the length of the body.
	BodyBytes int
	// ParseError is set when a POST /v1/chat/completions body was not a
	// JSON object; such a request is answered 400 and never reaches the
	// scenario.
	ParseError string

	// The fields below summarise a POST /v1/chat/completions body.

	Model  string
	Stream bool
	// IncludeUsage is stream_options.include_usage: only then does a
	// stream end with a usage chunk, as the API does.
	IncludeUsage bool
	// MaxTokens is max_completion_tokens, or the older max_tokens.
	MaxTokens int64
	// ReasoningEffort is reasoning_effort.
	ReasoningEffort string
	// Tools are the names of the functions offered, in order.
	Tools []string
	// ToolChoice is tool_choice as a string ("auto", "none",
	// "required"), or the name of the function it forces.
	ToolChoice string
	// Format is response_format, or nil when the request has none.
	Format *ResponseFormat
	// Messages holds the messages in order.
	Messages []Message
}

// ResponseFormat is a request's response_format: {"type":"json_schema",
// "json_schema":{"name","strict","schema"}} or {"type":"json_object"}.
type ResponseFormat struct {
	Type   string
	Name   string
	Strict bool
	// Schema is the JSON schema as sent, or nil.
	Schema json.RawMessage
}

// Message is one entry of a request's messages.
type Message struct {
	// Role is "system", "developer", "user", "assistant" or "tool".
	Role string
	// Text is the content: a string as is, a list of parts as their texts
	// joined by newlines.
	Text string
	// Reasoning is an assistant message's reasoning_content, which some
	// clients replay.
	Reasoning string
	// ToolCalls are an assistant message's tool_calls.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers.
	ToolCallID string
	// Images are the URLs of the content's image_url parts (a data: URL
	// carries the image's base64), so that a test can check an image
	// reached the model.
	Images []string
}

// ToolCall is a function call as an assistant message replays it.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// HasTool reports whether the request offered a function called name.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// System returns the texts of the system and developer messages joined by
// newlines.
func (r *Request) System() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "developer" {
			parts = append(parts, m.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// prompt returns the index of the last user message, or -1.
func (r *Request) prompt() int {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return i
		}
	}
	return -1
}

// LastUserText returns the text of the last user message: the prompt of
// the current turn.
func (r *Request) LastUserText() string {
	if i := r.prompt(); i >= 0 {
		return r.Messages[i].Text
	}
	return ""
}

// UserTexts returns the texts of every user message, in order.
func (r *Request) UserTexts() []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			out = append(out, m.Text)
		}
	}
	return out
}

// ToolResults returns the tool messages after the last user message: a
// non-empty result means the request follows up on tool calls of the
// current turn. Results of earlier turns, which clients replay, do not
// count.
func (r *Request) ToolResults() []Message {
	var out []Message
	for _, m := range r.Messages[r.prompt()+1:] {
		if m.Role == "tool" {
			out = append(out, m)
		}
	}
	return out
}

// LastToolResult returns the last of ToolResults and the call it answers
// (a zero ToolCall when the messages lack it); ok is false when there is
// no result.
func (r *Request) LastToolResult() (result Message, call ToolCall, ok bool) {
	res := r.ToolResults()
	if len(res) == 0 {
		return Message{}, ToolCall{}, false
	}
	result = res[len(res)-1]
	call, _ = r.Call(result.ToolCallID)
	return result, call, true
}

// Call returns the tool call with id from the assistant messages.
func (r *Request) Call(id string) (ToolCall, bool) {
	for _, m := range r.Messages {
		for _, c := range m.ToolCalls {
			if c.ID == id {
				return c, true
			}
		}
	}
	return ToolCall{}, false
}

// Contains reports whether text occurs in one of the request's messages
// (its content, reasoning, an image's URL, or the name or arguments of a
// tool call it replays): where a test checks that a message reached the model. The
// summary is searched, not the raw body, which is not kept.
func (r *Request) Contains(text string) bool {
	for _, m := range r.Messages {
		if strings.Contains(m.Text, text) || strings.Contains(m.Reasoning, text) {
			return true
		}
		for _, u := range m.Images {
			if strings.Contains(u, text) {
				return true
			}
		}
		for _, c := range m.ToolCalls {
			if strings.Contains(c.Name, text) || strings.Contains(c.Arguments, text) {
				return true
			}
		}
	}
	return false
}

// TitleRequest reports whether the request asks for a title for the
// conversation rather than for the turn: it offers no tools, and its
// system prompt (or, without one, its first message) asks for a title.
// Agent CLIs send one beside the first turn of a session (OpenCode's
// begins "You are a title generator").
func (r *Request) TitleRequest() bool {
	if len(r.Tools) > 0 {
		return false
	}
	text := r.System()
	if text == "" && len(r.Messages) > 0 {
		text = r.Messages[0].Text
	}
	return strings.Contains(strings.ToLower(text), "title")
}

// wireRequest is the part of a Chat Completions body the server reads.
// Every other field (temperature, top_p, parallel_tool_calls, ...) is
// accepted and ignored.
type wireRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int64             `json:"max_tokens"`
	MaxCompletionTokens int64             `json:"max_completion_tokens"`
	ReasoningEffort     string            `json:"reasoning_effort"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ResponseFormat      *struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Strict bool            `json:"strict"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Messages []json.RawMessage `json:"messages"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type wireMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// parseBody fills r's summary from a Chat Completions body. Only a body
// that is not a JSON object is an error: a field of an unexpected type is
// left empty, for the summary serves assertions, not validation.
func (r *Request) parseBody(body []byte) error {
	var w wireRequest
	if err := lenient(body, &w); err != nil {
		return err
	}
	r.Model, r.Stream, r.IncludeUsage = w.Model, w.Stream, w.StreamOptions.IncludeUsage
	r.MaxTokens = w.MaxCompletionTokens
	if r.MaxTokens == 0 {
		r.MaxTokens = w.MaxTokens
	}
	r.ReasoningEffort = w.ReasoningEffort
	for _, raw := range w.Tools {
		var t wireTool
		if lenient(raw, &t) != nil {
			continue
		}
		if t.Function.Name != "" {
			r.Tools = append(r.Tools, t.Function.Name)
		} else {
			r.Tools = append(r.Tools, t.Type)
		}
	}
	r.ToolChoice = toolChoice(w.ToolChoice)
	if f := w.ResponseFormat; f != nil {
		r.Format = &ResponseFormat{Type: f.Type, Name: f.JSONSchema.Name, Strict: f.JSONSchema.Strict}
		if s := f.JSONSchema.Schema; len(s) > 0 && string(s) != "null" {
			r.Format.Schema = append(json.RawMessage(nil), s...)
		}
	}
	r.Messages = make([]Message, 0, len(w.Messages))
	for _, raw := range w.Messages {
		var m wireMessage
		if lenient(raw, &m) != nil {
			continue
		}
		msg := Message{Role: m.Role, Text: texts(m.Content), Reasoning: texts(m.ReasoningContent), ToolCallID: m.ToolCallID,
			Images: imageURLs(m.Content)}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		r.Messages = append(r.Messages, msg)
	}
	return nil
}

// toolChoice reads tool_choice: a string, or {"type":"function",
// "function":{"name"}}, which it reduces to the name.
func toolChoice(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if lenient(raw, &o) == nil {
		return o.Function.Name
	}
	return ""
}

// errNotObject refuses a body that is valid JSON but not an object, such
// as null, which json.Unmarshal takes without complaint.
var errNotObject = errors.New("not a JSON object")

// lenient unmarshals the JSON object b into v. A field of the wrong type
// is left at its zero value and is no error: json.Unmarshal fills the
// other fields all the same.
func lenient(b []byte, v any) error {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		if !json.Valid(b) {
			return json.Unmarshal(b, v) // for its syntax error
		}
		return errNotObject
	}
	err := json.Unmarshal(b, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return nil
	}
	return err
}

// texts reads a string, or a list of parts whose text fields it joins by
// newlines; anything else is empty.
func texts(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var out []string
	for _, p := range parts {
		var part struct {
			Text string `json:"text"`
		}
		if lenient(p, &part) == nil && part.Text != "" {
			out = append(out, part.Text)
		}
	}
	return strings.Join(out, "\n")
}

// imageURLs reads the image_url parts of a list of parts: {"type":
// "image_url","image_url":{"url"}} (or the older bare string).
func imageURLs(raw json.RawMessage) []string {
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []string
	for _, p := range parts {
		var part struct {
			Type     string          `json:"type"`
			ImageURL json.RawMessage `json:"image_url"`
		}
		if lenient(p, &part) != nil || part.Type != "image_url" {
			continue
		}
		var u struct {
			URL string `json:"url"`
		}
		var s string
		switch {
		case json.Unmarshal(part.ImageURL, &s) == nil && s != "":
			out = append(out, s)
		case lenient(part.ImageURL, &u) == nil && u.URL != "":
			out = append(out, u.URL)
		}
	}
	return out
}
