package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// Request is what the server kept of one HTTP request: the headers and a
// parsed summary of a Responses API body. The raw body is not kept (a
// Codex request is about 41 KB).
type Request struct {
	// Seq counts every request the server received, from 1.
	Seq      int
	Method   string
	Path     string
	RawQuery string
	// Header holds the request headers. Codex sends Authorization,
	// Session-Id (the root thread) and Thread-Id (the thread asking,
	// which differs for a sub-agent) among others.
	Header http.Header
	// BodyBytes is the length of the body.
	BodyBytes int
	// ParseError is set when a POST /v1/responses body was not a JSON
	// object; such a request is answered 400 and never reaches the
	// scenario.
	ParseError string

	// The fields below summarise a POST /v1/responses body.

	Model  string
	Stream bool
	// Instructions is the instructions key: the system prompt of a client
	// that sends it there (GitHub Copilot CLI) rather than as a developer
	// message (Codex).
	Instructions string
	// Effort is reasoning.effort; Summary is reasoning.summary.
	Effort  string
	Summary string
	// PromptCacheKey is prompt_cache_key: Codex sends its session id.
	PromptCacheKey string
	// Tools are the tools offered, in order, by name. A namespace tool is
	// listed by its name followed by each of its functions as
	// "namespace.function" (e.g. "multi_agent_v1.spawn_agent"); a tool
	// without a name (web_search) by its type.
	Tools []string
	// Format is text.format, or nil when the request has none.
	Format *TextFormat
	// Input holds the input items in order.
	Input []InputItem
}

// TextFormat is a request's text.format: Codex's --output-schema sends
// {"type":"json_schema","name":"codex_output_schema","strict":true,
// "schema":{…}}.
type TextFormat struct {
	Type   string
	Name   string
	Strict bool
	// Schema is the JSON schema as sent, or nil.
	Schema json.RawMessage
}

// InputItem is one entry of a request's input.
type InputItem struct {
	// Type is "message", "reasoning", "function_call",
	// "function_call_output", or whatever else the client sent.
	Type string
	// Role of a message: "developer", "user" or "assistant".
	Role string
	// Text is a message's text parts joined by newlines, or a reasoning
	// item's summary texts joined by newlines.
	Text string
	// Name, Namespace and Arguments of a function_call.
	Name      string
	Namespace string
	Arguments string
	// CallID of a function_call or function_call_output.
	CallID string
	// Output of a function_call_output; a list of content parts is
	// flattened to their texts.
	Output string
}

// The headers by which Codex tells its threads apart.
const (
	// HeaderSessionID carries the root thread's id, on every request.
	HeaderSessionID = "Session-Id"
	// HeaderThreadID carries the id of the thread that asks.
	HeaderThreadID = "Thread-Id"
	// HeaderParentThreadID carries the spawning thread's id, on a
	// sub-agent's requests only.
	HeaderParentThreadID = "X-Codex-Parent-Thread-Id"
)

// SessionID returns the Session-Id header: the root thread's id, also
// on a sub-agent's requests.
func (r *Request) SessionID() string { return r.Header.Get(HeaderSessionID) }

// ThreadID returns the Thread-Id header: the id of the thread that asks.
func (r *Request) ThreadID() string { return r.Header.Get(HeaderThreadID) }

// SubAgent reports whether a sub-agent's thread sent the request: Codex
// then sends X-Codex-Parent-Thread-Id, and a Thread-Id that differs from
// the Session-Id.
func (r *Request) SubAgent() bool {
	if r.Header.Get(HeaderParentThreadID) != "" {
		return true
	}
	t, s := r.ThreadID(), r.SessionID()
	return t != "" && s != "" && t != s
}

// HasTool reports whether the request offered a tool called name, in
// the form Tools lists it.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// Injected reports whether the item is a user message that Codex wrote
// rather than the user: a block wholly wrapped in one tag, such as
// <environment_context>…</environment_context> at the start of a thread
// or <subagent_notification>…</subagent_notification> after a sub-agent
// finished.
func (it InputItem) Injected() bool {
	if it.Type != "message" || it.Role != "user" {
		return false
	}
	t := strings.TrimSpace(it.Text)
	if !strings.HasPrefix(t, "<") {
		return false
	}
	end := strings.IndexByte(t, '>')
	if end < 2 {
		return false
	}
	tag := t[1:end]
	for _, c := range tag {
		if (c < 'a' || c > 'z') && c != '_' && c != '-' {
			return false
		}
	}
	return strings.HasSuffix(t, "</"+tag+">")
}

// prompt returns the index of the last user message that is not
// Injected, or -1.
func (r *Request) prompt() int {
	for i := len(r.Input) - 1; i >= 0; i-- {
		if it := r.Input[i]; it.Type == "message" && it.Role == "user" && !it.Injected() {
			return i
		}
	}
	return -1
}

// LastUserText returns the text of the last user message that is not
// Injected: the prompt of the current turn.
func (r *Request) LastUserText() string {
	if i := r.prompt(); i >= 0 {
		return r.Input[i].Text
	}
	return ""
}

// FunctionOutputs returns the function_call_output items after the
// prompt (see LastUserText): a non-empty result means the request follows
// up on tool calls of the current turn. Outputs of earlier turns, which
// Codex replays, do not count.
func (r *Request) FunctionOutputs() []InputItem {
	var out []InputItem
	for _, it := range r.Input[r.prompt()+1:] {
		if it.Type == "function_call_output" {
			out = append(out, it)
		}
	}
	return out
}

