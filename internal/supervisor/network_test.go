package supervisor

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/egress"
	"github.com/agentgate/agentgate/internal/runs"
)

// netAdapter is the fake agent, saying where its model is.
type netAdapter struct {
	fakeAdapter
	endpoints []string
}

func (a netAdapter) ModelEndpoints(getenv func(string) string, _ string) []string {
	if u := getenv("FAKE_BASE_URL"); u != "" {
		return []string{urlHostPort(u)}
	}
	return a.endpoints
}

func (netAdapter) ProxyEnv(proxyURL string) []string { return []string{"FAKE_PROXY=" + proxyURL} }

// netSupervisor is a supervisor over a with cfg, not started: resolving
// a policy needs no store.
func netSupervisor(cfg NetworkConfig, a runs.Adapter) (*Supervisor, *Agent) {
	ag := &Agent{Adapter: a, Home: "/nonexistent"}
	return &Supervisor{cfg: Config{Network: cfg, Getenv: func(string) string { return "" }}}, ag
}

var someEgress = &Egress{Proxy: &egress.Proxy{}, Shim: "/bin/true"}

func TestResolveNetworkGivesTheTenantsDefault(t *testing.T) {
	cfg := NetworkConfig{Default: runs.NetworkModel, Tenants: map[string]runs.Network{"acme": runs.NetworkOpen}, Egress: someEgress}
	s, a := netSupervisor(cfg, netAdapter{endpoints: []string{"api.example.com:443"}})
	for tenant, want := range map[string]runs.Network{"": runs.NetworkModel, "beta": runs.NetworkModel, "acme": runs.NetworkOpen} {
		spec := runs.Spec{Agent: "fake", Tenant: tenant}
		if err := s.resolveNetwork(&spec, a); err != nil || spec.Network != want {
			t.Errorf("tenant %q: network %q, %v; want %q", tenant, spec.Network, err, want)
		}
	}
	spec := runs.Spec{Agent: "fake", Network: runs.NetworkOpen}
	if err := s.resolveNetwork(&spec, a); err != nil || spec.Network != runs.NetworkOpen {
		t.Errorf("an explicit policy: %q, %v", spec.Network, err)
	}
}

func TestResolveNetworkRefusals(t *testing.T) {
	model := []string{"api.example.com:443"}
	for _, tc := range []struct {
		name string
		cfg  NetworkConfig
		a    runs.Adapter
		spec runs.Spec
		code string // FieldError.Code, or "" for the kind alone
		kind error
		say  string
	}{
		{"open forbidden to the tenant", NetworkConfig{ForbidOpen: []string{"acme"}, Egress: someEgress}, netAdapter{endpoints: model},
			runs.Spec{Tenant: "acme", Network: runs.NetworkOpen}, runs.CodeNetworkForbidden, runs.ErrInvalid, "not allowed for this tenant"},
		{"open forbidden to all", NetworkConfig{ForbidOpen: []string{"*"}, Default: runs.NetworkOpen, Egress: someEgress}, netAdapter{endpoints: model},
			runs.Spec{Tenant: "beta"}, runs.CodeNetworkForbidden, runs.ErrInvalid, "not allowed"},
		{"no egress", NetworkConfig{}, netAdapter{endpoints: model},
			runs.Spec{Network: runs.NetworkModel}, "", runs.ErrUnsupported, "cannot confine"},
		{"an adapter that does not say", NetworkConfig{Egress: someEgress}, fakeAdapter{},
			runs.Spec{Network: runs.NetworkModel}, "", runs.ErrUnsupported, "does not know where"},
		{"none for a network model", NetworkConfig{Egress: someEgress}, netAdapter{endpoints: model},
			runs.Spec{Network: runs.NetworkNone}, "", runs.ErrUnsupported, `"none" is only for`},
		{"a bad host", NetworkConfig{Egress: someEgress}, netAdapter{endpoints: model},
			runs.Spec{Network: runs.NetworkAllow, AllowHosts: []string{"exa mple.com"}}, "", runs.ErrInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, a := netSupervisor(tc.cfg, tc.a)
			tc.spec.Agent = "fake"
			err := s.resolveNetwork(&tc.spec, a)
			var fe *runs.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, tc.kind) || fe.Code != tc.code || !strings.Contains(fe.Reason, tc.say) {
				t.Fatalf("err = %v (%+v), want %v with code %q saying %q", err, fe, tc.kind, tc.code, tc.say)
			}
			if tc.kind == runs.ErrUnsupported && fe.Agent != "fake" {
				t.Errorf("the refusal does not name the agent: %+v", fe)
			}
		})
	}
}

