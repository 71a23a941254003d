package codex

import (
	"encoding/json"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.NetworkNeeds = (*Adapter)(nil)

// builtinEndpoints are where Codex's built-in providers serve the model
// (codex 0.171.0): OpenAI's API, and the local servers of its two local
// providers on their default ports.
var builtinEndpoints = map[string][]string{
	builtinOpenAI: {"api.openai.com:443"},
	"ollama":      {"localhost:11434"},
	"lmstudio":    {"localhost:1234"},
}

// chatGPTEndpoints are what a ChatGPT login (`codex login`, tokens in
// auth.json) needs on the built-in provider: the model is served at
// chatgpt.com/backend-api/codex, and the login's access token is
// refreshed at auth.openai.com/oauth/token.
var chatGPTEndpoints = []string{"chatgpt.com:443", "auth.openai.com:443"}

// ModelEndpoints implements runs.NetworkNeeds. home is the Codex home
// (CODEX_HOME, as in Invocation.Home): the base_url of the provider its
// config.toml selects, else the built-in provider's hosts, with
// ChatGPT's when the home holds a ChatGPT login. A config.toml that
// cannot be read leaves Codex's defaults: Codex reports the file itself.
func (*Adapter) ModelEndpoints(_ func(string) string, home string) []string {
	prov := provider{ID: builtinOpenAI, Builtin: true}
	if home != "" {
		if p, err := loadProvider(runs.HostFiles{}, home); err == nil {
			prov = p
		}
	}
	var e adapterkit.Endpoints
	if !prov.Builtin {
		e.AddURL(prov.Config.BaseURL)
		return e
	}
	e.Add(builtinEndpoints[prov.ID]...)
	if prov.ID == builtinOpenAI && hasChatGPTLogin(home) {
		e.Add(chatGPTEndpoints...)
	}
	return e
}

// ProxyEnv implements runs.NetworkNeeds. Codex, the commands it runs and
// its MCP clients use HTTP_PROXY and HTTPS_PROXY as they are (see doc.go
// and TestProxyRealCLI).
func (*Adapter) ProxyEnv(string) []string { return nil }

// hasChatGPTLogin says whether home's auth.json holds the tokens of a
// ChatGPT login, rather than an API key alone.
func hasChatGPTLogin(home string) bool {
	if home == "" {
		return false
	}
	b, err := runs.HostFiles{}.ReadFile(filepath.Join(home, "auth.json"))
	if err != nil {
		return false
	}
	var auth struct {
		Tokens json.RawMessage `json:"tokens"`
	}
	return json.Unmarshal(b, &auth) == nil && len(auth.Tokens) > 0 && string(auth.Tokens) != "null"
}
