package store

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// bigEvents returns events from..to of a run, each of size bytes of JSON.
func bigEvents(runID string, from, to uint64, size int) []runs.StoredEvent {
	var evs []runs.StoredEvent
	for seq := from; seq <= to; seq++ {
		head := fmt.Appendf(nil, `{"run_id":%q,"seq":%d,"type":"message.delta","text":"`, runID, seq)
		pad := bytes.Repeat([]byte("x"), max(0, size-len(head)-2))
		evs = append(evs, runs.StoredEvent{Seq: seq, Type: runs.EventMessageDelta, JSON: append(append(head, pad...), `"}`...)})
	}
	return evs
}

// Many readers pulling big events at once must not get the connection cut:
// the server cuts a client whose pending writes pass its max_pending
// (64 MiB), and 50 cursors pulling 64 events of 64 KiB each ask for 200 MiB.
// The writes of the run being read share the store, and must all land.
// Before cursors read on their own connections, with pulls bounded in
// bytes, the server cut the store's connection within 40 events.
func TestFanOutOfBigEventsKeepsTheConnection(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	e := &env{t: t, dir: t.TempDir()}
	srv, err := StartEmbedded(e.dir, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	t.Cleanup(e.stop)
	e.nc = e.connect()
	e.s, err = Open(ctx(t), e.nc, Options{})
	if err != nil {
		t.Fatal(err)
	}

	const (
		// The old code's connection was cut within 40 events: 600
		// written and 150 read by each reader are well past that, and
		// cost a fifth of the 3,000 and 300 this test once moved.
		total   = 600
		size    = 64 << 10
		readers = 50
		batch   = 16
		// Each reader reads this many: enough to pull while the run is
		// written, and few enough that 50 of them fit a busy machine.
		readEach = 150
	)
	id := newID(t)
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Readers start on the first events, so that they pull while the run
	// is written.
	if err := e.s.AppendEvents(c, id, bigEvents(id, 1, batch, size)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var readErrs atomic.Int64
	for range readers {
		cur, err := e.s.OpenCursor(c, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer cur.Close()
			var next uint64 = 1
			for next <= readEach {
				evs, err := cur.Next(c, 256)
				if err != nil {
					t.Errorf("reader at %d: %v", next, err)
					readErrs.Add(1)
					return
				}
				for _, ev := range evs {
					if ev.Seq != next {
						t.Errorf("reader got seq %d, want %d", ev.Seq, next)
						readErrs.Add(1)
						return
					}
					next++
				}
			}
		})
	}
	for seq := uint64(batch + 1); seq <= total; seq += batch {
		if err := e.s.AppendEvents(c, id, bigEvents(id, seq, min(seq+batch-1, total), size)); err != nil {
			t.Errorf("append %d: %v", seq, err)
			break
		}
	}
	wg.Wait()
	if last, err := e.s.LastEvent(c, id); err != nil || last.Seq != total {
		t.Errorf("last stored event = %d, %v; want %d", last.Seq, err, total)
	}
	if n := e.nc.Stats().Reconnects; n != 0 {
		t.Errorf("the store's connection was cut %d times", n)
	}
	for _, l := range logs.FilterMessageSnippet("Slow Consumer").All() {
		t.Errorf("server: %s", l.Message)
	}
}
