package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/agentgate/agentgate/internal/mock/mockhttp"
)

// Scenario decides the answer to each POST /v1/messages request. The server
// calls Respond from one goroutine at a time.
type Scenario = mockhttp.Scenario[Request, Response]

// Func adapts a function to a Scenario.
type Func = mockhttp.Func[Request, Response]

// LongCommand runs for a minute. Claude Code refuses a foreground
// `sleep N`, so the long command is perl's.
const LongCommand = "perl -e 'sleep 60'"

// The usage the built-in scenarios bill. Every count, cache ones included,
// is non-zero and distinct so that a test can tell which field went where.
func firstCallUsage() Usage {
	return Usage{InputTokens: 1200, CacheCreationInputTokens: 9000, CacheReadInputTokens: 2500, OutputTokens: 80}
}

func followUpUsage() Usage {
	return Usage{InputTokens: 150, CacheCreationInputTokens: 300, CacheReadInputTokens: 11500, OutputTokens: 25}
}

func textUsage() Usage {
	return Usage{InputTokens: 100, CacheCreationInputTokens: 40, CacheReadInputTokens: 7000, OutputTokens: 20}
}

// TextAnswer answers every request with text.
func TextAnswer(text string) Scenario {
	return Func(func(*Request) Response {
		return Response{Message: Message{Content: []Block{Text(text)}, Usage: textUsage()}}
	})
}

// ToolTurn answers a first request with thinking, text and a Bash tool_use
// running command, and a request that carries the tool's result with the
// text answer.
func ToolTurn(command, answer string) Scenario {
	return Func(func(req *Request) Response {
		if len(req.ToolResults()) > 0 {
			return Response{Message: Message{Content: []Block{Text(answer)}, Usage: followUpUsage()}}
		}
		return Response{Message: Message{
			Content: []Block{Thinking("The user wants a command run. I will use Bash."), Text("Running the command."), Bash(command)},
			Usage:   firstCallUsage(),
		}}
	})
}

// LongTool is ToolTurn with LongCommand, for cancellation tests.
func LongTool() Scenario { return ToolTurn(LongCommand, "The command finished.") }

// ToolThenText asks for a Bash tool_use running command on a request
// whose messages hold no tool result yet, and answers every later request
// with text: the tool's result, a message steered into the running turn,
// or the next turn after an interrupt. With a long command it is the
// scenario of interrupts and steering.
func ToolThenText(command, text string) Scenario {
	return Func(func(req *Request) Response {
		if req.countToolResults() > 0 {
			return Response{Message: Message{Content: []Block{Text(text)}, Usage: followUpUsage()}}
		}
		return Response{Message: Message{
			Content: []Block{Text("Running the command."), Bash(command)},
			Usage:   firstCallUsage(),
		}}
	})
}

// TwoTools asks for a Bash tool_use running first, then, once the request
// carries its result (a refused call's error result counts), for one
// running second, and answers the request that carries both results with
// text. With second equal to first it is the same call twice.
func TwoTools(first, second, text string) Scenario {
	return Func(func(req *Request) Response {
		switch req.countToolResults() {
		case 0:
			return Response{Message: Message{Content: []Block{Text("First command."), Bash(first)}, Usage: firstCallUsage()}}
		case 1:
			return Response{Message: Message{Content: []Block{Text("Second command."), Bash(second)}, Usage: followUpUsage()}}
		}
		return Response{Message: Message{Content: []Block{Text(text)}, Usage: textUsage()}}
	})
}

// TurnUsage is what Turns bills for the n-th request it answers (from 1):
// distinct per request, so that a test can tell one turn's usage from the
// sum of several.
func TurnUsage(n int) Usage {
	k := int64(n)
	return Usage{InputTokens: 100 * k, CacheCreationInputTokens: 10*k + 1, CacheReadInputTokens: 1000*k + 2, OutputTokens: 7*k + 3}
}

