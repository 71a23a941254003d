package copilot

import (
	"slices"
	"testing"
)

func TestModelEndpoints(t *testing.T) {
	github := []string{"api.github.com:443", "api.githubcopilot.com:443", "api.individual.githubcopilot.com:443",
		"api.business.githubcopilot.com:443", "api.enterprise.githubcopilot.com:443"}
	for _, c := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{name: "GitHub", env: map[string]string{"GH_TOKEN": "gho_x"}, want: github},
		{name: "offline BYOK on the mock", env: map[string]string{"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:39999/v1"},
			want: []string{"127.0.0.1:39999"}},
		{name: "BYOK", env: map[string]string{"COPILOT_PROVIDER_BASE_URL": "https://models.example/openai/v1"},
			want: []string{"models.example:443"}},
		{name: "a base URL that is none", env: map[string]string{"COPILOT_PROVIDER_BASE_URL": "models.example"}, want: github},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := New().ModelEndpoints(func(k string) string { return c.env[k] }, t.TempDir())
			if !slices.Equal(got, c.want) {
				t.Errorf("ModelEndpoints = %v, want %v", got, c.want)
			}
		})
	}
}
