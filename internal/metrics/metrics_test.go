package metrics

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/fanout"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// httpObserver is the interface the api package declares for its edge.
type httpObserver interface {
	HTTPRequest(route, method string, status int, seconds float64)
	SSEClientsAdd(delta int)
}

var _ httpObserver = (*Recorder)(nil)

var testAgents = []string{"claude", "codex"}

func newTest(t *testing.T) (*Recorder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r, err := New(reg, Options{Agents: testAgents})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r, reg
}

// samples returns every sample reg exposes, keyed `name{label="value",…}`:
// counters and gauges by value, histograms by _count and _sum.
func samples(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			key := func(suffix string) string {
				return mf.GetName() + suffix + "{" + strings.Join(ls, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key("_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key("_sum")] = m.GetHistogram().GetSampleSum()
			default:
				t.Fatalf("unexpected type %v of %s", mf.GetType(), mf.GetName())
			}
		}
	}
	return out
}

// change runs f and returns what it did to reg: the new value of every new
// series (even 0) and the difference for every series whose value moved.
func change(t *testing.T, reg prometheus.Gatherer, f func()) map[string]float64 {
	t.Helper()
	before := samples(t, reg)
	f()
	after := samples(t, reg)
	d := map[string]float64{}
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			d[k] = v - old
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d[k+" gone"] = 1
		}
	}
	return d
}

func assertChange(t *testing.T, got, want map[string]float64) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if w, ok := want[k]; !ok || w != got[k] {
			t.Errorf("got   %s = %v", k, got[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			t.Errorf("wanted %s = %v", k, want[k])
		}
	}
}

func ptr(v float64) *float64 { return &v }

