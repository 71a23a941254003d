package qwen

import (
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.NetworkNeeds = (*Adapter)(nil)

// openAIEndpoint is where the "openai" auth type sends model requests
// when OPENAI_BASE_URL is unset (0.24.4's DEFAULT_OPENAI_BASE_URL).
const openAIEndpoint = "api.openai.com:443"

// ModelEndpoints implements runs.NetworkNeeds: OPENAI_BASE_URL's host,
// else OpenAI's. A model provider configured in the home's settings
// (modelProviders) is not read: such a home needs network "open" or
// allow_hosts.
func (*Adapter) ModelEndpoints(getenv func(string) string, _ string) []string {
	var e adapterkit.Endpoints
	if !e.AddURL(getenv("OPENAI_BASE_URL")) {
		e.Add(openAIEndpoint)
	}
	return e
}

// ProxyEnv implements runs.NetworkNeeds. The CLI sends its model requests
// through HTTP_PROXY and HTTPS_PROXY as they are, even to 127.0.0.1, and
// the commands its shell tool runs inherit them (doc.go).
func (*Adapter) ProxyEnv(string) []string { return nil }
