package chat

import "regexp"

// openCodeNameRE matches what OpenCode 1.18.33 replaces with "_" in the
// names of an MCP server and its tools when it offers them to the model.
var openCodeNameRE = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// OpenCodeMCPTool is the function name under which OpenCode offers the
// tool of the MCP server named server to the model: "<server>_<tool>"
// ("demo_reverse_text"), each part with the characters OpenCode does not
// keep replaced by "_".
func OpenCodeMCPTool(server, tool string) string {
	return openCodeNameRE.ReplaceAllString(server, "_") + "_" + openCodeNameRE.ReplaceAllString(tool, "_")
}

// OpenCodeMCPCall is a call of the MCP server's tool as OpenCode names it,
// with args, a JSON object's text, as its arguments ("{}" when empty).
func OpenCodeMCPCall(server, tool, args string) Call {
	if args == "" {
		args = "{}"
	}
	return Call{Name: OpenCodeMCPTool(server, tool), Arguments: args}
}
