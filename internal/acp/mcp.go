package acp

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// nameValue is an ACP env variable or HTTP header: ACP lists them as
// [{name, value}], not as an object.
type nameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// stdioServer is session/new's entry of an MCP server the CLI starts.
// Every field is required by ACP, args and env as (maybe empty) lists.
type stdioServer struct {
	Name    string      `json:"name"`
	Command string      `json:"command"`
	Args    []string    `json:"args"`
	Env     []nameValue `json:"env"`
}

// httpServer is session/new's entry of a remote MCP server.
type httpServer struct {
	Type    string      `json:"type"` // "http"
	Name    string      `json:"name"`
	URL     string      `json:"url"`
	Headers []nameValue `json:"headers"`
}

// MCPServers returns session/new's mcpServers entries for a run's MCP
// servers (Spec.MCPServers, whose Env and Headers the supervisor has
// opened), for Profile.MCPServers: a stdio server as {name, command,
// args, env: [{name, value}]}, a remote one as {type: "http", name, url,
// headers: [{name, value}]}, ordered by name so that the bytes are the
// same for the same spec. nil for none. The entries carry the env and
// header values: list MCPSecrets in Command.Secrets.
func MCPServers(servers map[string]runs.MCPServer) []json.RawMessage {
	if len(servers) == 0 {
		return nil
	}
	out := make([]json.RawMessage, 0, len(servers))
	for _, name := range sortedNames(servers) {
		m := servers[name]
		var v any
		if m.Remote() {
			v = httpServer{Type: "http", Name: name, URL: m.URL, Headers: nameValues(m.Headers)}
		} else {
			args := m.Args
			if args == nil {
				args = []string{}
			}
			v = stdioServer{Name: name, Command: m.Command, Args: args, Env: nameValues(m.Env)}
		}
		b, err := json.Marshal(v)
		if err != nil {
			// Strings and lists of strings always marshal.
			continue
		}
		out = append(out, b)
	}
	return out
}

// MCPSecrets returns the env and header values of servers, the values a
// command built with them must list in Command.Secrets so that they are
// redacted wherever they would appear. Empty values are left out: there
// is nothing to hide, and redacting "" would mean nothing.
func MCPSecrets(servers map[string]runs.MCPServer) []string {
	var out []string
	for _, name := range sortedNames(servers) {
		m := servers[name]
		for _, kv := range [2]map[string]string{m.Env, m.Headers} {
			for _, k := range sortedKeysOf(kv) {
				if v := kv[k]; v != "" {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// SplitMCPName splits the name a CLI gives an MCP tool, prefix + server +
// sep + tool ("mcp_" "demo" "_" "reverse_text" for Gemini's
// mcp_demo_reverse_text, "" "demo" "-" "reverse_text" for Copilot's),
// into the run's server (a key of servers) and the tool's own name. A
// server name may hold sep itself, so the longest server that matches
// wins. ok is false for a name of no server of the run: a built-in tool.
func SplitMCPName(name, prefix, sep string, servers map[string]runs.MCPServer) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, prefix)
	if !found {
		return "", "", false
	}
	for _, s := range sortedNames(servers) {
		t, found := strings.CutPrefix(rest, s+sep)
		if found && t != "" && len(s) > len(server) {
			server, tool, ok = s, t, true
		}
	}
	return server, tool, ok
}

func nameValues(m map[string]string) []nameValue {
	out := make([]nameValue, 0, len(m))
	for _, k := range sortedKeysOf(m) {
		out = append(out, nameValue{Name: k, Value: m[k]})
	}
	return out
}

func sortedNames(m map[string]runs.MCPServer) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedKeysOf(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
