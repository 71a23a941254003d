package codex

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// A run's MCP servers reach Codex in thread/start's (or thread/resume's)
// config, which overrides config.toml for that thread alone: nothing is
// written to the Codex home, which every run shares, nor to the run's
// directory. The same route serves one-shot runs and sessions, since
// both speak app-server.

// mcpName is the form of server name Codex takes as a key of
// mcp_servers: its tools reach the model in a namespace "mcp__<name>",
// and a dot would split the config key path.
var mcpName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkMCPServers refuses what Codex cannot be given: a name it would
// misread, the name of a server of the operator's config.toml (whose
// table the run's would be merged into), or an entry that is neither a
// command nor a URL.
func checkMCPServers(servers map[string]runs.MCPServer, operator []string) error {
	for name, s := range servers {
		if slices.Contains(operator, name) {
			return runs.Invalid(runs.FieldMCPServers,
				fmt.Sprintf("server name %q is taken by an MCP server of the gateway's Codex configuration; choose another", name))
		}
		if !mcpName.MatchString(name) {
			return runs.Invalid(runs.FieldMCPServers,
				fmt.Sprintf("server name %q: codex takes letters, digits, '_' and '-' only (at most 64)", clip.Text(name, 80)))
		}
		if (s.Command == "") == (s.URL == "") {
			return runs.Invalid(runs.FieldMCPServers, fmt.Sprintf("server %q: give either a command or a url", name))
		}
	}
	return nil
}

// mcpStartupSeconds is how long Codex waits for a run's MCP servers to
// start, both as each server's startup_timeout_sec and as the first
// turn's wait for servers still starting (mcp_optional_startup_grace_ms).
// With Codex's defaults the first turn began without a server that took
// seconds to start on a machine busy with other runs, and the model's
// call to its tool failed as unknown. A server that fails at once (its
// command missing) is still a warning at once, and the run goes on.
const mcpStartupSeconds = 60

// mcpConfig is the thread's mcp_servers for the run's servers, nil when
// it has none. With approvals never, every server's tools are approved
// in advance (default_tools_approval_mode "approve"): Codex's policy
// never otherwise fails each MCP call unasked. A run that asks leaves
// them to Codex's default, so that each call is asked
// (mcpServer/elicitation/request). The servers of the operator's
// config.toml (operator) are turned off for the thread, as Claude's
// --strict-mcp-config does, so that a run given its own servers sees
// only those.
func mcpConfig(servers map[string]runs.MCPServer, asks bool, operator []string) *threadConfig {
	if len(servers) == 0 {
		return nil
	}
	cfg := &threadConfig{MCPServers: make(map[string]mcpServerConfig, len(servers)), StartupGraceMS: mcpStartupSeconds * 1000}
	for name, s := range servers {
		c := mcpServerConfig{}
		if s.Remote() {
			c.URL, c.HTTPHeaders = s.URL, s.Headers
		} else {
			c.Command, c.Args, c.Env = s.Command, s.Args, s.Env
		}
		if !asks {
			c.ToolsApproval = "approve"
		}
		c.StartupTimeout = mcpStartupSeconds
		cfg.MCPServers[name] = c
	}
	off := false
	for _, name := range operator {
		if _, ok := servers[name]; !ok {
			cfg.MCPServers[name] = mcpServerConfig{Enabled: &off}
		}
	}
	return cfg
}

// mcpSecrets are the values of the servers' env and headers, which the
// supervisor keeps out of everything it stores: a tool may echo them.
func mcpSecrets(servers map[string]runs.MCPServer) []string {
	var out []string
	for _, s := range servers {
		for _, v := range s.Env {
			out = append(out, v)
		}
		for _, v := range s.Headers {
			out = append(out, v)
		}
	}
	out = slices.DeleteFunc(out, func(v string) bool { return strings.TrimSpace(v) == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// mcpOutput is the text of an MCP tool's result: its text content
// joined by newlines, or the result as Codex sent it when it has none
// (an image, a resource, structured content only).
func mcpOutput(result json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) == nil {
		var texts []string
		for _, c := range r.Content {
			if c.Type == "text" {
				texts = append(texts, c.Text)
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, "\n")
		}
	}
	if string(result) == "null" {
		return ""
	}
	return string(result)
}

// mcpError is the message of a failed MCP call's error, {"message": …}
// in codex 0.171.0, or the error as sent.
func mcpError(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	return string(raw)
}

// mcpStatusNotification is mcpServer/startupStatus/updated: starting,
// then ready, failed or cancelled.
type mcpStatusNotification struct {
	ThreadID string `json:"threadId"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	Error    string `json:"error"`
}

// mcpStatus reports an MCP server that did not start as a warning.
// Codex goes on without it, and says nothing else: its tools are just
// not offered to the model.
func (d *decoder) mcpStatus(m message) []runs.Event {
	var n mcpStatusNotification
	if json.Unmarshal(m.Params, &n) != nil || n.Status != "failed" {
		return nil
	}
	msg := fmt.Sprintf("MCP server %q did not start; the run goes on without its tools", n.Name)
	if n.Error != "" {
		msg += ": " + clip.Text(n.Error, 500)
	}
	return d.scope(n.ThreadID, []runs.Event{runs.Warning("mcp_server_failed", msg)})
}
