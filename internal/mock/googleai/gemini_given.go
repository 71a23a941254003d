package googleai

import "fmt"

// MCPToolName is the function name Gemini CLI (0.61.0) offers the model
// for the tool tool of the MCP server it was given as server:
// mcp_<server>_<tool>, in -p and in ACP alike.
func MCPToolName(server, tool string) string { return "mcp_" + server + "_" + tool }

// MCPTool asks for one call of the MCP tool tool of server (named as
// MCPToolName) with args, which must marshal to a JSON object, and
// answers the request that carries its response with answer. A first
// request that does not offer the tool is answered with a text saying
// so, and no call: the CLI did not get the server, and a test sees why.
func MCPTool(server, tool string, args any, answer string) Scenario {
	name := MCPToolName(server, tool)
	return routed(func(req *Request) Response {
		for _, fr := range req.FunctionResponses() {
			if fr.Name == name {
				return Response{Parts: []Part{Thought("The tool answered."), Text(answer)}, Usage: followUpUsage()}
			}
		}
		if !req.HasTool(name) {
			return Response{Parts: []Part{Text(fmt.Sprintf("no tool %s was offered (offered: %v)", name, req.Tools))}, Usage: textUsage()}
		}
		return Response{Parts: []Part{Thought("The user wants the MCP tool."), Text("Calling the tool."), Call(name, args)},
			Usage: firstCallUsage()}
	})
}

// ToolLoop asks for a run_shell_command call running command on every
// request and never ends the turn by itself, billing each request a
// non-zero usage: the scenario of budgets, which the gateway must stop.
func ToolLoop(command string) Scenario { return AlwaysTool(command) }
