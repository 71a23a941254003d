package acpagent

import (
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/agentsfile"
	"github.com/agentgate/agentgate/internal/runs"
)

// Networked is the adapter of an entry that names its model_endpoints:
// the gateway then knows where the CLI calls its model, and can confine
// its runs' network to them (network "model" and "allow"). An entry
// without them stays an Adapter, whose runs have network "open" only:
// the gateway does not guess where an unknown CLI's model is.
type Networked struct{ *Adapter }

var _ runs.NetworkNeeds = Networked{}

// ForEntry returns the adapter of entry: Networked when it names its
// model endpoints, else the plain Adapter.
func ForEntry(entry agentsfile.Agent, getenv func(string) string) runs.Adapter {
	a := New(entry, getenv)
	if len(entry.ModelEndpoints) > 0 {
		return Networked{a}
	}
	return a
}

// ModelEndpoints implements runs.NetworkNeeds: the entry's fixed
// endpoints, and the host and port of the URL each named variable holds
// for the CLI (the entry's env, else the gateway's, for pass_env). A
// variable that is unset or holds no URL adds nothing: the run then
// reaches nothing by it, as its CLI would find no endpoint there either.
func (n Networked) ModelEndpoints(getenv func(string) string, _ string) []string {
	var e adapterkit.Endpoints
	for _, me := range n.entry.ModelEndpoints {
		if me.HostPort != "" {
			e.Add(me.HostPort)
			continue
		}
		raw, fixed := n.entry.Env[me.URLVar]
		if !fixed && getenv != nil {
			raw = getenv(me.URLVar)
		}
		if hp, problem := agentsfile.EndpointOf(raw); problem == "" {
			e.Add(hp)
		}
	}
	return e
}

// ProxyEnv implements runs.NetworkNeeds: a configured CLI gets only
// HTTP_PROXY and HTTPS_PROXY, as every CLI does; one that ignores them
// cannot reach its model under "model", which the docs say.
func (Networked) ProxyEnv(string) []string { return nil }
