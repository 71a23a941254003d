package opencode

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.NetworkNeeds = (*Adapter)(nil)

// providerEndpoints are the API hosts of the built-in providers most
// used, from the models.dev catalogue OpenCode 1.18.33 bundles, for a
// provider whose configuration gives no baseURL. Another provider needs
// its baseURL configured to be reached under network "model".
var providerEndpoints = map[string][]string{
	"anthropic":  {"api.anthropic.com:443"},
	"openai":     {"api.openai.com:443"},
	"google":     {"generativelanguage.googleapis.com:443"},
	"openrouter": {"openrouter.ai:443"},
	"opencode":   {"opencode.ai:443"},
	"groq":       {"api.groq.com:443"},
	"mistral":    {"api.mistral.ai:443"},
	"xai":        {"api.x.ai:443"},
	"deepseek":   {"api.deepseek.com:443"},
	// A Copilot login's token is exchanged at api.github.com.
	"github-copilot": {"api.githubcopilot.com:443", "api.github.com:443"},
}

// freeProvider is OpenCode's own provider, whose free models need no key:
// what a run uses when nothing else is configured.
const freeProvider = "opencode"

// ModelEndpoints implements runs.NetworkNeeds. A run may name any
// provider's model (--model), so this is the hosts of every provider it
// could use: each provider the configurations OpenCode reads declare (its
// baseURL or api, else its built-in host), the default model's provider,
// the built-in providers the passed key variables and `opencode auth
// login` give credentials, and OpenCode's own when none is.
func (*Adapter) ModelEndpoints(getenv func(string) string, home string) []string {
	var env []string
	for _, name := range []string{"OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT"} {
		if v := getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	var srcs []source
	if home != "" {
		srcs = configSources(runs.HostFiles{}, home, env)
	} else {
		srcs = configSources(runs.NoFiles{}, home, env)
	}
	urls, providers := configuredProviders(srcs)
	for _, id := range slices.Sorted(maps.Keys(builtinKeys)) {
		if getenv(builtinKeys[id]) != "" {
			providers = append(providers, id)
		}
	}
	providers = append(providers, loggedInProviders(home)...)
	var e adapterkit.Endpoints
	for _, u := range urls {
		e.AddURL(u)
	}
	for _, id := range providers {
		e.Add(providerEndpoints[id]...)
	}
	if len(e) == 0 {
		e.Add(providerEndpoints[freeProvider]...)
	}
	return e
}

// ProxyEnv implements runs.NetworkNeeds. OpenCode, the commands its bash
// tool runs and its MCP clients use HTTP_PROXY and HTTPS_PROXY as they
// are (see doc.go and TestProxyRealCLI).
func (*Adapter) ProxyEnv(string) []string { return nil }

// providerSection is the part of a provider's configuration that says
// where it is served.
type providerSection struct {
	API     string `json:"api"`
	Options struct {
		BaseURL string `json:"baseURL"`
	} `json:"options"`
}

// configuredProviders returns the base URLs the configurations give their
// providers, and the providers that have none there (whose built-in host
// serves them), the default model's included, in the order read.
func configuredProviders(srcs []source) (urls, builtin []string) {
	served := map[string]bool{}
	var named []string
	for _, s := range srcs {
		c, ok := parseConfig(s.text)
		if !ok {
			continue
		}
		if p := providerOf(c.Model); p != "" {
			named = append(named, p)
		}
		for _, id := range slices.Sorted(maps.Keys(c.Provider)) {
			named = append(named, id)
			var sec providerSection
			if json.Unmarshal(c.Provider[id], &sec) != nil {
				continue
			}
			for _, u := range []string{sec.Options.BaseURL, sec.API} {
				if _, ok := adapterkit.Endpoint(u); ok {
					urls, served[id] = append(urls, u), true
				}
			}
		}
	}
	for _, id := range named {
		if !served[id] {
			builtin = append(builtin, id)
		}
	}
	return urls, builtin
}

// loggedInProviders returns the providers `opencode auth login` keeps
// credentials for in home, sorted.
func loggedInProviders(home string) []string {
	if home == "" {
		return nil
	}
	b, err := runs.HostFiles{}.ReadFile(authFile(home))
	if err != nil {
		return nil
	}
	var creds map[string]json.RawMessage
	if json.Unmarshal(b, &creds) != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(creds))
}
