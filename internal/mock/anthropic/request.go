package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Request is what the server kept of one HTTP request: the headers and a
// parsed summary of a Messages API body. The raw body is not kept (a
// Claude Code request is about 50 KB).
type Request struct {
	// Seq counts every request the server received, from 1.
	Seq      int
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	// BodyBytes is the length of the body.
	BodyBytes int
	// ParseError is set when a POST /v1/messages body was not valid JSON;
	// such a request is answered 400 and never reaches the scenario.
	ParseError string

	// The fields below summarise a POST /v1/messages body.

	Model     string
	Stream    bool
	MaxTokens int
	// Effort is output_config.effort.
	Effort string
	// Thinking is thinking.type ("adaptive", "enabled", "disabled").
	Thinking string
	// System is the text of every system block, joined by newlines.
	System string
	// Tools are the names of the tools offered, in order.
	Tools    []string
	Messages []Turn
}

// Turn is one entry of the request's messages. Role may be "system":
// Claude Code puts its environment block there.
type Turn struct {
	Role   string
	Blocks []ContentBlock
}

// ContentBlock is one block of a request message; a string content is one
// text block.
type ContentBlock struct {
	Type string
	// Text is a text block's text, or a tool_result's content flattened
	// to its text.
	Text      string
	ToolUseID string // tool_result
	IsError   bool   // tool_result
	ID        string // tool_use
	Name      string // tool_use
	// MediaType and Data are an image block's source: its media type and
	// base64 data.
	MediaType string
	Data      string
}

// HasTool reports whether the request offered a tool called name.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// ToolResults returns the tool_result blocks of the last message: a
// non-empty result means the request follows up on a tool call.
func (r *Request) ToolResults() []ContentBlock {
	if len(r.Messages) == 0 {
		return nil
	}
	var out []ContentBlock
	for _, b := range r.Messages[len(r.Messages)-1].Blocks {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

// countToolResults counts the tool_result blocks of every message.
func (r *Request) countToolResults() int {
	n := 0
	for _, m := range r.Messages {
		for _, b := range m.Blocks {
			if b.Type == "tool_result" {
				n++
			}
		}
	}
	return n
}

// Contains reports whether text occurs in the request's system text or in
// any block of its messages (text, tool results, tool names, image data).
func (r *Request) Contains(text string) bool {
	if strings.Contains(r.System, text) {
		return true
	}
	for _, m := range r.Messages {
		for _, b := range m.Blocks {
			if strings.Contains(b.Text, text) || strings.Contains(b.Name, text) || strings.Contains(b.Data, text) {
				return true
			}
		}
	}
	return false
}

// UserText returns the text blocks of the user messages, joined by
// newlines: where a test finds its prompt.
func (r *Request) UserText() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Blocks {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// wireRequest is the part of a Messages API body the server reads. Every
// other field (context_management, metadata, ...) is accepted and ignored.
type wireRequest struct {
	Model     string          `json:"model"`
	Stream    bool            `json:"stream"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	OutputConfig struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
	Thinking struct {
		Type string `json:"type"`
	} `json:"thinking"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Source    struct {
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// parseBody fills r's summary from a Messages API body.
func (r *Request) parseBody(body []byte) error {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return err
	}
	r.Model, r.Stream, r.MaxTokens = w.Model, w.Stream, w.MaxTokens
	r.Effort, r.Thinking = w.OutputConfig.Effort, w.Thinking.Type
	var sys []string
	for _, b := range blocks(w.System) {
		sys = append(sys, b.Text)
	}
	r.System = strings.Join(sys, "\n")
	for _, t := range w.Tools {
		r.Tools = append(r.Tools, t.Name)
	}
	for _, m := range w.Messages {
		r.Messages = append(r.Messages, Turn{Role: m.Role, Blocks: blocks(m.Content)})
	}
	return nil
}

// blocks reads a content value that is either a string or a block array.
// Anything else yields no blocks: the summary is for assertions, not
// validation.
func blocks(raw json.RawMessage) []ContentBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []ContentBlock{{Type: "text", Text: s}}
	}
	var ws []wireBlock
	if json.Unmarshal(raw, &ws) != nil {
		return nil
	}
	out := make([]ContentBlock, 0, len(ws))
	for _, w := range ws {
		b := ContentBlock{Type: w.Type, Text: w.Text, ToolUseID: w.ToolUseID, IsError: w.IsError, ID: w.ID, Name: w.Name,
			MediaType: w.Source.MediaType, Data: w.Source.Data}
		if w.Type == "tool_result" {
			var parts []string
			for _, c := range blocks(w.Content) {
				parts = append(parts, c.Text)
			}
			b.Text = strings.Join(parts, "\n")
		}
		out = append(out, b)
	}
	return out
}
