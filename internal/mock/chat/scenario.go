package chat

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/internal/mock/mockhttp"
)

// Scenario decides the answer to each POST /v1/chat/completions request.
// The server calls Respond from one goroutine at a time.
type Scenario = mockhttp.Scenario[Request, Response]

// Func adapts a function to a Scenario.
type Func = mockhttp.Func[Request, Response]

// LongCommand runs for a minute.
const LongCommand = "sleep 60; echo done"

// Title is the built-in scenarios' answer to a title request (see
// Request.TitleRequest).
const Title = "Mock conversation"

// The usage the built-in scenarios bill. Every count is non-zero and
// distinct, prompt exceeds cached and completion exceeds reasoning, so
// that a test can tell which field went where.
func firstCallUsage() Usage {
	return Usage{PromptTokens: 5000, CachedTokens: 4000, CompletionTokens: 50, ReasoningTokens: 12}
}

func followUpUsage() Usage {
	return Usage{PromptTokens: 5200, CachedTokens: 4900, CompletionTokens: 30, ReasoningTokens: 7}
}

func textUsage() Usage {
	return Usage{PromptTokens: 1000, CachedTokens: 600, CompletionTokens: 20, ReasoningTokens: 5}
}

func titleUsage() Usage {
	return Usage{PromptTokens: 310, CachedTokens: 120, CompletionTokens: 9, ReasoningTokens: 3}
}

// titled answers a title request with Title, and passes every other
// request to answer. Agent CLIs send a title request beside the first
// turn of a session; a real model answers it like any other.
func titled(answer func(req *Request) Response) Scenario {
	return Func(func(req *Request) Response {
		if req.TitleRequest() {
			return Response{Text: Title, Usage: titleUsage()}
		}
		return answer(req)
	})
}

// TextAnswer answers every request with text (a title request with
// Title).
func TextAnswer(text string) Scenario {
	return titled(func(*Request) Response {
		return Response{Text: text, Usage: textUsage()}
	})
}

// ToolTurn answers the first request of a turn with a reasoning text and
// call, and any request that carries a tool result in the current turn
// (after the last user message) with the answer text. Whatever the
// result says, the model answers: a client that refused or replaced the
// call (OpenCode turns a call of a tool it does not offer into one of
// its "invalid" tool) still ends its turn. A title request gets Title.
func ToolTurn(call Call, answer string) Scenario { return ToolSteps([][]Call{{call}}, answer) }

// ToolChain asks for calls one at a time, each once the previous one has
// its result, then answers (see ToolSteps).
func ToolChain(calls []Call, answer string) Scenario {
	steps := make([][]Call, len(calls))
	for i, c := range calls {
		steps[i] = []Call{c}
	}
	return ToolSteps(steps, answer)
}

// ToolSteps asks for one step of calls per request, several calls of a
// step in one answer: the first request of a turn gets steps[0], a
// request whose current turn carries the results of the first i steps
// gets steps[i], and once every call has its result, the answer text. A
// title request gets Title.
func ToolSteps(steps [][]Call, answer string) Scenario {
	return titled(func(req *Request) Response {
		n, i := len(req.ToolResults()), 0
		for i < len(steps) && n >= len(steps[i]) {
			n -= len(steps[i])
			i++
		}
		if i >= len(steps) {
			return Response{Text: answer, Usage: followUpUsage()}
		}
		usage := firstCallUsage()
		if i > 0 {
			usage = followUpUsage()
		}
		names := make([]string, 0, len(steps[i]))
		for _, c := range steps[i] {
			names = append(names, c.Name)
		}
		return Response{Reasoning: "The user wants a command run. I will call " + strings.Join(names, " and ") + ".",
			Calls: append([]Call(nil), steps[i]...), Usage: usage}
	})
}

// LongTool is ToolTurn with a Bash call of LongCommand, for cancellation
// tests.
func LongTool() Scenario { return ToolTurn(Bash(LongCommand), "The command finished.") }

// ToolThenText asks for calls, in one answer, on the first model request
// it sees (a title request aside), and answers every later one with text: the call's
// result, a message sent during the turn, or the next turn after an
// interrupt. It counts requests rather than reading them, for a call
// that was cancelled may leave no result behind. With a long command it
// is the scenario of interrupts and steering.
func ToolThenText(calls []Call, text string) Scenario {
	var mu sync.Mutex
	n := 0
	return titled(func(*Request) Response {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			return Response{Reasoning: "The user wants a command run.", Calls: append([]Call(nil), calls...), Usage: firstCallUsage()}
		}
		return Response{Text: text, Usage: followUpUsage()}
	})
}

// TwoTools asks for first, then, once the current turn carries its
// result (a refused call's result counts), for second, and answers a
// request that carries both results with text. With second equal to
// first it is the same call twice. It is ToolChain of the two.
func TwoTools(first, second Call, text string) Scenario {
	return ToolChain([]Call{first, second}, text)
}

// TurnUsage is what Turns bills for the n-th model request it answers
// (from 1): distinct per request, so that a test can tell one turn's
// usage from the sum of several, with every field non-zero.
func TurnUsage(n int) Usage {
	k := int64(n)
	return Usage{PromptTokens: 1000*k + 100, CachedTokens: 100*k + 10, CompletionTokens: 10*k + 5, ReasoningTokens: k + 1}
}

// Turns answers every request with text, billing the n-th model request
// TurnUsage(n) (a title request gets Title, billed apart): for runs of
// several turns whose usage is checked turn by turn.
func Turns(text string) Scenario {
	var mu sync.Mutex
	n := 0
	return titled(func(*Request) Response {
		mu.Lock()
		n++
		u := TurnUsage(n)
		mu.Unlock()
		return Response{Text: text, Usage: u}
	})
}

