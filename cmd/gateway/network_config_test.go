package main

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

func TestNetworkDefaults(t *testing.T) {
	g := &instance{cfg: config{Network: "none", TenantNetwork: map[string]string{"acme": "open"}, NetworkForbidOpen: []string{"beta"}}}
	nc, err := g.networkDefaults()
	if err != nil || nc.Default != runs.NetworkNone || nc.Tenants["acme"] != runs.NetworkOpen || !reflect.DeepEqual(nc.ForbidOpen, []string{"beta"}) {
		t.Errorf("defaults = %+v, %v", nc, err)
	}
	g.cfg = config{}
	if nc, err := g.networkDefaults(); err != nil || nc.Default != runs.NetworkModel {
		t.Errorf("unset: %+v, %v; want model", nc, err)
	}
	for _, bad := range []config{
		{Network: "internet"},
		{Network: "allow"},
		{TenantNetwork: map[string]string{"acme": "allow"}},
		{TenantNetwork: map[string]string{"acme": "wide"}},
	} {
		g.cfg = bad
		if _, err := g.networkDefaults(); err == nil || !strings.Contains(err.Error(), "NETWORK") {
			t.Errorf("%+v: %v, want an error naming the setting", bad, err)
		}
	}
}

func TestStoreEndpoints(t *testing.T) {
	g := &instance{cfg: config{NATSURL: "nats://a.example:4222, tls://user:pw@10.0.0.2:6000,nats://[::1],b.example"}}
	want := []string{"a.example:4222", "10.0.0.2:6000", "[::1]:4222", "b.example:4222"}
	if got := g.storeEndpoints(); !reflect.DeepEqual(got, want) {
		t.Errorf("storeEndpoints = %v, want %v", got, want)
	}
	g.cfg.NATSURL = ""
	if got := g.storeEndpoints(); len(got) != 0 {
		t.Errorf("embedded: %v, want none", got)
	}
}

// TestOpenEgressWithoutTheSandbox: a gateway whose agents run without the
// sandbox cannot enforce a policy: told to, it refuses to start, naming
// the way out; left to its default, it falls back to open.
func TestOpenEgressWithoutTheSandbox(t *testing.T) {
	for _, tc := range []struct {
		cfg  config
		want string // the error, or "" for a start on open
	}{
		{config{}, ""},
		{config{Network: "open"}, ""},
		{config{Network: "model"}, "AGENTGATE_NETWORK=open"},
		{config{TenantNetwork: map[string]string{"acme": "none"}}, "tenant acme"},
	} {
		g := &instance{cfg: tc.cfg, log: zap.NewNop()}
		err := g.openEgress(context.Background())
		switch {
		case tc.want == "" && (err != nil || g.network.Default != runs.NetworkOpen || g.network.Egress != nil):
			t.Errorf("%+v: %v, %+v; want a start on open", tc.cfg, err, g.network)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cli-only")):
			t.Errorf("%+v: %v, want a refusal saying %q and why", tc.cfg, err, tc.want)
		}
	}
}
