package unpack

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fuzzLimits are small, so that the fuzzer meets every bound.
var fuzzLimits = Limits{Entries: 16, TotalBytes: 8 << 10, FileBytes: 4 << 10, Depth: 6, NameBytes: 256}

func FuzzUnpack(f *testing.F) {
	tree := []member{
		dir("d/"), file("d/a", "hello"), exe("d/x.sh", "#!/bin/sh\n"), sym("l", "d/a"), sym("d/up", "../d"),
	}
	f.Add(tarOf(f, append(tree, hard("h", "d/a"))...))
	f.Add(tgzOf(f, tree...))
	f.Add(zipOf(f, tree...))
	f.Add(tarOf(f, sym("d", "."), sym("c", "d/.."), file("c/x", "x")))
	f.Add(zipOf(f, file("..\\evil", "x"), special("p", fs.ModeNamedPipe)))
	f.Add(tgzOf(f, file("big", strings.Repeat("0", 9<<10))))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "dst")
		_, err := Unpack(context.Background(), bytes.NewReader(data), int64(len(data)), dst, fuzzLimits)
		assertOnlyDst(t, parent)
		if err != nil {
			var uerr *Error
			if !errors.As(err, &uerr) {
				t.Fatalf("err = %v, want an *Error: the source cannot fail", err)
			}
			if names, _ := os.ReadDir(dst); len(names) != 0 {
				t.Fatalf("dst holds %v after %v", names, err)
			}
			return
		}
		assertWithinLimits(t, dst, fuzzLimits)
	})
}

// assertWithinLimits walks what was unpacked: no more entries, bytes or
// depth than lim allows, only the package's modes, and no link out.
func assertWithinLimits(t *testing.T, dst string, lim Limits) {
	t.Helper()
	var entries int
	var total int64
	inodes := map[uint64]bool{}
	err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dst {
			return err
		}
		entries++
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		if n := strings.Count(rel, "/") + 1; n > lim.Depth {
			t.Errorf("%s is %d deep, want at most %d", rel, n, lim.Depth)
		}
		switch mode := fi.Mode(); {
		case mode&fs.ModeSymlink != 0:
			assertLinkInside(t, dst, p)
		case mode.IsDir():
			if mode != fs.ModeDir|0o755 {
				t.Errorf("%s: mode %v", rel, mode)
			}
		case mode.IsRegular():
			if mode != 0o644 && mode != 0o755 {
				t.Errorf("%s: mode %v", rel, mode)
			}
			if fi.Size() > lim.FileBytes {
				t.Errorf("%s: %d bytes, want at most %d", rel, fi.Size(), lim.FileBytes)
			}
			if ino := fi.Sys().(*syscall.Stat_t).Ino; !inodes[ino] {
				inodes[ino] = true
				total += fi.Size()
			}
		default:
			t.Errorf("%s: a special file, mode %v", rel, mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if entries > lim.Entries || total > lim.TotalBytes {
		t.Errorf("unpacked %d entries of %d bytes, want at most %d and %d", entries, total, lim.Entries, lim.TotalBytes)
	}
}

// assertLinkInside resolves the link p by the kernel's rules; one that
// resolves (not dangling) must land inside dst.
func assertLinkInside(t *testing.T, dst, p string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return // dangling or looping: it reaches nothing
	}
	realDst, err := filepath.EvalSymlinks(dst)
	if err != nil {
		t.Fatal(err)
	}
	if real != realDst && !strings.HasPrefix(real, realDst+string(filepath.Separator)) {
		t.Errorf("link %s resolves to %s, outside %s", p, real, realDst)
	}
}
