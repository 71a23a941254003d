package store

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

func newFile(t testing.TB, tenant string, ttl time.Duration) files.File {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return files.File{ID: "file-" + newID(t), Tenant: tenant, MediaType: "image/png", Size: 3,
		SHA256: "abc", Name: "shot.png", Width: 1, Height: 1, CreatedAt: now, ExpiresAt: now.Add(ttl)}
}

// A file is its tenant's: stored, read whole (over several chunks),
// counted, and gone once deleted; another tenant never reaches it.
func TestFilesPutGetDelete(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	data := make([]byte, 300<<10) // more than one 128 KiB chunk
	rand.Read(data)
	f := newFile(t, "acme", time.Hour)
	f.Size = int64(len(data))
	if err := e.s.PutFile(c, f, data); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.GetFile(c, "acme", f.ID)
	if err != nil || got != f {
		t.Fatalf("GetFile = %+v, %v; want %+v", got, err, f)
	}
	back, err := e.s.FileData(c, "acme", f.ID)
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("FileData = %d bytes, %v; want the %d stored", len(back), err, len(data))
	}
	for _, other := range []string{"globex", ""} {
		if _, err := e.s.GetFile(c, other, f.ID); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("GetFile of tenant %q = %v, want ErrNotFound", other, err)
		}
		if _, err := e.s.FileData(c, other, f.ID); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("FileData of tenant %q = %v, want ErrNotFound", other, err)
		}
		if err := e.s.DeleteFile(c, other, f.ID); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("DeleteFile of tenant %q = %v, want ErrNotFound", other, err)
		}
	}
	anon := newFile(t, "", time.Hour)
	if err := e.s.PutFile(c, anon, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	for tenant, want := range map[string]int{"acme": 1, "": 1, "globex": 0} {
		if n, err := e.s.CountFiles(c, tenant); err != nil || n != want {
			t.Errorf("CountFiles(%q) = %d, %v; want %d", tenant, n, err, want)
		}
	}
	if err := e.s.DeleteFile(c, "acme", f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.GetFile(c, "acme", f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetFile after delete = %v, want ErrNotFound", err)
	}
	if _, err := e.s.FileData(c, "acme", f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("FileData after delete = %v, want ErrNotFound", err)
	}
	if err := e.s.DeleteFile(c, "acme", f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("second delete = %v, want ErrNotFound", err)
	}
	if n, err := e.s.CountFiles(c, "acme"); err != nil || n != 0 {
		t.Errorf("CountFiles after delete = %d, %v; want 0", n, err)
	}
	if _, err := e.s.GetFile(c, "acme", "not a file id"); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetFile of a malformed id = %v, want ErrNotFound", err)
	}
}

// A missing file is an answer at once, not an outage retried for seconds.
func TestFileNotFoundIsQuick(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	if _, err := e.s.GetFile(ctx(t), "acme", "file-"+newID(t)); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("GetFile = %v, want ErrNotFound", err)
	}
	if _, err := e.s.FileData(ctx(t), "acme", "file-"+newID(t)); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("FileData = %v, want ErrNotFound", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("missing files took %s to be reported", took)
	}
}

// Files expire: one whose record says so is gone at once, and the bucket
// drops every file after the store's FileTTL.
func TestFilesExpire(t *testing.T) {
	e := &env{t: t, dir: t.TempDir()}
	e.start(Options{FileTTL: time.Second})
	t.Cleanup(e.stop)
	c := ctx(t)
	past := newFile(t, "acme", -time.Second)
	if err := e.s.PutFile(c, past, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.GetFile(c, "acme", past.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetFile of an expired record = %v, want ErrNotFound", err)
	}
	f := newFile(t, "acme", time.Hour) // the bucket's TTL is shorter
	if err := e.s.PutFile(c, f, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.GetFile(c, "acme", f.ID); err != nil {
		t.Fatalf("GetFile before the TTL: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.s.FileData(c, "acme", f.ID)
		if errors.Is(err, runs.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the file outlived the bucket's 1s TTL by 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n, err := e.s.CountFiles(c, "acme"); err != nil || n != 0 {
		t.Errorf("CountFiles after the TTL = %d, %v; want 0", n, err)
	}
}

// A file stored through one replica's store is read through another's.
func TestFilesAreSharedByReplicas(t *testing.T) {
	e := newEnv(t)
	nc := e.connect()
	t.Cleanup(nc.Close)
	other, err := Open(ctx(t), nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	f := newFile(t, "acme", time.Hour)
	if err := e.s.PutFile(ctx(t), f, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if got, err := other.FileData(ctx(t), "acme", f.ID); err != nil || string(got) != "abc" {
		t.Fatalf("FileData on the other replica = %q, %v", got, err)
	}
	if err := other.DeleteFile(ctx(t), "acme", f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.GetFile(ctx(t), "acme", f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("GetFile after the other replica deleted it = %v", err)
	}
}