func TestMethodsMoveExactlyTheirSeries(t *testing.T) {
	usage := runs.Usage{InputTokens: 1000, CacheReadTokens: 600, CacheWriteTokens: 150, OutputTokens: 300, ReasoningTokens: 120}
	cases := []struct {
		name  string
		setup func(r *Recorder)
		call  func(r *Recorder)
		want  map[string]float64
	}{{
		name: "run queued",
		call: func(r *Recorder) { r.RunQueued("claude") },
		want: map[string]float64{`agentgate_runs_created_total{agent="claude"}`: 1},
	}, {
		name: "run queued for an agent not configured",
		call: func(r *Recorder) { r.RunQueued("mystery") },
		want: map[string]float64{`agentgate_runs_created_total{agent="other"}`: 1},
	}, {
		name: "run started",
		call: func(r *Recorder) { r.RunStarted("codex", 0.25) },
		want: map[string]float64{
			`agentgate_runs_started_total{agent="codex"}`:           1,
			`agentgate_run_queue_wait_seconds_count{agent="codex"}`: 1,
			`agentgate_run_queue_wait_seconds_sum{agent="codex"}`:   0.25,
		},
	}, {
		name: "run succeeded",
		call: func(r *Recorder) {
			r.RunFinished("claude", "claude-sonnet-4-5", runs.Succeeded, "", 42, usage, ptr(0.5))
		},
		want: map[string]float64{
			`agentgate_runs_finished_total{agent="claude",status="succeeded"}`:                         1,
			`agentgate_run_duration_seconds_count{agent="claude",status="succeeded"}`:                  1,
			`agentgate_run_duration_seconds_sum{agent="claude",status="succeeded"}`:                    42,
			`agentgate_input_tokens_total{agent="claude",cache="none",model="claude-sonnet-4-5"}`:      250,
			`agentgate_input_tokens_total{agent="claude",cache="read",model="claude-sonnet-4-5"}`:      600,
			`agentgate_input_tokens_total{agent="claude",cache="write",model="claude-sonnet-4-5"}`:     150,
			`agentgate_output_tokens_total{agent="claude",kind="text",model="claude-sonnet-4-5"}`:      180,
			`agentgate_output_tokens_total{agent="claude",kind="reasoning",model="claude-sonnet-4-5"}`: 120,
			`agentgate_cost_usd_total{agent="claude",model="claude-sonnet-4-5"}`:                       0.5,
		},
	}, {
		name: "approval requested",
		call: func(r *Recorder) { r.ApprovalRequested("claude") },
		want: map[string]float64{`agentgate_approvals_requested_total{agent="claude"}`: 1},
	}, {
		name: "approval resolved by a client",
		call: func(r *Recorder) { r.ApprovalResolved("codex", runs.AllowSession, runs.ResolvedByClient, 2.5) },
		want: map[string]float64{
			`agentgate_approvals_resolved_total{agent="codex",decision="allow_session",reason="client"}`: 1,
			`agentgate_approval_wait_seconds_count{agent="codex",reason="client"}`:                       1,
			`agentgate_approval_wait_seconds_sum{agent="codex",reason="client"}`:                         2.5,
		},
	}, {
		name: "approval withdrawn, and labels outside their sets",
		call: func(r *Recorder) {
			r.ApprovalResolved("claude", "", runs.ResolvedWithdrawn, 1)
			r.ApprovalResolved("claude", "maybe", "bored", 1)
		},
		want: map[string]float64{
			`agentgate_approvals_resolved_total{agent="claude",decision="none",reason="withdrawn"}`: 1,
			`agentgate_approvals_resolved_total{agent="claude",decision="other",reason="other"}`:    1,
			`agentgate_approval_wait_seconds_count{agent="claude",reason="withdrawn"}`:              1,
			`agentgate_approval_wait_seconds_sum{agent="claude",reason="withdrawn"}`:                1,
			`agentgate_approval_wait_seconds_count{agent="claude",reason="other"}`:                  1,
			`agentgate_approval_wait_seconds_sum{agent="claude",reason="other"}`:                    1,
		},
	}, {
		name: "turns",
		call: func(r *Recorder) {
			r.TurnStarted("codex")
			r.TurnFinished("codex", runs.Cancelled, 4)
		},
		want: map[string]float64{
			`agentgate_turns_started_total{agent="codex"}`:                            1,
			`agentgate_turn_duration_seconds_count{agent="codex",status="cancelled"}`: 1,
			`agentgate_turn_duration_seconds_sum{agent="codex",status="cancelled"}`:   4,
		},
	}, {
		name: "run failed early without model, usage or cost",
		call: func(r *Recorder) {
			r.RunFinished("claude", "", runs.Failed, runs.RateLimited, 1.5, runs.Usage{}, nil)
		},
		want: map[string]float64{
			`agentgate_runs_finished_total{agent="claude",status="failed"}`:                  1,
			`agentgate_run_duration_seconds_count{agent="claude",status="failed"}`:           1,
			`agentgate_run_duration_seconds_sum{agent="claude",status="failed"}`:             1.5,
			`agentgate_run_errors_total{agent="claude",class="rate_limited"}`:                1,
			`agentgate_input_tokens_total{agent="claude",cache="none",model="unknown"}`:      0,
			`agentgate_input_tokens_total{agent="claude",cache="read",model="unknown"}`:      0,
			`agentgate_input_tokens_total{agent="claude",cache="write",model="unknown"}`:     0,
			`agentgate_output_tokens_total{agent="claude",kind="text",model="unknown"}`:      0,
			`agentgate_output_tokens_total{agent="claude",kind="reasoning",model="unknown"}`: 0,
		},
	}, {
		name: "values outside their sets become other",
		call: func(r *Recorder) {
			r.RunFinished("gpt", "gpt-9", runs.Running, "bogus", -3, runs.Usage{InputTokens: 7, OutputTokens: 2}, ptr(0))
		},
		want: map[string]float64{
			`agentgate_runs_finished_total{agent="other",status="other"}`:                 1,
			`agentgate_run_duration_seconds_count{agent="other",status="other"}`:          1,
			`agentgate_run_duration_seconds_sum{agent="other",status="other"}`:            0,
			`agentgate_run_errors_total{agent="other",class="other"}`:                     1,
			`agentgate_input_tokens_total{agent="other",cache="none",model="other"}`:      7,
			`agentgate_input_tokens_total{agent="other",cache="read",model="other"}`:      0,
			`agentgate_input_tokens_total{agent="other",cache="write",model="other"}`:     0,
			`agentgate_output_tokens_total{agent="other",kind="text",model="other"}`:      2,
			`agentgate_output_tokens_total{agent="other",kind="reasoning",model="other"}`: 0,
			`agentgate_cost_usd_total{agent="other",model="other"}`:                       0,
		},
	}, {
		name: "inconsistent usage is clamped and counted",
		call: func(r *Recorder) {
			r.RunFinished("codex", "opus", runs.Cancelled, runs.ClassCancelled, 2,
				runs.Usage{InputTokens: 10, CacheReadTokens: 8, CacheWriteTokens: 5, OutputTokens: -4, ReasoningTokens: 3}, ptr(-1))
		},
		want: map[string]float64{
			`agentgate_runs_finished_total{agent="codex",status="cancelled"}`:            1,
			`agentgate_run_duration_seconds_count{agent="codex",status="cancelled"}`:     1,
			`agentgate_run_duration_seconds_sum{agent="codex",status="cancelled"}`:       2,
			`agentgate_run_errors_total{agent="codex",class="cancelled"}`:                1,
			`agentgate_input_tokens_total{agent="codex",cache="none",model="opus"}`:      0,
			`agentgate_input_tokens_total{agent="codex",cache="read",model="opus"}`:      8,
			`agentgate_input_tokens_total{agent="codex",cache="write",model="opus"}`:     5,
			`agentgate_output_tokens_total{agent="codex",kind="text",model="opus"}`:      0,
			`agentgate_output_tokens_total{agent="codex",kind="reasoning",model="opus"}`: 3,
			`agentgate_usage_inconsistent_total{agent="codex"}`:                          1,
		},
	}, {
		name: "event",
		call: func(r *Recorder) { r.Event("claude", runs.EventToolCallStarted) },
		want: map[string]float64{`agentgate_events_total{agent="claude",type="tool_call.started"}`: 1},
	}, {
		name: "event of an unknown type",
		call: func(r *Recorder) { r.Event("claude", "tool_call.exploded") },
		want: map[string]float64{`agentgate_events_total{agent="claude",type="other"}`: 1},
	}, {
		name: "first event",
		call: func(r *Recorder) { r.FirstEvent("claude", 2.5) },
		want: map[string]float64{
			`agentgate_time_to_first_event_seconds_count{agent="claude"}`: 1,
			`agentgate_time_to_first_event_seconds_sum{agent="claude"}`:   2.5,
		},
	}, {
		name: "queue depth",
		call: func(r *Recorder) { r.QueueDepth(3, 2) },
		want: map[string]float64{`agentgate_runs_queued{}`: 3, `agentgate_runs_active{}`: 2},
	}, {
		name:  "negative queue depth reads as 0",
		setup: func(r *Recorder) { r.QueueDepth(3, 2) },
		call:  func(r *Recorder) { r.QueueDepth(-1, -5) },
		want:  map[string]float64{`agentgate_runs_queued{}`: -3, `agentgate_runs_active{}`: -2},
	}, {
		name: "http request",
		call: func(r *Recorder) { r.HTTPRequest("/v1/runs/{id}", "GET", 200, 0.5) },
		want: map[string]float64{
			`agentgate_http_requests_total{code="200",method="GET",route="/v1/runs/{id}"}`:      1,
			`agentgate_http_request_duration_seconds_count{method="GET",route="/v1/runs/{id}"}`: 1,
			`agentgate_http_request_duration_seconds_sum{method="GET",route="/v1/runs/{id}"}`:   0.5,
		},
	}, {
		name: "http request without route, odd method and status",
		call: func(r *Recorder) { r.HTTPRequest("", "PROPFIND", 0, math.NaN()) },
		want: map[string]float64{
			`agentgate_http_requests_total{code="other",method="other",route="unmatched"}`:    1,
			`agentgate_http_request_duration_seconds_count{method="other",route="unmatched"}`: 1,
			`agentgate_http_request_duration_seconds_sum{method="other",route="unmatched"}`:   0,
		},
	}, {
		name: "http request the api marked unmatched, method OTHER",
		call: func(r *Recorder) { r.HTTPRequest("unmatched", "OTHER", 404, 0.25) },
		want: map[string]float64{
			`agentgate_http_requests_total{code="404",method="other",route="unmatched"}`:      1,
			`agentgate_http_request_duration_seconds_count{method="other",route="unmatched"}`: 1,
			`agentgate_http_request_duration_seconds_sum{method="other",route="unmatched"}`:   0.25,
		},
	}, {
		name: "http request with a path instead of a pattern and a lower-case method",
		call: func(r *Recorder) { r.HTTPRequest("v1/runs/\xff", "get", 404, math.Inf(1)) },
		want: map[string]float64{
			`agentgate_http_requests_total{code="404",method="other",route="other"}`:      1,
			`agentgate_http_request_duration_seconds_count{method="other",route="other"}`: 1,
			`agentgate_http_request_duration_seconds_sum{method="other",route="other"}`:   0,
		},
	}, {
		name:  "sse clients",
		setup: func(r *Recorder) { r.SSEClientsAdd(2) },
		call:  func(r *Recorder) { r.SSEClientsAdd(-1) },
		want:  map[string]float64{`agentgate_sse_clients{}`: -1},
	}, {
		name: "set agents",
		call: func(r *Recorder) {
			r.SetAgents([]runs.AgentInfo{{Name: "claude", Version: "2.1.3", Compatibility: runs.CompatVerified}})
		},
		want: map[string]float64{`agentgate_agent_info{agent="claude",compatibility="verified",version="2.1.3"}`: 1},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, reg := newTest(t)
			if tc.setup != nil {
				tc.setup(r)
			}
			assertChange(t, change(t, reg, func() { tc.call(r) }), tc.want)
		})
	}
}

