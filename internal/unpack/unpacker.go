package unpack

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
)

// kind is what an entry makes.
type kind int

const (
	kindSkip kind = iota // an entry that makes nothing (a tar's global header)
	kindDir
	kindFile
	kindSymlink
	kindHardLink
)

func (k kind) String() string {
	switch k {
	case kindDir:
		return "directory"
	case kindFile, kindHardLink:
		return "file"
	case kindSymlink:
		return "symbolic link"
	}
	return "entry"
}

// entry is one member of an archive, whatever its format.
type entry struct {
	name string
	kind kind
	// exec says a regular file is executable by someone.
	exec bool
	// size is what the header claims a regular file holds; it is checked
	// early, and the bytes are counted again as they stream.
	size int64
	// link is a symbolic link's target or a hard link's first name.
	link string
	// open returns a regular file's bytes.
	open func() (io.ReadCloser, error)
	// zip says the name is a zip's, where backslashes and drives are
	// Windows paths.
	zip bool
}

// unpacker unpacks one archive into root, keeping its own account of
// what it made there.
type unpacker struct {
	ctx   context.Context
	root  *os.Root
	src   *countingReaderAt
	lim   Limits
	stats Stats
	// made is the kind of every path made, directories made on the way
	// included; hard links count as files.
	made map[string]kind
	// links maps each symbolic link made to its target.
	links map[string]string
	buf   []byte
}

func newUnpacker(ctx context.Context, root *os.Root, src *countingReaderAt, lim Limits) *unpacker {
	return &unpacker{
		ctx: ctx, root: root, src: src, lim: lim,
		made:  make(map[string]kind),
		links: make(map[string]string),
		buf:   make([]byte, 32<<10),
	}
}

// add makes one entry.
func (u *unpacker) add(e entry) error {
	if err := u.ctx.Err(); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if u.stats.Entries++; u.stats.Entries > u.lim.Entries {
		return &Error{Code: CodeTooManyEntries, Message: fmt.Sprintf("the archive holds more than %d entries", u.lim.Entries)}
	}
	if e.kind == kindSkip {
		return nil
	}
	p, cerr := u.cleanName(e.name, e.zip)
	if cerr != nil {
		return cerr
	}
	if p == "" {
		if e.kind == kindDir {
			return nil // the directory itself, as in "./"
		}
		return entryError(CodeUnsafePath, e.name, "a %s cannot take the place of the directory itself", e.kind)
	}
	if err := u.checkPlace(e, p); err != nil {
		return err
	}
	if err := u.mkdirs(ancestors(p)); err != nil {
		return err
	}
	if _, ok := u.made[p]; !ok {
		if err := u.room(e.name); err != nil {
			return err
		}
	}
	return u.make(e, p)
}

// room refuses to make one more path once Limits.Entries are made:
// directories only implied by a path count too, else one entry 128 deep
// would make 128 of them.
func (u *unpacker) room(name string) error {
	if len(u.made) < u.lim.Entries {
		return nil
	}
	return entryError(CodeTooManyEntries, name, "the archive makes more than %d files and directories", u.lim.Entries)
}

func (u *unpacker) make(e entry, p string) error {
	switch e.kind {
	case kindDir:
		return u.dir(p)
	case kindFile:
		return u.file(e, p)
	case kindSymlink:
		return u.symlink(e, p)
	case kindHardLink:
		return u.hardLink(e, p)
	}
	return entryError(CodeSpecialFile, e.name, "unknown entry type")
}

// checkPlace refuses an entry whose path goes through anything but a
// directory made before, or that would replace an earlier entry of
// another kind. A file may replace a file (a tar appended to) and a
// directory repeat a directory.
func (u *unpacker) checkPlace(e entry, p string) error {
	for _, a := range ancestors(p) {
		if k, ok := u.made[a]; ok && k != kindDir {
			return entryError(CodeUnsafePath, e.name, "the path goes through the %s %s", k, quote(a))
		}
	}
	k, ok := u.made[p]
	if !ok {
		return nil
	}
	if k == e.kind && (k == kindDir || k == kindFile) {
		return nil
	}
	return entryError(CodeDuplicate, e.name, "it would replace an earlier %s", k)
}

// mkdirs makes the directories of dirs not made yet.
func (u *unpacker) mkdirs(dirs []string) error {
	for _, d := range dirs {
		if _, ok := u.made[d]; ok {
			continue // checkPlace saw it is a directory
		}
		if err := u.room(d); err != nil {
			return err
		}
		if err := u.mkdir(d); err != nil {
			return err
		}
	}
	return nil
}

func (u *unpacker) mkdir(p string) error {
	if err := u.root.Mkdir(p, 0o755); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	// Mkdir's mode passes through the umask; the mode is the package's.
	if err := u.root.Chmod(p, 0o755); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	u.made[p] = kindDir
	u.stats.Dirs++
	return nil
}

