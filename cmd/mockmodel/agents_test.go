package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// serve runs mockmodel with args until the test ends and returns the URL
// it printed.
func serve(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run(%q) = %v", args, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("run(%q) did not return after cancel", args)
		}
	})
	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("run(%q) printed no URL: %v", args, err)
	}
	// Drain the rest, so that a later write cannot block run.
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return strings.TrimSpace(url)
}

// postJSON posts body to url and returns the answer's status and body.
func postJSON(t *testing.T, url, body string) (int, string) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+mockKey)
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sourced runs sh, which sources the env file path and prints each of
// names' values NUL-terminated, and returns them by name: what a shell
// that sources the file gets.
func sourced(t *testing.T, path string, names ...string) map[string]string {
	t.Helper()
	script := `. "$1"; shift; for n; do eval "printf '%s\0' \"\${$n-<unset>}\""; done`
	out, err := exec.Command("sh", append([]string{"-c", script, "sh", path}, names...)...).Output()
	if err != nil {
		t.Fatalf("sourcing %s: %v", path, err)
	}
	vals := strings.Split(string(out), "\x00")
	got := map[string]string{}
	for i, n := range names {
		if i < len(vals) {
			got[n] = vals[i]
		}
	}
	return got
}

// TestNewAPIs serves the Gemini and Chat Completions mocks with -api and
// checks each answers its own request with the scenario's text.
func TestNewAPIs(t *testing.T) {
	gemini := serve(t, "-api", "googleai", "-scenario", "text")
	status, body := postJSON(t, gemini+"/v1beta/models/m:generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if status != http.StatusOK || !strings.Contains(body, "Hello from the mock.") {
		t.Errorf("googleai generateContent = %d %s", status, body)
	}

	chatURL := serve(t, "-api", "chat", "-scenario", "tool", "-command", "touch x")
	if !strings.HasSuffix(chatURL, "/v1") {
		t.Errorf("chat URL %q does not end in /v1", chatURL)
	}
	status, body = postJSON(t, chatURL+"/chat/completions",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"bash"}}]}`)
	if status != http.StatusOK || !strings.Contains(body, `"name":"bash"`) || !strings.Contains(body, `touch x`) {
		t.Errorf("chat completions = %d %s", status, body)
	}
}

// TestResponsesExtras checks the scenarios mockmodel adds to the
// Responses API: Copilot's bash forms and Codex's interactive ones.
func TestResponsesExtras(t *testing.T) {
	for _, c := range []struct{ scenario, want string }{
		{"bash-always-tool", `"name":"bash"`},
		{"bash-two-tools", `"name":"bash"`},
		{"bash-tool-then-text", `"name":"bash"`},
		{"two-tools", `"name":"exec_command"`},
		{"tool-then-text", `"name":"exec_command"`},
		{"turns", `Turn answered.`},
	} {
		url := serve(t, "-api", "openai", "-scenario", c.scenario, "-command", "touch y")
		status, body := postJSON(t, url+"/responses", `{"model":"m","input":[{"type":"message","role":"user","content":"hi"}]}`)
		if status != http.StatusOK || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %s", c.scenario, status, body, c.want)
		}
		if c.want != "Turn answered." && !strings.Contains(body, "touch y") {
			t.Errorf("%s ignored -command: %s", c.scenario, body)
		}
	}
}

// TestAgentEnv runs -agent for each agent and checks that the env file,
// sourced by a shell, points the agent's CLI at the URL printed, and that
// the URL serves the agent's API.
func TestAgentEnv(t *testing.T) {
	cases := []struct {
		agent string
		// want are the variables the file must set; "URL" stands for the
		// printed URL.
		want map[string]string
		// request is a path under the URL and a body of the agent's API.
		path, body string
	}{
		{"claude", map[string]string{"ANTHROPIC_BASE_URL": "URL", "ANTHROPIC_API_KEY": mockKey},
			"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"codex", map[string]string{codexKeyEnv: mockKey},
			"/responses", `{"model":"m","input":[{"type":"message","role":"user","content":"hi"}]}`},
		{"copilot", map[string]string{"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": "URL",
			"COPILOT_PROVIDER_API_KEY": mockKey, "COPILOT_PROVIDER_WIRE_API": "responses", "COPILOT_MODEL": mockModel},
			"/responses", `{"model":"m","input":[{"type":"message","role":"user","content":"hi"}]}`},
		{"gemini", map[string]string{"GOOGLE_GEMINI_BASE_URL": "URL", "GEMINI_API_KEY": mockKey},
			"/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"cline", map[string]string{"CLINE_BASE_URL": "URL", "CLINE_API_KEY": mockKey, "CLINE_MODEL": mockModel},
			"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"opencode", map[string]string{},
			"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"qwen", map[string]string{"OPENAI_BASE_URL": "URL", "OPENAI_API_KEY": mockKey, "OPENAI_MODEL": mockModel},
			"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			dir := t.TempDir()
			envFile := filepath.Join(dir, "mock.env")
			args := []string{"-agent", c.agent, "-env-file", envFile}
			home := filepath.Join(dir, "agents", "codex")
			if c.agent == "codex" {
				args = append(args, "-codex-home", home)
			}
			url := serve(t, args...)
			names := []string{"OPENCODE_CONFIG_CONTENT"}
			for n := range c.want {
				names = append(names, n)
			}
			got := sourced(t, envFile, names...)
			for n, v := range c.want {
				if v == "URL" {
					v = url
				}
				if got[n] != v {
					t.Errorf("%s = %q, want %q", n, got[n], v)
				}
			}
			status, body := postJSON(t, url+c.path, c.body)
			if status != http.StatusOK || !strings.Contains(body, "Hello from the mock.") {
				t.Errorf("POST %s = %d %s", c.path, status, body)
			}
			switch c.agent {
			case "opencode":
				checkOpencodeConfig(t, got["OPENCODE_CONFIG_CONTENT"], url)
			case "codex":
				checkCodexConfig(t, filepath.Join(home, "config.toml"), url)
			default:
				if got["OPENCODE_CONFIG_CONTENT"] != "<unset>" {
					t.Errorf("OPENCODE_CONFIG_CONTENT set for %s", c.agent)
				}
			}
		})
	}
}

// checkOpencodeConfig checks that cfg makes the mock at url OpenCode's
// model, with the key given literally.
func checkOpencodeConfig(t *testing.T, cfg, url string) {
	t.Helper()
	var c struct {
		Model      string `json:"model"`
		SmallModel string `json:"small_model"`
		Provider   map[string]struct {
			NPM     string `json:"npm"`
			Options struct {
				BaseURL string `json:"baseURL"`
				APIKey  string `json:"apiKey"`
			} `json:"options"`
			Models map[string]json.RawMessage `json:"models"`
		} `json:"provider"`
	}
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		t.Fatalf("OPENCODE_CONFIG_CONTENT %q: %v", cfg, err)
	}
	p := c.Provider["mock"]
	if c.Model != "mock/"+mockModel || c.SmallModel != c.Model || p.NPM != "@ai-sdk/openai-compatible" ||
		p.Options.BaseURL != url || p.Options.APIKey != mockKey || p.Models[mockModel] == nil {
		t.Errorf("OPENCODE_CONFIG_CONTENT = %s", cfg)
	}
}

// checkCodexConfig checks that the config.toml at path makes the mock at
// url Codex's model provider, reading its key from the env file's
// variable.
func checkCodexConfig(t *testing.T, path, url string) {
	t.Helper()
	var c struct {
		ModelProvider  string `toml:"model_provider"`
		ModelProviders map[string]struct {
			BaseURL string `toml:"base_url"`
			WireAPI string `toml:"wire_api"`
			EnvKey  string `toml:"env_key"`
		} `toml:"model_providers"`
	}
	if _, err := toml.DecodeFile(path, &c); err != nil {
		t.Fatal(err)
	}
	p := c.ModelProviders[c.ModelProvider]
	if c.ModelProvider != "mock" || p.BaseURL != url || p.WireAPI != "responses" || p.EnvKey != codexKeyEnv {
		b, _ := os.ReadFile(path)
		t.Errorf("config.toml:\n%s", b)
	}
}

// TestCopilotScenarios checks that -agent copilot gives the tool
// scenarios Copilot's bash tool, not Codex's exec_command.
func TestCopilotScenarios(t *testing.T) {
	for _, name := range []string{"tool", "long-tool", "always-tool", "two-tools", "tool-then-text"} {
		url := serve(t, "-agent", "copilot", "-scenario", name, "-command", "touch z")
		_, body := postJSON(t, url+"/responses", `{"model":"m","input":[{"type":"message","role":"user","content":"hi"}]}`)
		if !strings.Contains(body, `"name":"bash"`) || strings.Contains(body, "exec_command") || !strings.Contains(body, "touch z") {
			t.Errorf("copilot %s answered %s", name, body)
		}
	}
}

// TestCodexHomeKeepsOperatorConfig checks that mockmodel rewrites its
// own config.toml and refuses to replace anyone else's.
func TestCodexHomeKeepsOperatorConfig(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "config.toml")
	if err := writeCodexConfig(home, "http://127.0.0.1:1/v1"); err != nil {
		t.Fatal(err)
	}
	if err := writeCodexConfig(home, "http://127.0.0.1:2/v1"); err != nil {
		t.Fatalf("rewriting its own config.toml: %v", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte("127.0.0.1:2/v1")) || bytes.Contains(b, []byte("127.0.0.1:1/v1")) {
		t.Errorf("config.toml after the rewrite:\n%s", b)
	}
	operator := []byte("model_provider = \"openai\"\n")
	if err := os.WriteFile(path, operator, 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"-agent", "codex", "-codex-home", home}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "did not write it") {
		t.Errorf("run over an operator's config.toml = %v", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, operator) {
		t.Errorf("the operator's config.toml became:\n%s", b)
	}
}