func TestSetAgentsReplacesPreviousSeries(t *testing.T) {
	r, reg := newTest(t)
	r.SetAgents([]runs.AgentInfo{
		{Name: "claude", Version: "2.1.3", Compatibility: runs.CompatVerified},
		{Name: "claude", Version: "2.1.3", Compatibility: runs.CompatVerified}, // a duplicate is one series
		{Name: "codex", Compatibility: runs.CompatMissing},
		{Name: "stranger", Version: "v1 \xff; rm -rf", Compatibility: "maybe"},
	})
	const first = `
# HELP agentgate_agent_info Installed agent CLIs: always 1, with the version found and its compatibility.
# TYPE agentgate_agent_info gauge
agentgate_agent_info{agent="claude",compatibility="verified",version="2.1.3"} 1
agentgate_agent_info{agent="codex",compatibility="missing",version="unknown"} 1
agentgate_agent_info{agent="other",compatibility="other",version="other"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(first), "agentgate_agent_info"); err != nil {
		t.Fatal(err)
	}
	r.SetAgents([]runs.AgentInfo{{Name: "claude", Version: "2.2.0-beta.1", Compatibility: runs.CompatNewer}})
	const second = `
# HELP agentgate_agent_info Installed agent CLIs: always 1, with the version found and its compatibility.
# TYPE agentgate_agent_info gauge
agentgate_agent_info{agent="claude",compatibility="newer",version="2.2.0-beta.1"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(second), "agentgate_agent_info"); err != nil {
		t.Fatal(err)
	}
	r.SetAgents(nil)
	if n := testutil.CollectAndCount(r.agentInfo); n != 0 {
		t.Fatalf("after SetAgents(nil): %d agent_info series, want 0", n)
	}
}

