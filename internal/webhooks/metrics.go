package webhooks

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Observer is told what deliveries do, for metrics; every method must be
// cheap and must not block. Metrics implements it.
type Observer interface {
	// Delivery counts a delivery that ended, by its final State, or
	// "dropped" for one that could not even be recorded.
	Delivery(outcome string)
	// Attempt counts one attempt, by result ("2xx", "3xx", "4xx",
	// "5xx", "error", "refused"), with its duration.
	Attempt(result string, seconds float64)
}

// OutcomeDropped counts an event whose delivery could not be recorded.
const OutcomeDropped = "dropped"

// Metrics is the Prometheus Observer:
// agentgate_webhook_deliveries_total{outcome} and
// agentgate_webhook_attempts_total{result} with
// agentgate_webhook_attempt_duration_seconds.
type Metrics struct {
	deliveries *prometheus.CounterVec
	attempts   *prometheus.CounterVec
	duration   prometheus.Histogram
}

// NewMetrics registers the webhook metrics on reg, all or none.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("webhooks: nil registerer")
	}
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentgate", Name: "webhook_deliveries_total",
			Help: "Webhook deliveries that ended, by outcome: delivered, failed, gone (410), refused (an internal address), dropped (never recorded).",
		}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentgate", Name: "webhook_attempts_total",
			Help: "Webhook POSTs, by result: the status class, error (no answer), refused.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "agentgate", Name: "webhook_attempt_duration_seconds",
			Help:    "Time from a webhook POST to its answer, or its failure.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}),
	}
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{m.deliveries, m.attempts, m.duration} {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, err
		}
		done = append(done, c)
	}
	// Every outcome and result has a series from the start, so that a
	// rate over them is defined before the first one happens.
	for _, o := range []string{string(Delivered), string(Failed), string(Gone), string(Refused), OutcomeDropped} {
		m.deliveries.WithLabelValues(o)
	}
	for _, r := range []string{"2xx", "3xx", "4xx", "5xx", "error", "refused"} {
		m.attempts.WithLabelValues(r)
	}
	return m, nil
}

// Delivery implements Observer.
func (m *Metrics) Delivery(outcome string) { m.deliveries.WithLabelValues(outcome).Inc() }

// Attempt implements Observer.
func (m *Metrics) Attempt(result string, seconds float64) {
	m.attempts.WithLabelValues(result).Inc()
	m.duration.Observe(seconds)
}

// statusResult is the result label of an answered attempt.
func statusResult(code int) string {
	if code < 100 || code > 599 {
		return "error"
	}
	return strconv.Itoa(code/100) + "xx"
}

type nopObserver struct{}

func (nopObserver) Delivery(string)         {}
func (nopObserver) Attempt(string, float64) {}
