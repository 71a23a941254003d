// Package mcptest is a small MCP server over stdio, for tests that give a
// run an MCP server and have the real CLI call its tools.
//
// A test binary becomes the server: its TestMain calls Main first, which
// serves and exits when the process was started as the server (the
// environment variable ServeEnv is set). Server returns the run's
// mcp_servers entry that starts it, with a secret in its env that the
// tool show_token echoes, so that a test can check the secret is redacted
// wherever the tool's output goes.
//
// The server speaks JSON-RPC 2.0, one object per line: initialize,
// ping, tools/list and tools/call. Its tools:
//
//	reverse_text {"text": s}  → "reversed:" + s reversed
//	show_token {}             → "token:" + the value of TokenEnv
//
// Any other request is answered -32601, as the CLIs' probes expect.
package mcptest
