package runstest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentgate/agentgate/internal/probe"
)

// VersionCache is a runs.VersionOutput that asks each CLI for its version
// once and answers later probes of the same binary from memory. A test
// binary builds many supervisors over the same few CLIs; each would start
// every one of them again for --version, which for a Node CLI costs
// seconds of CPU. Only successes are kept: a probe that failed (a CLI cut
// short on a loaded machine) is tried again.
//
// An entry is the binary's real path, size and modification time, and the
// command's arguments: a fake CLI a test writes anew is a new entry. The
// environment is not part of it, since the CLIs print the same version in
// any HOME; a test of how the environment changes a probe must not use
// the cache.
type VersionCache struct {
	mu      sync.Mutex
	entries map[versionKey]*versionEntry
	// Starts counts the version commands the cache ran.
	starts int
}

type versionKey struct {
	path, args string
	size       int64
	mtime      time.Time
}

// versionEntry is one binary's answer; its mu makes concurrent probes of
// the same binary wait for one start.
type versionEntry struct {
	mu  sync.Mutex
	ok  bool
	out []byte
}

// Versions is the cache the supervisors of one test binary share.
var Versions = &VersionCache{}

// Output implements runs.VersionOutput.
func (c *VersionCache) Output(ctx context.Context, path string, args, env []string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return probe.RunVersion(ctx, path, args, env)
	}
	// The real file: a tool's .bin link and its target are one binary.
	real := path
	if p, err := filepath.EvalSymlinks(path); err == nil {
		real = p
	}
	key := versionKey{path: real, args: strings.Join(args, "\x00"), size: fi.Size(), mtime: fi.ModTime()}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[versionKey]*versionEntry{}
	}
	e, found := c.entries[key]
	if !found {
		e = &versionEntry{}
		c.entries[key] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ok {
		return append([]byte(nil), e.out...), nil
	}
	c.mu.Lock()
	c.starts++
	c.mu.Unlock()
	out, err := probe.RunVersion(ctx, path, args, env)
	if err != nil {
		return out, err
	}
	e.ok, e.out = true, out
	return append([]byte(nil), out...), nil
}

// Starts returns how many version commands the cache started.
func (c *VersionCache) Starts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starts
}