// Turns answers every request with text, billing the n-th request
// TurnUsage(n): for runs of several turns whose usage is checked turn by
// turn.
func Turns(text string) Scenario {
	var mu sync.Mutex
	n := 0
	return Func(func(*Request) Response {
		mu.Lock()
		n++
		u := TurnUsage(n)
		mu.Unlock()
		return Response{Message: Message{Content: []Block{Text(text)}, Usage: u}}
	})
}

// AlwaysTool asks for a Bash tool_use running command on every request,
// so that only a turn limit ends the run.
func AlwaysTool(command string) Scenario {
	return Func(func(*Request) Response {
		return Response{Message: Message{Content: []Block{Text("Once more."), Bash(command)}, Usage: firstCallUsage()}}
	})
}

// Structured calls the StructuredOutput tool with output when the request
// offers that tool (Claude Code's --json-schema), answers "Done." to the
// tool's result, and answers output's JSON as text when the tool is not
// offered.
func Structured(output any) Scenario {
	return Func(func(req *Request) Response {
		switch {
		case len(req.ToolResults()) > 0:
			return Response{Message: Message{Content: []Block{Text("Done.")}, Usage: followUpUsage()}}
		case req.HasTool("StructuredOutput"):
			return Response{Message: Message{Content: []Block{ToolUse("StructuredOutput", output)}, Usage: firstCallUsage()}}
		}
		b, _ := json.Marshal(output)
		return Response{Message: Message{Content: []Block{Text(string(b))}, Usage: textUsage()}}
	})
}

// Failure answers every request with status and an Anthropic error body of
// the matching type (401 authentication_error, 429 rate_limit_error, 500
// api_error, 529 overloaded_error, 400 invalid_request_error, ...). A 429
// carries retry-after: 1.
func Failure(status int) Scenario {
	resp := Response{Status: status, Error: &APIError{Type: ErrorType(status), Message: fmt.Sprintf("mock %s", ErrorType(status))}}
	if status == http.StatusTooManyRequests {
		resp.Header = http.Header{"Retry-After": {"1"}}
	}
	return Func(func(*Request) Response { return resp })
}

// Hang accepts every request and never answers it.
func Hang() Scenario {
	return Func(func(*Request) Response { return Response{Hang: true} })
}

// StreamFailure fails every streamed request with a mid-stream
// overloaded_error and answers a non-streamed one (the CLI's fallback) with
// text.
func StreamFailure(text string) Scenario {
	return Func(func(req *Request) Response {
		if req.Stream {
			return Response{StreamError: &APIError{Type: "overloaded_error", Message: "Overloaded"}, Message: Message{Usage: textUsage()}}
		}
		return Response{Message: Message{Content: []Block{Text(text)}, Usage: textUsage()}}
	})
}

// Sequence answers the i-th request it sees with steps[i], and every later
// one with the last step: Sequence(Failure(429), TextAnswer("ok")) fails
// once, then recovers.
func Sequence(steps ...Scenario) Scenario {
	return mockhttp.Sequence(Response{Status: http.StatusInternalServerError}, steps...)
}

// catalog builds the scenarios Named offers; command is the Bash command
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
		"structured":     func() Scenario { return Structured(map[string]string{"name": "Bob"}) },
		"hang":           Hang,
		"stream-error":   func() Scenario { return StreamFailure("Recovered without streaming.") },
		"error-400":      func() Scenario { return Failure(400) },
		"error-401":      func() Scenario { return Failure(401) },
		"error-403":      func() Scenario { return Failure(403) },
		"error-404":      func() Scenario { return Failure(404) },
		"error-413":      func() Scenario { return Failure(413) },
		"error-429":      func() Scenario { return Failure(429) },
		"error-500":      func() Scenario { return Failure(500) },
		"error-529":      func() Scenario { return Failure(529) },
	}
}

// Names lists the built-in scenarios Named knows, sorted.
func Names() []string { return catalog.Names() }

// Named returns the built-in scenario called name (see Names). command
// replaces the Bash command of "tool", "long-tool", "always-tool",
// "tool-then-text" and both of "two-tools" when not empty.
func Named(name, command string) (Scenario, error) { return catalog.Named(name, command) }