// LastOutput returns the last of FunctionOutputs and the function_call
// it answers (a zero InputItem when the input lacks it); ok is false
// when there is no output.
func (r *Request) LastOutput() (output, call InputItem, ok bool) {
	outs := r.FunctionOutputs()
	if len(outs) == 0 {
		return InputItem{}, InputItem{}, false
	}
	output = outs[len(outs)-1]
	call, _ = r.Call(output.CallID)
	return output, call, true
}

// HasFunctionOutput reports whether FunctionOutputs is not empty.
func (r *Request) HasFunctionOutput() bool { return len(r.FunctionOutputs()) > 0 }

// AnsweredCalls returns the call ids of every function_call_output in
// the input, in order.
func (r *Request) AnsweredCalls() []string {
	var ids []string
	for _, it := range r.Input {
		if it.Type == "function_call_output" {
			ids = append(ids, it.CallID)
		}
	}
	return ids
}

// Call returns the function_call item with callID.
func (r *Request) Call(callID string) (InputItem, bool) {
	for _, it := range r.Input {
		if it.Type == "function_call" && it.CallID == callID {
			return it, true
		}
	}
	return InputItem{}, false
}

// Output returns the output sent for the call with callID.
func (r *Request) Output(callID string) (string, bool) {
	for _, it := range r.Input {
		if it.Type == "function_call_output" && it.CallID == callID {
			return it.Output, true
		}
	}
	return "", false
}

// Developer returns the texts of the developer messages joined by
// newlines: Codex sends its system prompt there, as it has no
// instructions key.
func (r *Request) Developer() string {
	var parts []string
	for _, it := range r.Input {
		if it.Type == "message" && it.Role == "developer" {
			parts = append(parts, it.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// wireRequest is the part of a Responses API body the server reads. Every
// other field (include, store, client_metadata, ...) is accepted and
// ignored.
type wireRequest struct {
	Model        string `json:"model"`
	Stream       bool   `json:"stream"`
	Instructions string `json:"instructions"`
	Reasoning    struct {
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
	} `json:"reasoning"`
	PromptCacheKey string            `json:"prompt_cache_key"`
	Tools          []json.RawMessage `json:"tools"`
	Text           struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Strict bool            `json:"strict"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
	Input json.RawMessage `json:"input"`
}

type wireTool struct {
	Type  string     `json:"type"`
	Name  string     `json:"name"`
	Tools []wireTool `json:"tools"`
}

type wireItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Summary   json.RawMessage `json:"summary"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
}

// parseBody fills r's summary from a Responses API body. Only a body that
// is not a JSON object is an error: a field of an unexpected type is left
// empty, for the summary serves assertions, not validation.
func (r *Request) parseBody(body []byte) error {
	var w wireRequest
	if err := lenient(body, &w); err != nil {
		return err
	}
	r.Model, r.Stream, r.Instructions = w.Model, w.Stream, w.Instructions
	r.Effort, r.Summary = w.Reasoning.Effort, w.Reasoning.Summary
	r.PromptCacheKey = w.PromptCacheKey
	for _, raw := range w.Tools {
		var t wireTool
		if lenient(raw, &t) != nil {
			continue
		}
		switch {
		case t.Type == "namespace":
			r.Tools = append(r.Tools, t.Name)
			for _, in := range t.Tools {
				r.Tools = append(r.Tools, t.Name+"."+in.Name)
			}
		case t.Name != "":
			r.Tools = append(r.Tools, t.Name)
		default:
			r.Tools = append(r.Tools, t.Type)
		}
	}
	if f := w.Text.Format; f != nil {
		r.Format = &TextFormat{Type: f.Type, Name: f.Name, Strict: f.Strict}
		if len(f.Schema) > 0 && string(f.Schema) != "null" {
			r.Format.Schema = append(json.RawMessage(nil), f.Schema...)
		}
	}
	r.Input = items(w.Input)
	return nil
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

// items reads the input value: a string is one user message, an array
// holds items. Entries that are not objects are skipped.
func items(raw json.RawMessage) []InputItem {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []InputItem{{Type: "message", Role: "user", Text: s}}
	}
	var ws []json.RawMessage
	if json.Unmarshal(raw, &ws) != nil {
		return nil
	}
	out := make([]InputItem, 0, len(ws))
	for _, one := range ws {
		var w wireItem
		if lenient(one, &w) != nil {
			continue
		}
		it := InputItem{Type: w.Type, Role: w.Role, Name: w.Name, Namespace: w.Namespace, Arguments: w.Arguments, CallID: w.CallID}
		if it.Type == "" && it.Role != "" {
			// The API takes {"role","content"} without a type as a
			// message.
			it.Type = "message"
		}
		switch it.Type {
		case "message":
			it.Text = texts(w.Content)
		case "reasoning":
			it.Text = texts(w.Summary)
		case "function_call_output":
			it.Output = texts(w.Output)
		}
		out = append(out, it)
	}
	return out
}

// texts reads a string, or a list of parts whose text fields it joins by
// newlines.
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

// answeredAfterOutputs reports whether an assistant message follows the
// last function_call_output of the current turn: the model already
// answered, and the request only brings injected news.
func (r *Request) answeredAfterOutputs() bool {
	last := -1
	for i := r.prompt() + 1; i < len(r.Input); i++ {
		if r.Input[i].Type == "function_call_output" {
			last = i
		}
	}
	if last < 0 {
		return false
	}
	for _, it := range r.Input[last+1:] {
		if it.Type == "message" && it.Role == "assistant" {
			return true
		}
	}
	return false
}
