package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/gittest"
	"github.com/agentgate/agentgate/internal/runs"
)

// clock is a settable clock for eviction by age.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func newCache(t *testing.T, cfg Config) *Cache {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func clone(t *testing.T, c *Cache, remote Remote, ref string) (Cloned, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	got, err := c.Clone(context.Background(), remote, ref, dir)
	if err != nil {
		t.Fatalf("Clone %s at %q: %v", remote.URL, ref, err)
	}
	return got, dir
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func wantClass(t *testing.T, err error, class runs.Class) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", class)
	}
	if got := ClassOf(err); got != class {
		t.Fatalf("class %s (%v), want %s", got, err, class)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

func fileIn(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

var readme = map[string]string{"README.md": "hello\n", "src/main.go": "package main\n"}

func trimmed(s string) string { return strings.TrimSpace(s) }

// server is a token-protected server with repository "demo".
func server(t *testing.T) (*gittest.Server, *gittest.Repo, Remote) {
	s := gittest.NewServer(t, "tok-3f9a1c")
	r := s.NewRepo(t, "demo", readme)
	return s, r, Remote{URL: r.URL, Token: s.Token}
}
