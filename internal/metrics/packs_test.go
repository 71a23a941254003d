package metrics

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentgate/agentgate/internal/store"
)

// packCounts is a PackSource whose counts the test sets.
type packCounts struct {
	st atomic.Pointer[store.PackStats]
}

func (p *packCounts) PackStats() store.PackStats { return *p.st.Load() }

func TestPackMetrics(t *testing.T) {
	r, reg := newTest(t)
	for k := range samples(t, reg) {
		if strings.HasPrefix(k, "agentgate_store_packs_") {
			t.Fatalf("pack series before ObservePacks: %s", k)
		}
	}
	src := &packCounts{}
	src.st.Store(&store.PackStats{Sent: 12, Abandoned: 1, Read: 30, Missed: 4, Damaged: 2})
	r.ObservePacks(src)
	assertFanout(t, reg, map[string]float64{
		`agentgate_store_packs_sent_total{}`:                  12,
		`agentgate_store_packs_abandoned_total{}`:             1,
		`agentgate_store_packs_reads_total{result="read"}`:    30,
		`agentgate_store_packs_reads_total{result="missing"}`: 4,
		`agentgate_store_packs_reads_total{result="damaged"}`: 2,
	})
	// Read at each scrape, not at ObservePacks.
	src.st.Store(&store.PackStats{Sent: 13, Abandoned: 1, Read: 31, Missed: 4, Damaged: 2})
	assertFanout(t, reg, map[string]float64{
		`agentgate_store_packs_sent_total{}`:               13,
		`agentgate_store_packs_reads_total{result="read"}`: 31,
	})
}
