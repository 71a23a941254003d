package openai

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/agentgate/agentgate/internal/mock/mockhttp"
)

// Scenario decides the answer to each POST /v1/responses request. The
// server calls Respond from one goroutine at a time.
type Scenario = mockhttp.Scenario[Request, Response]

// Func adapts a function to a Scenario.
type Func = mockhttp.Func[Request, Response]

// LongCommand runs for a minute.
const LongCommand = "sleep 60; echo done"

// The usage the built-in scenarios bill. Every count is non-zero and
// distinct, input exceeds cached and output exceeds reasoning, so that a
// test can tell which field went where.
func firstCallUsage() Usage {
	return Usage{InputTokens: 5000, CachedTokens: 4000, OutputTokens: 50, ReasoningTokens: 12}
}

func followUpUsage() Usage {
	return Usage{InputTokens: 5200, CachedTokens: 4900, OutputTokens: 30, ReasoningTokens: 7}
}

func textUsage() Usage {
	return Usage{InputTokens: 1000, CachedTokens: 600, OutputTokens: 20, ReasoningTokens: 5}
}

func helperUsage() Usage {
	return Usage{InputTokens: 2100, CachedTokens: 1700, OutputTokens: 40, ReasoningTokens: 9}
}

// TextAnswer answers every request with text.
func TextAnswer(text string) Scenario {
	return Func(func(*Request) Response {
		return Response{Items: []Item{Text(text)}, Usage: textUsage()}
	})
}

// runningSession finds the session id in the output of an exec_command
// that outlived its yield time: Codex then reports "Process running with
// session ID N" and expects write_stdin calls to poll it.
var runningSession = regexp.MustCompile(`Process running with session ID (\d+)`)

// pollWait is how long a write_stdin poll waits for the process; Codex
// caps an empty poll at 300 s.
const pollWait = 300000

