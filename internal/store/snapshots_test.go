package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

func workspaceKey(tenant, id string) runs.SnapshotKey {
	return runs.SnapshotKey{Tenant: tenant, Kind: runs.SnapshotWorkspace, ID: id}
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// readSnapshot returns the snapshot's bytes and info, or fails the test.
func readSnapshot(t *testing.T, s *Store, key runs.SnapshotKey) ([]byte, runs.SnapshotInfo) {
	t.Helper()
	r, info, err := s.OpenSnapshot(ctx(t), key)
	if err != nil {
		t.Fatalf("OpenSnapshot(%+v): %v", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read snapshot %+v: %v", key, err)
	}
	return data, info
}

// checkSnapshotRoundTrip stores a snapshot of several chunks, reads it
// back with its meta, replaces it, and deletes it twice.
func checkSnapshotRoundTrip(t *testing.T, s *Store) {
	c := ctx(t)
	key := workspaceKey("acme", newID(t))
	data := randomBytes(t, 3*snapshotChunk+17)
	meta := map[string]string{"git": `{"base":"abc"}`}
	put, err := s.PutSnapshot(c, key, bytes.NewReader(data), int64(len(data)), meta)
	if err != nil || put.Size != int64(len(data)) {
		t.Fatalf("PutSnapshot = %+v, %v; want size %d", put, err, len(data))
	}
	got, info := readSnapshot(t, s, key)
	if !bytes.Equal(got, data) || info.Size != int64(len(data)) || info.Meta["git"] != meta["git"] || info.Modified.IsZero() {
		t.Fatalf("read back %d bytes (equal %v), info %+v; want the %d stored with meta %v", len(got), bytes.Equal(got, data), info, len(data), meta)
	}
	next := randomBytes(t, 100)
	if _, err := s.PutSnapshot(c, key, bytes.NewReader(next), 100, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := readSnapshot(t, s, key); !bytes.Equal(got, next) {
		t.Fatalf("after replacing: read %d bytes, want the 100 of the new version", len(got))
	}
	if n, err := s.SnapshotUsage(c, "acme"); err != nil || n != 100 {
		t.Errorf("SnapshotUsage = %d, %v; want 100 (the old version counted out)", n, err)
	}
	for range 2 {
		if err := s.DeleteSnapshot(c, key); err != nil {
			t.Fatalf("DeleteSnapshot: %v", err)
		}
	}
	if _, _, err := s.OpenSnapshot(c, key); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("OpenSnapshot after delete = %v, want ErrNotFound", err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	checkSnapshotRoundTrip(t, newEnv(t).s)
}

func TestSnapshotRoundTripOnCluster(t *testing.T) {
	_, s := openCluster(t, nil)
	st, err := s.js.Stream(ctx(t), "OBJ_"+snapshotsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().Config.Replicas; n != 3 {
		t.Errorf("snapshots bucket has %d replicas, want 3", n)
	}
	checkSnapshotRoundTrip(t, s)
}

// A snapshot past its bound stores nothing and leaves the version before
// it, with no chunks of the refused one left in the bucket.
func TestSnapshotPastItsBoundKeepsTheOld(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	key := workspaceKey("acme", newID(t))
	old := randomBytes(t, 1000)
	if _, err := e.s.PutSnapshot(c, key, bytes.NewReader(old), 1000, nil); err != nil {
		t.Fatal(err)
	}
	before := snapshotStreamBytes(t, e.s)
	big := randomBytes(t, 2*snapshotChunk+1)
	_, err := e.s.PutSnapshot(c, key, bytes.NewReader(big), 2*snapshotChunk, nil)
	if !errors.Is(err, runs.ErrSnapshotTooLarge) || !strings.Contains(err.Error(), "snapshot's bound") {
		t.Fatalf("PutSnapshot of one byte too many = %v, want ErrSnapshotTooLarge naming the snapshot's bound", err)
	}
	if got, _ := readSnapshot(t, e.s, key); !bytes.Equal(got, old) {
		t.Fatalf("after a refused put: read %d bytes, want the old 1000", len(got))
	}
	if after := snapshotStreamBytes(t, e.s); after != before {
		t.Errorf("bucket holds %d messages after a refused put, %d before: its chunks were left", after, before)
	}
	exact := randomBytes(t, 2*snapshotChunk)
	if _, err := e.s.PutSnapshot(c, key, bytes.NewReader(exact), 2*snapshotChunk, nil); err != nil {
		t.Fatalf("PutSnapshot of exactly its bound: %v", err)
	}
}

// snapshotStreamBytes is how many messages the snapshots' stream holds.
func snapshotStreamBytes(t *testing.T, s *Store) uint64 {
	t.Helper()
	st, err := s.js.Stream(ctx(t), "OBJ_"+snapshotsBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// A tenant's snapshots together stay within the store's bound for a
// tenant; replacing one counts its old size out, and another tenant is
// not charged.
func TestSnapshotTenantBound(t *testing.T) {
	e := &env{t: t, dir: t.TempDir()}
	e.start(Options{SnapshotTenantBytes: 1000})
	t.Cleanup(e.stop)
	c := ctx(t)
	first := workspaceKey("acme", newID(t))
	if _, err := e.s.PutSnapshot(c, first, bytes.NewReader(randomBytes(t, 600)), 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	second := workspaceKey("acme", newID(t))
	_, err := e.s.PutSnapshot(c, second, bytes.NewReader(randomBytes(t, 401)), 1<<20, nil)
	if !errors.Is(err, runs.ErrSnapshotTooLarge) || !strings.Contains(err.Error(), "tenant's bound") {
		t.Fatalf("PutSnapshot past the tenant's bound = %v, want ErrSnapshotTooLarge naming the tenant's bound", err)
	}
	if _, _, err := e.s.OpenSnapshot(c, second); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("refused snapshot: OpenSnapshot = %v, want ErrNotFound", err)
	}
	if _, err := e.s.PutSnapshot(c, second, bytes.NewReader(randomBytes(t, 400)), 1<<20, nil); err != nil {
		t.Fatalf("PutSnapshot up to the tenant's bound: %v", err)
	}
	if _, err := e.s.PutSnapshot(c, first, bytes.NewReader(randomBytes(t, 600)), 1<<20, nil); err != nil {
		t.Fatalf("replacing a snapshot with one of its size: %v", err)
	}
	if _, err := e.s.PutSnapshot(c, workspaceKey("globex", newID(t)), bytes.NewReader(randomBytes(t, 1000)), 1<<20, nil); err != nil {
		t.Fatalf("another tenant's snapshot: %v", err)
	}
	if n, err := e.s.SnapshotBytes(c); err != nil || n != 2000 {
		t.Errorf("SnapshotBytes = %d, %v; want 2000", n, err)
	}
}

// Keys are escaped part by part: no id or tenant, however crafted, names
// another tenant's snapshot.
func TestSnapshotTenantIsolation(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	victim := runs.SnapshotKey{Tenant: "acme", Kind: runs.SnapshotSession, ID: "claude/s1"}
	if _, err := e.s.PutSnapshot(c, victim, strings.NewReader("secret"), 100, nil); err != nil {
		t.Fatal(err)
	}
	anon := runs.SnapshotKey{Kind: runs.SnapshotWorkspace, ID: "r1"}
	if _, err := e.s.PutSnapshot(c, anon, strings.NewReader("anon"), 100, nil); err != nil {
		t.Fatal(err)
	}
	crafted := []runs.SnapshotKey{
		{Tenant: "evil", Kind: runs.SnapshotSession, ID: "../../acme/session/claude/s1"},
		{Tenant: "evil", Kind: runs.SnapshotSession, ID: "claude/s1"},
		{Tenant: "acme/session/claude", Kind: runs.SnapshotSession, ID: "s1"},
		{Tenant: "acme", Kind: runs.SnapshotWorkspace, ID: "claude/s1"},
		{Tenant: "acme", Kind: "session/claude", ID: "s1"},
		{Tenant: "_", Kind: runs.SnapshotWorkspace, ID: "r1"},
		{Tenant: "", Kind: runs.SnapshotSession, ID: "../acme/session/claude/s1"},
	}
	for _, k := range crafted {
		if _, _, err := e.s.OpenSnapshot(c, k); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("OpenSnapshot(%+v) = %v, want ErrNotFound", k, err)
		}
		if err := e.s.DeleteSnapshot(c, k); err != nil {
			t.Errorf("DeleteSnapshot(%+v) = %v", k, err)
		}
	}
	if got, _ := readSnapshot(t, e.s, victim); string(got) != "secret" {
		t.Errorf("victim's snapshot = %q after the crafted deletes, want it kept", got)
	}
	if got, _ := readSnapshot(t, e.s, anon); string(got) != "anon" {
		t.Errorf("the empty tenant's snapshot = %q after the crafted deletes, want it kept", got)
	}
}

// Names of different keys differ, whatever their bytes.
func FuzzSnapshotName(f *testing.F) {
	f.Add("acme", "claude/s1", "acme/session", "claude=2Fs1")
	f.Add("", "r1", "_", "r1")
	f.Fuzz(func(t *testing.T, tenantA, idA, tenantB, idB string) {
		a, errA := snapshotName(runs.SnapshotKey{Tenant: tenantA, Kind: runs.SnapshotSession, ID: idA})
		b, errB := snapshotName(runs.SnapshotKey{Tenant: tenantB, Kind: runs.SnapshotSession, ID: idB})
		if errA != nil || errB != nil {
			return
		}
		if a == b && (tenantA != tenantB || idA != idB) {
			t.Fatalf("keys (%q, %q) and (%q, %q) share the name %q", tenantA, idA, tenantB, idB, a)
		}
	})
}

// A put whose reader fails stores nothing and returns the reader's error.
func TestSnapshotReaderFails(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	key := workspaceKey("acme", newID(t))
	boom := errors.New("disk gone")
	r := io.MultiReader(bytes.NewReader(randomBytes(t, snapshotChunk+5)), failingReader{boom})
	if _, err := e.s.PutSnapshot(c, key, r, 1<<20, nil); !errors.Is(err, boom) {
		t.Fatalf("PutSnapshot of a failing reader = %v, want its error", err)
	}
	if _, _, err := e.s.OpenSnapshot(c, key); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("OpenSnapshot = %v, want ErrNotFound", err)
	}
	if n := snapshotStreamBytes(t, e.s); n != 0 {
		t.Errorf("bucket holds %d messages after a failed put, want 0", n)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// Bad arguments are refused as invalid.
func TestSnapshotInvalid(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	bad := map[string]runs.SnapshotKey{
		"empty id":     {Tenant: "acme", Kind: runs.SnapshotWorkspace},
		"unknown kind": {Tenant: "acme", Kind: "other", ID: "x"},
		"long id":      {Tenant: "acme", Kind: runs.SnapshotWorkspace, ID: strings.Repeat("x", maxSnapshotID+1)},
	}
	for name, key := range bad {
		if _, err := e.s.PutSnapshot(c, key, strings.NewReader("x"), 10, nil); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("%s: PutSnapshot = %v, want ErrInvalid", name, err)
		}
	}
	meta := map[string]string{"big": strings.Repeat("x", maxSnapshotMeta+1)}
	if _, err := e.s.PutSnapshot(c, workspaceKey("acme", "x"), strings.NewReader("x"), 10, meta); !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("meta past its bound: PutSnapshot = %v, want ErrInvalid", err)
	}
}

// A snapshot opened with a ctx without a deadline reads to its end even
// when that takes longer than the store's Timeout, which nats.go would
// otherwise impose on the whole read.
func TestSnapshotReadOutlastsTimeout(t *testing.T) {
	e := &env{t: t, dir: t.TempDir()}
	e.start(Options{Timeout: 200 * time.Millisecond})
	t.Cleanup(e.stop)
	key := workspaceKey("acme", newID(t))
	data := randomBytes(t, 3*snapshotChunk)
	if _, err := e.s.PutSnapshot(ctx(t), key, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
	r, _, err := e.s.OpenSnapshot(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The store's Timeout passing is what this tests.
	<-time.After(3 * 200 * time.Millisecond)
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the store's Timeout: %d bytes, %v; want the %d stored", len(got), err, len(data))
	}
}
