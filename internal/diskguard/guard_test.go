package diskguard

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tmpfs mounts a tmpfs of size bytes on a new directory, and unmounts it
// when the test ends, after the cleanups registered later (a store on it).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size); err != nil {
		t.Fatalf("mount a tmpfs of %s on %s: %v: this test fills a small disk of its own, which takes root (CAP_SYS_ADMIN); run it as root", size, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func mkdir(t *testing.T, parts ...string) string {
	t.Helper()
	dir := filepath.Join(parts...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fill writes path until its filesystem is full, as an agent would, and
// checks that it stopped on ENOSPC.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for _, n := range []int{1 << 20, 4096, 1} {
		for {
			if _, err = f.Write(buf[:n]); err != nil {
				break
			}
		}
		if !errors.Is(err, unix.ENOSPC) {
			t.Fatalf("filling %s: %v, want ENOSPC", path, err)
		}
	}
	if free := freeBytes(t, path); free != 0 {
		t.Fatalf("after filling %s, %d bytes free", path, free)
	}
}

func freeBytes(t *testing.T, path string) int64 {
	t.Helper()
	var sf unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &sf); err != nil {
		t.Fatal(err)
	}
	return int64(sf.Bavail) * sf.Bsize
}

// waitFor polls cond until it holds. The deadline only ends a test that
// would otherwise hang; it is far above what the guard needs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run runs g until the test ends.
func run(t *testing.T, g *Guard) {
	t.Helper()
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(c) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// changes records what OnChange reports.
type changes struct {
	mu  sync.Mutex
	got []error
}

func (c *changes) add(err error) { c.mu.Lock(); c.got = append(c.got, err); c.mu.Unlock() }
func (c *changes) list() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.got...)
}

