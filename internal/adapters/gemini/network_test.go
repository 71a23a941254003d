package gemini

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestModelEndpoints(t *testing.T) {
	for _, c := range []struct {
		name, settings, baseURL string
		prepared                bool // the settings PrepareHome writes
		want                    []string
	}{
		{name: "no settings", want: []string{"generativelanguage.googleapis.com:443"}},
		{name: "prepared home, mock base URL", prepared: true, baseURL: "http://127.0.0.1:40111",
			want: []string{"127.0.0.1:40111"}},
		{name: "prepared home", prepared: true, want: []string{"generativelanguage.googleapis.com:443"}},
		{name: "API key", settings: `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`, baseURL: "https://gem.example:8443/x",
			want: []string{"gem.example:8443"}},
		{name: "Vertex AI", settings: `{"security": {"auth": {"selectedType": "vertex-ai"}}}`, baseURL: "http://127.0.0.1:1",
			want: []string{"aiplatform.googleapis.com:443"}},
		{name: "login with Google", settings: `{"security": {"auth": {"selectedType": "oauth-personal"}}}`,
			want: []string{"cloudcode-pa.googleapis.com:443", "oauth2.googleapis.com:443", "www.googleapis.com:443"}},
		{name: "settings that do not parse", settings: `{"security": `, baseURL: "http://127.0.0.1:2",
			want: []string{"127.0.0.1:2"}},
		{name: "a base URL that is none", baseURL: "127.0.0.1:3", want: []string{"generativelanguage.googleapis.com:443"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			switch {
			case c.prepared:
				if err := New().PrepareHome(home); err != nil {
					t.Fatal(err)
				}
			case c.settings != "":
				if err := os.MkdirAll(filepath.Dir(settingsPath(home)), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(settingsPath(home), []byte(c.settings), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			env := map[string]string{"GOOGLE_GEMINI_BASE_URL": c.baseURL}
			got := New().ModelEndpoints(func(k string) string { return env[k] }, home)
			if !slices.Equal(got, c.want) {
				t.Errorf("ModelEndpoints = %v, want %v", got, c.want)
			}
		})
	}
}