// AlwaysTool asks for call on every request but a title request, so that
// only a turn limit ends the run.
func AlwaysTool(call Call) Scenario {
	return titled(func(*Request) Response {
		return Response{Reasoning: "Once more.", Calls: []Call{call}, Usage: firstCallUsage()}
	})
}

// NoSchemaText is Structured's answer to a request without a json_schema
// response format.
const NoSchemaText = "The request has no JSON schema."

// Structured answers output's JSON as the message text when the request
// has a json_schema response_format, and NoSchemaText otherwise.
func Structured(output any) Scenario {
	return titled(func(req *Request) Response {
		if req.Format == nil || req.Format.Type != "json_schema" {
			return Response{Text: NoSchemaText, Usage: textUsage()}
		}
		b, err := json.Marshal(output)
		if err != nil {
			return Response{Status: http.StatusInternalServerError}
		}
		return Response{Text: string(b), Usage: textUsage()}
	})
}

// StatusError returns the error body the API sends with status.
func StatusError(status int) *APIError {
	switch status {
	case 400:
		return &APIError{Type: "invalid_request_error", Code: "invalid_request", Message: "Invalid request: unsupported parameter"}
	case 401:
		return &APIError{Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided"}
	case 403:
		return &APIError{Type: "invalid_request_error", Code: "unsupported_country_region_territory", Message: "Country, region, or territory not supported"}
	case 404:
		return &APIError{Type: "invalid_request_error", Code: "model_not_found", Message: "The model does not exist or you do not have access to it."}
	case 429:
		return &APIError{Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached for requests"}
	case 503:
		return &APIError{Type: "server_error", Code: "server_is_overloaded", Message: "The server is overloaded. Please try again later."}
	}
	if status >= 500 {
		return &APIError{Type: "server_error", Message: "The server had an error while processing your request. Sorry about that!"}
	}
	return &APIError{Type: "invalid_request_error", Message: fmt.Sprintf("mock error %d", status)}
}

// Failure answers every request, title requests included, with status
// and an OpenAI error body (see StatusError). A 429 carries Retry-After:
// 1.
func Failure(status int) Scenario {
	resp := Response{Status: status, Error: StatusError(status)}
	if status == http.StatusTooManyRequests {
		resp.Header = http.Header{"Retry-After": {"1"}}
	}
	return Func(func(*Request) Response { return resp })
}

// ContextExceeded answers every request with the API's 400 for a prompt
// longer than the model's context: code context_length_exceeded.
func ContextExceeded() Scenario {
	return Func(func(*Request) Response {
		return Response{Status: http.StatusBadRequest, Error: &APIError{Type: "invalid_request_error", Code: "context_length_exceeded",
			Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages."}}
	})
}

// StreamError answers every streamed request with an error chunk after
// the first one (see Response.Failed).
func StreamError() Scenario {
	return Func(func(*Request) Response {
		return Response{Failed: &APIError{Type: "server_error", Message: "The model produced invalid content."}}
	})
}

// Hang accepts every request and never answers it.
func Hang() Scenario {
	return Func(func(*Request) Response { return Response{Hang: true} })
}

// Stall sends every stream's headers and first chunk, then nothing.
func Stall() Scenario {
	return Func(func(*Request) Response { return Response{Stall: true} })
}

// Sequence answers the i-th request it sees with steps[i], and every later
// one with the last step: Sequence(Failure(429), TextAnswer("ok")) fails
// once, then recovers.
func Sequence(steps ...Scenario) Scenario {
	return mockhttp.Sequence(Response{Status: http.StatusInternalServerError}, steps...)
}

// catalog builds the scenarios Named offers; command is the shell command
// of the tool scenarios, empty for their default.
var catalog mockhttp.Catalog[Scenario] = func(command string) map[string]func() Scenario {
	or := func(def string) string { return mockhttp.Or(command, def) }
	return withShellScenarios(or, map[string]func() Scenario{
		"text":             func() Scenario { return TextAnswer("Hello from the mock.") },
		"tool":             func() Scenario { return ToolTurn(Bash(or("echo hello > out.txt")), "I ran the command.") },
		"long-tool":        func() Scenario { return ToolTurn(Bash(or(LongCommand)), "The command finished.") },
		"always-tool":      func() Scenario { return AlwaysTool(Bash(or("echo again"))) },
		"tool-then-text":   func() Scenario { return ToolThenText([]Call{Bash(or(LongCommand))}, "Done after the tool.") },
		"two-tools":        func() Scenario { return TwoTools(Bash(or("echo one")), Bash(or("echo two")), "Both commands ran.") },
		"turns":            func() Scenario { return Turns("Turn answered.") },
		"structured":       func() Scenario { return Structured(map[string]string{"name": "Bob"}) },
		"context-exceeded": ContextExceeded,
		"stream-error":     StreamError,
		"hang":             Hang,
		"stall":            Stall,
		"error-400":        func() Scenario { return Failure(400) },
		"error-401":        func() Scenario { return Failure(401) },
		"error-403":        func() Scenario { return Failure(403) },
		"error-404":        func() Scenario { return Failure(404) },
		"error-429":        func() Scenario { return Failure(429) },
		"error-500":        func() Scenario { return Failure(500) },
		"error-503":        func() Scenario { return Failure(503) },
	})
}

// Names lists the built-in scenarios Named knows, sorted.
func Names() []string { return catalog.Names() }

// Named returns the built-in scenario called name (see Names). command
// replaces the Bash command of "tool", "long-tool", "always-tool",
// "tool-then-text" and both of "two-tools" when not empty.
func Named(name, command string) (Scenario, error) { return catalog.Named(name, command) }
