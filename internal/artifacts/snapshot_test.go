package artifacts

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func changesByPath(res Result) map[string]Change {
	m := map[string]Change{}
	for _, c := range res.Changes {
		m[c.Path] = c
	}
	return m
}

func TestSnapshotCompare(t *testing.T) {
	dir, store := t.TempDir(), filepath.Join(t.TempDir(), "run")
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("outside secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "keep.txt", "same\n")
	write(t, dir, "edit.txt", "one\ntwo\nthree\n")
	write(t, dir, "gone.txt", "bye\n")
	write(t, dir, "sub/bin.dat", "\x00\x01\x02")
	write(t, dir, "big.txt", strings.Repeat("x", 2000)+"\n")
	write(t, dir, "swap.txt", "plain\n")
	write(t, dir, ".git/HEAD", "ref: refs/heads/main\n")
	l := Limits{MaxFileBytes: 1000}
	snap, err := Take(dir, store, l)
	if err != nil {
		t.Fatal(err)
	}
	// What a run does.
	write(t, dir, "edit.txt", "one\n2\nthree\n")
	write(t, dir, "made.txt", "hello\n")
	write(t, dir, "sub/bin.dat", "\x00\x01\x03")
	write(t, dir, "big.txt", strings.Repeat("y", 2000)+"\n")
	write(t, dir, ".git/HEAD", "ref: refs/heads/other\n")
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	// A file replaced by a symlink that leads out: its target is named,
	// never read.
	if err := os.Remove(filepath.Join(dir, "swap.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "swap.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "keep.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := snap.Compare(dir, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := changesByPath(res)
	want := map[string]Change{
		"edit.txt":    {Path: "edit.txt", Kind: KindUpdate, Size: 12},
		"made.txt":    {Path: "made.txt", Kind: KindAdd, Size: 6},
		"gone.txt":    {Path: "gone.txt", Kind: KindDelete},
		"sub/bin.dat": {Path: "sub/bin.dat", Kind: KindUpdate, Size: 3, Binary: true},
		"big.txt":     {Path: "big.txt", Kind: KindUpdate, Size: 2001},
		"swap.txt":    {Path: "swap.txt", Kind: KindUpdate, Size: int64(len(outside))},
		"keep.txt":    {Path: "keep.txt", Kind: KindUpdate, Size: 5},
	}
	if len(got) != len(want) {
		t.Errorf("changes = %+v, want %+v", res.Changes, want)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %+v, want %+v", p, got[p], w)
		}
	}
	for _, s := range []string{
		"diff --git a/edit.txt b/edit.txt\n--- a/edit.txt\n+++ b/edit.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n",
		"diff --git a/made.txt b/made.txt\nnew file mode 100644\n--- /dev/null\n+++ b/made.txt\n@@ -0,0 +1 @@\n+hello\n",
		"diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
		"Binary files a/sub/bin.dat and b/sub/bin.dat differ\n",
		"Files a/big.txt and b/big.txt differ (not diffed",
		"old mode 100644\nnew mode 100755\n",
		"old mode 100644\nnew mode 120000\n--- a/swap.txt\n+++ b/swap.txt\n@@ -1 +1 @@\n-plain\n+" + outside + "\n\\ No newline at end of file\n",
	} {
		if !strings.Contains(res.Diff, s) {
			t.Errorf("the diff has no %q:\n%s", s, res.Diff)
		}
	}
	if strings.Contains(res.Diff, "outside secret") || strings.Contains(res.Diff, ".git") || strings.Contains(res.Diff, "pipe") {
		t.Errorf("the diff read past the run's files:\n%s", res.Diff)
	}
	if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the spent snapshot left its store: %v", err)
	}
	if _, _, _, err := Load(store); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("Load before Keep = %v, want ErrNoSnapshot", err)
	}
	if err := Keep(store, res); err != nil {
		t.Fatal(err)
	}
	changes, diffPath, truncated, err := Load(store)
	if err != nil || truncated || len(changes) != len(res.Changes) {
		t.Fatalf("Load = %v, %v, %v", changes, truncated, err)
	}
	if b, err := os.ReadFile(diffPath); err != nil || string(b) != res.Diff {
		t.Errorf("the kept diff = %q, %v", b, err)
	}
}

