package opencode

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// PrefersSession implements runs.SessionPreferrer: a run given MCP
// servers or images runs over ACP (`opencode acp`) even when it is
// neither interactive nor asks for approvals. `opencode run` takes MCP
// servers only from OpenCode's configuration, and the adapter can add to
// it only through OPENCODE_CONFIG_CONTENT or a file, which would replace
// the operator's own OPENCODE_CONFIG_CONTENT or put per-run settings in
// the shared home; session/new takes them per session. Images go the same
// way, as ACP image blocks, so that a run's prompt and its later messages
// take them alike.
func (*Adapter) PrefersSession(s runs.Spec) bool {
	return len(s.MCPServers) > 0 || len(s.Attachments) > 0
}

// sessionRun reports whether the run of s is driven over ACP.
func (a *Adapter) sessionRun(s runs.Spec) bool { return s.Session() || a.PrefersSession(s) }

// acpEnvVar is one entry of an ACP MCP server's env or headers: a list of
// {name, value}, not an object.
type acpEnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// acpStdioServer is session/new's entry of a stdio MCP server, which
// OpenCode starts itself.
type acpStdioServer struct {
	Name    string      `json:"name"`
	Command string      `json:"command"`
	Args    []string    `json:"args"`
	Env     []acpEnvVar `json:"env"`
}

// acpHTTPServer is session/new's entry of a remote MCP server
// (agentCapabilities.mcpCapabilities.http is true for OpenCode 1.18.33).
type acpHTTPServer struct {
	Type    string      `json:"type"`
	Name    string      `json:"name"`
	URL     string      `json:"url"`
	Headers []acpEnvVar `json:"headers"`
}

// acpMCPServers builds session/new's mcpServers for the run's servers,
// by name, and the env and header values they carry, which the
// supervisor must keep out of logs and records (they travel on stdin).
// Nil when the run has none, so that the core sends [].
func acpMCPServers(servers map[string]runs.MCPServer) (entries []json.RawMessage, secrets []string) {
	for _, name := range sortedNames(servers) {
		m := servers[name]
		var v any
		if m.Remote() {
			v = acpHTTPServer{Type: "http", Name: name, URL: m.URL, Headers: envList(m.Headers, &secrets)}
		} else {
			args := m.Args
			if args == nil {
				args = []string{}
			}
			v = acpStdioServer{Name: name, Command: m.Command, Args: args, Env: envList(m.Env, &secrets)}
		}
		b, err := json.Marshal(v)
		if err != nil {
			continue // strings and lists of strings always marshal
		}
		entries = append(entries, b)
	}
	return entries, secrets
}

// envList is a map as ACP's list of {name, value}, sorted by name, with
// every value added to secrets.
func envList(m map[string]string, secrets *[]string) []acpEnvVar {
	out := make([]acpEnvVar, 0, len(m))
	for _, k := range sortedNames(m) {
		out = append(out, acpEnvVar{Name: k, Value: m[k]})
		if m[k] != "" {
			*secrets = append(*secrets, m[k])
		}
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// mcpNameRE matches what OpenCode replaces with "_" in an MCP server's
// and a tool's names when it names the tool for the model (verified with
// 1.18.33: server "demo", tool "reverse_text" → "demo_reverse_text").
var mcpNameRE = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// mcpNamer maps OpenCode's names of MCP tools, "<server>_<tool>", back to
// the run's server (a key of Spec.MCPServers) and the tool's own name.
type mcpNamer struct {
	// prefixes are the servers' names as OpenCode writes them, with the
	// "_" after them, longest first, so that of servers "a" and "a_b"
	// the tool "a_b_x" is "a_b"'s.
	prefixes []mcpPrefix
}

type mcpPrefix struct{ prefix, server string }

func newMCPNamer(servers map[string]runs.MCPServer) mcpNamer {
	var n mcpNamer
	for name := range servers {
		n.prefixes = append(n.prefixes, mcpPrefix{mcpNameRE.ReplaceAllString(name, "_") + "_", name})
	}
	sort.Slice(n.prefixes, func(i, j int) bool {
		if len(n.prefixes[i].prefix) != len(n.prefixes[j].prefix) {
			return len(n.prefixes[i].prefix) > len(n.prefixes[j].prefix)
		}
		return n.prefixes[i].server < n.prefixes[j].server
	})
	return n
}

// split returns the server and tool of OpenCode's tool name, ok false
// when it is none of the run's MCP servers' tools.
func (n mcpNamer) split(name string) (server, tool string, ok bool) {
	for _, p := range n.prefixes {
		if rest, found := strings.CutPrefix(name, p.prefix); found && rest != "" {
			return p.server, rest, true
		}
	}
	return "", "", false
}
