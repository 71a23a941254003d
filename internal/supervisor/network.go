package supervisor

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/egress"
	"github.com/agentgate/agentgate/internal/netns"
	"github.com/agentgate/agentgate/internal/runs"
)

// NetworkConfig is how the supervisor gives runs their network policy
// (runs.Network) and enforces it.
type NetworkConfig struct {
	// Default is the policy of a run that names none, when its tenant
	// has no default of its own. Empty: runs.NetworkOpen.
	Default runs.Network
	// Tenants are tenants' own defaults, by tenant.
	Tenants map[string]runs.Network
	// ForbidOpen lists the tenants that may not have runs.NetworkOpen;
	// "*" is every tenant.
	ForbidOpen []string
	// Egress enforces every policy but open. Nil: this gateway honours
	// only open (no sandbox, or no network namespaces on this machine).
	Egress *Egress
}

// Egress is what enforces a run's network policy: the proxy that is the
// only way out of the run's network namespace, and the shim that hands
// the proxy its listener from inside it (netns.RunShim).
type Egress struct {
	Proxy *egress.Proxy
	// Shim is a binary that runs netns.RunShim when given netns.ShimArg:
	// the reaper's.
	Shim string
}

// forbidsOpen reports whether tenant may not have runs.NetworkOpen.
func (c NetworkConfig) forbidsOpen(tenant string) bool {
	return slices.Contains(c.ForbidOpen, "*") || slices.Contains(c.ForbidOpen, tenant)
}

// defaultFor is the policy of tenant's runs that name none.
func (c NetworkConfig) defaultFor(tenant string) runs.Network {
	if n, ok := c.Tenants[tenant]; ok {
		return n
	}
	if c.Default == "" {
		return runs.NetworkOpen
	}
	return c.Default
}

// networks are the policies the gateway can honour for a's runs: open
// always; model and allow where it enforces policies and a's adapter says
// where its CLI finds its model; none where, besides, the CLI needs no
// network for it.
func (s *Supervisor) networks(a *Agent) []runs.Network {
	out := []runs.Network{runs.NetworkOpen}
	needs, ok := a.Adapter.(runs.NetworkNeeds)
	if s.cfg.Network.Egress == nil || !ok {
		return out
	}
	out = append(out, runs.NetworkModel, runs.NetworkAllow)
	if len(needs.ModelEndpoints(s.cfg.Getenv, a.Home)) == 0 {
		out = append(out, runs.NetworkNone)
	}
	return out
}

// resolveNetwork gives spec its tenant's default policy when it names
// none, and checks that the tenant may have it, that the agent can honour
// it and that its hosts parse.
func (s *Supervisor) resolveNetwork(spec *runs.Spec, a *Agent) error {
	cfg := s.cfg.Network
	if spec.Network == "" {
		spec.Network = cfg.defaultFor(spec.Tenant)
	}
	if spec.Network == runs.NetworkOpen && cfg.forbidsOpen(spec.Tenant) {
		return &runs.FieldError{Field: runs.FieldNetwork, Kind: runs.ErrInvalid, Code: runs.CodeNetworkForbidden,
			Reason: `"open" is not allowed for this tenant: ask for "model", or "allow" with allow_hosts`}
	}
	if !slices.Contains(s.networks(a), spec.Network) {
		return runs.Unsupported(spec.Agent, runs.FieldNetwork, s.networkRefusal(spec.Network, a))
	}
	if _, err := egress.ParseRules(spec.AllowHosts); err != nil {
		return runs.Invalid(runs.FieldAllowHosts, err.Error())
	}
	return nil
}

// enforces reports whether this replica can run a's runs under policy n,
// as it was resolved at submission (possibly on another replica): a
// replica that cannot leaves such a run to one that can.
func (s *Supervisor) enforces(a *Agent, n runs.Network) bool {
	return n == "" || slices.Contains(s.networks(a), n)
}

// networkRefusal says why a's runs cannot have policy n.
func (s *Supervisor) networkRefusal(n runs.Network, a *Agent) string {
	if s.cfg.Network.Egress == nil {
		return fmt.Sprintf("this gateway cannot confine an agent's network (it needs the bubblewrap sandbox with network namespaces); only \"open\" is available, not %q", n)
	}
	if _, ok := a.Adapter.(runs.NetworkNeeds); !ok {
		return fmt.Sprintf("the gateway does not know where this agent's CLI reaches its model, so it can only run with network \"open\", not %q", n)
	}
	return `"none" is only for an agent whose model runs on this host and is reached without the network; this agent's CLI calls its model API over the network: use "model"`
}

// egressRun is one agent process's way out: the handoff through which
// the shim inside the run's network namespace gives the proxy its
// listener, and the proxy serving it until the process ends.
type egressRun struct {
	handoff *netns.Handoff
	cancel  context.CancelFunc
	done    chan struct{}
}

