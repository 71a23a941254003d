package anthropic

import (
	"encoding/json"
	"strings"
)

// MCPToolName is the name Claude Code offers the model for tool of the
// run's MCP server: "mcp__<server>__<tool>", e.g. mcp__demo__reverse_text.
func MCPToolName(server, tool string) string { return "mcp__" + server + "__" + tool }

// MCPCall asks for one call of tool of the MCP server named server, with
// input (a JSON object) as its arguments, on a request whose messages hold
// no tool result yet, and answers every later request with text. Claude
// Code offers MCP tools deferred (not in the request's tools, only named
// in a system reminder for ToolSearch) but runs a direct call all the
// same, so the call is made without looking the tool up.
func MCPCall(server, tool string, input json.RawMessage, text string) Scenario {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	return Func(func(req *Request) Response {
		if req.countToolResults() > 0 {
			return Response{Message: Message{Content: []Block{Text(text)}, Usage: followUpUsage()}}
		}
		return Response{Message: Message{
			Content: []Block{Text("Calling the MCP tool."), {Type: "tool_use", Name: MCPToolName(server, tool), Input: input}},
			Usage:   firstCallUsage(),
		}}
	})
}

// Images returns the image blocks of the request's user messages, in
// order: where a test finds the images a prompt or a message carried.
func (r *Request) Images() []ContentBlock {
	var out []ContentBlock
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Blocks {
			if b.Type == "image" {
				out = append(out, b)
			}
		}
	}
	return out
}

// ImageSeen reports whether a request of the ledger carried an image
// whose base64 data is data.
func (l Ledger) ImageSeen(data string) bool {
	for _, e := range l {
		for _, b := range e.Request.Images() {
			if strings.TrimSpace(b.Data) == data {
				return true
			}
		}
	}
	return false
}

// StructuredMismatch calls the StructuredOutput tool (Claude Code's
// --json-schema) with output on every request until tries of its calls
// got a result, and then answers "Done." to every request: a model that
// gives up on an output the CLI refuses as not matching the schema.
func StructuredMismatch(output any, tries int) Scenario {
	return Func(func(req *Request) Response {
		if req.HasTool("StructuredOutput") && req.countToolResults() < tries {
			return Response{Message: Message{Content: []Block{ToolUse("StructuredOutput", output)}, Usage: firstCallUsage()}}
		}
		return Response{Message: Message{Content: []Block{Text("Done.")}, Usage: textUsage()}}
	})
}
