package runstest

import (
	"sync"
	"time"
)

// Deadlines is a supervisor.Config.RunDeadline that lets a test strike a run's
// deadline at the moment its scenario needs: once the agent's tool runs,
// or once the mock holds its request unanswered. A timer started with the
// process cannot promise that on a busy machine, where the CLI may take
// longer to get there than the timeout. A run the test leaves alone still
// times out after its timeout, as without Deadlines.
type Deadlines struct {
	mu   sync.Mutex
	runs map[string]*deadline
}

type deadline struct {
	once sync.Once
	ch   chan time.Time
}

func (d *deadline) strike() { d.once.Do(func() { close(d.ch) }) }

func (ds *Deadlines) of(runID string) *deadline {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.runs == nil {
		ds.runs = map[string]*deadline{}
	}
	d, ok := ds.runs[runID]
	if !ok {
		d = &deadline{ch: make(chan time.Time)}
		ds.runs[runID] = d
	}
	return d
}

// Arm implements supervisor.Config.RunDeadline: the run's deadline comes after
// timeout, or when Strike says, whichever is first.
func (ds *Deadlines) Arm(runID string, timeout time.Duration) <-chan time.Time {
	d := ds.of(runID)
	time.AfterFunc(timeout, d.strike)
	return d.ch
}

// Strike makes run runID reach its deadline now (or at once when it
// starts, if it has not yet).
func (ds *Deadlines) Strike(runID string) { ds.of(runID).strike() }
