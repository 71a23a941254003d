package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Kinds of a change, as runs.ChangedFile spells them.
const (
	KindAdd    = "add"
	KindUpdate = "update"
	KindDelete = "delete"
)

// Limits bound a snapshot and its diff. A zero field takes its default.
type Limits struct {
	// MaxFiles bounds the files of a directory that can be snapshotted
	// (default 100000); a larger one is an ErrTooManyFiles.
	MaxFiles int
	// MaxFileBytes is the largest text file whose baseline is kept and
	// that is diffed (default 1 MiB); a larger one is compared by size
	// and hash and reported as changed, not diffed.
	MaxFileBytes int64
	// MaxKeptBytes bounds the baseline copies of one snapshot (default
	// 64 MiB); the files past it are compared by hash alone.
	MaxKeptBytes int64
	// MaxDiffBytes bounds the whole diff kept beside the snapshot
	// (default 16 MiB); a longer one is cut with Mark.
	MaxDiffBytes int
}

// DefaultLimits are the limits of a zero Limits.
var DefaultLimits = Limits{MaxFiles: 100_000, MaxFileBytes: 1 << 20, MaxKeptBytes: 64 << 20, MaxDiffBytes: 16 << 20}

func (l Limits) withDefaults() Limits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultLimits.MaxFiles
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultLimits.MaxFileBytes
	}
	if l.MaxKeptBytes <= 0 {
		l.MaxKeptBytes = DefaultLimits.MaxKeptBytes
	}
	if l.MaxDiffBytes <= 0 {
		l.MaxDiffBytes = DefaultLimits.MaxDiffBytes
	}
	return l
}

// ErrTooManyFiles is the error of a directory with more files than
// Limits.MaxFiles.
var ErrTooManyFiles = errors.New("too many files to snapshot")

// ErrNoSnapshot is the error of Load without a result kept in the store
// directory, and of Compare when the manifest Take wrote there is gone.
var ErrNoSnapshot = errors.New("no snapshot")

// Names in a store directory.
const (
	manifestFile = "before.json"
	blobDir      = "blobs"
	diffFile     = "diff"
	resultFile   = "result.json"
)

// entry is one file of a snapshot: a regular file or a symlink.
type entry struct {
	Path string `json:"path"`
	// Link says it is a symlink to Target.
	Link   bool   `json:"link,omitempty"`
	Target string `json:"target,omitempty"`
	Exec   bool   `json:"exec,omitempty"`
	Size   int64  `json:"size"`
	Hash   string `json:"hash"`
	Binary bool   `json:"binary,omitempty"`
	// Kept says a copy of the content is in the store, named by Hash.
	Kept bool `json:"kept,omitempty"`
}

func (e entry) mode() string {
	switch {
	case e.Link:
		return "120000"
	case e.Exec:
		return "100755"
	}
	return "100644"
}

// Change is one file a run changed.
type Change struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Size   int64  `json:"size"`
	Binary bool   `json:"binary,omitempty"`
}

// Result is what Compare found.
type Result struct {
	Changes []Change `json:"files"`
	// Diff is the unified diff of Changes, cut at Limits.MaxDiffBytes
	// with Mark when Truncated.
	Diff      string `json:"-"`
	Truncated bool   `json:"truncated,omitempty"`
}

// maxManifestInMemory bounds the manifest a Snapshot keeps in memory,
// about in bytes: a larger one is written into the store. A run that starts
// in an empty or small directory, as most do, then costs its snapshot no
// file at all, while a thousand runs in large ones hold little each.
const maxManifestInMemory = 64 << 10

// Snapshot is a directory as Take found it, for Compare.
type Snapshot struct {
	store string
	// entries is the manifest, when it is small enough to keep here;
	// onDisk says it is in the store instead.
	entries []entry
	onDisk  bool
	// made says Take made the store directory.
	made bool
}