func TestNetworksAnAgentSupports(t *testing.T) {
	all := []runs.Network{runs.NetworkOpen, runs.NetworkModel, runs.NetworkAllow}
	for _, tc := range []struct {
		name string
		cfg  NetworkConfig
		a    runs.Adapter
		want []runs.Network
	}{
		{"no egress", NetworkConfig{}, netAdapter{endpoints: []string{"a:1"}}, []runs.Network{runs.NetworkOpen}},
		{"an adapter that does not say", NetworkConfig{Egress: someEgress}, fakeAdapter{}, []runs.Network{runs.NetworkOpen}},
		{"a model on the network", NetworkConfig{Egress: someEgress}, netAdapter{endpoints: []string{"a:1"}}, all},
		{"a model without the network", NetworkConfig{Egress: someEgress}, netAdapter{}, append(all, runs.NetworkNone)},
	} {
		s, a := netSupervisor(tc.cfg, tc.a)
		if got := s.networks(a); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWithProxyReplacesEveryProxySetting(t *testing.T) {
	env := []string{"PATH=/bin", "HTTPS_PROXY=http://corp:8080", "no_proxy=localhost", "NO_PROXY=*", "http_proxy=x", "HOME=/h"}
	got := withProxy(env, "http://127.0.0.1:3128", []string{"EXTRA=1"})
	look := envLookup(got)
	for _, v := range proxyVars {
		if look(v) != "http://127.0.0.1:3128" {
			t.Errorf("%s = %q", v, look(v))
		}
	}
	for _, kv := range got {
		if strings.HasPrefix(strings.ToUpper(kv), "NO_PROXY=") || strings.Contains(kv, "corp:8080") || kv == "http_proxy=x" {
			t.Errorf("left %q in %v", kv, got)
		}
	}
	if look("PATH") != "/bin" || look("HOME") != "/h" || look("EXTRA") != "1" {
		t.Errorf("lost the rest of the environment: %v", got)
	}
}

func TestURLHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"https://mcp.example.com/sse": "mcp.example.com:443",
		"http://127.0.0.1:9000/mcp":   "127.0.0.1:9000",
		"http://[::1]/x":              "[::1]:80",
		"ftp://host/":                 "",
		"":                            "",
		"::bad":                       "",
	} {
		if got := urlHostPort(in); got != want {
			t.Errorf("urlHostPort(%q) = %q, want %q", in, got, want)
		}
	}
}

// A run admitted under a policy on a replica that enforces it may start
// on one that cannot (the shared queue, a takeover): there it must fail,
// not run on the host's network.
func TestStartEgressRefusesAPolicyThisReplicaCannotEnforce(t *testing.T) {
	s, a := netSupervisor(NetworkConfig{}, netAdapter{endpoints: []string{"api.example.com:443"}})
	for _, n := range []runs.Network{runs.NetworkModel, runs.NetworkAllow, runs.NetworkNone} {
		x := &execution{s: s, t: &task{agent: a, inv: runs.Invocation{Spec: runs.Spec{Agent: "fake", Network: n}}}}
		net, env, err := x.startEgress([]string{"PATH=/bin"}, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), string(n)) {
			t.Errorf("network %q without egress: confinement %+v, env %v, err %v; want an error naming the policy", n, net, env, err)
		}
	}
	x := &execution{s: s, t: &task{agent: a, inv: runs.Invocation{Spec: runs.Spec{Agent: "fake", Network: runs.NetworkOpen}}}}
	if net, env, err := x.startEgress([]string{"PATH=/bin"}, t.TempDir()); err != nil || net != nil || len(env) != 1 {
		t.Errorf("open without egress: %+v, %v, %v; want the environment as it was", net, env, err)
	}
}

// A replica leaves a run whose policy it cannot enforce to one that can.
func TestEnforces(t *testing.T) {
	model := netAdapter{endpoints: []string{"api.example.com:443"}}
	without, a := netSupervisor(NetworkConfig{}, model)
	with, _ := netSupervisor(NetworkConfig{Egress: someEgress}, model)
	for _, tc := range []struct {
		s    *Supervisor
		n    runs.Network
		want bool
	}{
		{without, runs.NetworkModel, false}, {without, runs.NetworkNone, false}, {without, runs.NetworkOpen, true}, {without, "", true},
		{with, runs.NetworkModel, true}, {with, runs.NetworkAllow, true}, {with, runs.NetworkNone, false},
	} {
		if got := tc.s.enforces(a, tc.n); got != tc.want {
			t.Errorf("egress %v, network %q: enforces = %v, want %v", tc.s.cfg.Network.Egress != nil, tc.n, got, tc.want)
		}
	}
}
