package codex

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestModelEndpoints(t *testing.T) {
	for _, c := range []struct {
		name, config, auth string
		want               []string
	}{
		{name: "no config", want: []string{"api.openai.com:443"}},
		{name: "the mock provider", config: "model_provider = \"mock\"\n[model_providers.mock]\nbase_url = \"http://127.0.0.1:38001/v1\"\nenv_key = \"K\"\n",
			want: []string{"127.0.0.1:38001"}},
		{name: "a profile's provider", config: "profile = \"p\"\nmodel_provider = \"a\"\n[profiles.p]\nmodel_provider = \"b\"\n" +
			"[model_providers.a]\nbase_url = \"https://a.example/v1\"\n[model_providers.b]\nbase_url = \"https://b.example:8443/v1\"\n",
			want: []string{"b.example:8443"}},
		{name: "a provider without a base URL", config: "model_provider = \"x\"\n[model_providers.x]\nenv_key = \"K\"\n", want: nil},
		{name: "ollama", config: "model_provider = \"ollama\"\n", want: []string{"localhost:11434"}},
		{name: "lmstudio", config: "model_provider = \"lmstudio\"\n", want: []string{"localhost:1234"}},
		{name: "a config that does not parse", config: "model_provider = [", want: []string{"api.openai.com:443"}},
		{name: "ChatGPT login", auth: `{"OPENAI_API_KEY": null, "tokens": {"access_token": "a", "refresh_token": "r"}}`,
			want: []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"}},
		{name: "API key login", auth: `{"OPENAI_API_KEY": "sk-x", "tokens": null}`, want: []string{"api.openai.com:443"}},
		{name: "ChatGPT login, custom provider", auth: `{"tokens": {"access_token": "a"}}`,
			config: "model_provider = \"m\"\n[model_providers.m]\nbase_url = \"http://[::1]:9/v1\"\n", want: []string{"[::1]:9"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if c.config != "" {
				writeConfig(t, home, c.config)
			}
			if c.auth != "" {
				if err := os.WriteFile(filepath.Join(home, "auth.json"), []byte(c.auth), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got := New().ModelEndpoints(func(string) string { return "" }, home)
			if !slices.Equal(got, c.want) {
				t.Errorf("ModelEndpoints = %v, want %v", got, c.want)
			}
		})
	}
}

func TestModelEndpointsWithoutHome(t *testing.T) {
	if got := New().ModelEndpoints(func(string) string { return "" }, ""); !slices.Equal(got, []string{"api.openai.com:443"}) {
		t.Errorf("ModelEndpoints = %v, want OpenAI's API alone", got)
	}
}
