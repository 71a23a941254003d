package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultMaxBaseBytes bounds what a run's home copies of the base home.
const DefaultMaxBaseBytes = 256 << 20

// BuildHome makes home, a run's own CLI home, with copies of the files and
// directories paths (relative, as runs.HomeKeeper.BaseFiles lists them)
// of base, the operator's home: what base lacks is skipped. Copies are
// made, not links, so that nothing a run writes reaches the base. A
// symlink in base is copied as what it points to, when that is a file or
// a directory; max bounds the bytes copied.
func BuildHome(base, home string, paths []string, max int64) error {
	if max <= 0 {
		max = DefaultMaxBaseBytes
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("make home: %w", err)
	}
	c := copier{left: max}
	for _, p := range paths {
		rel, err := homeRelative(p)
		if err != nil {
			return err
		}
		if err := c.copy(filepath.Join(base, rel), filepath.Join(home, rel), 0); err != nil {
			return fmt.Errorf("copy %s of the base home: %w", rel, err)
		}
	}
	return nil
}

// homeRelative checks p, a path an adapter names in a home.
func homeRelative(p string) (string, error) {
	c := filepath.Clean(p)
	if filepath.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") || c == "." {
		return "", fmt.Errorf("%q is not a path inside a home", p)
	}
	return c, nil
}

type copier struct{ left int64 }

// maxHomeDepth bounds how deep a copy goes: a symlink to a directory
// above it would otherwise make it go on for ever.
const maxHomeDepth = 32

func (c *copier) copy(src, dst string, depth int) error {
	if depth > maxHomeDepth {
		return fmt.Errorf("%s is more than %d directories deep (a symlink loop?)", src, maxHomeDepth)
	}
	fi, err := os.Stat(src) // follows a symlink: its target is copied
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return c.copyDir(src, dst, fi.Mode().Perm(), depth)
	case fi.Mode().IsRegular():
		return c.copyFile(src, dst, fi)
	}
	return nil // a device or a socket has no place in a home
}

func (c *copier) copyDir(src, dst string, perm fs.FileMode, depth int) error {
	if err := os.MkdirAll(dst, perm|0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := c.copy(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (c *copier) copyFile(src, dst string, fi fs.FileInfo) error {
	if c.left -= fi.Size(); c.left < 0 {
		return fmt.Errorf("the base home's files are larger than the bound for one home")
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm()|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
