package workspace

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/unpack"
)

// restoreRatio bounds a restored snapshot's unpacked bytes by its bound
// packed: a gzipped tar of text unpacks to several times its size.
const restoreRatio = 8

// RestoreLimits bound a snapshot restored, which is unpacked as an
// archive an agent wrote, when what is kept is bounded to packed bytes:
// generous in entries and ratio, since the gateway packed it, and bounded
// in bytes all the same.
func RestoreLimits(packed int64) unpack.Limits {
	if packed <= 0 {
		packed = 1 << 30
	}
	return unpack.Limits{Entries: 1_000_000, TotalBytes: packed * restoreRatio, FileBytes: packed * restoreRatio, Ratio: 2000}
}

// Store keeps directories in the cluster's snapshots, bounded, and
// restores them safely: what a snapshot holds was written by an agent, and
// is unpacked as an untrusted archive.
type Store struct {
	snaps runs.Snapshots
	// tmp holds a snapshot while it is unpacked (unpacking needs to
	// read it twice).
	tmp string
	// unpack bounds what a restored snapshot may hold.
	unpack unpack.Limits
}

// NewStore returns a Store over snaps, using tmp for the snapshots being
// restored.
func NewStore(snaps runs.Snapshots, tmp string, lim unpack.Limits) *Store {
	return &Store{snaps: snaps, tmp: tmp, unpack: lim}
}

// SaveDir stores the directory dir whole under key, at most max bytes.
func (s *Store) SaveDir(ctx context.Context, key runs.SnapshotKey, dir string, max int64, meta map[string]string) (runs.SnapshotInfo, error) {
	return s.SavePaths(ctx, key, dir, []string{"."}, max, meta)
}

// SavePaths stores the files and directories paths, relative to root,
// under key, at most max bytes: what is listed but missing is skipped.
func (s *Store) SavePaths(ctx context.Context, key runs.SnapshotKey, root string, paths []string, max int64, meta map[string]string) (runs.SnapshotInfo, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return runs.SnapshotInfo{}, fmt.Errorf("open %s: %w", key.Kind, err)
	}
	defer r.Close()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, r, paths)) }()
	info, err := s.snaps.PutSnapshot(ctx, key, pr, max, meta)
	pr.CloseWithError(errors.New("snapshot stored")) // stops the writer if the store gave up early
	return info, err
}

// Restore unpacks the snapshot key into dst, which is made when missing
// and must be empty. It returns runs.ErrNotFound, wrapped, when there is
// no such snapshot.
func (s *Store) Restore(ctx context.Context, key runs.SnapshotKey, dst string) (runs.SnapshotInfo, error) {
	body, info, err := s.snaps.OpenSnapshot(ctx, key)
	if err != nil {
		return runs.SnapshotInfo{}, fmt.Errorf("open %s snapshot: %w", key.Kind, err)
	}
	defer body.Close()
	f, err := os.CreateTemp(s.tmp, "restore-*")
	if err != nil {
		return runs.SnapshotInfo{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, body)
	if err != nil {
		return runs.SnapshotInfo{}, fmt.Errorf("read %s snapshot: %w", key.Kind, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return runs.SnapshotInfo{}, err
	}
	if _, err := unpack.Unpack(ctx, f, n, dst, s.unpack); err != nil {
		return runs.SnapshotInfo{}, fmt.Errorf("unpack %s snapshot: %w", key.Kind, err)
	}
	return info, nil
}

// writeTar writes paths under root to w as a gzipped tar: directories,
// regular files and symlinks (as symlinks, never followed); anything else
// is left out.
func writeTar(w io.Writer, root *os.Root, paths []string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, p := range paths {
		if err := fs.WalkDir(root.FS(), path.Clean(p), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return skipMissing(err)
			}
			return addEntry(tw, root, p, d)
		}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// skipMissing lets a walk go on past what vanished or was never there.
func skipMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func addEntry(tw *tar.Writer, root *os.Root, p string, d fs.DirEntry) error {
	if p == "." {
		return nil
	}
	fi, err := d.Info()
	if err != nil {
		return skipMissing(err)
	}
	switch t := d.Type(); {
	case t.IsDir():
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()})
	case t&fs.ModeSymlink != 0:
		target, err := root.Readlink(p)
		if err != nil {
			return skipMissing(err)
		}
		if !linkStaysInside(p, target) {
			// Restoring checks every link, and refuses a snapshot
			// with one that leads out: such a link is left out here,
			// so that the rest of the directory can be restored.
			return nil
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777, ModTime: fi.ModTime()})
	case t.IsRegular():
		return addFile(tw, root, p)
	}
	return nil
}

// linkStaysInside reports whether a symlink at p, relative to the root,
// to target leads to a place inside the root, by its words alone.
func linkStaysInside(p, target string) bool {
	if path.IsAbs(target) {
		return false
	}
	resolved := path.Join(path.Dir(p), target)
	return resolved != ".." && !strings.HasPrefix(resolved, "../")
}

// addFile writes the regular file p: as long as it was when opened, so
// that the header's size stays true of a file that grows while read.
func addFile(tw *tar.Writer, root *os.Root, p string) error {
	f, err := root.Open(p)
	if err != nil {
		return skipMissing(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Size: fi.Size(), Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, f, fi.Size()); err != nil {
		return fmt.Errorf("snapshot %s: %w", p, err)
	}
	return nil
}

// RestoreInto unpacks the snapshot key over what dst holds: its files
// replace dst's of the same name, the rest of dst stays. A session's
// files go into a home made of the base's this way.
func (s *Store) RestoreInto(ctx context.Context, key runs.SnapshotKey, dst string) (runs.SnapshotInfo, error) {
	// Beside dst, so that what is unpacked is renamed into it on one
	// file system.
	staging, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dst)), ".restore-into-*")
	if err != nil {
		return runs.SnapshotInfo{}, err
	}
	defer os.RemoveAll(staging)
	unpacked := filepath.Join(staging, "x")
	info, err := s.Restore(ctx, key, unpacked)
	if err != nil {
		return runs.SnapshotInfo{}, err
	}
	if err := mergeInto(unpacked, dst); err != nil {
		return runs.SnapshotInfo{}, fmt.Errorf("restore %s snapshot: %w", key.Kind, err)
	}
	return info, nil
}

// mergeInto moves the entries of src into dst, directory by directory:
// a directory that dst has is merged, anything else replaces dst's.
func mergeInto(src, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if e.IsDir() {
			if fi, err := os.Lstat(to); err == nil && fi.IsDir() {
				if err := mergeInto(from, to); err != nil {
					return err
				}
				continue
			}
		}
		if err := os.RemoveAll(to); err != nil {
			return err
		}
		if err := os.Rename(from, to); err != nil {
			return err
		}
	}
	return nil
}
