package unpack

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// Formats, as Stats.Format names them.
const (
	FormatTar    = "tar"
	FormatTarGz  = "tar+gzip"
	FormatZip    = "zip"
	tarBlockSize = 512
)

// ErrNotEmpty is returned when the destination already holds something:
// an archive is only ever unpacked into a directory of its own.
var ErrNotEmpty = errors.New("destination is not empty")

// Limits bound what one archive may unpack to. A zero field takes its
// value from DefaultLimits.
type Limits struct {
	// Entries is the most entries (files, directories, links) an archive
	// may hold.
	Entries int
	// TotalBytes is the most bytes all its files together may unpack to.
	TotalBytes int64
	// FileBytes is the most bytes one file may unpack to.
	FileBytes int64
	// Ratio is the most bytes unpacked per byte read of the archive,
	// judged once more than RatioGrace bytes are unpacked.
	Ratio int64
	// Depth is the most elements a path may have.
	Depth int
	// NameBytes is the longest path, in bytes.
	NameBytes int
}

// RatioGrace is how many bytes unpack before the ratio is judged: a
// small archive of repetitive text may compress far better than a
// repository does, and costs nothing.
const RatioGrace = 1 << 20

// DefaultLimits are sized for a source repository: 100k entries, 1 GiB
// in all, 512 MiB in one file, 200 bytes unpacked per byte packed, paths
// of at most 128 elements and 4096 bytes.
func DefaultLimits() Limits {
	return Limits{
		Entries:    100_000,
		TotalBytes: 1 << 30,
		FileBytes:  512 << 20,
		Ratio:      200,
		Depth:      128,
		NameBytes:  4096,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Entries <= 0 {
		l.Entries = d.Entries
	}
	if l.TotalBytes <= 0 {
		l.TotalBytes = d.TotalBytes
	}
	if l.FileBytes <= 0 {
		l.FileBytes = d.FileBytes
	}
	if l.Ratio <= 0 {
		l.Ratio = d.Ratio
	}
	if l.Depth <= 0 {
		l.Depth = d.Depth
	}
	if l.NameBytes <= 0 {
		l.NameBytes = d.NameBytes
	}
	return l
}

// Stats says what an archive unpacked to.
type Stats struct {
	// Format is FormatTar, FormatTarGz or FormatZip.
	Format string
	// Entries counts every entry of the archive, skipped ones included.
	Entries   int
	Files     int
	Dirs      int
	Symlinks  int
	HardLinks int
	// Bytes is how many bytes the files unpacked to.
	Bytes int64
	// Packed is how many bytes of the archive were read to unpack them.
	Packed int64
}

// Unpack unpacks the archive src, size bytes long, into dst: a tar, a
// gzipped tar or a zip, told apart by its first bytes. dst is created
// when missing and must otherwise be an empty directory (else
// ErrNotEmpty).
//
// Three things might happen. The whole archive is unpacked, and Unpack
// returns what it held. Or the archive is refused: the error is an *Error
// whose Code says why, naming the entry, and dst is left empty. Or
// something else fails (ctx is done, src cannot be read, dst cannot be
// written): the error wraps the cause, and dst is left empty.
func Unpack(ctx context.Context, src io.ReaderAt, size int64, dst string, lim Limits) (Stats, error) {
	root, err := openEmpty(dst)
	if err != nil {
		return Stats{}, err
	}
	defer root.Close()
	u := newUnpacker(ctx, root, &countingReaderAt{r: src}, lim.withDefaults())
	if err := u.run(size); err != nil {
		if cerr := empty(root); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return Stats{}, err
	}
	u.stats.Packed = u.src.n
	return u.stats, nil
}

// openEmpty creates dir when missing and opens it as a root, refusing a
// directory that already holds something: the account the unpacker keeps
// of what it created is the whole truth only in an empty one.
func openEmpty(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("unpack: create destination: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("unpack: open destination: %w", err)
	}
	names, err := readNames(root, 1)
	if err != nil {
		root.Close()
		return nil, err
	}
	if len(names) > 0 {
		root.Close()
		return nil, fmt.Errorf("unpack: %s: %w", dir, ErrNotEmpty)
	}
	return root, nil
}

func readNames(root *os.Root, n int) ([]string, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("unpack: read destination: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("unpack: read destination: %w", err)
	}
	return names, nil
}

// empty removes everything under root, leaving root itself.
func empty(root *os.Root) error {
	names, err := readNames(root, -1)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if err := root.RemoveAll(name); err != nil {
			errs = append(errs, fmt.Errorf("unpack: clean destination: %w", err))
		}
	}
	return errors.Join(errs...)
}

// run tells the format by its first bytes and unpacks it.
func (u *unpacker) run(size int64) error {
	head := make([]byte, tarBlockSize)
	n, err := u.src.ReadAt(head, 0)
	if err != nil && n < len(head) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("unpack: read archive: %w", err)
	}
	head = head[:n]
	whole := io.NewSectionReader(u.src, 0, size)
	switch {
	case isZip(head):
		u.stats.Format = FormatZip
		return u.unzip(size)
	case isGzip(head):
		u.stats.Format = FormatTarGz
		return u.untgz(whole)
	case isTar(head):
		u.stats.Format = FormatTar
		return u.untar(whole)
	}
	return &Error{Code: CodeFormat, Message: "the archive is not a tar, a gzipped tar or a zip"}
}

func (u *unpacker) untgz(r io.Reader) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return u.corrupt("", err)
	}
	defer gz.Close()
	br := bufio.NewReader(gz)
	head, err := br.Peek(tarBlockSize)
	if !isTar(head) {
		if err != nil && !errors.Is(err, io.EOF) {
			return u.corrupt("", err)
		}
		return &Error{Code: CodeFormat, Message: "the gzip file does not hold a tar"}
	}
	return u.untar(br)
}

func isZip(head []byte) bool {
	// A zip starts with a local file header, or, when it holds nothing,
	// with the end of its central directory.
	return hasPrefix(head, "PK\x03\x04") || hasPrefix(head, "PK\x05\x06")
}

func isGzip(head []byte) bool { return hasPrefix(head, "\x1f\x8b") }

// isTar says head is a tar's first block: a POSIX or GNU header, which
// carries "ustar" at offset 257, or the zero block that ends an empty tar.
func isTar(head []byte) bool {
	if len(head) < tarBlockSize {
		return false
	}
	if string(head[257:262]) == "ustar" {
		return true
	}
	for _, b := range head[:tarBlockSize] {
		if b != 0 {
			return false
		}
	}
	return true
}

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// countingReaderAt counts the bytes read of the archive, for the ratio,
// and keeps the first failure to read it, so that a failing source is
// not mistaken for a corrupt archive.
type countingReaderAt struct {
	r   io.ReaderAt
	n   int64
	err error
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) && c.err == nil {
		c.err = err
	}
	return n, err
}
