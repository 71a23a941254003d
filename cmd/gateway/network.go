package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/egress"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/sandbox"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// networkProber is the sandbox's check that it can give a run a network
// namespace of its own.
type networkProber interface {
	ProbeNetwork(ctx context.Context) error
}

// openEgress sets up runs' network policies: the defaults, and, where the
// sandbox can make network namespaces, the egress proxy that enforces
// every policy but open. A policy set explicitly that this machine cannot
// enforce stops the start; the unset default falls back to open, with a
// warning, on a gateway without its sandbox.
func (g *instance) openEgress(ctx context.Context) error {
	nc, err := g.networkDefaults()
	if err != nil {
		return err
	}
	eg, why := g.egress(ctx)
	nc.Egress = eg
	if eg == nil {
		if g.cfg.Network != "" && runs.Network(g.cfg.Network) != runs.NetworkOpen {
			return fmt.Errorf("AGENTGATE_NETWORK=%s cannot be enforced here: %s; set AGENTGATE_NETWORK=open to run agents on the host's network", g.cfg.Network, why)
		}
		for tenant, n := range nc.Tenants {
			if n != runs.NetworkOpen {
				return fmt.Errorf("AGENTGATE_TENANT_NETWORK gives tenant %s network %s, which cannot be enforced here: %s", tenant, n, why)
			}
		}
		g.log.Warn("agents reach the network as the gateway does: only network \"open\" is available", zap.String("why", why))
		nc.Default = runs.NetworkOpen
	}
	g.network = nc
	return nil
}

// networkDefaults reads the policy settings.
func (g *instance) networkDefaults() (supervisor.NetworkConfig, error) {
	nc := supervisor.NetworkConfig{Default: runs.NetworkModel, ForbidOpen: g.cfg.NetworkForbidOpen}
	if g.cfg.Network != "" {
		n, err := runs.ParseNetwork(g.cfg.Network)
		if err != nil {
			return nc, fmt.Errorf("AGENTGATE_NETWORK: %w", err)
		}
		if n == runs.NetworkAllow {
			return nc, errors.New(`AGENTGATE_NETWORK: "allow" needs a run's allow_hosts, so it cannot be a default: use model, open or none`)
		}
		nc.Default = n
	}
	if len(g.cfg.TenantNetwork) > 0 {
		nc.Tenants = map[string]runs.Network{}
	}
	for tenant, v := range g.cfg.TenantNetwork {
		n, err := runs.ParseNetwork(v)
		if err != nil || n == runs.NetworkAllow {
			return nc, fmt.Errorf("AGENTGATE_TENANT_NETWORK: tenant %s: want model, open or none, not %q", tenant, v)
		}
		nc.Tenants[tenant] = n
	}
	return nc, nil
}

// egress is the proxy and shim that enforce runs' policies, or nil and
// why this gateway cannot.
func (g *instance) egress(ctx context.Context) (*supervisor.Egress, string) {
	prober, ok := g.sandbox.(networkProber)
	if !ok {
		return nil, "agents run without the sandbox (AGENTGATE_SANDBOX=cli-only)"
	}
	if err := prober.ProbeNetwork(ctx); err != nil {
		return nil, err.Error()
	}
	guard, err := egress.NewGuard(ctx, net.DefaultResolver, g.ownPorts(), g.storeEndpoints())
	if err != nil {
		return nil, "the egress guard: " + err.Error()
	}
	proxy := &egress.Proxy{Checker: &egress.Checker{Guard: guard, Resolver: net.DefaultResolver}, Log: g.log.Named("egress")}
	return &supervisor.Egress{Proxy: proxy, Shim: proctree.ReaperBeside(g.self)}, ""
}

// ownPorts are the gateway's listening ports: no run may reach them on any
// of this host's addresses.
func (g *instance) ownPorts() []int {
	var ports []int
	if a, ok := g.ln.Addr().(*net.TCPAddr); ok {
		ports = append(ports, a.Port)
	}
	return ports
}

// storeEndpoints are the NATS servers' host:ports, out of every run's
// reach.
func (g *instance) storeEndpoints() []string {
	var out []string
	for _, u := range strings.Split(g.cfg.NATSURL, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		if i := strings.Index(u, "://"); i >= 0 {
			u = u[i+3:]
		}
		if i := strings.LastIndexByte(u, '@'); i >= 0 {
			u = u[i+1:]
		}
		u = strings.TrimSuffix(u, "/")
		if _, _, err := net.SplitHostPort(u); err != nil {
			u = net.JoinHostPort(strings.Trim(u, "[]"), strconv.Itoa(4222))
		}
		out = append(out, u)
	}
	return out
}

var _ networkProber = (*sandbox.Bubblewrap)(nil)
