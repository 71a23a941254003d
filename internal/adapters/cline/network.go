package cline

import (
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

var _ runs.NetworkNeeds = (*Adapter)(nil)

// clineEndpoints are the hosts of Cline's own provider ("cline"), which
// it uses when providers.json names no other.
var clineEndpoints = []string{"api.cline.bot:443"}

// ModelEndpoints implements runs.NetworkNeeds: the base URL of the
// active provider in the home's providers.json, or CLINE_BASE_URL, which
// PrepareHome writes there; Cline's own API when neither gives one. The
// feature-flag lookups of data.cline.bot and the telemetry of
// otel.cline.bot are not the model's: under network "model" they fail,
// which Cline ignores (doc.go).
func (*Adapter) ModelEndpoints(getenv func(string) string, home string) []string {
	var e adapterkit.Endpoints
	if u := getenv(BaseURLEnv); u != "" {
		e.AddURL(u)
	}
	if p, ok := readProviders(runs.HostFiles{}, home); ok && p.BaseURL != "" {
		e.AddURL(p.BaseURL)
	}
	if len(e) == 0 {
		e.Add(clineEndpoints...)
	}
	return e
}

// ProxyEnv implements runs.NetworkNeeds: Cline sends its model requests
// through HTTP_PROXY and HTTPS_PROXY as they are, even to 127.0.0.1.
func (*Adapter) ProxyEnv(string) []string { return nil }
