package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// autorunCollectors are the metrics of runs that start themselves.
func autorunCollectors() (fires, deliveries *prometheus.CounterVec, lag prometheus.Histogram) {
	return counterVec("schedule_fires_total",
			"Schedules' fire times handled on this replica, by outcome: started, skipped_busy, queued, refused, missed.",
			"outcome"),
		counterVec("trigger_deliveries_total",
			"Deliveries to triggers answered on this replica, by outcome: started, skipped_busy, queued, refused, ignored, duplicate, unauthenticated, too_large, rate_limited, invalid_payload.",
			"outcome"),
		prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "schedule_lag_seconds",
			Help:    "Time from a schedule's fire time to the submission of its run: how late the clock's runs start.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60}})
}

// autorunOutcomes bound the outcome label: anything else is "other".
var autorunOutcomes = map[string]bool{
	"started": true, "skipped_busy": true, "queued": true, "refused": true, "missed": true, "ignored": true,
	"duplicate": true, "unauthenticated": true, "too_large": true, "rate_limited": true, "invalid_payload": true,
}

func outcomeLabel(o string) string {
	if autorunOutcomes[o] {
		return o
	}
	return "other"
}

// ScheduleFire counts a schedule's fire by outcome, and observes the lag
// of a clock fire that started a run (lag ≥ 0).
func (r *Recorder) ScheduleFire(outcome string, lag time.Duration) {
	r.scheduleFires.WithLabelValues(outcomeLabel(outcome)).Inc()
	if lag >= 0 {
		r.scheduleLag.Observe(lag.Seconds())
	}
}

// TriggerDelivery counts a delivery to a trigger by outcome.
func (r *Recorder) TriggerDelivery(outcome string) {
	r.triggerDeliveries.WithLabelValues(outcomeLabel(outcome)).Inc()
}
