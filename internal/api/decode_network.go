package api

import (
	"encoding/json"
	"fmt"

	"github.com/agentgate/agentgate/internal/egress"
	"github.com/agentgate/agentgate/internal/runs"
)

// networkPolicies are the values of the network field. An absent one is
// the tenant's default, which the supervisor resolves.
var networkPolicies = runs.Networks

// decodeAllowHosts reads allow_hosts: a list of hosts, each a name, an
// address or a CIDR, with or without a port (egress.ParseRule).
func decodeAllowHosts(f fields, name string, spec *runs.Spec) error {
	raw := f.get(name)
	if raw == nil {
		return nil
	}
	var hosts []string
	if raw[0] != '[' || json.Unmarshal(raw, &hosts) != nil {
		return invalidField(name, "must be an array of strings")
	}
	if len(hosts) > runs.MaxAllowHosts {
		return invalidField(name, fmt.Sprintf("must have at most %d entries", runs.MaxAllowHosts))
	}
	for i, h := range hosts {
		if len(h) > runs.MaxAllowHostBytes {
			return invalidField(name, fmt.Sprintf("entry %d is longer than %d bytes", i, runs.MaxAllowHostBytes))
		}
		if _, err := egress.ParseRule(h); err != nil {
			return invalidField(name, fmt.Sprintf("entry %d: %v", i, err))
		}
	}
	spec.AllowHosts = hosts
	return nil
}
