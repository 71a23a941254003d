package googleai

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/agentgate/agentgate/internal/mock/mockhttp"
)

// Scenario decides the answer to each generateContent and
// streamGenerateContent request. The server calls Respond from one
// goroutine at a time.
type Scenario = mockhttp.Scenario[Request, Response]

// Func adapts a function to a Scenario.
type Func = mockhttp.Func[Request, Response]

// LongCommand runs for a minute.
const LongCommand = "sleep 60; echo done"

// The usage the built-in scenarios bill. Every count is non-zero and
// distinct, prompt exceeds cached, and every answer bills thoughts, so
// that a test can tell which field went where.
func firstCallUsage() Usage {
	return Usage{PromptTokenCount: 5200, CachedContentTokenCount: 3100, CandidatesTokenCount: 40, ThoughtsTokenCount: 25}.withTotal()
}

func followUpUsage() Usage {
	return Usage{PromptTokenCount: 5400, CachedContentTokenCount: 5000, CandidatesTokenCount: 18, ThoughtsTokenCount: 9}.withTotal()
}

func textUsage() Usage {
	return Usage{PromptTokenCount: 1200, CachedContentTokenCount: 300, CandidatesTokenCount: 12, ThoughtsTokenCount: 7}.withTotal()
}

func routerUsage() Usage {
	return Usage{PromptTokenCount: 100, CandidatesTokenCount: 20}.withTotal()
}

// RouterAnswer is the answer Gemini CLI's model router expects (see
// Request.Router): a complexity judgement as JSON text. Without it the CLI
// retries the router for about a minute before each turn.
func RouterAnswer(score int) Response {
	return Response{
		Parts: []Part{Text(fmt.Sprintf(`{"complexity_reasoning":"mock","complexity_score":%d}`, score))},
		Usage: routerUsage(),
	}
}

// routed answers a router request with RouterAnswer and every other one
// with f.
func routed(f func(req *Request) Response) Scenario {
	return Func(func(req *Request) Response {
		if req.Router() {
			return RouterAnswer(10)
		}
		return f(req)
	})
}

// TextAnswer answers every request with a thought and text (and a router
// request with RouterAnswer).
func TextAnswer(text string) Scenario {
	return routed(func(*Request) Response {
		return Response{Parts: []Part{Thought("The user wants an answer."), Text(text)}, Usage: textUsage()}
	})
}

// ToolTurn answers the first request of a turn with a thought, text and a
// run_shell_command call running command, and a request whose last
// content carries that tool's response with the answer text.
func ToolTurn(command, answer string) Scenario {
	return routed(func(req *Request) Response {
		for _, fr := range req.FunctionResponses() {
			if fr.Name == ShellTool {
				return Response{Parts: []Part{Thought("The command ran."), Text(answer)}, Usage: followUpUsage()}
			}
		}
		return Response{Parts: []Part{Thought("The user wants a command run."), Text("Running the command."), Shell(command)},
			Usage: firstCallUsage()}
	})
}

// LongTool is ToolTurn with LongCommand, for cancellation tests.
func LongTool() Scenario { return ToolTurn(LongCommand, "The command finished.") }

// ToolThenText asks for a run_shell_command call running command on the
// first model request it sees, and answers every later one with text:
// the tool's result, a message sent during the turn, or the next turn
// after an interrupt. It counts requests rather than reading them because
// after a cancelled call Gemini CLI sends the model's functionCall with no
// functionResponse. With a long command it is the scenario of interrupts.
func ToolThenText(command, text string) Scenario {
	var mu sync.Mutex
	n := 0
	return routed(func(*Request) Response {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			return Response{Parts: []Part{Text("Running the command."), Shell(command)}, Usage: firstCallUsage()}
		}
		return Response{Parts: []Part{Text(text)}, Usage: followUpUsage()}
	})
}

// TwoTools asks for a run_shell_command call running first, then, once
// the request carries its response (a refused call's error response
// counts), for one running second, and answers a request that carries
// both responses with text. With second equal to first it is the same
// call twice.
func TwoTools(first, second, text string) Scenario {
	return routed(func(req *Request) Response {
		switch req.countShellResponses() {
		case 0:
			return Response{Parts: []Part{Text("First command."), Shell(first)}, Usage: firstCallUsage()}
		case 1:
			return Response{Parts: []Part{Text("Second command."), Shell(second)}, Usage: followUpUsage()}
		}
		return Response{Parts: []Part{Text(text)}, Usage: textUsage()}
	})
}

// TurnUsage is what Turns bills for the n-th model request it answers
// (from 1): distinct per request, so that a test can tell one turn's
// usage from the sum of several, with cached and thought tokens, which
// Gemini CLI's ACP prompt result leaves out and its chat recording
// keeps.
func TurnUsage(n int) Usage {
	k := int64(n)
	return Usage{PromptTokenCount: 1000*k + 1, CachedContentTokenCount: 100*k + 2, CandidatesTokenCount: 10*k + 3, ThoughtsTokenCount: k + 4}.withTotal()
}

// Turns answers every request with text, billing the n-th model request
// TurnUsage(n): for runs of several turns whose usage is checked turn by
// turn.
func Turns(text string) Scenario {
	var mu sync.Mutex
	n := 0
	return routed(func(*Request) Response {
		mu.Lock()
		n++
		u := TurnUsage(n)
		mu.Unlock()
		return Response{Parts: []Part{Text(text)}, Usage: u}
	})
}

// AlwaysTool asks for a run_shell_command call running command on every
// request.
func AlwaysTool(command string) Scenario {
	return routed(func(*Request) Response {
		return Response{Parts: []Part{Text("Once more."), Shell(command)}, Usage: firstCallUsage()}
	})
}

