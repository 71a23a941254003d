package copilot

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// mcpSep joins a server's name and a tool's in the name the CLI gives an
// MCP tool: "demo-reverse_text".
const mcpSep = "-"

// reservedServers are names --allow-tool reads as a kind of tool rather
// than as an MCP server ("shell", "write", "url", "memory"): a server so
// named would have a read_only run allow every shell command or write.
var reservedServers = map[string]bool{"shell": true, "write": true, "url": true, "memory": true, "read": true}

// mcpEntry is one server of --additional-mcp-config, in the shape the CLI
// writes to its own mcp-config.json (`copilot mcp add --json`): "local"
// for a server it starts, "http" for a remote one, every tool enabled.
type mcpEntry struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Tools   []string          `json:"tools"`
}

// mcpArgs returns the flags that give the CLI the run's MCP servers: one
// --additional-mcp-config holding them all, as JSON, and, with preallow
// (a read_only run that asks for no approvals), --allow-tool=<server> for
// each, so that a run that names a server may call its tools without
// anyone to approve them: --deny-tool=write alone has the CLI deny them. The config rides on
// the command line rather than in a file: the CLI's home is shared by all
// runs, and a file in the run's directory would be the user's. Its env
// and header values are in Command.Secrets (mcpSecrets).
func mcpArgs(servers map[string]runs.MCPServer, preallow bool) ([]string, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	entries := make(map[string]mcpEntry, len(servers))
	names := make([]string, 0, len(servers))
	for name, m := range servers {
		if reservedServers[name] {
			return nil, runs.Invalid(runs.FieldMCPServers, fmt.Sprintf(
				"copilot reads an MCP server named %q as a kind of tool in its permission rules; choose another name", name))
		}
		e := mcpEntry{Tools: []string{"*"}}
		switch {
		case m.Remote():
			e.Type, e.URL, e.Headers = "http", m.URL, m.Headers
		case m.Command != "":
			e.Type, e.Command, e.Args, e.Env = "local", m.Command, m.Args, m.Env
		default:
			return nil, runs.Invalid(runs.FieldMCPServers, fmt.Sprintf("MCP server %q has neither a command nor a url", name))
		}
		entries[name] = e
		names = append(names, name)
	}
	b, err := json.Marshal(map[string]any{"mcpServers": entries})
	if err != nil {
		return nil, fmt.Errorf("copilot: encode the MCP servers: %w", err)
	}
	args := []string{"--additional-mcp-config=" + string(b)}
	if preallow {
		sort.Strings(names)
		for _, n := range names {
			args = append(args, "--allow-tool="+n)
		}
	}
	return args, nil
}

// mcpSecrets are the env and header values of the run's servers.
func mcpSecrets(servers map[string]runs.MCPServer) []string { return acp.MCPSecrets(servers) }

// splitMCP names the run's server and the tool's own name for a tool the
// CLI calls name ("demo-reverse_text"); ok is false for a built-in tool.
func splitMCP(name string, servers map[string]runs.MCPServer) (server, tool string, ok bool) {
	return acp.SplitMCPName(name, "", mcpSep, servers)
}