func TestHistogramBuckets(t *testing.T) {
	r, reg := newTest(t)
	r.RunFinished("claude", "sonnet", runs.TimedOut, runs.Timeout, 42, runs.Usage{}, nil)
	const want = `
# HELP agentgate_run_duration_seconds Time from a run's start to its end.
# TYPE agentgate_run_duration_seconds histogram
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="0.5"} 0
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="1"} 0
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="2.5"} 0
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="5"} 0
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="10"} 0
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="20"} 0
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="30"} 0
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="60"} 1
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="120"} 1
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="300"} 1
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="600"} 1
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="1200"} 1
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="1800"} 1
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="3600"} 1
agentgate_run_duration_seconds_bucket{agent="claude",status="timed_out",le="+Inf"} 1
agentgate_run_duration_seconds_sum{agent="claude",status="timed_out"} 42
agentgate_run_duration_seconds_count{agent="claude",status="timed_out"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentgate_run_duration_seconds"); err != nil {
		t.Fatal(err)
	}

	// Each histogram has room at both ends of the range it measures.
	r.RunStarted("claude", 0)
	r.FirstEvent("claude", 0)
	r.HTTPRequest("/healthz", "GET", 200, 0)
	ranges := map[string][2]float64{
		"agentgate_run_duration_seconds":          {1, 3600},
		"agentgate_run_queue_wait_seconds":        {0.001, 300},
		"agentgate_time_to_first_event_seconds":   {0.1, 60},
		"agentgate_http_request_duration_seconds": {0.001, 60},
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		want, ok := ranges[mf.GetName()]
		if !ok {
			continue
		}
		delete(ranges, mf.GetName())
		bs := mf.GetMetric()[0].GetHistogram().GetBucket()
		lo, hi := bs[0].GetUpperBound(), bs[len(bs)-1].GetUpperBound()
		if lo > want[0] || hi < want[1] {
			t.Errorf("%s: buckets span %v–%v, want at least %v–%v", mf.GetName(), lo, hi, want[0], want[1])
		}
	}
	if len(ranges) != 0 {
		t.Errorf("histograms not found: %v", slices.Collect(maps.Keys(ranges)))
	}
}

func TestModels(t *testing.T) {
	defaults := newAllowed(DefaultModels())
	custom := newAllowed([]string{"my-model"})
	cases := []struct {
		a           allowed
		model, want string
	}{
		{defaults, "", "unknown"},
		{defaults, "sonnet", "sonnet"},
		{defaults, "sonnet[1m]", "sonnet[1m]"},
		{defaults, "claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"},
		{defaults, "claude-sonnet-4-5-20250929[1m]", "claude-sonnet-4-5-20250929[1m]"},
		{defaults, "claude-opus-4-8", "claude-opus-4-8"},
		{defaults, "claude-haiku-4-5-20251001", "claude-haiku-4-5-20251001"},
		{defaults, "claude-sonnet-9-9-attacker-chosen", "other"},
		{defaults, "claude-evil[1m]", "other"},
		{defaults, "[1m]", "other"},
		{defaults, "sonnet[1m][1m]", "other"},
		{defaults, "SONNET", "other"},
		{custom, "my-model", "my-model"},
		{custom, "sonnet", "other"}, // a list replaces the defaults
	}
	for _, c := range cases {
		if got := c.a.modelLabel(c.model); got != c.want {
			t.Errorf("modelLabel(%q) = %q, want %q", c.model, got, c.want)
		}
	}

	// Options.Models reaches the labels.
	reg := prometheus.NewRegistry()
	r, err := New(reg, Options{Agents: []string{"claude"}, Models: []string{"my-model"}})
	if err != nil {
		t.Fatal(err)
	}
	r.RunFinished("claude", "my-model", runs.Succeeded, "", 1, runs.Usage{}, ptr(1))
	r.RunFinished("claude", "sonnet", runs.Succeeded, "", 1, runs.Usage{}, ptr(2))
	const want = `
# HELP agentgate_cost_usd_total Cost of finished runs as reported by the agent, in US dollars.
# TYPE agentgate_cost_usd_total counter
agentgate_cost_usd_total{agent="claude",model="my-model"} 1
agentgate_cost_usd_total{agent="claude",model="other"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentgate_cost_usd_total"); err != nil {
		t.Fatal(err)
	}
}

