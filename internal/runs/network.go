package runs

import (
	"fmt"
	"slices"
	"strings"
)

// Network is what a run's agent, and everything it starts, may reach on
// the network. The gateway enforces it, not the CLI: the agent gets a
// network namespace of its own whose only way out is an egress proxy that
// knows the run's policy (internal/egress).
type Network string

// The network policies.
const (
	// NetworkModel: the agent's model API (the host of the base URL its
	// CLI is configured with) and the run's MCP servers given by URL.
	NetworkModel Network = "model"
	// NetworkAllow: what NetworkModel allows, and the run's AllowHosts.
	NetworkAllow Network = "allow"
	// NetworkOpen: the host's network, as the gateway's own processes
	// have it.
	NetworkOpen Network = "open"
	// NetworkNone: no way out at all.
	NetworkNone Network = "none"
)

// Networks are the policies, in the order /v1/agents lists them.
var Networks = []Network{NetworkModel, NetworkAllow, NetworkOpen, NetworkNone}

// The request fields of the network policy.
const (
	FieldNetwork    = "network"
	FieldAllowHosts = "allow_hosts"
)

// MaxAllowHosts bounds a run's allow_hosts, and MaxAllowHostBytes each of
// its entries.
const (
	MaxAllowHosts     = 64
	MaxAllowHostBytes = 260
)

// WarningNetworkDenied is the code of the warning event that names a host
// and port the run's policy refused, once per host and port per run.
const WarningNetworkDenied = "network_denied"

// CodeNetworkForbidden is the API's code for a policy the operator does
// not let the run's tenant have.
const CodeNetworkForbidden = "network_forbidden"

// ParseNetwork returns the policy s names.
func ParseNetwork(s string) (Network, error) {
	n := Network(s)
	if !slices.Contains(Networks, n) {
		return "", fmt.Errorf("unknown network policy %q (want one of %s)", s, networkNames())
	}
	return n, nil
}

func networkNames() string {
	names := make([]string, len(Networks))
	for i, n := range Networks {
		names[i] = string(n)
	}
	return strings.Join(names, ", ")
}

// checkNetwork checks the policy's shape; the hosts' syntax, and whether
// the agent and the tenant may have the policy, are the supervisor's.
func checkNetwork(s Spec) error {
	if s.Network != "" {
		if _, err := ParseNetwork(string(s.Network)); err != nil {
			return Invalid(FieldNetwork, "must be one of "+networkNames())
		}
	}
	switch {
	case s.Network == NetworkAllow && len(s.AllowHosts) == 0:
		return Invalid(FieldAllowHosts, `is required with network "allow": list the hosts the agent may reach`)
	case s.Network != NetworkAllow && len(s.AllowHosts) > 0:
		return Invalid(FieldAllowHosts, `is only for network "allow"`)
	case len(s.AllowHosts) > MaxAllowHosts:
		return Invalid(FieldAllowHosts, fmt.Sprintf("must have at most %d entries", MaxAllowHosts))
	}
	for _, h := range s.AllowHosts {
		if h == "" || len(h) > MaxAllowHostBytes {
			return Invalid(FieldAllowHosts, fmt.Sprintf("entries must be 1 to %d bytes", MaxAllowHostBytes))
		}
	}
	return nil
}
