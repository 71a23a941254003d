package diskguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
	"github.com/google/uuid"
	"go.uber.org/zap"
)

// storeEnv is a gateway's data directory on a 64 MiB disk, as in the
// incident: the embedded store's files and a workspace on one filesystem.
type storeEnv struct {
	dir  string // the store's files
	ws   string // a workspace
	emb  *store.Embedded
	s    *store.Store
	fill string // the workspace's file that fills the disk
}

func newStoreEnv(t *testing.T) *storeEnv {
	t.Helper()
	mnt := tmpfs(t, "64m")
	e := &storeEnv{dir: filepath.Join(mnt, "data", "nats"), ws: mkdir(t, mnt, "data", "workspaces", "run")}
	e.fill = filepath.Join(e.ws, "big")
	emb, err := store.StartEmbedded(e.dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	// A short timeout: a write to a stream the server marked is never
	// answered.
	s, err := store.Open(testCtx(t), nc, store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.emb, e.s = emb, s
	return e
}

func (e *storeEnv) guard(t *testing.T) *Guard {
	t.Helper()
	g, err := New(Options{StoreDir: e.dir, Store: e.emb, Dirs: []string{filepath.Dir(e.ws)}, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Healthy(); err != nil {
		t.Fatalf("a fresh disk: %v", err)
	}
	return g
}

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func newRun(t *testing.T) runs.Run {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return runs.Run{ID: id.String(), Agent: "claude", Status: runs.Running, CreatedAt: time.Now().UTC(),
		Spec: runs.Spec{Agent: "claude", Prompt: "fill the disk"}}
}

func events(runID string, from, to uint64, last bool) []runs.StoredEvent {
	var evs []runs.StoredEvent
	for seq := from; seq <= to; seq++ {
		typ := runs.EventMessageDelta
		if last && seq == to {
			typ = runs.EventRunCompleted
		}
		evs = append(evs, runs.StoredEvent{Seq: seq, Type: typ,
			JSON: fmt.Appendf(nil, `{"run_id":%q,"seq":%d,"type":%q,"data":{"text":%q}}`, runID, seq, typ, strings.Repeat("y", 2000))})
	}
	return evs
}

// checkEvents reads the run's log and checks it holds seqs 1..n.
func checkEvents(t *testing.T, s *store.Store, runID string, n uint64) {
	t.Helper()
	c, err := s.OpenCursor(testCtx(t), runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var seq uint64
	for seq < n {
		batch, err := c.Next(testCtx(t), 100)
		if err != nil {
			t.Fatalf("after seq %d of %d: %v", seq, n, err)
		}
		for _, ev := range batch {
			if ev.Seq != seq+1 {
				t.Fatalf("seq %d after %d", ev.Seq, seq)
			}
			seq = ev.Seq
		}
	}
}

// worksAgain checks that the store takes every kind of write again: a new
// run, its events and its updates, the sessions bucket.
func worksAgain(t *testing.T, s *store.Store) {
	t.Helper()
	r := newRun(t)
	if err := s.CreateRun(testCtx(t), r); err != nil {
		t.Fatalf("create a run: %v", err)
	}
	if err := s.AppendEvents(testCtx(t), r.ID, events(r.ID, 1, 20, true)); err != nil {
		t.Fatalf("append events: %v", err)
	}
	r.Status = runs.Succeeded
	if err := s.UpdateRun(testCtx(t), r); err != nil {
		t.Fatalf("update the run: %v", err)
	}
	if err := s.SetSession(testCtx(t), "claude", r.ID, runs.SessionRecord{Cwd: "run"}); err != nil {
		t.Fatalf("set a session: %v", err)
	}
	checkEvents(t, s, r.ID, 20)
}

// The incident's disk: an agent fills its workspace, on the store's disk,
// to the last byte. The guard turns unhealthy, and the reserve it lets go
// takes the run's last events and final record; once the file is gone it
// is healthy again and the same store takes new runs.
func TestFullDiskReserveTakesFinalWrites(t *testing.T) {
	e := newStoreEnv(t)
	g := e.guard(t)
	var ch changes
	g.OnChange(ch.add)
	run(t, g)

	r := newRun(t)
	if err := e.s.CreateRun(testCtx(t), r); err != nil {
		t.Fatal(err)
	}
	if err := e.s.AppendEvents(testCtx(t), r.ID, events(r.ID, 1, 5, false)); err != nil {
		t.Fatal(err)
	}

	fill(t, e.fill)
	waitFor(t, "the guard to see the full disk", func() bool { return g.Healthy() != nil })
	if err := g.Healthy(); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("Healthy = %v, want ErrDiskLow", err)
	}
	// The filler gave up on ENOSPC: the free space stops falling, and the
	// guard lets the reserve go.
	waitFor(t, "the reserve released", func() bool {
		_, err := os.Stat(filepath.Join(e.dir, ReserveFile))
		return errors.Is(err, os.ErrNotExist)
	})
	// The store may take some of the freed room at once (writes it had
	// failed to flush): what counts is that its writes below succeed.
	t.Logf("%d bytes free after the release of a 4 MiB reserve", freeBytes(t, e.fill))

	// What a stopped run still writes: its last events and final record.
	if err := e.s.AppendEvents(testCtx(t), r.ID, events(r.ID, 6, 40, true)); err != nil {
		t.Fatalf("the run's last events on the full disk: %v (health %v, free %d, guard %v)", err, e.emb.Health(), freeBytes(t, e.fill), g.Healthy())
	}
	r.Status = runs.Failed
	r.Error = &runs.RunError{Class: "store_failed", Message: "disk full"}
	if err := e.s.UpdateRun(testCtx(t), r); err != nil {
		t.Fatalf("the run's final record on the full disk: %v", err)
	}
	// Those writes met no full disk, but the server's own flush of its
	// streams' state may have, while the disk was full and the reserve
	// held: the guard then restarts JetStream, now that there is room,
	// and Health says ErrRestarting while it does. Either way the store
	// must be healthy without the filler gone.
	waitFor(t, "the store healthy beside the filler", func() bool { return e.emb.Health() == nil })
	// Still unhealthy: the filler is there, and the reserve is not held.
	if err := g.Healthy(); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("Healthy = %v with the disk still full", err)
	}

	if err := os.Remove(e.fill); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the guard healthy again", func() bool { return g.Healthy() == nil })
	if !reserveHeld(filepath.Join(e.dir, ReserveFile), 4<<20) {
		t.Error("the reserve was not made again")
	}
	got, err := e.s.GetRun(testCtx(t), r.ID)
	if err != nil || got.Status != runs.Failed {
		t.Errorf("the final record: %v, %v", got.Status, err)
	}
	checkEvents(t, e.s, r.ID, 40)
	worksAgain(t, e.s)
	if c := ch.list(); len(c) < 2 || c[0] == nil || c[len(c)-1] != nil {
		t.Errorf("OnChange got %v, want unhealthy then healthy", c)
	}
}

// The store met the full disk before the guard could act, so the server
// marked its runs bucket and writes nothing there any more. The guard
// sees it, lets the reserve go and restarts JetStream in that room: the
// run's final record is stored while the disk is still full, and once
// space is back the same store takes new runs, with no restart of the
// process.
func TestFullDiskStoreMarkedRecovers(t *testing.T) {
	e := newStoreEnv(t)
	g := e.guard(t) // not running yet: the store fails first

	r := newRun(t)
	if err := e.s.CreateRun(testCtx(t), r); err != nil {
		t.Fatal(err)
	}
	fill(t, e.fill)
	// The reserve is still held, so the store's next write that needs a
	// new page of the disk fails, and the server marks its stream.
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		r.Result = strings.Repeat("x", 1000+i)
		err = e.s.UpdateRun(context.Background(), r)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("updates on a full disk: %v, want one to time out", err)
	}
	if e.emb.Health() == nil {
		t.Fatal("the server did not mark the runs bucket")
	}

	run(t, g)
	waitFor(t, "the guard to restart the store's jetstream", func() bool {
		err := g.Healthy()
		return err != nil && !errors.Is(err, ErrStoreFailed)
	})
	if err := g.Healthy(); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("Healthy = %v, want ErrDiskLow with the disk still full", err)
	}
	if err := e.emb.Health(); err != nil {
		t.Fatalf("the store after the guard's restart: %v", err)
	}
	r.Status = runs.Failed
	r.Error = &runs.RunError{Class: "store_failed", Message: "disk full"}
	if err := e.s.UpdateRun(testCtx(t), r); err != nil {
		t.Fatalf("the run's final record on the full disk, after the restart: %v", err)
	}

	if err := os.Remove(e.fill); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the guard healthy again", func() bool { return g.Healthy() == nil })
	got, err := e.s.GetRun(testCtx(t), r.ID)
	if err != nil || got.Status != runs.Failed {
		t.Errorf("the final record: %v, %v", got.Status, err)
	}
	worksAgain(t, e.s)
}

// Space comes back with the store still marked and the guard not yet
// running: at its first look it restarts JetStream and is healthy.
func TestStoreMarkedSpaceBack(t *testing.T) {
	e := newStoreEnv(t)
	r := newRun(t)
	if err := e.s.CreateRun(testCtx(t), r); err != nil {
		t.Fatal(err)
	}
	fill(t, e.fill)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		r.Result = strings.Repeat("x", 1000+i)
		err = e.s.UpdateRun(context.Background(), r)
	}
	if err == nil || e.emb.Health() == nil {
		t.Fatalf("the store did not fail on a full disk: %v", err)
	}
	// New on the full disk: no room for the reserve, the store failed.
	g, err := New(Options{StoreDir: e.dir, Store: e.emb, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Healthy(); !errors.Is(err, ErrDiskLow) || !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("Healthy = %v, want ErrDiskLow and ErrStoreFailed", err)
	}
	if err := os.Remove(e.fill); err != nil {
		t.Fatal(err)
	}
	run(t, g)
	waitFor(t, "the guard healthy", func() bool { return g.Healthy() == nil })
	worksAgain(t, e.s)
}