// Failure answers every request with status and a Google error body (see
// StatusError). A 429 carries a RetryInfo of one second.
func Failure(status int) Scenario {
	resp := Response{Status: status, Error: StatusError(status)}
	return Func(func(*Request) Response { return resp })
}

// InvalidKey answers every request as the Gemini API answers a key it
// does not know: 400 INVALID_ARGUMENT with the ErrorInfo reason
// API_KEY_INVALID, not a 401.
func InvalidKey() Scenario {
	resp := Response{Status: http.StatusBadRequest, Error: &APIError{
		Code: 400, Status: "INVALID_ARGUMENT", Message: "API key not valid. Please pass a valid API key.",
		Details: []map[string]any{
			{"@type": typeErrorInfo, "reason": "API_KEY_INVALID", "domain": "googleapis.com",
				"metadata": map[string]any{"service": "generativelanguage.googleapis.com"}},
			{"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": "API key not valid. Please pass a valid API key."},
		},
	}}
	return Func(func(*Request) Response { return resp })
}

// Hang accepts every request and never answers it.
func Hang() Scenario {
	return Func(func(*Request) Response { return Response{Hang: true} })
}

// Sequence answers the i-th request it sees with steps[i], and every later
// one with the last step: Sequence(Failure(429), TextAnswer("ok")) fails
// once, then recovers.
func Sequence(steps ...Scenario) Scenario {
	return mockhttp.Sequence(Response{Status: http.StatusInternalServerError}, steps...)
}

// The google.rpc detail types the error bodies use.
const (
	typeErrorInfo = "type.googleapis.com/google.rpc.ErrorInfo"
	typeRetryInfo = "type.googleapis.com/google.rpc.RetryInfo"
	typeHelp      = "type.googleapis.com/google.rpc.Help"
)

// StatusError returns the error body the Gemini API sends with status.
func StatusError(status int) *APIError {
	switch status {
	case 400:
		return &APIError{Code: 400, Status: "INVALID_ARGUMENT",
			Message: "Invalid JSON payload received. Unknown name \"mock\": Cannot find field."}
	case 401:
		return &APIError{Code: 401, Status: "UNAUTHENTICATED",
			Message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
			Details: []map[string]any{{"@type": typeErrorInfo, "reason": "ACCESS_TOKEN_TYPE_UNSUPPORTED", "domain": "googleapis.com"}}}
	case 403:
		return &APIError{Code: 403, Status: "PERMISSION_DENIED",
			Message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
			Details: []map[string]any{{"@type": typeErrorInfo, "reason": "CONSUMER_INVALID", "domain": "googleapis.com"}}}
	case 404:
		return &APIError{Code: 404, Status: "NOT_FOUND",
			Message: "models/mock-model is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."}
	case 429:
		return &APIError{Code: 429, Status: "RESOURCE_EXHAUSTED",
			Message: "Resource has been exhausted (e.g. check quota).",
			Details: []map[string]any{
				{"@type": typeHelp, "links": []any{map[string]any{"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}}},
				{"@type": typeRetryInfo, "retryDelay": "1s"},
			}}
	case 500:
		return &APIError{Code: 500, Status: "INTERNAL",
			Message: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"}
	case 503:
		return &APIError{Code: 503, Status: "UNAVAILABLE", Message: "The model is overloaded. Please try again later."}
	case 504:
		return &APIError{Code: 504, Status: "DEADLINE_EXCEEDED", Message: "The request timed out. Please try again."}
	}
	name := "UNKNOWN"
	switch {
	case status >= 500:
		name = "INTERNAL"
	case status >= 400:
		name = "FAILED_PRECONDITION"
	}
	return &APIError{Code: status, Status: name, Message: fmt.Sprintf("mock error %d", status)}
}

// catalog builds the scenarios Named offers; command is the shell command
// of the tool scenarios, empty for their default.
var catalog mockhttp.Catalog[Scenario] = func(command string) map[string]func() Scenario {
	or := func(def string) string { return mockhttp.Or(command, def) }
	return map[string]func() Scenario{
		"text":           func() Scenario { return TextAnswer("Hello from the mock.") },
		"tool":           func() Scenario { return ToolTurn(or("echo hello > out.txt"), "I ran the command.") },
		"long-tool":      func() Scenario { return ToolTurn(or(LongCommand), "The command finished.") },
		"always-tool":    func() Scenario { return AlwaysTool(or("echo again")) },
		"tool-then-text": func() Scenario { return ToolThenText(or(LongCommand), "Done after the tool.") },
		"two-tools":      func() Scenario { return TwoTools(or("echo one"), or("echo two"), "Both commands ran.") },
		"turns":          func() Scenario { return Turns("Turn answered.") },
		"hang":           Hang,
		"invalid-key":    InvalidKey,
		"error-400":      func() Scenario { return Failure(400) },
		"error-401":      func() Scenario { return Failure(401) },
		"error-403":      func() Scenario { return Failure(403) },
		"error-404":      func() Scenario { return Failure(404) },
		"error-429":      func() Scenario { return Failure(429) },
		"error-500":      func() Scenario { return Failure(500) },
		"error-503":      func() Scenario { return Failure(503) },
	}
}

// Names lists the built-in scenarios Named knows, sorted.
func Names() []string { return catalog.Names() }

// Named returns the built-in scenario called name (see Names). command
// replaces the shell command of "tool", "long-tool", "always-tool",
// "tool-then-text" and both of "two-tools" when not empty.
func Named(name, command string) (Scenario, error) { return catalog.Named(name, command) }
