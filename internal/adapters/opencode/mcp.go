package opencode

import (
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