func TestSplitUsage(t *testing.T) {
	cases := []struct {
		u    runs.Usage
		want usageSplit
	}{
		{runs.Usage{}, usageSplit{consistent: true}},
		{runs.Usage{InputTokens: 10, CacheReadTokens: 4, CacheWriteTokens: 6, OutputTokens: 5, ReasoningTokens: 5},
			usageSplit{uncached: 0, cacheRead: 4, cacheWrite: 6, text: 0, reasoning: 5, consistent: true}},
		{runs.Usage{InputTokens: 10, CacheReadTokens: 4, CacheWriteTokens: 7},
			usageSplit{uncached: 0, cacheRead: 4, cacheWrite: 7, consistent: false}},
		{runs.Usage{InputTokens: -10, OutputTokens: 3},
			usageSplit{text: 3, consistent: false}},
		{runs.Usage{InputTokens: 5, CacheReadTokens: -1, OutputTokens: 3, ReasoningTokens: -2},
			usageSplit{uncached: 5, text: 3, consistent: false}},
		{runs.Usage{OutputTokens: 3, ReasoningTokens: 4},
			usageSplit{reasoning: 4, consistent: false}},
		{runs.Usage{InputTokens: math.MaxInt64, CacheReadTokens: math.MaxInt64, CacheWriteTokens: math.MaxInt64},
			usageSplit{cacheRead: math.MaxInt64, cacheWrite: math.MaxInt64, consistent: false}},
		{runs.Usage{InputTokens: math.MaxInt64, CacheReadTokens: math.MaxInt64 - 1, CacheWriteTokens: 1},
			usageSplit{cacheRead: math.MaxInt64 - 1, cacheWrite: 1, consistent: true}},
	}
	for _, c := range cases {
		if got := splitUsage(c.u); got != c.want {
			t.Errorf("splitUsage(%+v) = %+v, want %+v", c.u, got, c.want)
		}
	}
}

