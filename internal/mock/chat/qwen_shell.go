package chat

// ShellTool is the name of Qwen Code's shell tool, whose arguments hold
// the command line in "command".
const ShellTool = "run_shell_command"

// ShellLongCommand runs for a minute. Qwen Code refuses a command that
// starts with sleep and goes on ("Blocked: sleep 60 followed by: …"), so
// a perl sleeps instead.
const ShellLongCommand = "perl -e 'sleep 60'; echo done"

// Shell returns a call of ShellTool running command.
func Shell(command string) Call {
	return FunctionCall(ShellTool, map[string]string{"command": command})
}

// withShellScenarios adds to the catalog's scenarios m its tool scenarios
// with Qwen Code's shell tool, "shell-" and their names; or gives a
// scenario's command, the catalog's or the default.
func withShellScenarios(or func(string) string, m map[string]func() Scenario) map[string]func() Scenario {
	m["shell-tool"] = func() Scenario { return ToolTurn(Shell(or("echo hello > out.txt")), "I ran the command.") }
	m["shell-long-tool"] = func() Scenario { return ToolTurn(Shell(or(ShellLongCommand)), "The command finished.") }
	m["shell-always-tool"] = func() Scenario { return AlwaysTool(Shell(or("echo again"))) }
	m["shell-two-tools"] = func() Scenario { return TwoTools(Shell(or("echo one")), Shell(or("echo two")), "Both commands ran.") }
	m["shell-tool-then-text"] = func() Scenario {
		return ToolThenText([]Call{Shell(or(ShellLongCommand))}, "Done after the tool.")
	}
	return m
}
