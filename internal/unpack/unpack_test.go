package unpack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unpackInto unpacks data into a fresh "dst" inside a temp parent and
// returns both directories.
func unpackInto(t *testing.T, ctx context.Context, src io.ReaderAt, size int64, lim Limits) (dst, parent string, st Stats, err error) {
	t.Helper()
	parent = t.TempDir()
	dst = filepath.Join(parent, "dst")
	st, err = Unpack(ctx, src, size, dst, lim)
	return dst, parent, st, err
}

func unpackBytes(t *testing.T, data []byte, lim Limits) (dst, parent string, st Stats, err error) {
	t.Helper()
	return unpackInto(t, context.Background(), bytes.NewReader(data), int64(len(data)), lim)
}

// assertLeftEmpty checks a failed unpack left dst empty and nothing else
// beside it.
func assertLeftEmpty(t *testing.T, dst, parent string) {
	t.Helper()
	names, err := os.ReadDir(dst)
	if err != nil {
		t.Fatalf("read dst: %v", err)
	}
	if len(names) != 0 {
		t.Errorf("dst holds %v after a failure, want nothing", names)
	}
	assertOnlyDst(t, parent)
}

func assertOnlyDst(t testing.TB, parent string) {
	t.Helper()
	names, err := os.ReadDir(parent)
	if err != nil {
		t.Fatalf("read parent: %v", err)
	}
	if len(names) != 1 || names[0].Name() != "dst" {
		t.Errorf("the parent of dst holds %v, want only dst", names)
	}
}

// repository is a small repository's tree: a .git directory, an
// executable, a setuid file, a symbolic link to a file and one to a
// directory, an empty directory and a directory only implied by a path.
func repository() []member {
	setuid := exe("bin/tool", "#!/bin/sh\n")
	setuid.mode |= fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	return []member{
		dir(".git/"),
		file(".git/HEAD", "ref: refs/heads/main\n"),
		file(".git/objects/ab/cdef0123", "blob 4\x00data"),
		exe("scripts/build.sh", "#!/bin/sh\necho built\n"),
		setuid,
		file("src/main.go", "package main\n"),
		sym("src/link.go", "main.go"),
		sym("latest", "scripts"),
		dir("empty/"),
	}
}

func TestUnpackRepositoryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		format string
		data   []byte
	}{
		{FormatTar, tarOf(t, repository()...)},
		{FormatTarGz, tgzOf(t, repository()...)},
		{FormatZip, zipOf(t, repository()...)},
	} {
		t.Run(tc.format, func(t *testing.T) {
			dst, parent, st, err := unpackBytes(t, tc.data, Limits{})
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			assertTree(t, dst, repository())
			assertOnlyDst(t, parent)
			// .git, .git/objects, .git/objects/ab, scripts, bin, src, empty
			want := Stats{Format: tc.format, Entries: 9, Files: 5, Dirs: 7, Symlinks: 2, Bytes: bodyBytes(repository()), Packed: st.Packed}
			if st != want || st.Packed <= 0 {
				t.Errorf("stats = %+v, want %+v with some bytes packed", st, want)
			}
		})
	}
}

func bodyBytes(ms []member) int64 {
	var n int64
	for _, m := range ms {
		if m.mode.IsRegular() && !m.hard {
			n += int64(len(m.body))
		}
	}
	return n
}

// assertTree checks each member unpacked as itself, with the package's
// modes.
func assertTree(t *testing.T, dst string, ms []member) {
	t.Helper()
	for _, m := range ms {
		p := filepath.Join(dst, m.name)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", m.name, err)
			continue
		}
		switch {
		case m.mode&fs.ModeSymlink != 0:
			if got, err := os.Readlink(p); err != nil || got != m.link {
				t.Errorf("%s: link to %q (%v), want %q", m.name, got, err, m.link)
			}
		case m.mode.IsDir():
			if fi.Mode() != fs.ModeDir|0o755 {
				t.Errorf("%s: mode %v, want drwxr-xr-x", m.name, fi.Mode())
			}
		default:
			assertFile(t, p, m)
		}
	}
}

