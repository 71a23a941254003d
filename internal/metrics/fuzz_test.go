package metrics

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentgate/agentgate/internal/runs"
)

// FuzzLabels feeds every method arbitrary values, as a buggy caller or a
// hostile client might, and checks that nothing panics, the registry still
// gathers, every label value stays in its bounded set and the token series
// never go negative.
func FuzzLabels(f *testing.F) {
	f.Add("claude", "sonnet", "succeeded", "", "message.delta", "/v1/runs/{id}", "GET", 200,
		"2.1.3", "verified", 1.5, int64(100), int64(40), int64(10), int64(50), int64(20), 0.25)
	f.Add("", "", "", "rate_limited", "", "", "", 0, "", "", -1.0, int64(-1), int64(-2), int64(-3), int64(-4), int64(-5), -0.5)
	f.Add("other", "sonnet[1m]", "running", "bogus", "run.completed", "/v1/runs\xff", "get", 999,
		"v1 \xff", "newer", math.Inf(1), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(1), int64(math.MaxInt64), math.NaN())
	f.Add("codex", "claude-evil", "timed_out", "timeout", "warning", "/"+strings.Repeat("x", 200), "PROPFIND", 404,
		strings.Repeat("9", 65), "missing", math.NaN(), int64(0), int64(0), int64(0), int64(0), int64(0), math.Inf(1))
	f.Fuzz(func(t *testing.T, agent, model, status, class, evType, route, method string, code int,
		version, compat string, secs float64, in, read, write, out, reasoning int64, cost float64) {
		reg := prometheus.NewRegistry()
		r, err := New(reg, Options{Agents: testAgents})
		if err != nil {
			t.Fatal(err)
		}
		u := runs.Usage{InputTokens: in, CacheReadTokens: read, CacheWriteTokens: write, OutputTokens: out, ReasoningTokens: reasoning}
		r.RunQueued(agent)
		r.RunStarted(agent, secs)
		r.FirstEvent(agent, secs)
		r.Event(agent, runs.EventType(evType))
		r.RunFinished(agent, model, runs.State(status), runs.Class(class), secs, u, &cost)
		r.HTTPRequest(route, method, code, secs)
		r.SetAgents([]runs.AgentInfo{{Name: agent, Version: version, Compatibility: compat}})

		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("gather: %v", err)
		}
		models := DefaultModels()
		in1 := func(set []string, extra ...string) func(string) bool {
			return func(v string) bool { return slices.Contains(set, v) || slices.Contains(extra, v) }
		}
		valid := map[string]func(string) bool{
			"agent": in1(testAgents, other),
			"model": func(v string) bool {
				base, _ := strings.CutSuffix(v, longContext)
				return slices.Contains(models, base) || v == other || v == unknown
			},
			"status": func(v string) bool { return runs.State(v).Terminal() || v == other },
			"class":  func(v string) bool { return slices.Contains(runs.Classes, runs.Class(v)) || v == other },
			"type":   func(v string) bool { return slices.Contains(runs.EventTypes, runs.EventType(v)) || v == other },
			"route":  in1([]string{route}, unmatched, other),
			"method": in1([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE"}, other),
			"code": func(v string) bool {
				n, err := strconv.Atoi(v)
				return v == other || err == nil && 100 <= n && n <= 599 && strconv.Itoa(n) == v
			},
			"version": func(v string) bool {
				return len(v) <= maxVersion && utf8.ValidString(v) && !strings.ContainsAny(v, " \t\n\"\\{}")
			},
			"compatibility": in1([]string{runs.CompatVerified, runs.CompatNewer, runs.CompatOlder, runs.CompatUnrecognized, runs.CompatMissing}, other),
			"cache":         in1([]string{"none", "read", "write"}),
			"kind":          in1([]string{"text", "reasoning"}),
		}
		var inSum, outSum float64
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					ok, known := valid[lp.GetName()]
					if !known {
						t.Fatalf("%s: unexpected label %q", mf.GetName(), lp.GetName())
					}
					if !ok(lp.GetValue()) {
						t.Errorf("%s: label %s=%q is outside its set", mf.GetName(), lp.GetName(), lp.GetValue())
					}
				}
				if c := m.GetCounter(); c != nil && (c.GetValue() < 0 || math.IsNaN(c.GetValue())) {
					t.Errorf("%s: counter is %v", mf.GetName(), c.GetValue())
				}
				if h := m.GetHistogram(); h != nil && (h.GetSampleSum() < 0 || math.IsNaN(h.GetSampleSum()) || math.IsInf(h.GetSampleSum(), 0)) {
					t.Errorf("%s: histogram sum is %v", mf.GetName(), h.GetSampleSum())
				}
				switch mf.GetName() {
				case "agentgate_input_tokens_total":
					inSum += m.GetCounter().GetValue()
				case "agentgate_output_tokens_total":
					outSum += m.GetCounter().GetValue()
				}
			}
		}
		// With consistent usage the parts add up to the totals; float64
		// is exact below 2^53.
		if splitUsage(u).consistent && in < 1<<53 && out < 1<<53 {
			if inSum != float64(in) || outSum != float64(out) {
				t.Errorf("token series sum to %v in, %v out; usage says %d, %d", inSum, outSum, in, out)
			}
		}
	})
}