func TestCompareBounded(t *testing.T) {
	dir, store := t.TempDir(), t.TempDir()
	snap, err := Take(dir, store, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		write(t, dir, n+".txt", strings.Repeat(n+"\n", 100))
	}
	res, err := snap.Compare(dir, Limits{MaxDiffBytes: 500}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Diff) > 500+len(Mark)+10 || !strings.Contains(res.Diff, "[diff truncated: ") || len(res.Changes) != 4 {
		t.Errorf("bounded diff: truncated %v, %d bytes, %d changes:\n%s", res.Truncated, len(res.Diff), len(res.Changes), res.Diff)
	}
}

func TestTooManyFiles(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		write(t, dir, n, n)
	}
	if _, err := Take(dir, t.TempDir(), Limits{MaxFiles: 2}); !errors.Is(err, ErrTooManyFiles) {
		t.Errorf("Take = %v, want ErrTooManyFiles", err)
	}
}

func TestOpen(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	write(t, dir, "ok.txt", "fine\n")
	write(t, dir, "sub/in.txt", "inner\n")
	write(t, outside, "secret", "no\n")
	for name, target := range map[string]string{
		"out":      filepath.Join(outside, "secret"),
		"up":       "../" + filepath.Base(outside) + "/secret",
		"in":       "sub/in.txt",
		"dangling": "nothing-here",
		"sub/back": "../ok.txt",
		"dirlink":  outside,
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for p, want := range map[string]string{"ok.txt": "fine\n", "in": "inner\n", "sub/back": "fine\n", "sub/in.txt": "inner\n"} {
		f, _, err := Open(root, p)
		if err != nil {
			t.Errorf("Open(%q): %v", p, err)
			continue
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != want {
			t.Errorf("Open(%q) read %q", p, b)
		}
	}
	for p, want := range map[string]error{
		"":                 ErrInvalidPath,
		"/etc/passwd":      ErrInvalidPath,
		"../x":             ErrInvalidPath,
		"sub/../ok.txt":    ErrInvalidPath,
		"./ok.txt":         ErrInvalidPath,
		"sub//in.txt":      ErrInvalidPath,
		"a\x00b":           ErrInvalidPath,
		"out":              ErrInvalidPath,
		"up":               ErrInvalidPath,
		"dirlink/secret":   ErrInvalidPath,
		"sub":              ErrInvalidPath,
		"fifo":             ErrInvalidPath,
		"missing.txt":      ErrFileNotFound,
		"dangling":         ErrFileNotFound,
		"ok.txt/beneath":   ErrFileNotFound,
		"sub/missing/deep": ErrFileNotFound,
	} {
		f, _, err := Open(root, p)
		if f != nil {
			f.Close()
		}
		if !errors.Is(err, want) {
			t.Errorf("Open(%q) = %v, want %v", p, err, want)
		}
	}
}

func TestArchive(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.txt", "alpha\n")
	write(t, dir, "d/b.txt", "beta\n")
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var buf bytes.Buffer
	if err := Archive(&buf, root, 1<<20); err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			got[h.Name] = "-> " + h.Linkname
		case tar.TypeReg:
			b, _ := io.ReadAll(tr)
			got[h.Name] = string(b)
		case tar.TypeDir:
			got[h.Name] = "dir"
		default:
			t.Errorf("entry %s of type %c", h.Name, h.Typeflag)
		}
	}
	want := map[string]string{"a.txt": "alpha\n", "d/": "dir", "d/b.txt": "beta\n", "link": "-> /etc/passwd"}
	if len(got) != len(want) {
		t.Errorf("archive = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("archive[%s] = %q, want %q", k, got[k], v)
		}
	}
	buf.Reset()
	if err := Archive(&buf, root, 5); !errors.Is(err, ErrTooLarge) || buf.Len() != 0 {
		t.Errorf("over the bound: %v, %d bytes written", err, buf.Len())
	}
}

