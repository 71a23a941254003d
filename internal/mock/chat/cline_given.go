package chat

// ClineCommandsTool is Cline 3.0.65's shell tool.
const ClineCommandsTool = "run_commands"

// ClineCommands is a call of Cline's shell tool running command:
// {"commands":[command]}.
func ClineCommands(command string) Call {
	return FunctionCall(ClineCommandsTool, map[string][]string{"commands": {command}})
}
