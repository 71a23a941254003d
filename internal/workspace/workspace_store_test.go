package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/unpack"
)

// snapshots is the gateway's own store, on an embedded server, as the
// snapshots a Store keeps directories in.
func snapshots(t *testing.T) (runs.Store, runs.Snapshots) {
	t.Helper()
	st := runstest.Store(t)
	snaps, ok := st.(runs.Snapshots)
	if !ok {
		t.Fatalf("store %T keeps no snapshots", st)
	}
	return st, snaps
}

func newStore(t *testing.T) (*Store, runs.Snapshots) {
	t.Helper()
	_, snaps := snapshots(t)
	return NewStore(snaps, t.TempDir(), unpack.Limits{}), snaps
}

func wsKey(id string) runs.SnapshotKey {
	return runs.SnapshotKey{Tenant: "acme", Kind: runs.SnapshotWorkspace, ID: id}
}

// writeTree writes files (slash paths to contents) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree is every regular file under dir, by slash path, and every
// symlink as "-> target".
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s holds %v, want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s holds %v, want %v", what, got, want)
		}
	}
}

func TestStoreRoundTrip(t *testing.T) {
	s, _ := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"README.md": "hello\n", "src/main.go": "package main\n", "src/deep/x.txt": "x"})
	if err := os.Symlink("src/main.go", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "README.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := s.SaveDir(ctx, wsKey("r1"), src, 1<<20, map[string]string{"base": "abc"})
	if err != nil {
		t.Fatalf("SaveDir: %v", err)
	}
	if info.Size <= 0 {
		t.Fatalf("stored size %d", info.Size)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	got, err := s.Restore(ctx, wsKey("r1"), dst)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got.Meta["base"] != "abc" {
		t.Fatalf("restored meta %v, want base=abc", got.Meta)
	}
	sameTree(t, "the restored directory", readTree(t, dst), readTree(t, src))
	fi, err := os.Stat(filepath.Join(dst, "README.md"))
	if err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("README.md restored as %v (%v), want executable", fi.Mode(), err)
	}
}

func TestStoreRestoreOfNothingIsNotFound(t *testing.T) {
	s, _ := newStore(t)
	_, err := s.Restore(context.Background(), wsKey("none"), t.TempDir())
	if !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("Restore of no snapshot: %v, want runs.ErrNotFound", err)
	}
}

func TestStoreSavePathsKeepsOnlyThose(t *testing.T) {
	s, _ := newStore(t)
	home := t.TempDir()
	writeTree(t, home, map[string]string{
		".claude/projects/p/sess.jsonl": "{}\n",
		".claude/settings.json":         `{"hooks":"evil"}`,
		".claude.json":                  "{}",
		"other.txt":                     "no",
	})
	ctx := context.Background()
	key := runs.SnapshotKey{Tenant: "acme", Kind: runs.SnapshotSession, ID: "claude/s1"}
	if _, err := s.SavePaths(ctx, key, home, []string{".claude/projects/p", ".claude.json", "missing/file"}, 1<<20, nil); err != nil {
		t.Fatalf("SavePaths: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "d")
	if _, err := s.Restore(ctx, key, dst); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	sameTree(t, "the session snapshot", readTree(t, dst), map[string]string{".claude/projects/p/sess.jsonl": "{}\n", ".claude.json": "{}"})
}

func TestStoreRestoreRefusesANonEmptyDirectory(t *testing.T) {
	s, _ := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "snapshot"})
	ctx := context.Background()
	if _, err := s.SaveDir(ctx, wsKey("r1"), src, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	writeTree(t, dst, map[string]string{"mine.txt": "mine"})
	if _, err := s.Restore(ctx, wsKey("r1"), dst); err == nil {
		t.Fatal("Restore into a non-empty directory succeeded")
	}
	sameTree(t, "the directory refused", readTree(t, dst), map[string]string{"mine.txt": "mine"})
}

func TestStoreRestoreIntoMerges(t *testing.T) {
	s, _ := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"conf/a.json": "new a", "conf/sub/b.json": "b", "top.txt": "new top", "fresh.txt": "fresh"})
	ctx := context.Background()
	key := runs.SnapshotKey{Tenant: "acme", Kind: runs.SnapshotSession, ID: "fake/s"}
	if _, err := s.SaveDir(ctx, key, src, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	writeTree(t, dst, map[string]string{"conf/a.json": "old a", "conf/keep.json": "keep", "top.txt": "old top", "login": "token file"})
	if _, err := s.RestoreInto(ctx, key, dst); err != nil {
		t.Fatalf("RestoreInto: %v", err)
	}
	sameTree(t, "the merged home", readTree(t, dst), map[string]string{
		"conf/a.json": "new a", "conf/sub/b.json": "b", "conf/keep.json": "keep",
		"top.txt": "new top", "fresh.txt": "fresh", "login": "token file",
	})
}

