package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// DefaultInterval is how often Watch looks at the keys file when given no
// interval: a revoked key stops working within about this long.
const DefaultInterval = time.Second

// maxFileLen bounds a keys file read whole: 100k keys of ~150 bytes fit.
const maxFileLen = 16 << 20

// KeyFile is a keys file kept current: Lookup always answers from the
// last valid version of the file. Safe for concurrent use.
type KeyFile struct {
	path string
	log  *zap.Logger
	ring atomic.Pointer[Keyring]
	done chan struct{} // closed when the watching goroutine returns
}

// Watch loads the keys file at path and keeps it loaded: every interval
// (DefaultInterval if interval <= 0) it stats the file, and when its
// size, modification or change time, inode or device differ from the last
// look (an edit in place, an atomic rename over it, a Kubernetes secret's
// symlink swap) it reads it again. A version that is missing or invalid
// is logged at error level, with its line, and the last valid keyring is
// kept, so a bad edit locks no one out; the next change is read again.
//
// An empty file (0 bytes) is refused like an invalid one, because an
// editor saving in place passes through it; to revoke every key, leave a
// comment. Replacing the file by a rename is the safest way to edit it.
//
// Watch fails if the file is missing, empty or invalid now. It watches until ctx
// is done. A nil log logs nothing.
func Watch(ctx context.Context, path string, log *zap.Logger, interval time.Duration) (*KeyFile, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	f := &KeyFile{path: path, log: log.With(zap.String("path", path)), done: make(chan struct{})}
	st, err := stat(path)
	if err != nil {
		return nil, fmt.Errorf("keys file: %w", err)
	}
	data, kr, err := load(path)
	if err != nil {
		return nil, fmt.Errorf("keys file %s: %w", path, err)
	}
	f.ring.Store(kr)
	f.log.Info("keys file loaded", zap.Int("keys", kr.Len()), zap.Int("tenants", len(kr.tenants)))
	go f.watch(ctx, interval, st, data)
	return f, nil
}

var errEmpty = errors.New("empty (a file of no keys needs at least a comment)")

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
		id.dev, id.ino = uint64(s.Dev), s.Ino
		id.ctim = s.Ctim.Nano()
	}
	return id, nil
}

// load reads and parses the file whole, bounded by maxFileLen.
func load(path string) ([]byte, *Keyring, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFileLen+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxFileLen {
		return nil, nil, fmt.Errorf("larger than %d bytes", maxFileLen)
	}
	if len(data) == 0 {
		// An editor saving in place truncates the file before writing it:
		// taken at its word, that moment would revoke every key.
		return nil, nil, errEmpty
	}
	kr, err := ParseKeys(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	return data, kr, nil
}

func (f *KeyFile) watch(ctx context.Context, interval time.Duration, last fileID, data []byte) {
	defer close(f.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Stat before reading: a write that lands after the stat changes
		// the file's identity again, so it is read on the next tick.
		st, err := stat(f.path)
		if err == nil && st == last {
			continue
		}
		if err == nil {
			var kr *Keyring
			var got []byte
			got, kr, err = load(f.path)
			if after, serr := stat(f.path); err == nil && (serr != nil || after != st) {
				// Changed while being read (a writer still at work): the
				// next tick reads the finished version.
				continue
			}
			if err == nil {
				last, lastErr = st, ""
				if !bytes.Equal(got, data) {
					data = got
					f.ring.Store(kr)
					f.log.Info("keys file reloaded", zap.Int("keys", kr.Len()), zap.Int("tenants", len(kr.tenants)))
				}
				continue
			}
			// An invalid version is not read again until it changes; a
			// read that failed is retried on the next tick.
			if _, invalid := errors.AsType[*ParseError](err); invalid {
				last = st
			}
		}
		// Log each distinct failure once, not once per tick.
		if err.Error() != lastErr {
			lastErr = err.Error()
			fields := []zap.Field{zap.Error(err)}
			if pe, ok := errors.AsType[*ParseError](err); ok {
				fields = append(fields, zap.Int("line", pe.Line))
			}
			f.log.Error("keys file not reloaded, keeping the last valid version", fields...)
		}
	}
}

// Lookup returns the key whose secret is secret, from the current version
// of the file (see Keyring.Lookup).
func (f *KeyFile) Lookup(secret string) (Key, bool) { return f.ring.Load().Lookup(secret) }

// ByID returns the key named id in the current version of the file.
func (f *KeyFile) ByID(id string) (Key, bool) { return f.ring.Load().ByID(id) }

// Tenants returns the tenants of the current version of the file, sorted.
func (f *KeyFile) Tenants() []string { return f.ring.Load().Tenants() }

// Keyring returns the current version of the file.
func (f *KeyFile) Keyring() *Keyring { return f.ring.Load() }

// Path is the keys file's path as given to Watch, so that the sandbox can
// hide it from agents.
func (f *KeyFile) Path() string { return f.path }
