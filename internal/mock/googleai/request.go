package googleai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// The methods of the models resource the server answers.
const (
	MethodStream      = "streamGenerateContent"
	MethodGenerate    = "generateContent"
	MethodCountTokens = "countTokens"
)

// Request is what the server kept of one HTTP request: the headers and a
// parsed summary of a generateContent body. The raw body is not kept (a
// Gemini CLI request is about 40 KB).
type Request struct {
	// Seq counts every request the server received, from 1.
	Seq      int
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	// BodyBytes is the length of the body.
	BodyBytes int
	// Body is the body as received (up to the server's limit), for
	// Contains.
	Body []byte
	// ParseError is set when a model call's body was not a JSON object;
	// such a request is answered 400 and never reaches the scenario.
	ParseError string

	// APIVersion, Model and Call come from a path of the form
	// /{version}/models/{model}:{call}.
	APIVersion string
	Model      string
	Call       string
	// Stream is set for streamGenerateContent.
	Stream bool

	// The fields below summarise the body.

	// System is the text of systemInstruction's parts, joined by
	// newlines.
	System string
	// Tools are the names of the function declarations offered, in order.
	Tools    []string
	Contents []Content
	// ResponseMIMEType is generationConfig.responseMimeType.
	ResponseMIMEType string
	// ResponseSchema is generationConfig.responseJsonSchema (or
	// responseSchema), raw.
	ResponseSchema json.RawMessage
	// IncludeThoughts, ThinkingBudget and ThinkingLevel are
	// generationConfig.thinkingConfig's.
	IncludeThoughts bool
	ThinkingBudget  *int64
	ThinkingLevel   string
}

// Content is one entry of the request's contents.
type Content struct {
	Role  string
	Parts []RequestPart
}

// RequestPart is one part of a request's content.
type RequestPart struct {
	Text    string
	Thought bool
	// FunctionCall is a call the model made earlier, replayed.
	FunctionCall *FunctionCall
	// FunctionResponse is a tool's result.
	FunctionResponse *FunctionResponse
}

// FunctionResponse is a tool's result as the client sends it back.
type FunctionResponse struct {
	ID       string
	Name     string
	Response json.RawMessage
}

// Output returns the response's "output" string, where Gemini CLI puts a
// tool's output, or the raw response when it has none.
func (f *FunctionResponse) Output() string {
	var r struct {
		Output string `json:"output"`
		Error  string `json:"error"`
	}
	if json.Unmarshal(f.Response, &r) == nil && (r.Output != "" || r.Error != "") {
		return r.Output + r.Error
	}
	return string(f.Response)
}

// IsModelCall reports whether the request is a generateContent or
// streamGenerateContent call, the calls that bill.
func (r *Request) IsModelCall() bool { return r.Call == MethodStream || r.Call == MethodGenerate }

// HasTool reports whether the request offered a function called name.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// FunctionResponses returns the function responses of the last content:
// a request that follows up on tool calls. Gemini CLI's instructions
// may mention functionResponse in the first request too, so only the last
// entry counts.
func (r *Request) FunctionResponses() []FunctionResponse {
	if len(r.Contents) == 0 {
		return nil
	}
	var out []FunctionResponse
	for _, p := range r.Contents[len(r.Contents)-1].Parts {
		if p.FunctionResponse != nil {
			out = append(out, *p.FunctionResponse)
		}
	}
	return out
}

// countShellResponses counts the run_shell_command function responses in
// every content of the request.
func (r *Request) countShellResponses() int {
	n := 0
	for _, c := range r.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil && p.FunctionResponse.Name == ShellTool {
				n++
			}
		}
	}
	return n
}

// Contains reports whether text occurs anywhere in the request's body, as
// sent or with JSON's escapes undone (system instruction, contents,
// function calls and responses): where a test checks that a message
// reached the model.
func (r *Request) Contains(text string) bool {
	if text == "" {
		return true
	}
	if bytes.Contains(r.Body, []byte(text)) {
		return true
	}
	if strings.Contains(r.System, text) {
		return true
	}
	for _, c := range r.Contents {
		for _, p := range c.Parts {
			if strings.Contains(p.Text, text) {
				return true
			}
			if p.FunctionResponse != nil && strings.Contains(p.FunctionResponse.Output(), text) {
				return true
			}
		}
	}
	return false
}