func TestStoreSnapshotOverTheBoundStoresNothing(t *testing.T) {
	s, snaps := newStore(t)
	src := t.TempDir()
	// Noise that gzip cannot shrink below the bound.
	big := make([]byte, 256<<10)
	x := uint64(88172645463325252)
	for i := range big {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		big[i] = byte(x)
	}
	writeTree(t, src, map[string]string{"big.bin": string(big)})
	ctx := context.Background()
	_, err := s.SaveDir(ctx, wsKey("big"), src, 4<<10, nil)
	if !errors.Is(err, runs.ErrSnapshotTooLarge) {
		t.Fatalf("SaveDir over the bound: %v, want runs.ErrSnapshotTooLarge", err)
	}
	if _, _, err := snaps.OpenSnapshot(ctx, wsKey("big")); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("after a refused save, OpenSnapshot: %v, want runs.ErrNotFound", err)
	}
}

// putTar stores a gzipped tar of entries directly, as an attacker who
// controls a snapshot's bytes would.
func putTar(t *testing.T, snaps runs.Snapshots, key runs.SnapshotKey, hdrs []tar.Header, body string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := snaps.PutSnapshot(context.Background(), key, &buf, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
}

func TestStoreRefusesAMaliciousSnapshot(t *testing.T) {
	cases := map[string][]tar.Header{
		"dotdot":       {{Typeflag: tar.TypeReg, Name: "../escaped.txt", Mode: 0o644}},
		"deep dotdot":  {{Typeflag: tar.TypeReg, Name: "a/../../escaped.txt", Mode: 0o644}},
		"absolute":     {{Typeflag: tar.TypeReg, Name: "/tmp/escaped.txt", Mode: 0o644}},
		"symlink out":  {{Typeflag: tar.TypeSymlink, Name: "out", Linkname: "../../.."}},
		"link through": {{Typeflag: tar.TypeSymlink, Name: "out", Linkname: "/"}, {Typeflag: tar.TypeReg, Name: "out/escaped.txt", Mode: 0o644}},
	}
	s, snaps := newStore(t)
	for name, hdrs := range cases {
		t.Run(name, func(t *testing.T) {
			key := wsKey("evil-" + strings.ReplaceAll(name, " ", "-"))
			putTar(t, snaps, key, hdrs, "pwned")
			parent := t.TempDir()
			dst := filepath.Join(parent, "a", "b", "dst")
			for _, restore := range []func(context.Context, runs.SnapshotKey, string) (runs.SnapshotInfo, error){s.Restore, s.RestoreInto} {
				if _, err := restore(context.Background(), key, dst); err == nil {
					t.Fatalf("a snapshot of %v was restored", hdrs)
				}
			}
			var found []string
			filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					found = append(found, p)
				}
				return nil
			})
			if len(found) != 0 {
				t.Fatalf("a refused snapshot left %v", found)
			}
			if _, err := os.Stat("/tmp/escaped.txt"); err == nil {
				t.Fatal("a refused snapshot wrote /tmp/escaped.txt")
			}
		})
	}
}

func TestStoreSnapshotsAreTheTenants(t *testing.T) {
	s, _ := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "acme's"})
	ctx := context.Background()
	if _, err := s.SaveDir(ctx, wsKey("r1"), src, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	other := runs.SnapshotKey{Tenant: "globex", Kind: runs.SnapshotWorkspace, ID: "r1"}
	if _, err := s.Restore(ctx, other, t.TempDir()); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("another tenant's Restore of r1: %v, want runs.ErrNotFound", err)
	}
}

// An agent may leave a symlink that leads out of its directory; restoring
// refuses a snapshot with one, so saving leaves such links out, and the
// rest of the directory is restored.
func TestStoreLeavesOutLinksThatLeadOut(t *testing.T) {
	s, _ := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"kept.txt": "k", "sub/in.txt": "i"})
	for link, target := range map[string]string{"abs": "/etc/passwd", "up": "../../x", "sub/up": "../../y", "sub/in": "in.txt", "top": "sub/in.txt"} {
		if err := os.Symlink(target, filepath.Join(src, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if _, err := s.SaveDir(ctx, wsKey("links"), src, 1<<20, nil); err != nil {
		t.Fatalf("SaveDir: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := s.Restore(ctx, wsKey("links"), dst); err != nil {
		t.Fatalf("Restore of a directory with links out: %v", err)
	}
	want := map[string]string{"kept.txt": "k", "sub/in.txt": "i", "sub/in": "-> in.txt", "top": "-> sub/in.txt"}
	sameTree(t, "the restored directory", readTree(t, dst), want)
}