// TestTokenSeriesSumToUsage sends many runs through a Recorder and checks
// that the token series add up to the totals of their usage.
func TestTokenSeriesSumToUsage(t *testing.T) {
	r, reg := newTest(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var total runs.Usage
	for range 200 {
		// Bounded so that float64 sums stay exact.
		read, write, plain := rng.Int64N(1<<30), rng.Int64N(1<<30), rng.Int64N(1<<30)
		reasoning, text := rng.Int64N(1<<30), rng.Int64N(1<<30)
		u := runs.Usage{
			InputTokens: read + write + plain, CacheReadTokens: read, CacheWriteTokens: write,
			OutputTokens: reasoning + text, ReasoningTokens: reasoning,
		}
		total = total.Add(u)
		model := []string{"sonnet", "opus", "", "nonsense"}[rng.IntN(4)]
		r.RunFinished("claude", model, runs.Succeeded, "", 1, u, nil)
	}
	var in, out, read, write, reasoning float64
	for k, v := range samples(t, reg) {
		switch {
		case strings.HasPrefix(k, "agentgate_input_tokens_total{"):
			in += v
			if strings.Contains(k, `cache="read"`) {
				read += v
			}
			if strings.Contains(k, `cache="write"`) {
				write += v
			}
		case strings.HasPrefix(k, "agentgate_output_tokens_total{"):
			out += v
			if strings.Contains(k, `kind="reasoning"`) {
				reasoning += v
			}
		case strings.HasPrefix(k, "agentgate_usage_inconsistent_total{"):
			t.Errorf("consistent usage counted as inconsistent: %s = %v", k, v)
		}
	}
	got := runs.Usage{InputTokens: int64(in), CacheReadTokens: int64(read), CacheWriteTokens: int64(write),
		OutputTokens: int64(out), ReasoningTokens: int64(reasoning)}
	if got != total {
		t.Fatalf("token series sum to %+v, want %+v", got, total)
	}
}

func TestNew(t *testing.T) {
	t.Run("second recorder on one registry", func(t *testing.T) {
		r, reg := newTest(t)
		_, err := New(reg, Options{Agents: testAgents})
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			t.Fatalf("second New: err = %v, want an AlreadyRegisteredError", err)
		}
		// The first still works.
		r.RunQueued("claude")
		if v := testutil.ToFloat64(r.runsCreated.WithLabelValues("claude")); v != 1 {
			t.Fatalf("runs_created_total = %v, want 1", v)
		}
		if _, err := reg.Gather(); err != nil {
			t.Fatalf("gather: %v", err)
		}
	})
	t.Run("clash registers nothing", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentgate_sse_clients", Help: "someone else's"}))
		if _, err := New(reg, Options{}); err == nil {
			t.Fatal("New on a registry that has agentgate_sse_clients: no error")
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if len(mfs) != 1 || mfs[0].GetHelp() != "someone else's" {
			t.Fatalf("after a failed New the registry has %d families, want only the one already there", len(mfs))
		}
	})
	for _, opts := range []Options{
		{Agents: []string{""}},
		{Agents: []string{"other"}},
		{Agents: []string{"claude\xff"}},
		{Models: []string{"unknown"}},
		{Models: []string{"sonnet", ""}},
	} {
		if _, err := New(prometheus.NewRegistry(), opts); err == nil {
			t.Errorf("New(%+v): no error", opts)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil): no error")
	}
}

