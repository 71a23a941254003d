// Package runstest is what tests that drive a real Supervisor share: an
// embedded store to run it on, a reader of a run's whole stored log, and an
// Observer that records nothing.
package runstest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
)

// Store starts an embedded JetStream server in a temporary directory and
// opens the gateway's store on it; both go when the test ends.
func Store(t testing.TB) runs.Store {
	t.Helper()
	return StoreWith(t, store.Options{})
}

// StoreWith is Store opened with opts: a short ReplicaTTL, say, for a test
// in which a replica that stopped must be found dead soon.
func StoreWith(t testing.TB, opts store.Options) runs.Store {
	t.Helper()
	emb, err := store.StartEmbedded(filepath.Join(t.TempDir(), "nats"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := store.Open(context.Background(), nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Uploads keeps tenants' uploaded files in st, a store from Store, with the
// default limits, as the gateway's own store does: a supervisor given it
// takes attachments, inline or by file id.
func Uploads(t testing.TB, st runs.Store) *files.Uploads {
	t.Helper()
	fs, ok := st.(files.Store)
	if !ok {
		t.Fatalf("store %T keeps no files", st)
	}
	return files.NewUploads(fs, files.Limits{}, nil)
}

// StoredEvents reads the whole log of run id as stored.
func StoredEvents(t testing.TB, st runs.EventLog, id string) []runs.StoredEvent {
	t.Helper()
	last, err := st.LastEvent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if last.Seq == 0 {
		return nil
	}
	cur, err := st.OpenCursor(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []runs.StoredEvent
	for uint64(len(out)) < last.Seq {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		batch, err := cur.Next(ctx, 512)
		cancel()
		if err != nil {
			t.Fatalf("read events of %s: %v", id, err)
		}
		out = append(out, batch...)
	}
	return out
}

// Completed reports whether the run's last stored event is run.completed.
// A run is recorded finished before that event is stored, so a test that
// reads the events once the record is terminal waits for this too.
func Completed(t testing.TB, st runs.EventLog, id string) bool {
	t.Helper()
	last, err := st.LastEvent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return last.Type == runs.EventRunCompleted
}

// NopObserver is a runs.Observer that records nothing.
type NopObserver struct{}

var _ runs.Observer = NopObserver{}

func (NopObserver) RunQueued(string)           {}
func (NopObserver) RunStarted(string, float64) {}
func (NopObserver) RunFinished(string, string, runs.State, runs.Class, float64, runs.Usage, *float64) {
}
func (NopObserver) Event(string, runs.EventType)                            {}
func (NopObserver) FirstEvent(string, float64)                              {}
func (NopObserver) QueueDepth(int, int)                                     {}
func (NopObserver) ApprovalRequested(string)                                {}
func (NopObserver) ApprovalResolved(string, runs.Decision, string, float64) {}
func (NopObserver) TurnStarted(string)                                      {}
func (NopObserver) TurnFinished(string, runs.State, float64)                {}
func (NopObserver) WorkspacePrepared(string, float64, bool)                 {}
func (NopObserver) SnapshotKept(runs.SnapshotKind, int64)                   {}
func (NopObserver) SnapshotRestored(runs.SnapshotKind)                      {}
func (NopObserver) NetworkDenied(string, string)                            {}
func (NopObserver) RunHibernated(string)                                    {}
func (NopObserver) RunWoken(string)                                         {}
func (NopObserver) WokenFirstEvent(string, float64)                         {}
