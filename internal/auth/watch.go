package auth

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/filewatch"
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
	w, kr, err := filewatch.Load(path, keysFormat)
	if err != nil {
		return nil, err
	}
	f.ring.Store(kr)
	f.log.Info("keys file loaded", zap.Int("keys", kr.Len()), zap.Int("tenants", len(kr.tenants)))
	go func() {
		defer close(f.done)
		w.Watch(ctx, interval, f.log, func(kr *Keyring) {
			f.ring.Store(kr)
			f.log.Info("keys file reloaded", zap.Int("keys", kr.Len()), zap.Int("tenants", len(kr.tenants)))
		})
	}()
	return f, nil
}

var errEmpty = errors.New("empty (a file of no keys needs at least a comment)")

// keysFormat is how Watch reads a keys file.
var keysFormat = filewatch.Format[*Keyring]{
	Name:    "keys file",
	MaxLen:  maxFileLen,
	Empty:   errEmpty,
	Parse:   func(data []byte) (*Keyring, error) { return ParseKeys(bytes.NewReader(data)) },
	Invalid: filewatch.InvalidAs(func(e *ParseError) int { return e.Line }),
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
