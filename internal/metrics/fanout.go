package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentgate/agentgate/internal/fanout"
)

// FanoutSource is the replica's fan-out hub, a *fanout.Hub, read at each
// scrape for the fan-out metrics.
type FanoutSource interface {
	Stats() fanout.Stats
}

// ObserveFanout makes the fan-out metrics report src, the replica's hub:
// cmd/gateway calls it once it has built the hub. Until then they have no
// series.
func (r *Recorder) ObserveFanout(src FanoutSource) {
	r.fanout.set(src)
}

// fanoutCollector exports a FanoutSource's Stats, read when scraped, so
// that the hub keeps plain atomic counters and knows nothing of
// Prometheus.
type fanoutCollector struct {
	feeds, readers, storeReads, fellOff, delivered *prometheus.Desc
	offered, localFeeds, fallbacks                 *prometheus.Desc

	mu  sync.Mutex
	src FanoutSource
}

func newFanoutCollector() *fanoutCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(namespace+"_fanout_"+name, help, labels, nil)
	}
	return &fanoutCollector{
		feeds: desc("feeds",
			"Runs whose events this replica's clients read through a shared feed: one store cursor and a ring of recent events each."),
		readers: desc("readers",
			"Open event streams on this replica, by where they read: the run's ring (ring), or a store cursor of their own (store) while behind it.",
			"source"),
		storeReads: desc("store_reads_total",
			"Store cursors event streams opened of their own: starting before their run's ring, or fallen off it."),
		fellOff: desc("fell_off_total",
			"Event streams that fell off their run's ring, reading more slowly than the run wrote, and read on from the store."),
		delivered: desc("events_delivered_total",
			"Events handed to event streams on this replica, from a ring or the store."),
		offered: desc("events_offered_total",
			"Events that entered a run's ring straight from this replica's own appends to the store, not through a store cursor."),
		localFeeds: desc("local_feeds",
			"Feeds kept current by this replica's own appends alone, with no store cursor: runs this replica runs, watched here."),
		fallbacks: desc("local_fallbacks_total",
			"Times a feed kept by this replica's appends found its run's log written without them, and read the store again."),
	}
}

func (c *fanoutCollector) set(src FanoutSource) {
	c.mu.Lock()
	c.src = src
	c.mu.Unlock()
}

func (c *fanoutCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.feeds, c.readers, c.storeReads, c.fellOff, c.delivered, c.offered, c.localFeeds, c.fallbacks} {
		ch <- d
	}
}

func (c *fanoutCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	st := src.Stats()
	ch <- prometheus.MustNewConstMetric(c.feeds, prometheus.GaugeValue, float64(max(st.Feeds, 0)))
	ch <- prometheus.MustNewConstMetric(c.readers, prometheus.GaugeValue, float64(max(st.RingReaders, 0)), "ring")
	ch <- prometheus.MustNewConstMetric(c.readers, prometheus.GaugeValue, float64(max(st.StoreReaders, 0)), "store")
	ch <- prometheus.MustNewConstMetric(c.storeReads, prometheus.CounterValue, float64(max(st.StoreReads, 0)))
	ch <- prometheus.MustNewConstMetric(c.fellOff, prometheus.CounterValue, float64(max(st.FellOff, 0)))
	ch <- prometheus.MustNewConstMetric(c.delivered, prometheus.CounterValue, float64(max(st.Delivered, 0)))
	ch <- prometheus.MustNewConstMetric(c.offered, prometheus.CounterValue, float64(max(st.Offered, 0)))
	ch <- prometheus.MustNewConstMetric(c.localFeeds, prometheus.GaugeValue, float64(max(st.LocalFeeds, 0)))
	ch <- prometheus.MustNewConstMetric(c.fallbacks, prometheus.CounterValue, float64(max(st.LocalFallbacks, 0)))
}
