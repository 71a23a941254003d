package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/egress"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// networkCases check the gateway's egress policy with the real CLI: its
// model calls, through the proxy, work under every policy, and what its
// tools reach is what the policy allows.
func (s *suite) networkCases() []suiteCase {
	return []suiteCase{
		{"network_model", func(t *testing.T) { s.networkPolicy(t, runs.NetworkModel) }},
		{"network_allow", func(t *testing.T) { s.networkPolicy(t, runs.NetworkAllow) }},
		{"network_open", func(t *testing.T) { s.networkPolicy(t, runs.NetworkOpen) }},
	}
}

// netTargets are the three listeners a network case's tool tries to
// reach on the host's loopback: a service a run may be allowed, and
// stand-ins for the gateway's own port and a NATS server, which only
// network open reaches.
type netTargets struct {
	service, gateway, nats int
}

// serveTargets starts the three listeners; each answers any request with
// "reached-<name>".
func serveTargets(t *testing.T) netTargets {
	t.Helper()
	port := func(name string) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "reached-"+name)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return ln.Addr().(*net.TCPAddr).Port
	}
	return netTargets{service: port("service"), gateway: port("gateway"), nats: port("nats")}
}

// withEgress enforces network policies as a gateway does, with the test
// binary as the shim, guarding tg's gateway and NATS stand-ins.
func withEgress(t *testing.T, tg netTargets) func(*supervisor.Config, runs.Store) {
	return func(cfg *supervisor.Config, _ runs.Store) {
		guard, err := egress.NewGuard(context.Background(), net.DefaultResolver, []int{tg.gateway},
			[]string{"127.0.0.1:" + strconv.Itoa(tg.nats)})
		if err != nil {
			t.Fatal(err)
		}
		proxy := &egress.Proxy{Checker: &egress.Checker{Guard: guard, Resolver: net.DefaultResolver}, Log: zaptest.NewLogger(t)}
		cfg.Network = supervisor.NetworkConfig{Default: runs.NetworkModel,
			Egress: &supervisor.Egress{Proxy: proxy, Shim: testBinary(t)}}
	}
}

// networkPolicy runs one tool call, under permission full, that fetches each target through the
// proxy the CLI's tools are pointed at, and checks what it reached, what
// the run reported refused, and that the run itself succeeded (its model
// calls went through the proxy).
func (s *suite) networkPolicy(t *testing.T, policy runs.Network) {
	tg := serveTargets(t)
	var cmd strings.Builder
	for _, p := range []int{tg.service, tg.gateway, tg.nats} {
		fmt.Fprintf(&cmd, "curl -sS -m 60 http://127.0.0.1:%d/; echo \" curl-exit=$?\"; ", p)
	}
	cmd.WriteString("echo net-done")
	g := s.start(t, Scenario{Kind: Tool, Command: cmd.String(), Text: "done"}, credentials, withEgress(t, tg))
	// Under full, no CLI's own sandbox is in play (Codex's cuts its
	// commands' network under workspace_write, whatever the gateway's
	// policy): the policy alone decides what the tool reaches, and the
	// gateway's file sandbox is off, so it is the network namespace alone
	// that holds.
	spec := runs.Spec{Prompt: "Run the command.", Permission: runs.Full, Network: policy}
	if policy == runs.NetworkAllow {
		spec.AllowHosts = []string{"127.0.0.1:" + strconv.Itoa(tg.service), "127.0.0.1:" + strconv.Itoa(tg.gateway)}
	}
	r := g.submit(t, spec)
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("%s: status %s, error %+v; events %s", policy, r.Status, r.Error, eventsOf(evs))
	}
	out := toolOutput(evs)
	if !strings.Contains(out, "net-done") {
		t.Fatalf("%s: the tool did not run to its end: %q", policy, out)
	}
	want := map[runs.Network][]string{
		runs.NetworkModel: nil,
		runs.NetworkAllow: {"service"},
		runs.NetworkOpen:  {"service", "gateway", "nats"},
	}[policy]
	denied := deniedPorts(evs)
	for name, port := range map[string]int{"service": tg.service, "gateway": tg.gateway, "nats": tg.nats} {
		allowed := strings.Contains(strings.Join(want, " "), name)
		reached := strings.Contains(out, "reached-"+name)
		switch {
		case allowed && !reached:
			t.Errorf("%s: the tool did not reach the %s at port %d: %q", policy, name, port, out)
		case !allowed && reached:
			t.Errorf("%s: the tool reached the %s at port %d: %q", policy, name, port, out)
		case !allowed && denied[port] != 1:
			t.Errorf("%s: %d network_denied warnings name the %s's port %d, want 1; events %s", policy, denied[port], name, port, eventsOf(evs))
		}
	}
	if policy != runs.NetworkOpen && r.NetworkDenied < 3-len(want) {
		t.Errorf("%s: the record counts %d refusals, want at least %d", policy, r.NetworkDenied, 3-len(want))
	}
	if r.Network != policy {
		t.Errorf("the record's network is %q, want %q", r.Network, policy)
	}
}

// toolOutput joins what the run's tool calls printed.
func toolOutput(evs []runs.Event) string {
	var out strings.Builder
	for _, ev := range of(evs, runs.EventToolCallCompleted) {
		var d struct {
			Output string `json:"output"`
		}
		_ = json.Unmarshal(ev.Data.(json.RawMessage), &d)
		out.WriteString(d.Output)
	}
	return out.String()
}

// deniedPorts counts the network_denied warnings by the port they name.
func deniedPorts(evs []runs.Event) map[int]int {
	out := map[int]int{}
	for _, ev := range of(evs, runs.EventWarning) {
		var d runs.WarningData
		_ = json.Unmarshal(ev.Data.(json.RawMessage), &d)
		if d.Code != runs.WarningNetworkDenied {
			continue
		}
		i := strings.LastIndex(d.Message, ":")
		if i < 0 {
			continue
		}
		if p, err := strconv.Atoi(strings.TrimRight(d.Message[i+1:], " .")); err == nil {
			out[p]++
		}
	}
	return out
}
