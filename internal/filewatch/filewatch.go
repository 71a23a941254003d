// Package filewatch keeps a file that the gateway reads whole current
// while it runs (the API keys file, the webhooks tenants file), so that an
// operator's edit takes effect without a restart and a bad edit takes
// nothing away.
//
// A Watcher stats the file every interval, and when its size, modification
// or change time, inode or device differ from the last look (an edit in
// place, an atomic rename over it, a Kubernetes secret's symlink swap) it
// reads it again. A version that is missing or invalid is logged at error
// level, with its line, and the last valid one is kept; the next change is
// read again. An empty file is refused like an invalid one, because an
// editor saving in place passes through it.
package filewatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Format is how to read one kind of file.
type Format[T any] struct {
	// Name is what errors and log lines call the file: "keys file".
	Name string
	// MaxLen bounds the file, which is read whole.
	MaxLen int
	// Empty is the error an empty file is refused with.
	Empty error
	// Parse reads one version of the file.
	Parse func(data []byte) (T, error)
	// Invalid reports whether a read's err is Parse's verdict that the
	// file is invalid, and the line it names. An invalid version is not
	// read again until it changes; a read that failed otherwise is
	// retried on the next tick.
	Invalid func(err error) (line int, ok bool)
}

// InvalidAs makes a Format.Invalid for a parser that says a file is
// invalid with an error of type E; line returns the line such an error
// names.
func InvalidAs[E error](line func(E) int) func(error) (int, bool) {
	return func(err error) (int, bool) {
		e, ok := errors.AsType[E](err)
		if !ok {
			return 0, false
		}
		return line(e), true
	}
}

// Watcher keeps the version of one file last read.
type Watcher[T any] struct {
	path   string
	format Format[T]
	last   fileID // the version last read, valid or not
	data   []byte // the last valid version
}

// Load reads the file at path now, failing if it is missing, too large,
// empty or invalid, and returns its value and a Watcher to keep it current.
func Load[T any](path string, format Format[T]) (*Watcher[T], T, error) {
	var zero T
	id, err := stat(path)
	if err != nil {
		return nil, zero, fmt.Errorf("%s: %w", format.Name, err)
	}
	w := &Watcher[T]{path: path, format: format, last: id}
	data, v, err := w.load()
	if err != nil {
		return nil, zero, fmt.Errorf("%s %s: %w", format.Name, path, err)
	}
	w.data = data
	return w, v, nil
}

// Watch looks at the file every interval until ctx is done, and calls
// reloaded, from Watch's goroutine, with each valid version whose content
// differs from the last. It logs each distinct failure once to log, not
// once per tick. Call it once, after Load.
func (w *Watcher[T]) Watch(ctx context.Context, interval time.Duration, log *zap.Logger, reloaded func(T)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// Stat before reading: a write that lands after the stat changes
		// the file's identity again, so it is read on the next tick.
		id, err := stat(w.path)
		if err == nil && id == w.last {
			continue
		}
		if err == nil {
			var got []byte
			var v T
			got, v, err = w.load()
			if after, serr := stat(w.path); err == nil && (serr != nil || after != id) {
				// Changed while being read (a writer still at work): the
				// next tick reads the finished version.
				continue
			}
			if err == nil {
				w.last, lastErr = id, ""
				if !bytes.Equal(got, w.data) {
					w.data = got
					reloaded(v)
				}
				continue
			}
			if _, invalid := w.format.Invalid(err); invalid {
				w.last = id
			}
		}
		if err.Error() != lastErr {
			lastErr = err.Error()
			fields := []zap.Field{zap.Error(err)}
			if line, invalid := w.format.Invalid(err); invalid {
				fields = append(fields, zap.Int("line", line))
			}
			log.Error(w.format.Name+" not reloaded, keeping the last valid version", fields...)
		}
	}
}

// fileID is what tells one version of the file from the next without
// reading it.
type fileID struct {
	dev, ino    uint64
	size        int64
	mtime, ctim int64
}

func stat(path string) (fileID, error) {
	fi, err := os.Stat(path) // follows symlinks: the target is what counts
	if err != nil {
		return fileID{}, err
	}
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino, id.ctim = uint64(s.Dev), s.Ino, s.Ctim.Nano()
	}
	return id, nil
}

// load reads the file whole, bounded by MaxLen, and parses it.
func (w *Watcher[T]) load() ([]byte, T, error) {
	var zero T
	fh, err := os.Open(w.path)
	if err != nil {
		return nil, zero, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, int64(w.format.MaxLen)+1))
	if err != nil {
		return nil, zero, err
	}
	if len(data) > w.format.MaxLen {
		return nil, zero, fmt.Errorf("larger than %d bytes", w.format.MaxLen)
	}
	if len(data) == 0 {
		// An editor saving in place truncates the file before writing it:
		// taken at its word, that moment would empty the file's set.
		return nil, zero, w.format.Empty
	}
	v, err := w.format.Parse(data)
	if err != nil {
		return nil, zero, err
	}
	return data, v, nil
}
