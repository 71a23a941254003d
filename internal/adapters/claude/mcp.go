package claude

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// mcpNameRE is what a run's MCP server may be called. Claude Code names a
// server's tools mcp__<server>__<tool>, and reads the server back from
// that name, so a name with "__" or with characters the CLI would rewrite
// could not be told apart from another.
var mcpNameRE = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)

// mcpEntry is one server of --mcp-config, as the CLI reads it.
type mcpEntry struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// mcpArgs returns the flags that give the run its MCP servers, the
// --allowedTools rules that let their tools run without asking (nil when
// the run asks), and the values the flags carry that must never be
// stored: the servers' env and header values.
//
// --strict-mcp-config makes the CLI ignore every other MCP configuration
// (the operator's ~/.claude.json, a project's .mcp.json in the run's
// directory), so a run gets exactly its own servers. The config goes on
// the command line rather than into a file: the adapter writes no files,
// and a file in the shared home or in the run's directory would be read
// by other runs.
func mcpArgs(servers map[string]runs.MCPServer) (args, allow, secrets []string, err error) {
	if len(servers) == 0 {
		return nil, nil, nil, nil
	}
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	cfg := make(map[string]mcpEntry, len(servers))
	for _, name := range names {
		s := servers[name]
		field := runs.FieldMCPServers + "." + name
		if !mcpNameRE.MatchString(name) {
			return nil, nil, nil, runs.Invalid(field, "an MCP server's name must be letters, digits, '-' and single '_' "+
				"(claude names its tools mcp__<server>__<tool>)")
		}
		if err := noExpansion(field, s); err != nil {
			return nil, nil, nil, err
		}
		switch {
		case s.Command != "" && s.URL != "":
			return nil, nil, nil, runs.Invalid(field, "give either command or url, not both")
		case s.Command != "":
			cfg[name] = mcpEntry{Type: "stdio", Command: s.Command, Args: s.Args, Env: serverEnv(s.Env)}
		case s.URL != "":
			// Remote servers are streamable HTTP, the transport the
			// CLI's "http" type speaks.
			cfg[name] = mcpEntry{Type: "http", URL: s.URL, Headers: s.Headers}
		default:
			return nil, nil, nil, runs.Invalid(field, "an MCP server needs a command or a url")
		}
		for _, v := range s.Env {
			secrets = append(secrets, v)
		}
		for _, v := range s.Headers {
			secrets = append(secrets, v)
		}
		// A rule naming the server allows every tool of it.
		allow = append(allow, "mcp__"+name)
	}
	b, err := json.Marshal(map[string]any{"mcpServers": cfg})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("claude: encode the MCP config: %w", err)
	}
	if len(b) > maxArg {
		return nil, nil, nil, runs.Unsupported(Name, runs.FieldMCPServers,
			fmt.Sprintf("are %d bytes as claude's --mcp-config, which the command line holds at most %d of", len(b), maxArg))
	}
	secrets = slices.DeleteFunc(secrets, func(v string) bool { return v == "" })
	return []string{"--mcp-config=" + string(b), "--strict-mcp-config"}, allow, secrets, nil
}

// mcpTool reads a tool name the CLI gives the model for an MCP tool,
// mcp__<server>__<tool>, back into the server (a key of servers) and the
// tool's own name. ok is false for a built-in tool, and for an MCP tool
// of a server the run was not given.
func mcpTool(name string, servers map[string]runs.MCPServer) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, "mcp__")
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, "__")
	if !found || tool == "" {
		return "", "", false
	}
	if _, given := servers[server]; !given {
		return "", "", false
	}
	return server, tool, true
}

// serverEnv is the environment a stdio server gets on top of the CLI's:
// the client's variables, and every credential variable of the CLI the
// client did not set, emptied. The CLI starts its MCP servers with its
// whole environment (verified: a server read a variable set only for the
// CLI), which holds the gateway's model credentials; an entry of the
// config's env replaces the inherited value (verified with an empty one).
func serverEnv(given map[string]string) map[string]string {
	env := make(map[string]string, len(given)+len(credentialEnv))
	for _, name := range credentialEnv {
		env[name] = ""
	}
	for k, v := range given {
		env[k] = v
	}
	return env
}

// noExpansion refuses a value of the server's entry in which the CLI
// would expand "${NAME}" with its own environment (verified: an env value
// "${HOME}" reached the server as the CLI's HOME). The CLI has no escape
// for it, and its environment holds the gateway's credentials, which a
// header could otherwise carry to a remote server.
func noExpansion(field string, s runs.MCPServer) error {
	check := func(what, v string) error {
		if strings.Contains(v, "${") {
			return runs.Invalid(field, what+` must not contain "${": claude would replace ${NAME} with its own environment`)
		}
		return nil
	}
	if err := check("command", s.Command); err != nil {
		return err
	}
	if err := check("url", s.URL); err != nil {
		return err
	}
	for _, a := range s.Args {
		if err := check("args", a); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(s.Env) {
		if err := check("env "+k, s.Env[k]); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(s.Headers) {
		if err := check("header "+k, s.Headers[k]); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
