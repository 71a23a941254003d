package mcptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/testproc"
)

// ServeEnv, set to "1" in its environment, makes a test binary that calls
// Main the MCP server. TokenEnv is the secret show_token echoes.
const (
	ServeEnv = "AGENTGATE_MCPTEST_SERVE"
	TokenEnv = "MCPTEST_TOKEN"
	// StartDelayEnv, a duration, makes the server wait that long before
	// it reads its first request: a server slow to start, as a loaded
	// machine makes one.
	StartDelayEnv = "MCPTEST_START_DELAY"
)

// Name is the server's name in the runs of the tests, and Reversed the
// output reverse_text gives for s.
const Name = "demo"

// Reversed is reverse_text's output for s.
func Reversed(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return "reversed:" + string(r)
}

// Main serves on stdin and stdout, and exits, when the process was started
// as the server; otherwise it returns at once. Call it first in TestMain.
func Main() {
	if os.Getenv(ServeEnv) != "1" {
		return
	}
	if d, err := time.ParseDuration(os.Getenv(StartDelayEnv)); err == nil {
		time.Sleep(d)
	}
	if err := Serve(os.Stdin, os.Stdout, os.Getenv(TokenEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		testproc.Exit(1)
	}
	testproc.Exit(0)
}

// Server is the mcp_servers entry that starts the running test binary as
// the server, with token as its secret. The binary's TestMain must call
// Main.
func Server(token string) (runs.MCPServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return runs.MCPServer{}, err
	}
	return runs.MCPServer{
		Command: exe, Args: []string{"-test.run=^$"},
		Env: map[string]string{ServeEnv: "1", TokenEnv: token},
	}, nil
}

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Serve answers requests from r on w until r ends.
func Serve(r io.Reader, w io.Writer, token string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	enc := json.NewEncoder(w)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			if err := enc.Encode(response{JSONRPC: "2.0", ID: json.RawMessage("null"),
				Error: &rpcError{Code: -32700, Message: "parse error"}}); err != nil {
				return err
			}
			continue
		}
		if len(req.ID) == 0 {
			continue // a notification: initialized, cancelled
		}
		result, rerr := answer(req, token)
		if err := enc.Encode(response{JSONRPC: "2.0", ID: req.ID, Result: result, Error: rerr}); err != nil {
			return err
		}
	}
	return sc.Err()
}

func answer(req request, token string) (any, *rpcError) {
	switch req.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(req.Params, &p)
		if p.ProtocolVersion == "" {
			p.ProtocolVersion = "2025-06-18"
		}
		return map[string]any{
			"protocolVersion": p.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": Name, "version": "1.0.0"},
		}, nil
	case "ping":
		return map[string]any{}, nil
	case "tools/list":
		return map[string]any{"tools": []any{
			map[string]any{
				"name": "reverse_text", "description": "Reverse a text.",
				"inputSchema": map[string]any{
					"type": "object", "required": []string{"text"},
					"properties": map[string]any{"text": map[string]any{"type": "string", "description": "The text to reverse."}},
				},
			},
			map[string]any{
				"name": "show_token", "description": "Show the server's token.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}},
			},
		}}, nil
	case "tools/call":
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &rpcError{Code: -32602, Message: "invalid params"}
		}
		switch p.Name {
		case "reverse_text":
			return text(Reversed(p.Arguments.Text)), nil
		case "show_token":
			return text("token:" + token), nil
		}
		return nil, &rpcError{Code: -32602, Message: "unknown tool " + p.Name}
	}
	return nil, &rpcError{Code: -32601, Message: "method not found: " + req.Method}
}

func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}, "isError": false}
}
