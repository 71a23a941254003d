package openai

import (
	"encoding/json"
	"strconv"
)

// The scenarios of interactive runs for GitHub Copilot CLI, whose shell
// tool is bash (with read_bash to wait for a command still running) where
// Codex's is exec_command.

// bashCalls returns the outputs of the current turn that answer a bash
// call (not a read_bash poll), in order, with the shell to poll when the
// last output of the turn says its command still runs ("" otherwise).
func (r *Request) bashCalls() (outs []InputItem, running string) {
	for _, out := range r.FunctionOutputs() {
		if call, _ := r.Call(out.CallID); call.Name == BashTool {
			outs = append(outs, out)
		}
	}
	if out, call, ok := r.LastOutput(); ok && (call.Name == BashTool || call.Name == ReadBashTool) {
		if m := bashRunning.FindStringSubmatch(out.Output); m != nil {
			running = m[1]
		}
	}
	return outs, running
}

// readBash is the read_bash call that waits for shell.
func readBash(shell string) Item {
	id, _ := strconv.Atoi(shell)
	return FunctionCall(ReadBashTool, map[string]any{"shellId": strconv.Itoa(id), "delay": bashPollWait})
}

// BashTwoTools is TwoTools for GitHub Copilot CLI: in one turn, a bash
// call running first, then, once its result came back (a refused call's
// result counts), one running second, then answer. With second equal to
// first it is the same call twice. A command that outlives the tool's
// initial wait is waited for with read_bash. Each request bills as
// BashTurn's do: the first of the turn firstCallUsage, every later one
// followUpUsage.
func BashTwoTools(first, second, answer string) Scenario {
	return Func(func(req *Request) Response {
		outs, running := req.bashCalls()
		switch {
		case running != "":
			return Response{Items: []Item{readBash(running)}, Usage: followUpUsage()}
		case len(outs) == 0:
			return Response{Items: []Item{Reasoning("Two commands to run; the first."), BashCall(first)}, Usage: firstCallUsage()}
		case len(outs) == 1:
			return Response{Items: []Item{BashCall(second)}, Usage: followUpUsage()}
		}
		return Response{Items: []Item{Text(answer)}, Usage: followUpUsage()}
	})
}

// BashLongThenText is LongThenText for GitHub Copilot CLI: a bash call
// running command on the first request of the run, and text for every
// later request: the command's result, a prompt sent during the turn,
// the next turn's prompt after an interrupt. Only while the command
// still runs is it waited for with read_bash. A request is the first when
// its input holds no bash call of command: the CLI replays earlier turns
// in every request.
func BashLongThenText(command, text string) Scenario {
	return Func(func(req *Request) Response {
		asked := false
		for _, it := range req.Input {
			if it.Type == "function_call" && it.Name == BashTool {
				var args struct {
					Command string `json:"command"`
				}
				if json.Unmarshal([]byte(it.Arguments), &args) == nil && args.Command == command {
					asked = true
				}
			}
		}
		if !asked {
			return Response{Items: []Item{Reasoning("A long command to run."), BashCall(command)}, Usage: firstCallUsage()}
		}
		if _, running := req.bashCalls(); running != "" {
			return Response{Items: []Item{readBash(running)}, Usage: followUpUsage()}
		}
		return Response{Items: []Item{Text(text)}, Usage: followUpUsage()}
	})
}
