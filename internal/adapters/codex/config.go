package codex

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/BurntSushi/toml"
)

// The operator configures Codex the way Codex documents it, in
// config.toml in the Codex home the gateway uses. The adapter reads that
// file only to learn which model provider is active and what its table
// already sets, so that its own retry bounds never replace the
// operator's, and so that the pre-run check knows where credentials
// come from.

// configFile is the part of config.toml the adapter reads.
type configFile struct {
	Profile        string                    `toml:"profile"`
	ModelProvider  string                    `toml:"model_provider"`
	ModelProviders map[string]providerConfig `toml:"model_providers"`
	Profiles       map[string]struct {
		ModelProvider string `toml:"model_provider"`
	} `toml:"profiles"`
	MCPServers map[string]any `toml:"mcp_servers"`
}

// providerConfig is one [model_providers.<id>] table.
type providerConfig struct {
	BaseURL             string `toml:"base_url"`
	EnvKey              string `toml:"env_key"`
	RequiresOpenAIAuth  bool   `toml:"requires_openai_auth"`
	ExperimentalBearer  string `toml:"experimental_bearer_token"`
	RequestMaxRetries   *int64 `toml:"request_max_retries"`
	StreamMaxRetries    *int64 `toml:"stream_max_retries"`
	StreamIdleTimeoutMS *int64 `toml:"stream_idle_timeout_ms"`
	defined             bool
	EnvKeyInstructions  string            `toml:"env_key_instructions"`
	EnvHTTPHeaders      map[string]string `toml:"env_http_headers"`
}

// builtinOpenAI is Codex's own provider. It cannot be redefined in
// config.toml ("Built-in providers cannot be overridden"), so neither can
// its retries.
const builtinOpenAI = "openai"

// provider is the model provider a run will use.
type provider struct {
	ID     string
	Config providerConfig
	// Builtin is true when config.toml has no table for ID: Codex's own
	// provider, or one of its local ones.
	Builtin bool
	// MCPServers names the operator's own [mcp_servers.<name>] tables in
	// the same file, sorted: a run given servers of its own turns them
	// off.
	MCPServers []string
}

// fileReader is what reading config.toml takes of runs.CLIFiles.
type fileReader interface {
	ReadFile(name string) ([]byte, error)
}

// loadProvider reads home/config.toml with files: Command and NewDecoder
// give the Invocation's Files, Preflight the host's. A missing file
// means Codex's defaults: the built-in OpenAI provider.
func loadProvider(files fileReader, home string) (provider, error) {
	var cfg configFile
	path := filepath.Join(home, "config.toml")
	b, err := files.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return provider{ID: builtinOpenAI, Builtin: true}, nil
	case err != nil:
		return provider{}, err
	}
	if _, err := toml.Decode(string(b), &cfg); err != nil {
		return provider{}, fmt.Errorf("%s: %w", path, err)
	}
	id := cfg.ModelProvider
	if p, ok := cfg.Profiles[cfg.Profile]; ok && cfg.Profile != "" && p.ModelProvider != "" {
		id = p.ModelProvider
	}
	if id == "" {
		id = builtinOpenAI
	}
	pc, ok := cfg.ModelProviders[id]
	return provider{ID: id, Config: pc, Builtin: !ok, MCPServers: slices.Sorted(maps.Keys(cfg.MCPServers))}, nil
}

// Retry bounds the gateway sets on the active provider when the operator
// did not. Codex's defaults (4 request retries inside 5 stream retries)
// turned one 500 into 30 requests and 26 s; one retry of each still rides
// out a blip.
const (
	DefaultRequestMaxRetries = 1
	DefaultStreamMaxRetries  = 1
)

// providerKey is the form of provider id that can be addressed with -c:
// Codex splits the key path on dots.
var providerKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// overrides returns the -c switches that bound p's retries, leaving
// every key the operator set alone. A built-in provider takes none.
func (p provider) overrides() []string {
	if p.Builtin || !providerKey.MatchString(p.ID) {
		return nil
	}
	var args []string
	set := func(key string, have *int64, v int) {
		if have == nil {
			args = append(args, "-c", "model_providers."+p.ID+"."+key+"="+strconv.Itoa(v))
		}
	}
	set("request_max_retries", p.Config.RequestMaxRetries, DefaultRequestMaxRetries)
	set("stream_max_retries", p.Config.StreamMaxRetries, DefaultStreamMaxRetries)
	return args
}