func (u *unpacker) dir(p string) error {
	if _, ok := u.made[p]; ok {
		return nil
	}
	return u.mkdir(p)
}

// file makes a regular file, 0755 when executable else 0644, whatever
// other bits the archive gives it.
func (u *unpacker) file(e entry, p string) error {
	if e.size > u.lim.FileBytes {
		return entryError(CodeTooLarge, e.name, "the file is larger than %d bytes", u.lim.FileBytes)
	}
	if _, ok := u.made[p]; ok {
		// Replace, not truncate: truncating would write through to the
		// hard links of the earlier file.
		if err := u.root.Remove(p); err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
	}
	mode := os.FileMode(0o644)
	if e.exec {
		mode = 0o755
	}
	f, err := u.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	u.made[p] = kindFile
	u.stats.Files++
	werr := u.fill(e, f)
	if werr == nil {
		werr = f.Chmod(mode) // past the umask
	}
	if cerr := f.Close(); werr == nil && cerr != nil {
		werr = fmt.Errorf("unpack: %w", cerr)
	}
	return werr
}

func (u *unpacker) fill(e entry, f *os.File) error {
	rc, err := e.open()
	if err != nil {
		return u.corrupt(e.name, err)
	}
	defer rc.Close()
	return u.copy(e.name, f, rc)
}

// copy streams a file's bytes, counting each chunk against the bounds
// before it is written.
func (u *unpacker) copy(name string, w io.Writer, r io.Reader) error {
	var n int64
	for {
		if err := u.ctx.Err(); err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		got, rerr := r.Read(u.buf)
		if got > 0 {
			n += int64(got)
			if err := u.account(name, n, int64(got)); err != nil {
				return err
			}
			if _, err := w.Write(u.buf[:got]); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return u.corrupt(name, rerr)
		}
	}
}

// account counts got more bytes of a file that has now unpacked to n.
func (u *unpacker) account(name string, n, got int64) error {
	if n > u.lim.FileBytes {
		return entryError(CodeTooLarge, name, "the file is larger than %d bytes", u.lim.FileBytes)
	}
	u.stats.Bytes += got
	if u.stats.Bytes > u.lim.TotalBytes {
		return entryError(CodeTooLarge, name, "the archive unpacks to more than %d bytes", u.lim.TotalBytes)
	}
	if u.stats.Bytes > RatioGrace && u.stats.Bytes > u.lim.Ratio*u.src.n {
		return entryError(CodeRatio, name, "the archive unpacks to more than %d times its size", u.lim.Ratio)
	}
	return nil
}

// corrupt is a failure to read the archive: the source's own failure
// when it had one, else a corrupt archive.
func (u *unpacker) corrupt(name string, err error) error {
	if u.src.err != nil {
		return fmt.Errorf("unpack: read archive: %w", u.src.err)
	}
	if name == "" {
		return &Error{Code: CodeFormat, Message: "the archive is corrupt: " + err.Error()}
	}
	return entryError(CodeFormat, name, "the archive is corrupt: %v", err)
}

func (u *unpacker) symlink(e entry, p string) error {
	switch {
	case e.link == "" || len(e.link) > maxLinkBytes || hasControl(e.link):
		return entryError(CodeLinkOutside, e.name, "the link's target is empty, too long or holds a control byte")
	case !u.staysInside(parentElems(p), e.link):
		return entryError(CodeLinkOutside, e.name, "the link's target %s leaves the directory", quote(e.link))
	}
	if err := u.root.Symlink(e.link, p); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	u.made[p] = kindSymlink
	u.links[p] = e.link
	u.stats.Symlinks++
	return nil
}

// hardLink links p to a regular file unpacked before it, named as the
// archive names its entries.
func (u *unpacker) hardLink(e entry, p string) error {
	target, cerr := u.cleanName(e.link, e.zip)
	if cerr != nil || u.made[target] != kindFile {
		return entryError(CodeLinkOutside, e.name, "the hard link's target %s is not a file unpacked before it", quote(e.link))
	}
	if err := u.root.Link(target, p); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	u.made[p] = kindFile
	u.stats.HardLinks++
	return nil
}

// checkLinks follows every symbolic link again once all are made: a
// link made later can turn an element of an earlier link's target into
// a way out.
func (u *unpacker) checkLinks() error {
	paths := make([]string, 0, len(u.links))
	for p := range u.links {
		paths = append(paths, p)
	}
	sort.Strings(paths) // the same archive is refused with the same message
	for _, p := range paths {
		if err := u.ctx.Err(); err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		if !u.staysInside(parentElems(p), u.links[p]) {
			return entryError(CodeLinkOutside, p, "the link's target %s leaves the directory through a later link", quote(u.links[p]))
		}
	}
	return nil
}