func assertFile(t *testing.T, p string, m member) {
	t.Helper()
	want := fs.FileMode(0o644)
	if m.mode&0o111 != 0 {
		want = 0o755
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != want {
		t.Errorf("%s: mode %v, want %v", m.name, fi.Mode(), want)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != m.body {
		t.Errorf("%s: holds %q (%v), want %q", m.name, got, err, m.body)
	}
}

func TestUnpackTarHardLinkAndReplacedFile(t *testing.T) {
	data := tarOf(t,
		file("a", "first"),
		hard("b", "a"),
		file("a", "second"), // a tar appended to: the later file wins
	)
	dst, _, st, err := unpackBytes(t, data, Limits{})
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	assertFile(t, filepath.Join(dst, "a"), file("a", "second"))
	// b kept the first file's bytes: replacing a does not write through.
	assertFile(t, filepath.Join(dst, "b"), file("b", "first"))
	if st.HardLinks != 1 || st.Files != 2 {
		t.Errorf("stats = %+v, want 1 hard link and 2 files", st)
	}
}

func TestUnpackEmptyArchives(t *testing.T) {
	for _, tc := range []struct {
		format string
		data   []byte
	}{
		{FormatTar, tarOf(t)},
		{FormatTarGz, tgzOf(t)},
		{FormatZip, zipOf(t)},
	} {
		_, _, st, err := unpackBytes(t, tc.data, Limits{})
		if err != nil || st.Format != tc.format || st.Entries != 0 {
			t.Errorf("%s: stats %+v, err %v; want an empty %s", tc.format, st, err, tc.format)
		}
	}
}

func TestUnpackRefuses(t *testing.T) {
	ok := file("ok.txt", "fine") // something unpacked before the refusal
	gzipBomb, zipBomb := zerosTgz(t, 10<<20), zerosZip(t, 10<<20)
	for _, tc := range []struct {
		name string
		data []byte
		lim  Limits
		code string
	}{
		{"not an archive", []byte("hello, world"), Limits{}, CodeFormat},
		{"gzip of no tar", gzipOf(t, []byte("hello, world")), Limits{}, CodeFormat},
		{"truncated tar", tarOf(t, file("a", strings.Repeat("x", 600)))[:900], Limits{}, CodeFormat},
		{"tar traversal", tarOf(t, ok, file("../evil", "x")), Limits{}, CodeUnsafePath},
		{"tar inner traversal", tarOf(t, ok, file("a/../../evil", "x")), Limits{}, CodeUnsafePath},
		{"tar absolute", tarOf(t, ok, file("/tmp/evil", "x")), Limits{}, CodeUnsafePath},
		{"tar control byte", tarOf(t, ok, file("a\x1bb", "x")), Limits{}, CodeUnsafePath},
		{"tar long name", tarOf(t, ok, file(strings.Repeat("abcdefgh/", 500)+"x", "x")), Limits{}, CodeUnsafePath},
		{"tar long element", tarOf(t, ok, file(strings.Repeat("a", 256), "x")), Limits{}, CodeUnsafePath},
		{"tar file named as the directory", tarOf(t, ok, file(".", "x")), Limits{}, CodeUnsafePath},
		{"tar symlink escape", tarOf(t, ok, sym("l", "../outside")), Limits{}, CodeLinkOutside},
		{"tar symlink absolute", tarOf(t, ok, sym("l", "/etc")), Limits{}, CodeLinkOutside},
		{"tar symlink up from a subdirectory", tarOf(t, ok, sym("a/l", "../../x")), Limits{}, CodeLinkOutside},
		{"tar symlink empty", tarOf(t, ok, sym("l", "")), Limits{}, CodeLinkOutside},
		{"tar symlink through a link to the top", tarOf(t, ok, sym("d", "."), sym("c", "d/..")), Limits{}, CodeLinkOutside},
		{"tar symlink through a later link", tarOf(t, ok, sym("c", "d/.."), sym("d", ".")), Limits{}, CodeLinkOutside},
		{"tar symlink loop", tarOf(t, ok, sym("a", "b"), sym("b", "a")), Limits{}, CodeLinkOutside},
		{"tar symlink then file through it", tarOf(t, ok, dir("sub/"), sym("l", "sub"), file("l/x", "x")), Limits{}, CodeUnsafePath},
		{"tar file through a file", tarOf(t, ok, file("ok.txt/x", "x")), Limits{}, CodeUnsafePath},
		{"tar hard link outside", tarOf(t, ok, hard("h", "../etc/passwd")), Limits{}, CodeLinkOutside},
		{"tar hard link absolute", tarOf(t, ok, hard("h", "/etc/passwd")), Limits{}, CodeLinkOutside},
		{"tar hard link to a later file", tarOf(t, ok, hard("h", "later"), file("later", "x")), Limits{}, CodeLinkOutside},
		{"tar hard link to a symlink", tarOf(t, ok, sym("s", "ok.txt"), hard("h", "s")), Limits{}, CodeLinkOutside},
		{"tar hard link to a directory", tarOf(t, ok, dir("d/"), hard("h", "d")), Limits{}, CodeLinkOutside},
		{"tar char device", tarOf(t, ok, special("null", fs.ModeDevice|fs.ModeCharDevice)), Limits{}, CodeSpecialFile},
		{"tar block device", tarOf(t, ok, special("sda", fs.ModeDevice)), Limits{}, CodeSpecialFile},
		{"tar fifo", tarOf(t, ok, special("pipe", fs.ModeNamedPipe)), Limits{}, CodeSpecialFile},
		{"tar symlink over a file", tarOf(t, ok, sym("ok.txt", "other")), Limits{}, CodeDuplicate},
		{"tar file over a symlink", tarOf(t, ok, sym("l", "ok.txt"), file("l", "x")), Limits{}, CodeDuplicate},
		{"tar file over a directory", tarOf(t, ok, dir("d/"), file("d", "x")), Limits{}, CodeDuplicate},
		{"tar directory over a file", tarOf(t, ok, dir("ok.txt/")), Limits{}, CodeDuplicate},
		{"tar too many entries", tarOf(t, ok, file("b", ""), file("c", ""), file("d", "")), Limits{Entries: 3}, CodeTooManyEntries},
		{"tar too many implied directories", tarOf(t, file("a/b/c/d/e", "x")), Limits{Entries: 4}, CodeTooManyEntries},
		{"tar too deep", tarOf(t, ok, file("a/b/c/d/e", "x")), Limits{Depth: 4}, CodeTooDeep},
		{"tar file too large", tarOf(t, ok, file("big", strings.Repeat("x", 2048))), Limits{FileBytes: 1024}, CodeTooLarge},
		{"tar total too large", tarOf(t, ok, file("a", strings.Repeat("x", 600)), file("b", strings.Repeat("x", 600))), Limits{TotalBytes: 1024}, CodeTooLarge},
		{"gzip bomb over the total", gzipBomb, Limits{TotalBytes: 1 << 20}, CodeTooLarge},
		{"gzip bomb over the ratio", gzipBomb, Limits{}, CodeRatio},
		{"zip traversal", zipOf(t, ok, file("../evil", "x")), Limits{}, CodeUnsafePath},
		{"zip slip with backslashes", zipOf(t, ok, file("..\\..\\evil", "x")), Limits{}, CodeUnsafePath},
		{"zip drive", zipOf(t, ok, file("C:\\evil", "x")), Limits{}, CodeUnsafePath},
		{"zip drive with a slash", zipOf(t, ok, file("c:/evil", "x")), Limits{}, CodeUnsafePath},
		{"zip absolute", zipOf(t, ok, file("/tmp/evil", "x")), Limits{}, CodeUnsafePath},
		{"zip NUL", zipOf(t, ok, file("a\x00b", "x")), Limits{}, CodeUnsafePath},
		{"zip symlink escape", zipOf(t, ok, sym("a/l", "../../x")), Limits{}, CodeLinkOutside},
		{"zip symlink then file through it", zipOf(t, ok, dir("sub/"), sym("l", "sub"), file("l/x", "x")), Limits{}, CodeUnsafePath},
		{"zip fifo", zipOf(t, ok, special("pipe", fs.ModeNamedPipe)), Limits{}, CodeSpecialFile},
		{"zip device", zipOf(t, ok, special("sda", fs.ModeDevice)), Limits{}, CodeSpecialFile},
		{"zip socket", zipOf(t, ok, special("sock", fs.ModeSocket)), Limits{}, CodeSpecialFile},
		{"zip too many entries", zipOf(t, ok, file("b", ""), file("c", "")), Limits{Entries: 2}, CodeTooManyEntries},
		{"zip deflate bomb over the total", zipBomb, Limits{TotalBytes: 1 << 20}, CodeTooLarge},
		{"zip deflate bomb over the ratio", zipBomb, Limits{}, CodeRatio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst, parent, _, err := unpackBytes(t, tc.data, tc.lim)
			var uerr *Error
			if !errors.As(err, &uerr) || uerr.Code != tc.code {
				t.Fatalf("err = %v, want an *Error with code %s", err, tc.code)
			}
			assertLeftEmpty(t, dst, parent)
		})
	}
}

func TestUnpackBombStopsAtItsBound(t *testing.T) {
	// The bound holds on what streams out, not on what a header says, and
	// nothing past it reaches the disk.
	const bound = 1 << 20
	dst := filepath.Join(t.TempDir(), "dst")
	data := zerosTgz(t, 10<<20)
	u, root := newTestUnpacker(t, data, dst, Limits{TotalBytes: bound})
	err := u.run(int64(len(data)))
	written := u.stats.Bytes
	root.Close()
	var uerr *Error
	if !errors.As(err, &uerr) || uerr.Code != CodeTooLarge {
		t.Fatalf("err = %v, want %s", err, CodeTooLarge)
	}
	fi, serr := os.Stat(filepath.Join(dst, "zeros"))
	if serr != nil || fi.Size() > bound {
		t.Errorf("zeros on disk: %v, %v; want at most %d bytes", fi, serr, bound)
	}
	if written > bound+int64(len(u.buf)) {
		t.Errorf("counted %d bytes, want at most one chunk past %d", written, bound)
	}
}

func newTestUnpacker(t *testing.T, data []byte, dst string, lim Limits) (*unpacker, *os.Root) {
	t.Helper()
	root, err := openEmpty(dst)
	if err != nil {
		t.Fatal(err)
	}
	return newUnpacker(context.Background(), root, &countingReaderAt{r: bytes.NewReader(data)}, lim.withDefaults()), root
}

func TestUnpackErrorNamesTheEntryClipped(t *testing.T) {
	long := "../" + strings.Repeat("x", 1000)
	_, _, _, err := unpackBytes(t, tarOf(t, file(long, "x")), Limits{})
	var uerr *Error
	if !errors.As(err, &uerr) {
		t.Fatalf("err = %v, want an *Error", err)
	}
	if !strings.Contains(uerr.Message, `"../xxx`) || len(uerr.Message) > 300 {
		t.Errorf("message = %q, want the entry's name, clipped", uerr.Message)
	}
}

func TestUnpackRefusesADestinationThatHoldsSomething(t *testing.T) {
	dst := t.TempDir()
	keep := filepath.Join(dst, "keep")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := tarOf(t, file("a", "x"))
	_, err := Unpack(context.Background(), bytes.NewReader(data), int64(len(data)), dst, Limits{})
	if !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("err = %v, want ErrNotEmpty", err)
	}
	if got, err := os.ReadFile(keep); err != nil || string(got) != "mine" {
		t.Errorf("the file already there holds %q (%v), want it untouched", got, err)
	}
}