// FuzzOpen: no path, however made, opens anything outside the directory
// or anything but a regular file.
func FuzzOpen(f *testing.F) {
	dir, outside := f.TempDir(), f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("inside"), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink("../"+filepath.Base(outside)+"/secret", filepath.Join(dir, "rel")); err != nil {
		f.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { root.Close() })
	for _, s := range []string{"in.txt", "out/secret", "rel", "../" + filepath.Base(outside) + "/secret", "/etc/passwd", ".", "in.txt/", "%2e%2e/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if _, err := CleanPath(p); err == nil && (strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../")) {
			t.Fatalf("CleanPath accepted %q", p)
		}
		file, fi, err := Open(root, p)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) && !errors.Is(err, ErrFileNotFound) {
				t.Fatalf("Open(%q) = %v: neither invalid nor not found", p, err)
			}
			return
		}
		defer file.Close()
		b, _ := io.ReadAll(file)
		if !fi.Mode().IsRegular() || string(b) != "inside" {
			t.Fatalf("Open(%q) read %q (%v)", p, b, fi.Mode())
		}
	})
}

// TestCompareRedacted: the diff kept in the store, and the one returned,
// are redacted before anything is written; an empty directory's snapshot
// keeps nothing in its store, so it makes none.
func TestCompareRedacted(t *testing.T) {
	dir, store := t.TempDir(), filepath.Join(t.TempDir(), "snap")
	snap, err := Take(dir, store, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an empty directory's snapshot made its store: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.txt"), []byte("token=hunter2-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := snap.Compare(dir, Limits{}, func(s string) string {
		return strings.ReplaceAll(s, "hunter2-secret", "[REDACTED]")
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Diff, "hunter2") || !strings.Contains(res.Diff, "+token=[REDACTED]") {
		t.Errorf("returned diff: %q", res.Diff)
	}
	if err := Keep(store, res); err != nil {
		t.Fatal(err)
	}
	_, diffPath, _, err := Load(store)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := os.ReadFile(diffPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(kept) != res.Diff {
		t.Errorf("kept diff %q, returned %q", kept, res.Diff)
	}
}

// A directory with many files has its manifest written into the store, and
// compares as one kept in memory does; either way the spent snapshot
// leaves nothing behind, and a directory that did not change has no diff.
func TestLargeManifestOnDisk(t *testing.T) {
	dir, store := t.TempDir(), filepath.Join(t.TempDir(), "snap")
	for i := range 2000 {
		write(t, dir, fmt.Sprintf("d%02d/file-with-a-longer-name-%04d.txt", i%50, i), fmt.Sprintf("line %d\n", i))
	}
	snap, err := Take(dir, store, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !snap.onDisk {
		t.Fatal("a manifest of 2,000 files was kept in memory")
	}
	if _, err := os.Stat(filepath.Join(store, manifestFile)); err != nil {
		t.Fatalf("no manifest in the store: %v", err)
	}
	write(t, dir, "d07/file-with-a-longer-name-0007.txt", "changed\n")
	res, err := snap.Compare(dir, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || !strings.Contains(res.Diff, "-line 7\n+changed\n") {
		t.Errorf("changes %+v, diff:\n%s", res.Changes, res.Diff)
	}
	if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the spent snapshot left its store: %v", err)
	}
}

// An unchanged directory compares to no changes and no diff, whether its
// manifest was in memory or on disk.
func TestUnchangedDirectory(t *testing.T) {
	for _, files := range []int{3, 2000} {
		dir, store := t.TempDir(), filepath.Join(t.TempDir(), "snap")
		for i := range files {
			write(t, dir, fmt.Sprintf("d%02d/file-with-a-longer-name-%04d.txt", i%50, i), "x\n")
		}
		snap, err := Take(dir, store, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if snap.onDisk != (files > 100) {
			t.Errorf("%d files: manifest on disk %v", files, snap.onDisk)
		}
		res, err := snap.Compare(dir, Limits{}, nil)
		if err != nil || len(res.Changes) != 0 || res.Diff != "" || res.Truncated {
			t.Errorf("%d files unchanged: %+v, %v", files, res, err)
		}
		if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%d files: the spent snapshot left its store: %v", files, err)
		}
	}
}
