package openai

import (
	"bytes"
	"encoding/json"
)

// The scenarios of what a GitHub Copilot CLI run is given: the tools of
// its MCP servers and a tool loop for budgets. The images a request
// carries are kept by StartWithImages.

// CopilotMCPName is the name GitHub Copilot CLI gives the tool of an MCP
// server in the model request's tools list: the server's name, "-", the
// tool's own name ("demo-reverse_text"; verified with 1.0.102).
func CopilotMCPName(server, tool string) string { return server + "-" + tool }

// CopilotMCPCall answers the first request of a prompt with a call of the
// MCP tool that Copilot offers as CopilotMCPName(server, tool), with the
// JSON object args as its arguments, and a request carrying that call's
// output with answer. It bills as BashTurn does: the first request
// firstCallUsage, the follow-up followUpUsage.
func CopilotMCPCall(server, tool string, args json.RawMessage, answer string) Scenario {
	name := CopilotMCPName(server, tool)
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	return Func(func(req *Request) Response {
		if _, call, ok := req.LastOutput(); ok && call.Name == name {
			return Response{Items: []Item{Text(answer)}, Usage: followUpUsage()}
		}
		return Response{Items: []Item{Reasoning("The user wants the " + tool + " tool of " + server + "."),
			{Type: "function_call", Name: name, Arguments: string(args)}}, Usage: firstCallUsage()}
	})
}

// BashLoop asks for a call of Copilot's bash tool running command on every
// request, never answering with text: only a limit the client enforces
// ends the run. Every request bills firstCallUsage.
func BashLoop(command string) Scenario {
	return Func(func(*Request) Response {
		return Response{Items: []Item{Reasoning("Once more."), BashCall(command)}, Usage: firstCallUsage()}
	})
}
