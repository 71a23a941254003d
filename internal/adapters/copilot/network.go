package copilot

import (
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.NetworkNeeds = (*Adapter)(nil)

// githubEndpoints are what the CLI signed in to GitHub needs for a model
// call: api.github.com checks the token and names the account's Copilot
// API (copilot_internal/user, whose "endpoints.api" follows the plan),
// which is one of the githubcopilot.com hosts. GitHub's tokens are not
// refreshed, so no login host is needed. COPILOT_GH_HOST and GH_HOST
// (GitHub Enterprise) are not passed to the CLI, so github.com's hosts
// are the only ones.
var githubEndpoints = []string{
	"api.github.com:443",
	"api.githubcopilot.com:443",
	"api.individual.githubcopilot.com:443",
	"api.business.githubcopilot.com:443",
	"api.enterprise.githubcopilot.com:443",
}

// ModelEndpoints implements runs.NetworkNeeds: with a custom provider
// (BYOK, COPILOT_PROVIDER_BASE_URL) its host alone, since the CLI then
// needs no GitHub authentication (`copilot help providers`); else
// GitHub's.
func (*Adapter) ModelEndpoints(getenv func(string) string, _ string) []string {
	var e adapterkit.Endpoints
	if !e.AddURL(getenv("COPILOT_PROVIDER_BASE_URL")) {
		e.Add(githubEndpoints...)
	}
	return e
}

// ProxyEnv implements runs.NetworkNeeds. The CLI, the commands its shell
// tool runs and its MCP clients use HTTP_PROXY and HTTPS_PROXY as they
// are (see doc.go and TestProxyRealCLI).
func (*Adapter) ProxyEnv(string) []string { return nil }
