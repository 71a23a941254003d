package supervisor

import (
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

// TestAppender is a run's appender for the benchmarks of the runs_test
// package, which can use the real store: add queues events, close stores
// what is queued and returns how many events the store never took.
type TestAppender struct{ a *appender }

// NewTestAppender starts an appender of the run's events on st with the
// given window (0: none, as before windows).
func NewTestAppender(st runs.Store, runID string, window time.Duration) TestAppender {
	return TestAppender{newAppenderWindow(st, runID, 4096, time.Minute, window, zap.NewNop())}
}

// Add queues evs.
func (t TestAppender) Add(evs []runs.StoredEvent) { t.a.add(evs) }

// Close stores what is queued.
func (t TestAppender) Close() (lost int) { return t.a.close() }

// AppendWindow is the window of the supervisor's appenders.
const AppendWindow = appendWindow
