package openai

import (
	"encoding/json"
	"regexp"
	"strconv"
)

// BashTool is the name of GitHub Copilot CLI's shell tool. Its arguments
// are {"command", "description"} (both required), and optionally shellId,
// mode ("sync" or "async"), detach and initial_wait (seconds).
const BashTool = "bash"

// ReadBashTool is Copilot's tool that waits for a shell command still
// running, by its shellId.
const ReadBashTool = "read_bash"

// BashCall returns a call of Copilot's bash tool running command.
func BashCall(command string) Item {
	return FunctionCall(BashTool, map[string]string{"command": command, "description": "Run the command"})
}

// bashRunning finds the shell id in the output of a bash call that
// outlived its initial wait: Copilot then reports "<shellId: N still
// running…>" (or "shellId: N" with "running") and expects read_bash calls.
var bashRunning = regexp.MustCompile(`shellId: (\d+)[^>]*running`)

// bashPollWait is how long a read_bash poll waits, in seconds.
const bashPollWait = 300

// bashOutput reports whether out answers a bash call running command, or
// a read_bash poll, and returns the shell to poll when the command still
// runs.
func bashOutput(out, call InputItem, command string) (ours bool, shell string) {
	switch call.Name {
	case BashTool:
		var args struct {
			Command string `json:"command"`
		}
		if json.Unmarshal([]byte(call.Arguments), &args) != nil || args.Command != command {
			return false, ""
		}
	case ReadBashTool:
	default:
		return false, ""
	}
	if m := bashRunning.FindStringSubmatch(out.Output); m != nil {
		shell = m[1]
	}
	return true, shell
}

// BashTurn is ToolTurn for GitHub Copilot CLI: it answers the first
// request of a prompt with a reasoning summary and a call of Copilot's
// bash tool running command, and a request that carries that call's output
// with the answer text. While the command outlives the tool's initial
// wait, the follow-ups ask read_bash to wait for it, so the answer comes
// once the command has finished. The usage is ToolTurn's: the first
// request bills 5000 input (4000 cached), 50 output (12 reasoning), the
// follow-up 5200 (4900), 30 (7).
func BashTurn(command, answer string) Scenario {
	return Func(func(req *Request) Response {
		if out, call, ok := req.LastOutput(); ok {
			if ours, shell := bashOutput(out, call, command); ours {
				if shell != "" {
					id, _ := strconv.Atoi(shell)
					return Response{Items: []Item{FunctionCall(ReadBashTool, map[string]any{
						"shellId": strconv.Itoa(id), "delay": bashPollWait,
					})}, Usage: followUpUsage()}
				}
				return Response{Items: []Item{Text(answer)}, Usage: followUpUsage()}
			}
		}
		return Response{Items: []Item{Reasoning("The user wants a command run. I will use bash."), BashCall(command)},
			Usage: firstCallUsage()}
	})
}