// execOutput reports whether out answers an exec_command running command,
// or a write_stdin poll of it, and returns the session id to poll when
// the command still runs.
func execOutput(out, call InputItem, command string) (ours bool, session int64) {
	switch call.Name {
	case "exec_command":
		var args struct {
			Cmd string `json:"cmd"`
		}
		if json.Unmarshal([]byte(call.Arguments), &args) != nil || args.Cmd != command {
			return false, 0
		}
	case "write_stdin":
	default:
		return false, 0
	}
	if m := runningSession.FindStringSubmatch(out.Output); m != nil {
		session, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return true, session
}

// poll asks Codex to wait for the running exec session.
func poll(session int64) Response {
	return Response{Items: []Item{FunctionCall("write_stdin", map[string]any{
		"session_id": session, "chars": "", "yield_time_ms": pollWait,
	})}, Usage: followUpUsage()}
}

// ToolTurn answers the first request of a turn with a reasoning summary
// and an exec_command call running command, and a request that carries
// that call's output with the answer text. While the command outlives
// Codex's yield time (10 s by default) the follow-ups ask write_stdin to
// poll it, so the answer comes once the command has finished.
func ToolTurn(command, answer string) Scenario {
	return Func(func(req *Request) Response {
		if out, call, ok := req.LastOutput(); ok {
			if ours, session := execOutput(out, call, command); ours {
				if session != 0 {
					return poll(session)
				}
				return Response{Items: []Item{Text(answer)}, Usage: followUpUsage()}
			}
		}
		return Response{Items: []Item{Reasoning("The user wants a command run. I will use exec_command."), ExecCommand(command)},
			Usage: firstCallUsage()}
	})
}

// LongTool is ToolTurn with LongCommand, for cancellation tests: Codex
// yields after 10 s, and the scenario polls until the command is done.
func LongTool() Scenario { return ToolTurn(LongCommand, "The command finished.") }

// AlwaysTool asks for an exec_command running command on every request,
// so that only a turn limit ends the run.
func AlwaysTool(command string) Scenario {
	return Func(func(*Request) Response {
		return Response{Items: []Item{Reasoning("Once more."), ExecCommand(command)}, Usage: firstCallUsage()}
	})
}

// NoSchemaText is Structured's answer to a request without a json_schema
// text format.
const NoSchemaText = "The request has no JSON schema."

// Structured answers output's JSON as the message text when the request
// has a json_schema text format (Codex's --output-schema), and
// NoSchemaText otherwise.
func Structured(output any) Scenario {
	return Func(func(req *Request) Response {
		if req.Format == nil || req.Format.Type != "json_schema" {
			return Response{Items: []Item{Text(NoSchemaText)}, Usage: textUsage()}
		}
		b, err := json.Marshal(output)
		if err != nil {
			return Response{Status: http.StatusInternalServerError}
		}
		return Response{Items: []Item{Text(string(b))}, Usage: textUsage()}
	})
}

// Failure answers every request with status and an OpenAI error body
// (see StatusError). A 429 carries Retry-After: 1. A 400 sends its body
// raw, with a trailing newline, as the API does; Codex shows that body
// as the error message.
func Failure(status int) Scenario {
	resp := Response{Status: status, Error: StatusError(status)}
	switch status {
	case http.StatusTooManyRequests:
		resp.Header = http.Header{"Retry-After": {"1"}}
	case http.StatusBadRequest:
		b, _ := json.Marshal(map[string]any{"error": resp.Error})
		resp.RawBody = string(b) + "\n"
	}
	return Func(func(*Request) Response { return resp })
}

// ContextExceeded fails every stream with response.failed carrying the
// code context_length_exceeded.
func ContextExceeded() Scenario {
	return Func(func(*Request) Response {
		return Response{Failed: &ResponseError{Code: "context_length_exceeded",
			Message: "Your input exceeds the context window of this model. Please adjust your input and try again."}}
	})
}

// Hang accepts every request and never answers it.
func Hang() Scenario {
	return Func(func(*Request) Response { return Response{Hang: true} })
}

// Stall sends every stream's headers and response.created, then nothing.
func Stall() Scenario {
	return Func(func(*Request) Response { return Response{Stall: true} })
}

// Sequence answers the i-th request it sees with steps[i], and every later
// one with the last step: Sequence(Failure(429), TextAnswer("ok")) fails
// once, then recovers.
func Sequence(steps ...Scenario) Scenario {
	return mockhttp.Sequence(Response{Status: http.StatusInternalServerError}, steps...)
}

// HelperPrompt is the task HelperThread gives the sub-agent.
const HelperPrompt = "Helper task: answer with one sentence."

// rootDelay holds back HelperThread's final root answer, so that the
// helper's turn/completed comes well before the root's.
const rootDelay = 300 * time.Millisecond

// HelperThread makes Codex run a sub-agent (a helper thread) that ends
// its turn before the root turn ends. The root thread's first request is
// answered with a spawn_agent call in the multi_agent_v1 namespace giving
// HelperPrompt; the spawn's output, which names the new agent, with a
// wait_agent call on that agent (again after a timed out wait); the
// wait's output, 300 ms later, with rootAnswer. A sub-agent's requests (see
// Request.SubAgent) are answered with helperAnswer. wait_agent returns once
// the helper's turn has completed, so the root's answer always comes
// after it.
//
// Codex also tells the root of the finished helper with an injected
// <subagent_notification> user message. When that arrives only after the
// root's last request went out, Codex samples the root once more; that
// request, which already holds rootAnswer, is answered with no output
// items, so the turn still ends with rootAnswer.
//
// It needs Codex's default multi_agent feature (multi_agent_v1); the
// multi_agent_v2 feature offers other tools.
func HelperThread(helperAnswer, rootAnswer string) Scenario {
	return Func(func(req *Request) Response {
		if req.SubAgent() {
			return Response{Items: []Item{Reasoning("The helper answers its task."), Text(helperAnswer)}, Usage: helperUsage()}
		}
		if req.answeredAfterOutputs() {
			// Codex samples once more when the sub-agent's
			// notification arrived after the answer was asked for.
			return Response{Usage: textUsage()}
		}
		out, call, ok := req.LastOutput()
		if !ok {
			return Response{Items: []Item{Reasoning("I will hand this to a helper."),
				AgentCall("spawn_agent", map[string]string{"message": HelperPrompt})}, Usage: firstCallUsage()}
		}
		switch call.Name {
		case "spawn_agent":
			var spawned struct {
				AgentID string `json:"agent_id"`
			}
			if json.Unmarshal([]byte(out.Output), &spawned) != nil || spawned.AgentID == "" {
				return Response{Items: []Item{Text("spawn_agent gave no agent id: " + out.Output)}, Usage: followUpUsage()}
			}
			return waitAgent(spawned.AgentID)
		case "wait_agent":
			var waited struct {
				TimedOut bool `json:"timed_out"`
			}
			if json.Unmarshal([]byte(out.Output), &waited) == nil && waited.TimedOut {
				var args struct {
					Targets []string `json:"targets"`
				}
				_ = json.Unmarshal([]byte(call.Arguments), &args)
				if len(args.Targets) > 0 {
					return waitAgent(args.Targets[0])
				}
			}
			return Response{Items: []Item{Text(rootAnswer)}, Usage: followUpUsage(), Delay: rootDelay}
		}
		return Response{Items: []Item{Text("unexpected tool output for " + call.Name + ": " + out.Output)}, Usage: followUpUsage()}
	})
}

func waitAgent(agent string) Response {
	return Response{Items: []Item{AgentCall("wait_agent", map[string]any{"targets": []string{agent}, "timeout_ms": 30000})},
		Usage: followUpUsage()}
}

// catalog builds the scenarios Named offers; command is the shell command
// of the tool scenarios, empty for their default.
var catalog mockhttp.Catalog[Scenario] = func(command string) map[string]func() Scenario {
	or := func(def string) string { return mockhttp.Or(command, def) }
	return map[string]func() Scenario{
		"text":             func() Scenario { return TextAnswer("Hello from the mock.") },
		"tool":             func() Scenario { return ToolTurn(or("echo hello > out.txt"), "I ran the command.") },
		"long-tool":        func() Scenario { return ToolTurn(or(LongCommand), "The command finished.") },
		"always-tool":      func() Scenario { return AlwaysTool(or("echo again")) },
		"structured":       func() Scenario { return Structured(map[string]string{"name": "Bob"}) },
		"helper":           func() Scenario { return HelperThread("The helper is done.", "The root is done.") },
		"bash-tool":        func() Scenario { return BashTurn(or("echo hello > out.txt"), "I ran the command.") },
		"bash-long-tool":   func() Scenario { return BashTurn(or(LongCommand), "The command finished.") },
		"context-exceeded": ContextExceeded,
		"hang":             Hang,
		"stall":            Stall,
		"error-400":        func() Scenario { return Failure(400) },
		"error-401":        func() Scenario { return Failure(401) },
		"error-403":        func() Scenario { return Failure(403) },
		"error-404":        func() Scenario { return Failure(404) },
		"error-429":        func() Scenario { return Failure(429) },
		"error-500":        func() Scenario { return Failure(500) },
		"error-503":        func() Scenario { return Failure(503) },
	}
}

// Names lists the built-in scenarios Named knows, sorted.
func Names() []string { return catalog.Names() }

// Named returns the built-in scenario called name (see Names). command
// replaces the exec_command command of "tool", "long-tool" and
// "always-tool", and the bash command of "bash-tool" and "bash-long-tool"
// (GitHub Copilot CLI's), when not empty.
func Named(name, command string) (Scenario, error) { return catalog.Named(name, command) }
