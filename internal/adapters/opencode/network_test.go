package opencode

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestModelEndpoints(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		homeConf string // ~/.config/opencode/opencode.json
		auth     string // ~/.local/share/opencode/auth.json
		want     []string
	}{
		{name: "nothing configured", want: []string{"opencode.ai:443"}},
		{name: "the mock in the content", env: map[string]string{"OPENCODE_CONFIG_CONTENT": mockConfig("http://127.0.0.1:38080/v1", "K")},
			want: []string{"127.0.0.1:38080"}},
		{name: "the mock in the home", homeConf: mockConfigWith("http://127.0.0.1:38081/v1", "K", imageInput),
			want: []string{"127.0.0.1:38081"}},
		{name: "keys of built-in providers", env: map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"},
			want: []string{"api.anthropic.com:443", "api.openai.com:443"}},
		{name: "a default model of a built-in provider", env: map[string]string{"OPENCODE_CONFIG_CONTENT": `{"model": "openrouter/x"}`},
			want: []string{"openrouter.ai:443"}},
		{name: "a provider's api, and one without a URL", env: map[string]string{"OPENCODE_CONFIG_CONTENT": `{
			// a comment
			"provider": {"corp": {"api": "https://llm.corp.example:8443/v1"}, "groq": {"options": {"apiKey": "x"}},},
		}`}, want: []string{"llm.corp.example:8443", "api.groq.com:443"}},
		{name: "an unknown provider without a URL", env: map[string]string{"OPENCODE_CONFIG_CONTENT": `{"provider": {"mystery": {}}}`},
			want: []string{"opencode.ai:443"}},
		{name: "a login", auth: `{"github-copilot": {"type": "oauth"}, "anthropic": {"type": "api"}}`,
			want: []string{"api.anthropic.com:443", "api.githubcopilot.com:443", "api.github.com:443"}},
		{name: "home, file and content merged", homeConf: `{"provider": {"a": {"options": {"baseURL": "http://a.example"}}}}`,
			env:  map[string]string{"OPENCODE_CONFIG": "FILE", "OPENCODE_CONFIG_CONTENT": `{"model": "anthropic/claude"}`},
			want: []string{"a.example:80", "b.example:443", "api.anthropic.com:443"}},
		{name: "a configuration that does not parse", env: map[string]string{"OPENCODE_CONFIG_CONTENT": `{"provider": `, "OPENAI_API_KEY": "k"},
			want: []string{"api.openai.com:443"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			write := func(p, content string) {
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if c.homeConf != "" {
				write(filepath.Join(configDir(home), "opencode.json"), c.homeConf)
			}
			if c.auth != "" {
				write(authFile(home), c.auth)
			}
			env := map[string]string{}
			for k, v := range c.env {
				if v == "FILE" {
					v = filepath.Join(t.TempDir(), "file.json")
					write(v, `{"provider": {"b": {"options": {"baseURL": "https://b.example/v1"}}}}`)
				}
				env[k] = v
			}
			got := New().ModelEndpoints(func(k string) string { return env[k] }, home)
			if !slices.Equal(got, c.want) {
				t.Errorf("ModelEndpoints = %v, want %v", got, c.want)
			}
		})
	}
}