func TestReserveHoldsBlocks(t *testing.T) {
	mnt := tmpfs(t, "64m")
	dir := mkdir(t, mnt, "nats")
	before := freeBytes(t, filepath.Join(dir, "x"))
	g, err := New(Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Healthy(); err != nil {
		t.Fatal(err)
	}
	// The default reserve, 64 MiB, is capped to a 16th of the disk.
	const want = 4 << 20
	path := filepath.Join(dir, ReserveFile)
	if !reserveHeld(path, want) {
		t.Fatalf("no allocated reserve of %d bytes at %s", want, path)
	}
	if used := before - freeBytes(t, path); used < want {
		t.Errorf("the reserve takes %d bytes of the disk, want %d", used, want)
	}
	st := g.Status()
	if len(st) != 1 || st[0].Reserve != want || st[0].LowWater != want || st[0].Size != 64<<20 {
		t.Errorf("Status = %+v", st)
	}

	// A sparse file in its place holds nothing, and is made whole.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, want); err != nil {
		t.Fatal(err)
	}
	if reserveHeld(path, want) {
		t.Fatal("a sparse file counts as a reserve")
	}
	if _, err := New(Options{StoreDir: dir}); err != nil {
		t.Fatal(err)
	}
	if !reserveHeld(path, want) {
		t.Error("a sparse reserve was not made whole")
	}

	// Without a reserve, an old one goes.
	if _, err := New(Options{StoreDir: dir, Reserve: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reserve left with Reserve -1: %v", err)
	}
}

func TestOptions(t *testing.T) {
	dir := t.TempDir()
	for name, opts := range map[string]Options{
		"negative low water": {StoreDir: dir, LowWater: -1},
		"negative interval":  {StoreDir: dir, Interval: -time.Second},
		"store without dir":  {Store: fakeStore{}},
		"missing dir":        {Dirs: []string{filepath.Join(dir, "nope")}},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

type fakeStore struct{}

func (fakeStore) Health() error           { return nil }
func (fakeStore) RestartJetStream() error { return nil }

// Workspaces on their own filesystem: filling it makes the guard
// unhealthy, naming it, and leaves the store's reserve alone.
func TestWorkspaceFilesystemLow(t *testing.T) {
	store := mkdir(t, tmpfs(t, "64m"), "nats")
	ws := tmpfs(t, "16m")
	g, err := New(Options{StoreDir: store, Dirs: []string{ws}, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var ch changes
	g.OnChange(ch.add)
	run(t, g)
	if err := g.Healthy(); err != nil {
		t.Fatal(err)
	}

	big := filepath.Join(ws, "big")
	fill(t, big)
	waitFor(t, "the guard to see the full workspace", func() bool { return g.Healthy() != nil })
	err = g.Healthy()
	if !errors.Is(err, ErrDiskLow) || errors.Is(err, ErrStoreFailed) || !strings.Contains(err.Error(), ws) {
		t.Errorf("Healthy = %v, want ErrDiskLow naming %s", err, ws)
	}
	if !reserveHeld(filepath.Join(store, ReserveFile), 4<<20) {
		t.Error("the store's reserve was released for another filesystem")
	}

	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the guard healthy again", func() bool { return g.Healthy() == nil })
	got := ch.list()
	if len(got) != 2 || !errors.Is(got[0], ErrDiskLow) || got[1] != nil {
		t.Errorf("OnChange got %v, want [disk low, nil]", got)
	}
}

// While the free space still falls, something is still writing, and a
// released reserve would only feed it: the guard keeps it until the free
// space stops falling.
func TestReserveKeptWhileFilling(t *testing.T) {
	dir := mkdir(t, tmpfs(t, "64m"), "nats")
	g, err := New(Options{StoreDir: dir, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Looks in this test come when it calls check; one with no fall since
	// the last is enough.
	g.settle = 0
	path := filepath.Join(dir, ReserveFile)
	fill(t, filepath.Join(dir, "big"))
	// The look before saw the disk as New left it: the free space fell by
	// all of it since.
	g.check()
	if !errors.Is(g.Healthy(), ErrDiskLow) {
		t.Fatalf("Healthy = %v on a full disk", g.Healthy())
	}
	if !reserveHeld(path, 4<<20) {
		t.Fatal("reserve released while the disk was still filling")
	}
	// Nothing fell since the last look: the filler stopped.
	g.check()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reserve kept once the disk stopped filling: %v", err)
	}
	if !errors.Is(g.Healthy(), ErrDiskLow) {
		t.Fatalf("Healthy = %v without the reserve", g.Healthy())
	}
	if st := g.Status(); st[0].Free < 4<<20 || st[0].Reserve != 0 {
		t.Errorf("Status after the release = %+v", st)
	}
	// Room for the reserve but not for it above the mark: still low.
	fi, err := os.Stat(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "big"), fi.Size()-2<<20); err != nil {
		t.Fatal(err)
	}
	g.check()
	if err := g.Healthy(); !errors.Is(err, ErrDiskLow) || reserveHeld(path, 4<<20) {
		t.Fatalf("Healthy = %v, with %d bytes free, want low and no reserve", err, freeBytes(t, path))
	}
	if err := os.Remove(filepath.Join(dir, "big")); err != nil {
		t.Fatal(err)
	}
	g.check()
	if err := g.Healthy(); err != nil || !reserveHeld(path, 4<<20) {
		t.Fatalf("Healthy = %v, reserve held %v, with the disk free", err, reserveHeld(path, 4<<20))
	}
}

// A full disk stops falling at once, whether or not what filled it still
// lives: while a function given to HoldReserveWhile says it is still being
// stopped, the reserve stays, and it goes at the first look after.
func TestReserveHeldWhileStopping(t *testing.T) {
	dir := mkdir(t, tmpfs(t, "64m"), "nats")
	g, err := New(Options{StoreDir: dir, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	g.settle = 0
	var mu sync.Mutex
	stopping, asked := true, 0
	g.HoldReserveWhile(func() bool {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return stopping
	})
	path := filepath.Join(dir, ReserveFile)
	fill(t, filepath.Join(dir, "big"))
	g.check() // the fall
	for i := 0; i < 3; i++ {
		g.check() // settled, but still stopping
		if !reserveHeld(path, 4<<20) {
			t.Fatalf("look %d: reserve released while what fills the disk was still being stopped", i)
		}
	}
	mu.Lock()
	if asked < 3 {
		t.Errorf("the hold was asked %d times over three settled looks", asked)
	}
	stopping = false
	mu.Unlock()
	g.check()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reserve kept once nothing was being stopped: %v", err)
	}
}
