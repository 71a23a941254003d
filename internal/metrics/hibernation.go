package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentgate/agentgate/internal/runs"
)

// hibernationCollectors are the counters of runs that hibernated and woke,
// and the time from a waking message to the first event of the CLI
// started again.
func hibernationCollectors() (hibernations, wakes *prometheus.CounterVec, wakeFirst *prometheus.HistogramVec) {
	hibernations = counterVec("hibernations_total",
		"Interactive runs that hibernated: their session kept in the cluster and their CLI stopped.", "agent")
	wakes = counterVec("wakes_total",
		"Hibernated runs a message woke, on this replica.", "agent")
	wakeFirst = histogramVec("wake_first_event_seconds",
		"Time from the message that woke a hibernated run to the first event of its CLI started again.",
		[]float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120},
		"agent")
	return hibernations, wakes, wakeFirst
}

// RunHibernated counts a run that hibernated.
func (r *Recorder) RunHibernated(agent string) {
	r.hibernations.WithLabelValues(r.agents.label(agent)).Inc()
}

// RunWoken counts a hibernated run that a message woke here.
func (r *Recorder) RunWoken(agent string) {
	r.wakes.WithLabelValues(r.agents.label(agent)).Inc()
}

// WokenFirstEvent records the time from a waking message to the first
// event of the woken CLI.
func (r *Recorder) WokenFirstEvent(agent string, secs float64) {
	r.wakeFirst.WithLabelValues(r.agents.label(agent)).Observe(seconds(secs))
}

// ActivitySource says how many of the replica's runs do what, read at
// each scrape (the supervisor's ActivityCounts).
type ActivitySource func() map[runs.Activity]int

// ObserveActivities makes agentgate_runs_by_activity report src:
// cmd/gateway calls it once it has built the supervisor. Until then the
// metric has no series.
func (r *Recorder) ObserveActivities(src ActivitySource) {
	r.activities.mu.Lock()
	r.activities.src = src
	r.activities.mu.Unlock()
}

// activityCollector exports the runs by activity, read when scraped.
type activityCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	src  ActivitySource
}

func newActivityCollector() *activityCollector {
	return &activityCollector{desc: prometheus.NewDesc(namespace+"_runs_by_activity",
		"Interactive runs and runs with approvals on this replica by activity: in_turn, awaiting_approval, idle, stopping, and hibernated (the hibernated runs whose timer this replica keeps).",
		[]string{"activity"}, nil)}
}

func (c *activityCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *activityCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	for a, n := range src() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(a))
	}
}
