package openai

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
)

// The scenarios of interactive runs: several tool calls in one turn,
// several turns, a long command whose turn is interrupted or steered.

// execCalls returns the outputs of the current turn that answer an
// exec_command call (not a write_stdin poll), in order, with whether the
// last output of the turn says its command still runs.
func (r *Request) execCalls() (outs []InputItem, running int64) {
	for _, out := range r.FunctionOutputs() {
		call, _ := r.Call(out.CallID)
		if call.Name == "exec_command" {
			outs = append(outs, out)
		}
	}
	if out, call, ok := r.LastOutput(); ok && (call.Name == "exec_command" || call.Name == "write_stdin") {
		if m := runningSession.FindStringSubmatch(out.Output); m != nil {
			running, _ = strconv.ParseInt(m[1], 10, 64)
		}
	}
	return outs, running
}

// steeredAfterOutput reports whether a user message follows the last
// function_call_output of the current turn: input the client added to
// the running turn (Codex's turn/steer).
func (r *Request) steeredAfterOutput() bool {
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
		if it.Type == "message" && it.Role == "user" && !it.Injected() {
			return true
		}
	}
	return false
}

// TwoTools asks, in one turn, for an exec_command running first, then,
// once that call's result came back (a refused call's result counts),
// for one running second, then answers the second result with answer.
// With second equal to first it is the same call twice. A command that
// outlives Codex's yield time is polled with write_stdin, as in ToolTurn.
// Each request bills as ToolTurn's do: the first of the turn
// firstCallUsage, every later one followUpUsage.
func TwoTools(first, second, answer string) Scenario {
	return Func(func(req *Request) Response {
		outs, running := req.execCalls()
		switch {
		case running != 0:
			return poll(running)
		case len(outs) == 0:
			return Response{Items: []Item{Reasoning("Two commands to run; the first."), ExecCommand(first)}, Usage: firstCallUsage()}
		case len(outs) == 1:
			return Response{Items: []Item{ExecCommand(second)}, Usage: followUpUsage()}
		}
		return Response{Items: []Item{Text(answer)}, Usage: followUpUsage()}
	})
}

// TurnUsage is what Turns bills for its n-th request (from 1): distinct
// for every request, so that a test can tell each turn's usage from the
// others' and from a sum over the session.
func TurnUsage(n int) Usage {
	k := int64(n)
	return Usage{InputTokens: 1000 * k, CachedTokens: 600 * k, OutputTokens: 20 + k, ReasoningTokens: k}
}

// Turns answers every request with text, billing TurnUsage(n) for the
// n-th, for runs of several turns.
func Turns(text string) Scenario {
	var mu sync.Mutex
	n := 0
	return Func(func(*Request) Response {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		return Response{Items: []Item{Text(text)}, Usage: TurnUsage(k)}
	})
}

// LongThenText asks for an exec_command running command on the first
// request of the run, and answers every later request with text: the
// command's result, input steered into the running turn, the next turn's
// prompt after an interrupt. Only while the command still runs, and
// nothing was steered, is it polled with write_stdin, so that the turn
// waits for it. A request is the first when its input holds no call of
// command: Codex replays earlier turns in every request.
func LongThenText(command, text string) Scenario {
	return Func(func(req *Request) Response {
		asked := false
		for _, it := range req.Input {
			if it.Type == "function_call" && it.Name == "exec_command" {
				var args struct {
					Cmd string `json:"cmd"`
				}
				if json.Unmarshal([]byte(it.Arguments), &args) == nil && args.Cmd == command {
					asked = true
				}
			}
		}
		if !asked {
			return Response{Items: []Item{Reasoning("A long command to run."), ExecCommand(command)}, Usage: firstCallUsage()}
		}
		if _, running := req.execCalls(); running != 0 && !req.steeredAfterOutput() {
			return poll(running)
		}
		return Response{Items: []Item{Text(text)}, Usage: followUpUsage()}
	})
}

// Contains reports whether text occurs in the request: in a message, a
// reasoning summary, a call's arguments or a call's output, or the
// instructions.
func (r *Request) Contains(text string) bool {
	if strings.Contains(r.Instructions, text) {
		return true
	}
	for _, it := range r.Input {
		if strings.Contains(it.Text, text) || strings.Contains(it.Arguments, text) || strings.Contains(it.Output, text) {
			return true
		}
	}
	return false
}

// Seen reports whether any request of the ledger Contains text.
func (l Ledger) Seen(text string) bool {
	for _, e := range l {
		if e.Request.Contains(text) {
			return true
		}
	}
	return false
}