// startEgress prepares the way out of the run's network namespace for an
// agent process whose environment is env and temporary directory tmp, and
// returns what the sandbox needs to put the process in the namespace and
// the environment that points it at the proxy. Under open it returns nil
// and env unchanged.
func (x *execution) startEgress(env []string, tmp string) (*NetConfinement, []string, error) {
	s, t := x.s, x.t
	n := t.inv.Spec.Network
	eg := s.cfg.Network.Egress
	if n == "" || n == runs.NetworkOpen {
		return nil, env, nil
	}
	if eg == nil {
		// The run was admitted where its policy could be enforced;
		// here it cannot: running it on the host's network would
		// quietly give it what its policy refuses.
		return nil, nil, fmt.Errorf("this replica cannot enforce the run's network %q: %s", n, s.networkRefusal(n, t.agent))
	}
	if n == runs.NetworkNone {
		return &NetConfinement{}, env, nil
	}
	pol, err := x.egressPolicy(env)
	if err != nil {
		return nil, nil, err
	}
	h, err := netns.NewHandoff(tmp)
	if err != nil {
		return nil, nil, fmt.Errorf("make the network handoff: %w", err)
	}
	ctx, cancel := context.WithCancel(x.ctx)
	x.egress = &egressRun{handoff: h, cancel: cancel, done: make(chan struct{})}
	go x.serveEgress(ctx, eg.Proxy, pol)
	env = withProxy(env, netns.ProxyURL(), t.agent.Adapter.(runs.NetworkNeeds).ProxyEnv(netns.ProxyURL()))
	return &NetConfinement{Shim: eg.Shim, Socket: h.Path()}, env, nil
}

// serveEgress waits for the shim's listener, then serves the run's policy
// on it until ctx ends.
func (x *execution) serveEgress(ctx context.Context, p *egress.Proxy, pol egress.Policy) {
	defer close(x.egress.done)
	defer x.egress.handoff.Close()
	ln, err := x.egress.handoff.Receive(ctx)
	if err != nil {
		if ctx.Err() == nil {
			x.log.Error("receive the run's network listener", zap.Error(err))
		}
		return
	}
	if err := p.Serve(ctx, ln, pol, x.networkDenied); err != nil && ctx.Err() == nil {
		x.log.Error("serve the run's egress proxy", zap.Error(err))
	}
}

// stopEgress ends the proxy of the process that exited, and waits for it.
func (x *execution) stopEgress() {
	if x.egress == nil {
		return
	}
	x.egress.cancel()
	select {
	case <-x.egress.done:
	case <-time.After(egressStopWait):
		// The run's record must not wait on its proxy: a run that never
		// concludes is worse than a goroutine left to end on its own.
		x.log.Error("the run's egress proxy did not stop", zap.Duration("waited", egressStopWait))
	}
	x.egress = nil
}

// egressStopWait bounds how long a run's end waits for its proxy, which
// closes every connection it holds once its context ends.
const egressStopWait = 30 * time.Second

// networkDenied records a connection the run's policy refused: the run's
// count and a metric, and, the first time for its host and port, a
// warning event. The message ends with the host:port, which clients may
// read off it.
func (x *execution) networkDenied(d egress.Denial) {
	t := x.t
	t.netDenied.Add(1)
	x.s.obs.NetworkDenied(t.run.Agent, t.run.Tenant)
	if !d.First {
		return
	}
	addr := net.JoinHostPort(d.Host, fmt.Sprint(d.Port))
	x.s.emit(t, runs.NewEvent(runs.EventWarning, runs.WarningData{Code: runs.WarningNetworkDenied,
		Message: fmt.Sprintf("the run's network policy %q refused a connection (%s) to %s", t.inv.Spec.Network, d.Reason, addr)}))
}

// egressPolicy is the proxy's policy for the run: trusted, the model
// endpoints its CLI is configured with and its MCP servers' URLs, which
// the operator's allow-list (Config.MCPURLs) admitted; its own, its
// allow_hosts.
func (x *execution) egressPolicy(env []string) (egress.Policy, error) {
	t := x.t
	spec := t.inv.Spec
	needs, ok := t.agent.Adapter.(runs.NetworkNeeds)
	if !ok {
		return egress.Policy{}, fmt.Errorf("agent %s cannot run with network %q", t.run.Agent, spec.Network)
	}
	pol := egress.Policy{Mode: egress.Mode(spec.Network)}
	trusted := needs.ModelEndpoints(envLookup(env), t.inv.Home)
	for _, m := range spec.MCPServers {
		if hp := urlHostPort(m.URL); hp != "" {
			trusted = append(trusted, hp)
		}
	}
	// The operator's list is not bounded as a run's is.
	for _, hp := range trusted {
		r, err := egress.ParseRule(hp)
		if err != nil {
			return egress.Policy{}, fmt.Errorf("the agent's model endpoint or MCP server %q: %w", hp, err)
		}
		pol.Trusted = append(pol.Trusted, r)
	}
	var err error
	if pol.Allowed, err = egress.ParseRules(spec.AllowHosts); err != nil {
		return egress.Policy{}, fmt.Errorf("the run's hosts: %w", err)
	}
	return pol, nil
}

// urlHostPort is the host:port an http(s) URL reaches, "" for anything
// else.
func urlHostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "https":
		port = "443"
	case u.Scheme == "http":
		port = "80"
	default:
		return ""
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// proxyVars are the variables by which programs find a proxy, in both
// the cases that tools read.
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}

// withProxy points env at the proxy at proxyURL: the usual variables, the
// CLI's own (extra) and no exceptions (NO_PROXY), which would send a
// request past the proxy into a namespace where it goes nowhere. Any
// proxy the operator set for the gateway is replaced: the egress proxy
// dials out itself.
func withProxy(env []string, proxyURL string, extra []string) []string {
	out := make([]string, 0, len(env)+len(proxyVars)+len(extra))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(proxyVars, name) || strings.EqualFold(name, "NO_PROXY") {
			continue
		}
		out = append(out, kv)
	}
	for _, v := range proxyVars {
		out = append(out, v+"="+proxyURL)
	}
	return append(out, extra...)
}

// envLookup reads a variable of env, the last setting winning as it does
// for a process.
func envLookup(env []string) func(string) string {
	return func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], name+"="); ok {
				return v
			}
		}
		return ""
	}
}