// cancellingReaderAt cancels its context once a read reaches past at.
type cancellingReaderAt struct {
	r      io.ReaderAt
	at     int64
	cancel context.CancelFunc
}

func (c cancellingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > c.at {
		c.cancel()
	}
	return c.r.ReadAt(p, off)
}

func TestUnpackStopsWhenCancelled(t *testing.T) {
	data := tarOf(t, file("a", "first"), file("b", strings.Repeat("x", 100_000)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := cancellingReaderAt{r: bytes.NewReader(data), at: 2048, cancel: cancel}
	dst, parent, _, err := unpackInto(t, ctx, src, int64(len(data)), Limits{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertLeftEmpty(t, dst, parent)
}

// failingReaderAt fails every read past at.
type failingReaderAt struct {
	r  io.ReaderAt
	at int64
}

var errDiskGone = errors.New("disk gone")

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.at {
		return 0, errDiskGone
	}
	return f.r.ReadAt(p, off)
}

func TestUnpackSourceFailureIsNotARefusal(t *testing.T) {
	data := tgzOf(t, file("a", "first"), file("b", strings.Repeat("xy", 100_000)))
	dst, parent, _, err := unpackInto(t, context.Background(), failingReaderAt{bytes.NewReader(data), int64(len(data)) / 2}, int64(len(data)), Limits{})
	var uerr *Error
	if !errors.Is(err, errDiskGone) || errors.As(err, &uerr) {
		t.Fatalf("err = %v, want the source's failure, not a refusal", err)
	}
	assertLeftEmpty(t, dst, parent)
}