func TestLint(t *testing.T) {
	reg := NewRegistry()
	r, err := New(reg, Options{Agents: testAgents})
	if err != nil {
		t.Fatal(err)
	}
	exercise(r)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), namespace+"_") {
			ours = append(ours, mf.GetName())
		}
	}
	// Every family has a series, so lint sees them all.
	want := []string{
		"agentgate_agent_info",
		"agentgate_cost_usd_total",
		"agentgate_events_total",
		"agentgate_fanout_events_delivered_total",
		"agentgate_fanout_events_offered_total",
		"agentgate_fanout_feeds",
		"agentgate_fanout_fell_off_total",
		"agentgate_fanout_local_fallbacks_total",
		"agentgate_fanout_local_feeds",
		"agentgate_fanout_readers",
		"agentgate_fanout_store_reads_total",
		"agentgate_http_request_duration_seconds",
		"agentgate_http_requests_total",
		"agentgate_input_tokens_total",
		"agentgate_output_tokens_total",
		"agentgate_run_duration_seconds",
		"agentgate_run_errors_total",
		"agentgate_run_queue_wait_seconds",
		"agentgate_runs_active",
		"agentgate_runs_created_total",
		"agentgate_runs_finished_total",
		"agentgate_runs_queued",
		"agentgate_runs_started_total",
		"agentgate_schedule_lag_seconds",
		"agentgate_sse_clients",
		"agentgate_store_packs_abandoned_total",
		"agentgate_store_packs_reads_total",
		"agentgate_store_packs_sent_total",
		"agentgate_time_to_first_event_seconds",
		"agentgate_usage_inconsistent_total",
	}
	if !slices.Equal(ours, want) {
		t.Errorf("families exposed:\n%v\nwant:\n%v", ours, want)
	}
	// OpenMetrics names a counter's family without "_total": a counter
	// x_total and a gauge x would be two families of one name.
	for _, name := range ours {
		if base, ok := strings.CutSuffix(name, "_total"); ok && slices.Contains(ours, base) {
			t.Errorf("%s and %s clash in OpenMetrics", name, base)
		}
	}
	if !slices.ContainsFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "go_goroutines" }) {
		t.Error("NewRegistry lacks the Go collector")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// exercise calls every method once, with values that touch every family.
func exercise(r *Recorder) {
	r.RunQueued("claude")
	r.RunStarted("claude", 0.01)
	r.FirstEvent("claude", 1)
	r.Event("claude", runs.EventMessageDelta)
	r.RunFinished("claude", "sonnet", runs.Failed, runs.APIError, 3,
		runs.Usage{InputTokens: -1, OutputTokens: 1}, ptr(0.01))
	r.QueueDepth(1, 1)
	r.HTTPRequest("/v1/runs", "POST", 201, 0.002)
	r.SSEClientsAdd(1)
	r.SetAgents([]runs.AgentInfo{{Name: "claude", Version: "2.1.3", Compatibility: runs.CompatVerified}})
	r.ObserveFanout(fixedFanout{Feeds: 1, RingReaders: 2, StoreReaders: 1, StoreReads: 3, FellOff: 1, Delivered: 9})
	r.ObservePacks(fixedPacks{Sent: 2, Abandoned: 1, Read: 3, Missed: 1, Damaged: 1})
}

// fixedPacks is a PackSource that always reports the same.
type fixedPacks store.PackStats

func (f fixedPacks) PackStats() store.PackStats { return store.PackStats(f) }

// fixedFanout is a FanoutSource that always reports the same.
type fixedFanout fanout.Stats

func (f fixedFanout) Stats() fanout.Stats { return fanout.Stats(f) }

func TestConcurrentUse(t *testing.T) {
	r, reg := newTest(t)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				exercise(r)
				r.SetAgents([]runs.AgentInfo{{Name: "codex", Version: fmt.Sprint(w, ".", i), Compatibility: runs.CompatNewer}})
				if i%50 == 0 {
					if _, err := reg.Gather(); err != nil {
						t.Errorf("gather: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if v := testutil.ToFloat64(r.runsCreated.WithLabelValues("claude")); v != workers*each {
		t.Fatalf("runs_created_total = %v, want %d", v, workers*each)
	}
	if v := testutil.ToFloat64(r.sseClients); v != workers*each {
		t.Fatalf("sse_clients = %v, want %d", v, workers*each)
	}
	if n := testutil.CollectAndCount(r.agentInfo); n != 1 {
		t.Fatalf("agent_info has %d series, want the last SetAgents' 1", n)
	}
}

func TestWorkspaceAndSnapshotSeries(t *testing.T) {
	reg := NewRegistry()
	r, err := New(reg, Options{Agents: []string{"claude"}})
	if err != nil {
		t.Fatal(err)
	}
	r.WorkspacePrepared(runs.SourceGit, 2, true)
	r.WorkspacePrepared(runs.SourceGit, 3, false)
	r.WorkspacePrepared(runs.SourceArchive, 1, true) // no clone: not counted as one
	r.WorkspacePrepared("made-up", 1, false)
	r.SnapshotKept(runs.SnapshotWorkspace, 100)
	r.SnapshotKept(runs.SnapshotWorkspace, 50)
	r.SnapshotKept(runs.SnapshotSession, 0)
	r.SnapshotRestored(runs.SnapshotSession)
	want := `
# HELP agentgate_git_clones_total Runs' directories cloned from a repository, by whether this replica's cache of it served the clone (hit) or it was cloned whole (miss).
# TYPE agentgate_git_clones_total counter
agentgate_git_clones_total{cache="hit"} 1
agentgate_git_clones_total{cache="miss"} 1
# HELP agentgate_snapshot_bytes_total Bytes this replica stored in the cluster's snapshots, by kind: runs' workspaces, sessions' files, patches, whole results.
# TYPE agentgate_snapshot_bytes_total counter
agentgate_snapshot_bytes_total{kind="workspace"} 150
# HELP agentgate_snapshot_restores_total Snapshots restored on this replica, by kind.
# TYPE agentgate_snapshot_restores_total counter
agentgate_snapshot_restores_total{kind="session"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"agentgate_git_clones_total", "agentgate_snapshot_bytes_total", "agentgate_snapshot_restores_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(r.workspacePrepare); n != 3 {
		t.Errorf("workspace_prepare_seconds has %d series, want git, archive and other", n)
	}
}
