package runs

import (
	"bytes"
	"errors"
	"testing"
)

func TestMCPAllowLists(t *testing.T) {
	d := Description{Name: "x", Fields: []string{FieldMCPServers}}
	cmds := []string{"/usr/bin/mcp-fs", "/opt/mcp/", "npx"}
	urls := []string{"https://mcp.example.com/v1", "http://127.0.0.1:8080/"}
	ok := []MCPServer{
		{Command: "/usr/bin/mcp-fs"}, {Command: "npx"}, {Command: "/opt/mcp/server"}, {Command: "/opt/mcp/a/b"},
		{URL: "https://mcp.example.com/v1"}, {URL: "https://MCP.example.com:443/v1/sse"}, {URL: "http://127.0.0.1:8080/anything"},
	}
	for _, m := range ok {
		if err := checkMCPServers(d, map[string]MCPServer{"s": m}, cmds, urls); err != nil {
			t.Errorf("%+v refused: %v", m, err)
		}
	}
	refused := []struct {
		m    MCPServer
		code string
	}{
		{MCPServer{Command: "/usr/bin/mcp-fs2"}, CodeMCPCommandNotAllowed},
		{MCPServer{Command: "/opt/mcp/../../bin/sh"}, CodeMCPCommandNotAllowed},
		{MCPServer{Command: "/opt/mcpx"}, CodeMCPCommandNotAllowed},
		{MCPServer{Command: "opt/mcp/x"}, CodeMCPCommandNotAllowed},
		{MCPServer{Command: "bash"}, CodeMCPCommandNotAllowed},
		{MCPServer{URL: "https://mcp.example.com/v2"}, CodeMCPURLNotAllowed},
		{MCPServer{URL: "https://mcp.example.com/v1x"}, CodeMCPURLNotAllowed},
		{MCPServer{URL: "http://mcp.example.com/v1"}, CodeMCPURLNotAllowed},
		{MCPServer{URL: "https://mcp.example.com:8443/v1"}, CodeMCPURLNotAllowed},
		{MCPServer{URL: "https://evil.com/v1"}, CodeMCPURLNotAllowed},
		{MCPServer{URL: "https://mcp.example.com/v1/../admin"}, CodeMCPURLNotAllowed},
		{MCPServer{URL: "https://mcp.example.com/v1/%2e%2e/x"}, CodeMCPURLNotAllowed},
		{MCPServer{URL: "https://u:p@mcp.example.com/v1"}, CodeMCPURLNotAllowed},
		{MCPServer{URL: "ftp://127.0.0.1:8080/"}, CodeMCPURLNotAllowed},
		{MCPServer{URL: "http://127.0.0.1:8081/"}, CodeMCPURLNotAllowed},
	}
	for _, c := range refused {
		m, code := c.m, c.code
		err := checkMCPServers(d, map[string]MCPServer{"s": m}, cmds, urls)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Code != code || fe.Field != FieldMCPServers || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want %s", m, err, code)
		}
	}
	if err := checkMCPServers(d, map[string]MCPServer{"s": {Command: "npx"}}, nil, nil); err == nil {
		t.Error("an empty allow-list allowed a command")
	}
	err := checkMCPServers(Description{Name: "y"}, map[string]MCPServer{"s": {Command: "npx"}}, cmds, urls)
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrUnsupported) || fe.Field != FieldMCPServers || fe.Agent != "y" {
		t.Errorf("an agent without MCP: %v", err)
	}
}

func TestSealRoundTrip(t *testing.T) {
	key := NewSealKey()
	in := map[string]MCPServer{
		"demo": {Command: "/bin/mcp", Args: []string{"-v"}, Env: map[string]string{"TOKEN": "s3cret-value", "A": "b"}},
		"web":  {URL: "https://x.example/mcp", Headers: map[string]string{"Authorization": "Bearer tok-123"}},
		"bare": {Command: "/bin/other"},
	}
	sealedServers, err := sealMCPServers(key, "run-1", in)
	if err != nil {
		t.Fatal(err)
	}
	if in["demo"].Env == nil {
		t.Error("sealing changed its input")
	}
	for name, m := range sealedServers {
		if m.Env != nil || m.Headers != nil {
			t.Errorf("%s keeps its values in the clear", name)
		}
		if bytes.Contains(m.Sealed, []byte("s3cret-value")) || bytes.Contains(m.Sealed, []byte("tok-123")) {
			t.Errorf("%s: sealed holds the plain text", name)
		}
	}
	if got := sealedServers["demo"].EnvNames; len(got) != 2 || got[0] != "A" || got[1] != "TOKEN" {
		t.Errorf("env names %v", got)
	}
	if got := sealedServers["web"].HeaderNames; len(got) != 1 || got[0] != "Authorization" {
		t.Errorf("header names %v", got)
	}
	if sealedServers["bare"].Sealed != nil {
		t.Error("a server without values has a sealed blob")
	}
	opened, err := openMCPServers(key, "run-1", sealedServers)
	if err != nil {
		t.Fatal(err)
	}
	if opened["demo"].Env["TOKEN"] != "s3cret-value" || opened["web"].Headers["Authorization"] != "Bearer tok-123" || opened["demo"].Args[0] != "-v" {
		t.Errorf("opened %+v", opened)
	}
	if sealedServers["demo"].Env != nil {
		t.Error("opening changed its input")
	}
	if _, err := openMCPServers(key, "run-2", sealedServers); err == nil {
		t.Error("a sealed blob opened in another run")
	}
	if _, err := openMCPServers(NewSealKey(), "run-1", sealedServers); err == nil {
		t.Error("a sealed blob opened with another key")
	}
	if _, err := sealMCPServers([]byte("short"), "run-1", in); err == nil {
		t.Error("a bad key sealed")
	}
	secrets := mcpSecrets(opened)
	if len(secrets) != 3 {
		t.Errorf("secrets %v", secrets)
	}
}
