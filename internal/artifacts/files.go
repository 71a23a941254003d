package artifacts

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// MaxPathBytes bounds a path asked for in a run's directory.
const MaxPathBytes = 4096

// ErrInvalidPath is the error of a path that is not a file's place in a
// run's directory: absolute, with a "..", "." or empty element, a NUL, a
// directory, a device or pipe, or a symlink that leads out.
var ErrInvalidPath = errors.New("invalid path")

// ErrFileNotFound is the error of a path that names nothing.
var ErrFileNotFound = errors.New("file not found")

// ErrTooLarge is the error of an archive over its bound.
var ErrTooLarge = errors.New("too large")

// CleanPath checks p, a path relative to a run's directory with forward
// slashes, and returns it. It refuses rather than cleans: a path that
// would need cleaning is not one the gateway hands out.
func CleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: empty", ErrInvalidPath)
	case len(p) > MaxPathBytes:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrInvalidPath, MaxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w: holds a NUL byte", ErrInvalidPath)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: absolute; give it relative to the run's directory", ErrInvalidPath)
	}
	for _, el := range strings.Split(p, "/") {
		switch el {
		case "..":
			return "", fmt.Errorf("%w: a \"..\" element would leave the run's directory", ErrInvalidPath)
		case ".", "":
			return "", fmt.Errorf("%w: an empty or \".\" element", ErrInvalidPath)
		}
	}
	return p, nil
}

// Open opens the regular file p in the directory root, confined to it: a
// symlink is followed only while it stays inside. Errors wrap
// ErrInvalidPath or ErrFileNotFound, or are the file system's.
func Open(root *os.Root, p string) (*os.File, fs.FileInfo, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, nil, err
	}
	f, fi, err := openRegular(root, p)
	switch {
	case err == nil:
		return f, fi, nil
	case errors.Is(err, errNotRegular):
		what := "not a regular file"
		if fi != nil && fi.IsDir() {
			what = "a directory, not a file"
		}
		return nil, nil, fmt.Errorf("%w: %s is %s", ErrInvalidPath, p, what)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, nil, fmt.Errorf("%w: %s", ErrFileNotFound, p)
	}
	// What os.Root refuses: a symlink or ".." that leads out, a loop.
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return nil, nil, fmt.Errorf("%w: %s cannot be opened inside the run's directory: %v", ErrInvalidPath, p, err)
}

// Archive writes the directory root as a gzipped tar to w: directories,
// regular files and symlinks (kept as symlinks, never followed); devices,
// pipes and sockets are left out. A directory whose files add up to more
// than max bytes is an ErrTooLarge before anything is written; one that
// grows past it while written fails with ErrTooLarge once it does, with
// the archive cut short.
func Archive(w io.Writer, root *os.Root, max int64) error {
	var total int64
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		if total > max {
			return fmt.Errorf("%w: the run's directory holds more than the archive's limit of %d bytes", ErrTooLarge, max)
		}
		return nil
	})
	if err != nil {
		return err
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	var written int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			if p == "." {
				return err
			}
			return nil // gone since it was listed
		}
		t := d.Type()
		switch {
		case t.IsDir():
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()})
		case t&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return nil
			}
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777})
		case t.IsRegular():
			f, fi, err := openRegular(root, p)
			if err != nil {
				return nil
			}
			defer f.Close()
			if written += fi.Size(); written > max {
				return fmt.Errorf("%w: the run's directory grew past the archive's limit of %d bytes while it was written", ErrTooLarge, max)
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Size: fi.Size(),
				Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}); err != nil {
				return err
			}
			// The header promised Size bytes: a file that shrank
			// while read cannot be archived truthfully.
			if _, err := io.CopyN(tw, f, fi.Size()); err != nil {
				return fmt.Errorf("archive %s: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