// UserText returns the text parts of the user contents, joined by
// newlines: where a test finds its prompt.
func (r *Request) UserText() string {
	var parts []string
	for _, c := range r.Contents {
		if c.Role != "user" {
			continue
		}
		for _, p := range c.Parts {
			if p.Text != "" && p.FunctionResponse == nil {
				parts = append(parts, p.Text)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// Router reports whether the request is Gemini CLI's model router: a
// non-streamed call with no tools that asks for a JSON answer carrying a
// complexity score. The CLI sends it before each turn when it was given
// no model.
func (r *Request) Router() bool {
	return r.Call == MethodGenerate && r.ResponseMIMEType == "application/json" &&
		bytes.Contains(r.ResponseSchema, []byte("complexity_score"))
}

// wireRequest is the part of a generateContent body the server reads.
// Every other field (safetySettings, cachedContent, labels, ...) is
// accepted and ignored.
type wireRequest struct {
	Contents          []wireContent `json:"contents"`
	SystemInstruction *wireContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig *struct {
		ResponseMIMEType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ThinkingConfig     *struct {
			IncludeThoughts bool   `json:"includeThoughts"`
			ThinkingBudget  *int64 `json:"thinkingBudget"`
			ThinkingLevel   string `json:"thinkingLevel"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
	// countTokens may wrap a whole generateContent request.
	GenerateContentRequest *wireRequest `json:"generateContentRequest"`
}

type wireContent struct {
	Role  string     `json:"role"`
	Parts []wirePart `json:"parts"`
}

type wirePart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// parseBody fills r's summary from a generateContent (or countTokens)
// body, which must be a JSON object.
func (r *Request) parseBody(body []byte) error {
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' {
		return errors.New("the body is not a JSON object")
	}
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return err
	}
	if w.GenerateContentRequest != nil && len(w.Contents) == 0 {
		w = *w.GenerateContentRequest
	}
	if w.SystemInstruction != nil {
		var sys []string
		for _, p := range w.SystemInstruction.Parts {
			sys = append(sys, p.Text)
		}
		r.System = strings.Join(sys, "\n")
	}
	for _, t := range w.Tools {
		for _, f := range t.FunctionDeclarations {
			r.Tools = append(r.Tools, f.Name)
		}
	}
	for _, c := range w.Contents {
		out := Content{Role: c.Role}
		for _, p := range c.Parts {
			rp := RequestPart{Text: p.Text, Thought: p.Thought}
			if fc := p.FunctionCall; fc != nil {
				rp.FunctionCall = &FunctionCall{ID: fc.ID, Name: fc.Name, Args: fc.Args}
			}
			if fr := p.FunctionResponse; fr != nil {
				rp.FunctionResponse = &FunctionResponse{ID: fr.ID, Name: fr.Name, Response: fr.Response}
			}
			out.Parts = append(out.Parts, rp)
		}
		r.Contents = append(r.Contents, out)
	}
	if g := w.GenerationConfig; g != nil {
		r.ResponseMIMEType = g.ResponseMIMEType
		r.ResponseSchema = g.ResponseJSONSchema
		if len(r.ResponseSchema) == 0 {
			r.ResponseSchema = g.ResponseSchema
		}
		if tc := g.ThinkingConfig; tc != nil {
			r.IncludeThoughts, r.ThinkingBudget, r.ThinkingLevel = tc.IncludeThoughts, tc.ThinkingBudget, tc.ThinkingLevel
		}
	}
	return nil
}

// parsePath splits /{version}/models/{model}:{call}. ok is false for any
// other path.
func parsePath(path string) (version, model, call string, ok bool) {
	rest, found := strings.CutPrefix(path, "/")
	if !found {
		return "", "", "", false
	}
	version, rest, found = strings.Cut(rest, "/")
	if !found || version == "" {
		return "", "", "", false
	}
	rest, found = strings.CutPrefix(rest, "models/")
	if !found {
		return "", "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 || strings.Contains(rest[:i], "/") {
		return "", "", "", false
	}
	return version, rest[:i], rest[i+1:], true
}