// Take snapshots dir: the manifest of every regular file and symlink
// under dir (a ".git" is skipped) and a copy of each small text file, for
// the diff. The copies, and a manifest too large to keep in memory, go
// into store, a directory it creates only for them. Nothing under dir is
// followed out of it.
func Take(dir, store string, l Limits) (*Snapshot, error) {
	l = l.withDefaults()
	snap := &Snapshot{store: store}
	var kept int64
	blobs := false // the blob directory is made for the first copy: most runs start in an empty directory
	entries, err := walk(dir, l, func(e *entry, content []byte) error {
		if content == nil || e.Binary || kept+e.Size > l.MaxKeptBytes {
			return nil
		}
		if !blobs {
			if err := snap.mkdir(blobDir); err != nil {
				return err
			}
			blobs = true
		}
		blob := filepath.Join(store, blobDir, e.Hash)
		if _, err := os.Stat(blob); err != nil {
			if err := os.WriteFile(blob, content, 0o600); err != nil {
				return fmt.Errorf("keep %s: %w", e.Path, err)
			}
			kept += e.Size
		}
		e.Kept = true
		return nil
	})
	if err != nil {
		snap.discard()
		return nil, err
	}
	size := 0
	for _, e := range entries {
		size += len(e.Path) + len(e.Target) + len(e.Hash) + 64
	}
	if size <= maxManifestInMemory {
		snap.entries = entries
		return snap, nil
	}
	b, err := json.Marshal(entries)
	if err == nil {
		if err = snap.mkdir(""); err == nil {
			err = writeAtomic(filepath.Join(store, manifestFile), b)
		}
	}
	if err != nil {
		snap.discard()
		return nil, err
	}
	snap.onDisk = true
	return snap, nil
}

// mkdir makes the store directory, and sub in it unless it is "".
func (s *Snapshot) mkdir(sub string) error {
	if err := os.MkdirAll(filepath.Join(s.store, sub), 0o700); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	s.made = true
	return nil
}

// discard removes what Take wrote into the store, and the store directory
// if it made it and nothing else is in it.
func (s *Snapshot) discard() {
	if !s.made {
		return
	}
	_ = os.RemoveAll(filepath.Join(s.store, blobDir))
	_ = os.Remove(filepath.Join(s.store, manifestFile))
	_ = os.Remove(s.store)
}

