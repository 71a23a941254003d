package main

import (
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/adapters/claude"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// BenchmarkNetworkPolicy measures what a run's network policy costs its
// start and its model calls: the same short run through the gateway under
// network "open" (the host's network, no namespace) and under "model" (a
// network namespace of its own, the shim's handoff, every model call
// through the egress proxy), alternated and swapped every iteration so
// that both share the machine's noise. One op is one of each.
//
//   - agent=fakeclaude: a run that writes only its result line and calls
//     nothing: the namespace's and the handoff's cost alone.
//   - agent=claude: the real claude CLI answering one text turn from the
//     mock Anthropic server: the proxy on its model calls too.
//
// Metrics: open-ms, model-ms (means), cost-ms (model minus open) and
// x-open (model over open).
func BenchmarkNetworkPolicy(b *testing.B) {
	b.Run("agent=fakeclaude", func(b *testing.B) {
		bin := buildFakeClaude(b)
		g := startGateway(b, benchGatewayEnv(b, bin), nil)
		mix := mixes(b)[0]
		settings := fakeSettings{Lines: writeLines(b, mix.body), Final: string(mix.final)}
		comparePolicies(b, g, settings.prompt(b))
	})
	b.Run("agent=claude", func(b *testing.B) {
		mock, err := anthropic.Start("127.0.0.1:0", anthropic.TextAnswer("Hello from the mock."))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(mock.Close)
		g := startGateway(b, benchGatewayEnv(b, agenttest.ClaudeBin(b)), mockCreds(mock))
		comparePolicies(b, g, "Say hello.")
	})
}

// comparePolicies alternates one claude run of prompt under network open
// and one under model, and reports both.
func comparePolicies(b *testing.B, g *gateway, prompt string) {
	client := benchClient(b)
	under := func(policy runs.Network) func() time.Duration {
		return func() time.Duration {
			start := time.Now()
			id := g.create(b, client, map[string]any{"agent": claude.Name, "prompt": prompt,
				"permission": runs.WorkspaceWrite, "network": policy})
			_, done := g.follow(b, client, id, nil)
			took := time.Since(start)
			if done.Status != runs.Succeeded {
				b.Fatalf("run %s under network %s: %s %+v", id, policy, done.Status, done.Error)
			}
			return took
		}
	}
	open, model := under(runs.NetworkOpen), under(runs.NetworkModel)
	open()
	model()
	var o, m time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			o += open()
			m += model()
		} else {
			m += model()
			o += open()
		}
		i++
	}
	n := float64(i)
	b.ReportMetric(o.Seconds()*1e3/n, "open-ms")
	b.ReportMetric(m.Seconds()*1e3/n, "model-ms")
	b.ReportMetric((m-o).Seconds()*1e3/n, "cost-ms")
	b.ReportMetric(m.Seconds()/o.Seconds(), "x-open")
}
