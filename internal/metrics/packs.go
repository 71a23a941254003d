package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentgate/agentgate/internal/store"
)

// PackSource is the replica's store, a *store.Store, read at each scrape
// for the pack metrics.
type PackSource interface {
	PackStats() store.PackStats
}

// ObservePacks makes the pack metrics report src, the replica's store:
// cmd/gateway calls it once the store is open. Until then they have no
// series.
func (r *Recorder) ObservePacks(src PackSource) {
	r.packs.set(src)
}

// packCollector exports a PackSource's PackStats, read when scraped, so
// that the store keeps plain atomic counters and knows nothing of
// Prometheus.
type packCollector struct {
	sent, abandoned, reads *prometheus.Desc

	mu  sync.Mutex
	src PackSource
}

func newPackCollector() *packCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(namespace+"_store_packs_"+name, help, labels, nil)
	}
	return &packCollector{
		sent: desc("sent_total",
			"Packs this replica's store wrote: a run's events 512 to a message, which replays read."),
		abandoned: desc("abandoned_total",
			"Packs given up before they were complete (a gap in what this replica stored, a pack past its size, the writer's memory bound): their events are replayed from the log, more slowly."),
		reads: desc("reads_total",
			"Packs that cursors on this replica asked for, by what they found: read; missing (never written, or the live tail, where each cursor's first ask finds none); damaged.",
			"result"),
	}
}

func (c *packCollector) set(src PackSource) {
	c.mu.Lock()
	c.src = src
	c.mu.Unlock()
}

func (c *packCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sent, c.abandoned, c.reads} {
		ch <- d
	}
}

func (c *packCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	st := src.PackStats()
	ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(st.Sent))
	ch <- prometheus.MustNewConstMetric(c.abandoned, prometheus.CounterValue, float64(st.Abandoned))
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(st.Read), "read")
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(st.Missed), "missing")
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(st.Damaged), "damaged")
}