// Compare snapshots dir again, compares it with s and returns the changes
// and their diff; the diff goes through redact, when not nil. Then s is
// spent: what Take kept in the store is removed. Keep stores the result,
// for Load.
func (s *Snapshot) Compare(dir string, l Limits, redact func(string) string) (Result, error) {
	l = l.withDefaults()
	defer s.discard()
	before := s.entries
	if s.onDisk {
		b, err := os.ReadFile(filepath.Join(s.store, manifestFile))
		if errors.Is(err, fs.ErrNotExist) {
			return Result{}, ErrNoSnapshot
		}
		if err != nil {
			return Result{}, err
		}
		if err := json.Unmarshal(b, &before); err != nil {
			return Result{}, fmt.Errorf("snapshot manifest: %w", err)
		}
	}
	after, err := walk(dir, l, nil)
	if err != nil {
		return Result{}, err
	}
	old := make(map[string]entry, len(before))
	for _, e := range before {
		old[e.Path] = e
	}
	now := make(map[string]entry, len(after))
	for _, e := range after {
		now[e.Path] = e
	}
	var paths []string
	for p, e := range now {
		if o, ok := old[p]; !ok || o.Hash != e.Hash || o.Link != e.Link || o.Exec != e.Exec {
			paths = append(paths, p)
		}
	}
	for p := range old {
		if _, ok := now[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	if len(paths) == 0 {
		return Result{}, nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	var res Result
	w := &boundedWriter{max: l.MaxDiffBytes}
	for _, p := range paths {
		o, hadOld := old[p]
		n, hasNew := now[p]
		c := Change{Path: p, Kind: KindUpdate, Size: n.Size, Binary: o.Binary || n.Binary}
		switch {
		case !hadOld:
			c.Kind = KindAdd
		case !hasNew:
			c.Kind, c.Size, c.Binary = KindDelete, 0, o.Binary
		}
		res.Changes = append(res.Changes, c)
		w.write(fileDiff(root, s.store, l, c, o, n))
	}
	res.Diff, res.Truncated = w.String(), w.truncated
	if redact != nil {
		res.Diff = redact(res.Diff)
	}
	return res, nil
}

// Keep stores res in store, a directory it creates, for Load: the whole
// diff in a file of its own, and the changes. What it stored never held
// more than res does (Compare's redact has been through the diff).
func Keep(store string, res Result) error {
	if err := os.MkdirAll(store, 0o700); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	if err := writeAtomic(filepath.Join(store, diffFile), []byte(res.Diff)); err != nil {
		return err
	}
	rb, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(store, resultFile), rb)
}

// Load returns what Compare kept in store: the changes, the path of the
// whole diff, and whether it was cut. It fails with ErrNoSnapshot when
// Compare did not run there.
func Load(store string) (changes []Change, diffPath string, truncated bool, err error) {
	b, err := os.ReadFile(filepath.Join(store, resultFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", false, ErrNoSnapshot
	}
	if err != nil {
		return nil, "", false, err
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, "", false, fmt.Errorf("snapshot result: %w", err)
	}
	return res.Changes, filepath.Join(store, diffFile), res.Truncated, nil
}

// fileDiff is the git-style diff of one changed file.
func fileDiff(root *os.Root, store string, l Limits, c Change, o, n entry) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "diff --git %s %s\n", quotePath("a/", c.Path), quotePath("b/", c.Path))
	from, to := quotePath("a/", c.Path), quotePath("b/", c.Path)
	switch c.Kind {
	case KindAdd:
		fmt.Fprintf(&sb, "new file mode %s\n", n.mode())
		from = "/dev/null"
	case KindDelete:
		fmt.Fprintf(&sb, "deleted file mode %s\n", o.mode())
		to = "/dev/null"
	default:
		if o.mode() != n.mode() {
			fmt.Fprintf(&sb, "old mode %s\nnew mode %s\n", o.mode(), n.mode())
		}
	}
	if c.Binary {
		fmt.Fprintf(&sb, "Binary files %s and %s differ\n", from, to)
		return sb.String()
	}
	var a, b string
	okA, okB := true, true
	if c.Kind != KindAdd {
		a, okA = oldContent(store, o)
	}
	if c.Kind != KindDelete {
		b, okB = newContent(root, l, n)
	}
	if !okA || !okB {
		fmt.Fprintf(&sb, "Files %s and %s differ (not diffed: larger than the gateway's limit)\n", from, to)
		return sb.String()
	}
	if hunks := Unified(a, b); hunks != "" {
		fmt.Fprintf(&sb, "--- %s\n+++ %s\n%s", from, to, hunks)
	}
	return sb.String()
}

func oldContent(store string, e entry) (string, bool) {
	if e.Link {
		return e.Target, true
	}
	if !e.Kept {
		return "", e.Size == 0
	}
	b, err := os.ReadFile(filepath.Join(store, blobDir, e.Hash))
	if err != nil {
		return "", false
	}
	return string(b), true
}

func newContent(root *os.Root, l Limits, e entry) (string, bool) {
	if e.Link {
		return e.Target, true
	}
	if e.Size > l.MaxFileBytes {
		return "", false
	}
	f, _, err := openRegular(root, e.Path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, l.MaxFileBytes+1))
	if err != nil || int64(len(b)) > l.MaxFileBytes {
		return "", false
	}
	return string(b), true
}

