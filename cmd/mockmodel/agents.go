package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/mock/openai"
)

// mockKey is the API key every agent is given for the mock, which takes
// any. GitHub Copilot CLI masks its key's value wherever it occurs in its
// output, so the key is a string no answer contains.
const mockKey = "sk-mockmodel-no-real-key"

// mockModel is the model the agents whose configuration names one are
// pointed at; the mocks answer any model.
const mockModel = openai.DefaultModel

// codexKeyEnv is the variable the mock model provider in Codex's
// config.toml reads its key from (its env_key); the gateway passes it to
// Codex.
const codexKeyEnv = "MOCKMODEL_API_KEY"

// envVar is one variable of the gateway's environment.
type envVar struct{ Name, Value string }

// agent is how one of the gateway's agents is pointed at a mock: which
// API it speaks and what the gateway's environment must hold for its CLI
// to reach the mock. The adapters set the CLIs' switches that stop
// telemetry and updates themselves; what is left is the operator's:
// endpoint, key and model.
type agent struct {
	api string
	// scenarios renames the scenarios whose API form is another agent's:
	// a name missing here is the API's own.
	scenarios map[string]string
	// env is the gateway's environment for the mock at url.
	env func(url string) []envVar
	// codexConfig is set for Codex, whose model provider is configured in
	// config.toml in its home rather than in the environment.
	codexConfig bool
}

// scenario returns the API's name for the agent's scenario name.
func (a agent) scenario(name string) string {
	if n, ok := a.scenarios[name]; ok {
		return n
	}
	return name
}

// agents returns the agents by name, as the gateway names them.
func agents() map[string]agent {
	return map[string]agent{
		"claude": {api: "anthropic", env: func(url string) []envVar {
			return []envVar{{"ANTHROPIC_BASE_URL", url}, {"ANTHROPIC_API_KEY", mockKey}}
		}},
		"codex": {api: "openai", codexConfig: true, env: func(string) []envVar {
			return []envVar{{codexKeyEnv, mockKey}}
		}},
		// The Responses API in offline mode is what the copilot adapter is
		// verified with; the Chat Completions one is not.
		"copilot": {api: "openai", env: func(url string) []envVar {
			return []envVar{
				{"COPILOT_OFFLINE", "true"},
				{"COPILOT_PROVIDER_BASE_URL", url},
				{"COPILOT_PROVIDER_API_KEY", mockKey},
				{"COPILOT_PROVIDER_WIRE_API", "responses"},
				{"COPILOT_MODEL", mockModel},
			}
		}, scenarios: map[string]string{
			"tool":           "bash-tool",
			"long-tool":      "bash-long-tool",
			"always-tool":    "bash-always-tool",
			"two-tools":      "bash-two-tools",
			"tool-then-text": "bash-tool-then-text",
		}},
		"gemini": {api: "googleai", env: func(url string) []envVar {
			return []envVar{{"GOOGLE_GEMINI_BASE_URL", url}, {"GEMINI_API_KEY", mockKey}}
		}},
		// The gateway writes Cline's providers.json from these.
		"cline": {api: "chat", env: func(url string) []envVar {
			return []envVar{{"CLINE_BASE_URL", url}, {"CLINE_API_KEY", mockKey}, {"CLINE_MODEL", mockModel}}
		}},
		"opencode": {api: "chat", env: func(url string) []envVar {
			return []envVar{{"OPENCODE_CONFIG_CONTENT", opencodeConfig(url)}}
		}},
		// Qwen Code's "openai" auth type; its shell tool is
		// run_shell_command, not bash.
		"qwen": {api: "chat", env: func(url string) []envVar {
			return []envVar{{"OPENAI_BASE_URL", url}, {"OPENAI_API_KEY", mockKey}, {"OPENAI_MODEL", mockModel}}
		}, scenarios: map[string]string{
			"tool":           "shell-tool",
			"long-tool":      "shell-long-tool",
			"always-tool":    "shell-always-tool",
			"two-tools":      "shell-two-tools",
			"tool-then-text": "shell-tool-then-text",
		}},
	}
}

// opencodeConfig is an OpenCode configuration whose default model, and
// small model (for titles), is the mock's at url. The model declares tool
// calls, reasoning and image input, so that attachments reach it, and a
// price per million tokens, so that runs report a cost_usd.
func opencodeConfig(url string) string {
	cfg := map[string]any{
		"model":       "mock/" + mockModel,
		"small_model": "mock/" + mockModel,
		"provider": map[string]any{"mock": map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    "Mock",
			"options": map[string]any{"baseURL": url, "apiKey": mockKey},
			"models": map[string]any{mockModel: map[string]any{
				"name": "Mock Model", "tool_call": true, "reasoning": true, "attachment": true,
				"modalities": map[string]any{"input": []string{"text", "image"}, "output": []string{"text"}},
				"cost":       map[string]any{"input": 1, "output": 4, "cache_read": 0.1},
			}},
		}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // maps of strings, numbers and bools always marshal
	}
	return string(b)
}

// codexMarker opens every config.toml mockmodel writes, so that it
// rewrites its own file (the mock's port changes with every start) and
// never an operator's.
const codexMarker = "# Written by mockmodel"

// codexConfig is config.toml for a Codex whose model provider is the
// mock at url (the Responses API base URL, ending in /v1).
func codexConfig(url string) string {
	return fmt.Sprintf(`%s: Codex's model provider is the mock model server at %s.
# mockmodel rewrites this file at every start; remove it to use another provider.
model_provider = "mock"

[model_providers.mock]
name = "mock"
base_url = %q
wire_api = "responses"
env_key = %q
`, codexMarker, url, url, codexKeyEnv)
}

// writeCodexConfig writes codexConfig(url) as config.toml in the Codex
// home dir, making dir if need be. It refuses to replace a config.toml
// that it did not write.
func writeCodexConfig(dir, url string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, "config.toml")
	old, err := os.ReadFile(path)
	switch {
	case err == nil && !bytes.HasPrefix(old, []byte(codexMarker)):
		return fmt.Errorf("%s exists and mockmodel did not write it: move it away, or use another Codex home", path)
	case err != nil && !os.IsNotExist(err):
		return err
	}
	return writeFileAtomic(path, []byte(codexConfig(url)))
}
