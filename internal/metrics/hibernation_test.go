package metrics

import (
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// Each hibernation method moves its own series and no other; the runs by
// activity are read from their source at every scrape, none before one is
// given.
func TestHibernationSeries(t *testing.T) {
	r, reg := newTest(t)
	assertChange(t, change(t, reg, func() { r.RunHibernated("claude") }),
		map[string]float64{`agentgate_hibernations_total{agent="claude"}`: 1})
	assertChange(t, change(t, reg, func() { r.RunWoken("codex") }),
		map[string]float64{`agentgate_wakes_total{agent="codex"}`: 1})
	assertChange(t, change(t, reg, func() { r.WokenFirstEvent("codex", 1.5) }),
		map[string]float64{`agentgate_wake_first_event_seconds_count{agent="codex"}`: 1,
			`agentgate_wake_first_event_seconds_sum{agent="codex"}`: 1.5})

	counts := map[runs.Activity]int{runs.Idle: 2, runs.Hibernated: 7}
	assertChange(t, change(t, reg, func() { r.ObserveActivities(func() map[runs.Activity]int { return counts }) }),
		map[string]float64{`agentgate_runs_by_activity{activity="idle"}`: 2, `agentgate_runs_by_activity{activity="hibernated"}`: 7})
	assertChange(t, change(t, reg, func() { counts[runs.Hibernated] = 1000 }),
		map[string]float64{`agentgate_runs_by_activity{activity="hibernated"}`: 993})
}
