package gitrepo

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Stats is what the cache holds, for metrics.
type Stats struct {
	Bytes int64
	Repos int
}

// mirrorOnDisk is one mirror as Evict sees it.
type mirrorOnDisk struct {
	key   string
	used  time.Time
	bytes int64
}

// Stats measures the mirrors on disk.
func (c *Cache) Stats() (Stats, error) {
	mirrors, err := c.list()
	if err != nil {
		return Stats{}, err
	}
	var s Stats
	for _, m := range mirrors {
		s.Bytes += m.bytes
		s.Repos++
	}
	return s, nil
}

// Evict removes the mirrors no run used within MaxAge and then, least
// recently used first, mirrors until the rest fit in MaxBytes. A mirror
// being fetched or read by a change is never removed, even when that
// leaves the cache over its bound. It returns what is left.
func (c *Cache) Evict(ctx context.Context) (Stats, error) {
	mirrors, err := c.list()
	if err != nil {
		return Stats{}, err
	}
	slices.SortFunc(mirrors, func(a, b mirrorOnDisk) int { return a.used.Compare(b.used) })
	var left Stats
	for _, m := range mirrors {
		left.Bytes += m.bytes
		left.Repos++
	}
	now := c.cfg.Now()
	for _, m := range mirrors {
		if ctx.Err() != nil {
			return left, ctx.Err()
		}
		old := c.cfg.MaxAge > 0 && now.Sub(m.used) > c.cfg.MaxAge
		over := c.cfg.MaxBytes > 0 && left.Bytes > c.cfg.MaxBytes
		if (old || over) && c.remove(m) {
			left.Bytes -= m.bytes
			left.Repos--
		}
	}
	return left, nil
}

// remove deletes a mirror nobody holds or reads; false when it is in use.
func (c *Cache) remove(disk mirrorOnDisk) bool {
	m := c.stateOf(disk.key)
	if !c.tryLock(m) {
		return false
	}
	defer c.unlock(m)
	c.mu.Lock()
	busy := m.inUse > 0
	c.mu.Unlock()
	if busy {
		return false
	}
	// A rename first, so the mirror vanishes at once and a removal cut
	// short leaves only tmp's leftovers, which New cleans.
	gone := filepath.Join(c.tmp, fmt.Sprintf("evicted-%s-%d", disk.key, time.Now().UnixNano()))
	if err := os.Rename(m.dir, gone); err != nil {
		c.log.Warn("cannot evict git mirror", zap.String("mirror", disk.key), zap.Error(err))
		return false
	}
	os.Remove(filepath.Join(c.mirrors, disk.key+".used"))
	if err := os.RemoveAll(gone); err != nil {
		c.log.Warn("cannot remove evicted git mirror", zap.String("mirror", disk.key), zap.Error(err))
	}
	c.log.Info("git mirror evicted", zap.String("mirror", disk.key), zap.Int64("bytes", disk.bytes),
		zap.Time("last_used", disk.used))
	return true
}

// stateOf is the state of the mirror called key.
func (c *Cache) stateOf(key string) *mirrorState {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.state[key]
	if !ok {
		m = &mirrorState{key: key, dir: filepath.Join(c.mirrors, key+".git"), sem: make(chan struct{}, 1)}
		c.state[key] = m
	}
	return m
}

// list finds the mirrors on disk with their size and last use.
func (c *Cache) list() ([]mirrorOnDisk, error) {
	entries, err := os.ReadDir(c.mirrors)
	if err != nil {
		return nil, fmt.Errorf("list git mirrors: %w", err)
	}
	var out []mirrorOnDisk
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), ".git")
		if !ok || !e.IsDir() {
			continue
		}
		out = append(out, mirrorOnDisk{key: key, used: c.lastUsed(key), bytes: dirSize(filepath.Join(c.mirrors, e.Name()))})
	}
	return out, nil
}

// dirSize is the bytes of the files under dir; what vanishes meanwhile
// counts nothing.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}