// walk lists the regular files and symlinks under dir, hashing each, and
// gives each file no larger than MaxFileBytes to keep with its content.
func walk(dir string, l Limits, keep func(*entry, []byte) error) ([]entry, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open run directory: %w", err)
	}
	defer root.Close()
	var out []entry
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			// An unreadable corner is left out rather than failing
			// the whole snapshot.
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if p == "." {
			return nil
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		t := d.Type()
		if t.IsDir() || (t&fs.ModeSymlink == 0 && !t.IsRegular()) {
			return nil // devices, pipes and sockets are not files a run leaves
		}
		if len(out) >= l.MaxFiles {
			return fmt.Errorf("%w: more than %d under the run's directory", ErrTooManyFiles, l.MaxFiles)
		}
		e := entry{Path: p}
		if t&fs.ModeSymlink != 0 {
			target, err := root.Readlink(p)
			if err != nil {
				return nil
			}
			sum := sha256.Sum256([]byte(target))
			e.Link, e.Target, e.Size, e.Hash = true, target, int64(len(target)), hex.EncodeToString(sum[:])
			out = append(out, e)
			return nil
		}
		content, err := hashFile(root, &e, l)
		if err != nil {
			return nil // gone or unreadable: not a file the run left
		}
		if keep != nil {
			if err := keep(&e, content); err != nil {
				return err
			}
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// binaryProbe is how much of a file is looked at for a NUL, as git does.
const binaryProbe = 8000

// hashFile fills e's size, hash, mode and binary flag, and returns the
// content of a file no larger than MaxFileBytes.
func hashFile(root *os.Root, e *entry, l Limits) ([]byte, error) {
	f, fi, err := openRegular(root, e.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	e.Exec = fi.Mode().Perm()&0o111 != 0
	h := sha256.New()
	if fi.Size() <= l.MaxFileBytes {
		b, err := io.ReadAll(io.LimitReader(f, l.MaxFileBytes+1))
		if err != nil {
			return nil, err
		}
		if int64(len(b)) <= l.MaxFileBytes {
			h.Write(b)
			e.Size, e.Hash = int64(len(b)), hex.EncodeToString(h.Sum(nil))
			e.Binary = bytes.IndexByte(b[:min(len(b), binaryProbe)], 0) >= 0 || !utf8.Valid(b)
			return b, nil
		}
		// It grew past the limit while read: hash it whole below.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
	}
	head := make([]byte, binaryProbe)
	n, _ := io.ReadFull(f, head)
	h.Write(head[:n])
	rest, err := io.Copy(h, f)
	if err != nil {
		return nil, err
	}
	e.Size, e.Hash = int64(n)+rest, hex.EncodeToString(h.Sum(nil))
	e.Binary = bytes.IndexByte(head[:n], 0) >= 0 || !utf8.Valid(trimPartialRune(head[:n]))
	return nil, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b,
// where a probe may have cut a character in two.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// openRegular opens the regular file p under root, following a symlink
// only within root. Anything but a regular file (a directory, a device, a
// pipe) is refused before it is opened, and again once it is, in case it
// was swapped in between; it is opened non-blocking, so that a pipe
// swapped in cannot hang the open.
func openRegular(root *os.Root, p string) (*os.File, fs.FileInfo, error) {
	fi, err := root.Stat(p)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, errNotRegular
	}
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	got, err := f.Stat()
	if err != nil || !got.Mode().IsRegular() || !os.SameFile(fi, got) {
		f.Close()
		return nil, fi, errNotRegular
	}
	return f, got, nil
}

var errNotRegular = errors.New("not a regular file")

// Mark ends a diff that was cut; it names the bytes left out.
const Mark = "[diff truncated: %d more bytes not shown]\n"

// Bound returns diff cut to at most max bytes at a line's end, with Mark,
// and whether it was cut.
func Bound(diff string, max int) (string, bool) {
	if max <= 0 || len(diff) <= max {
		return diff, false
	}
	w := &boundedWriter{max: max}
	w.write(diff)
	return w.String(), true
}

// boundedWriter keeps what is written up to max bytes, cut at a line's
// end, and counts the rest.
type boundedWriter struct {
	max       int
	sb        strings.Builder
	dropped   int
	truncated bool
}

func (w *boundedWriter) write(s string) {
	if w.truncated {
		w.dropped += len(s)
		return
	}
	if w.sb.Len()+len(s) <= w.max {
		w.sb.WriteString(s)
		return
	}
	room := w.max - w.sb.Len()
	cut := strings.LastIndexByte(s[:room], '\n') + 1
	w.sb.WriteString(s[:cut])
	w.dropped, w.truncated = len(s)-cut, true
}

func (w *boundedWriter) String() string {
	if !w.truncated {
		return w.sb.String()
	}
	return w.sb.String() + fmt.Sprintf(Mark, w.dropped)
}

// writeAtomic writes b to name by a rename, so that a reader finds the
// whole file or none.
func writeAtomic(name string, b []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
