package claude

import (
	"encoding/json"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.NetworkNeeds = (*Adapter)(nil)

// The CLI's own hosts, where the operator configured none.
const (
	// apiEndpoint serves the model with an API key, a token, or a
	// claude.ai login alike.
	apiEndpoint = "api.anthropic.com:443"
	// oauthEndpoint is where a login in ~/.claude/.credentials.json
	// (`claude` /login) is refreshed: its access token lasts hours, so a
	// run of a logged-in CLI that cannot reach it fails once the token
	// expires (TOKEN_URL https://platform.claude.com/v1/oauth/token in
	// 2.1.332). CLAUDE_CODE_OAUTH_TOKEN (`claude setup-token`) is a
	// long-lived token and refreshes nothing.
	oauthEndpoint = "platform.claude.com:443"
)

// ModelEndpoints implements runs.NetworkNeeds: the host of
// ANTHROPIC_BASE_URL, given to the gateway or in the "env" of the
// operator's ~/.claude/settings.json (the CLI applies both; either may
// be the one in force, so both are allowed), else api.anthropic.com; and
// the login's refresh host when the home holds a login.
func (*Adapter) ModelEndpoints(getenv func(string) string, home string) []string {
	var e adapterkit.Endpoints
	e.AddURL(getenv("ANTHROPIC_BASE_URL"))
	e.AddURL(settingsEnv(home)["ANTHROPIC_BASE_URL"])
	if len(e) == 0 {
		e.Add(apiEndpoint)
	}
	if home != "" && hasFile(filepath.Join(home, ".claude", ".credentials.json")) {
		e.Add(oauthEndpoint)
	}
	return e
}

// ProxyEnv implements runs.NetworkNeeds. The CLI, the commands its Bash
// tool runs and its MCP clients use HTTP_PROXY and HTTPS_PROXY as they
// are (see doc.go and TestProxyRealCLI).
func (*Adapter) ProxyEnv(string) []string { return nil }

// settingsEnv returns the "env" object of home's ~/.claude/settings.json,
// or nil when there is none to read.
func settingsEnv(home string) map[string]string {
	if home == "" {
		return nil
	}
	b, err := runs.HostFiles{}.ReadFile(filepath.Join(home, ".claude", "settings.json"))
	if err != nil {
		return nil
	}
	var s struct {
		Env map[string]any `json:"env"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	env := make(map[string]string, len(s.Env))
	for k, v := range s.Env {
		if str, ok := v.(string); ok {
			env[k] = str
		}
	}
	return env
}

// hasFile says whether name is there to read.
func hasFile(name string) bool {
	_, err := runs.HostFiles{}.HostPath(name)
	return err == nil
}
