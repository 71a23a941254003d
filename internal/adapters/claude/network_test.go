package claude

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
		settings string // ~/.claude/settings.json
		login    bool   // ~/.claude/.credentials.json
		want     []string
	}{
		{name: "defaults", want: []string{"api.anthropic.com:443"}},
		{name: "mock base URL", env: map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:41234"},
			want: []string{"127.0.0.1:41234"}},
		{name: "base URL with path", env: map[string]string{"ANTHROPIC_BASE_URL": "https://llm.corp.example/anthropic/"},
			want: []string{"llm.corp.example:443"}},
		{name: "base URL in the settings", settings: `{"env": {"ANTHROPIC_BASE_URL": "https://gw.example:8443", "N": 1}}`,
			want: []string{"gw.example:8443"}},
		{name: "both base URLs", env: map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
			settings: `{"env": {"ANTHROPIC_BASE_URL": "https://gw.example"}}`, want: []string{"127.0.0.1:9", "gw.example:443"}},
		{name: "settings that do not parse", settings: `{"env": `, want: []string{"api.anthropic.com:443"}},
		{name: "a base URL that is none", env: map[string]string{"ANTHROPIC_BASE_URL": "api.example.com"},
			want: []string{"api.anthropic.com:443"}},
		{name: "logged in", login: true, want: []string{"api.anthropic.com:443", "platform.claude.com:443"}},
		{name: "logged in with a base URL", login: true, env: map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
			want: []string{"127.0.0.1:9", "platform.claude.com:443"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if c.settings != "" {
				writeHomeFile(t, home, ".claude/settings.json", c.settings)
			}
			if c.login {
				writeHomeFile(t, home, ".claude/.credentials.json", `{"claudeAiOauth": {}}`)
			}
			got := New().ModelEndpoints(func(k string) string { return c.env[k] }, home)
			if !slices.Equal(got, c.want) {
				t.Errorf("ModelEndpoints = %v, want %v", got, c.want)
			}
		})
	}
}

func TestModelEndpointsWithoutHome(t *testing.T) {
	if got := New().ModelEndpoints(func(string) string { return "" }, ""); !slices.Equal(got, []string{"api.anthropic.com:443"}) {
		t.Errorf("ModelEndpoints = %v, want the API's host alone", got)
	}
}

func writeHomeFile(t *testing.T, home, name, content string) {
	t.Helper()
	p := filepath.Join(home, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
