package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// fullDiskEnv is a store whose files are on a tmpfs of 64 MiB, and a
// workspace on the same tmpfs, as a gateway with one small data directory
// has them.
type fullDiskEnv struct {
	emb  *Embedded
	s    *Store
	fill string // the workspace's file that fills the disk
}

func newFullDiskEnv(t *testing.T) *fullDiskEnv {
	t.Helper()
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64m"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v: this test fills a small disk of its own, which takes root (CAP_SYS_ADMIN); run it as root", mnt, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	emb, err := StartEmbedded(filepath.Join(mnt, "data", "nats"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	// A short timeout: a write to a marked stream is never answered.
	s, err := Open(ctx(t), nc, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(mnt, "data", "workspaces")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return &fullDiskEnv{emb: emb, s: s, fill: filepath.Join(ws, "big")}
}

// fillDisk writes the workspace's file until the disk is full.
func (e *fullDiskEnv) fillDisk(t *testing.T) {
	t.Helper()
	f, err := os.Create(e.fill)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for _, n := range []int{1 << 20, 4096, 1} {
		for err = nil; err == nil; _, err = f.Write(buf[:n]) {
		}
		if !errors.Is(err, unix.ENOSPC) {
			t.Fatalf("filling the disk: %v, want ENOSPC", err)
		}
	}
}

// breakRun updates r until an update fails, as the first write that needs
// a new page of the full disk does, and returns that error.
func (e *fullDiskEnv) breakRun(t *testing.T, r runs.Run) error {
	t.Helper()
	for i := 0; i < 100; i++ {
		r.Result = strings.Repeat("x", 1000+i)
		if err := e.s.UpdateRun(context.Background(), r); err != nil {
			return err
		}
	}
	t.Fatal("100 updates of 1 KB each stored on a full disk")
	return nil
}

// What nats-server 2.15.2 does when its disk fills, without a guard: the
// stream that met ENOSPC is marked, Ping still answers, and the mark stays
// once the space is back: every write times out until JetStream is
// restarted, which clears it on the same server and connection. Should
// a later server clear the mark by itself, this test fails, and the disk
// guard's restart can go.
func TestFullDiskMarksStreamUntilRestart(t *testing.T) {
	e := newFullDiskEnv(t)
	r := sampleRun(newID(t))
	if err := e.s.CreateRun(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, e.s, r.ID, 1, 3)
	if err := e.emb.Health(); err != nil {
		t.Fatal(err)
	}

	e.fillDisk(t)
	if err := e.breakRun(t, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("update on a full disk: %v, want a timeout (the server does not answer)", err)
	}
	health := e.emb.Health()
	if health == nil || !strings.Contains(health.Error(), "KV_"+runsBucket) || !strings.Contains(health.Error(), "no space left") {
		t.Fatalf("Health = %v, want the runs bucket's write error", health)
	}
	if err := e.s.Ping(ctx(t)); err != nil {
		t.Errorf("Ping = %v; it answered in the incident, which is why readiness said ready", err)
	}

	if err := os.Remove(e.fill); err != nil {
		t.Fatal(err)
	}
	r.Status = runs.Succeeded
	if err := e.s.UpdateRun(context.Background(), r); err == nil {
		t.Fatal("the marked bucket stored an update once space was back: the server now clears the mark itself")
	}
	if err := e.emb.Health(); err == nil {
		t.Fatal("Health is nil once space is back, with the bucket still marked")
	}

	if err := e.emb.RestartJetStream(); err != nil {
		t.Fatal(err)
	}
	if err := e.emb.Health(); err != nil {
		t.Fatalf("Health after the restart: %v", err)
	}
	// The same Store, on the same connection, writes again, and what was
	// stored before is there.
	if err := e.s.UpdateRun(ctx(t), r); err != nil {
		t.Fatalf("update after the restart: %v", err)
	}
	if got, err := e.s.GetRun(ctx(t), r.ID); err != nil || got.Status != runs.Succeeded {
		t.Errorf("GetRun = %v, %v", got.Status, err)
	}
	appendEvents(t, e.s, r.ID, 4, 5)
	read(t, openCursor(t, e.s, r.ID, 0), r.ID, 1, 5)
	r2 := sampleRun(newID(t))
	if err := e.s.CreateRun(ctx(t), r2); err != nil {
		t.Errorf("create after the restart: %v", err)
	}
}

func TestRestartJetStreamKeepsCursors(t *testing.T) {
	e := newEnv(t)
	r := sampleRun(newID(t))
	if err := e.s.CreateRun(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, e.s, r.ID, 1, 3)
	c := openCursor(t, e.s, r.ID, 0)
	read(t, c, r.ID, 1, 3)
	if err := e.srv.RestartJetStream(); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Health(); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, e.s, r.ID, 4, 6)
	// The cursor's consumer went with JetStream; the client makes a new
	// one after its missed heartbeats, which takes about 10 s, longer than
	// read waits for one batch.
	wait, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []uint64
	for len(got) < 3 {
		batch, err := c.Next(wait, 100)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		for _, ev := range batch {
			got = append(got, ev.Seq)
		}
	}
	if len(got) != 3 || got[0] != 4 || got[1] != 5 || got[2] != 6 {
		t.Errorf("after the restart the cursor read seqs %v, want [4 5 6]", got)
	}
}

// While RestartJetStream replaces the server, Health says so rather than
// what the old server, shutting down, reports: every stream "could not be
// recovered", which a caller would take for a store that lost its files.
func TestHealthDuringRestart(t *testing.T) {
	e := newEnv(t)
	done := make(chan error, 1)
	go func() { done <- e.srv.RestartJetStream() }()
	var seen []error
	for restarted := false; !restarted; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("restart: %v", err)
			}
			restarted = true
		default:
		}
		if err := e.srv.Health(); err != nil && !errors.Is(err, ErrRestarting) {
			seen = append(seen, err)
		}
	}
	for _, err := range seen {
		t.Errorf("Health during the restart: %v, want ErrRestarting", err)
	}
	if err := e.srv.Health(); err != nil {
		t.Errorf("Health after the restart: %v", err)
	}
}
