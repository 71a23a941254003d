package gitrepo

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/gittest"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// threeRepos serves repositories a, b and c without a token.
func threeRepos(t *testing.T) map[string]Remote {
	s := gittest.NewServer(t, "")
	out := map[string]Remote{}
	for _, name := range []string{"a", "b", "c"} {
		out[name] = Remote{URL: s.NewRepo(t, name, readme).URL}
	}
	return out
}

func mirrored(c *Cache, r Remote) bool {
	return exists(filepath.Join(c.mirrors, mirrorKey(r.URL)+".git"))
}

func evict(t *testing.T, c *Cache) Stats {
	t.Helper()
	left, err := c.Evict(context.Background())
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	return left
}

func TestEvictRemovesMirrorsUnusedForMaxAge(t *testing.T) {
	repos := threeRepos(t)
	clk := &clock{now: t0}
	c := newCache(t, Config{Now: clk.Now, MaxAge: time.Hour})
	_, wsA := clone(t, c, repos["a"], "main")
	clk.Set(t0.Add(60 * time.Minute))
	clone(t, c, repos["b"], "main")
	clk.Set(t0.Add(90 * time.Minute))
	clone(t, c, repos["c"], "main")

	clk.Set(t0.Add(110 * time.Minute))
	left := evict(t, c)
	if mirrored(c, repos["a"]) || !mirrored(c, repos["b"]) || !mirrored(c, repos["c"]) || left.Repos != 2 {
		t.Fatalf("after eviction a:%v b:%v c:%v (%d left); want only a gone",
			mirrored(c, repos["a"]), mirrored(c, repos["b"]), mirrored(c, repos["c"]), left.Repos)
	}
	// The workspace made from the evicted mirror is whole on its own.
	gittest.Git(t, wsA, "fsck", "--full", "--no-dangling")
	if got := fileIn(t, wsA, "README.md"); got != "hello\n" {
		t.Fatalf("README.md in a's workspace = %q", got)
	}
	if stats, err := c.Stats(); err != nil || stats != left || stats.Bytes <= 0 {
		t.Fatalf("Stats = %+v, %v; Evict said %+v", stats, err, left)
	}
}

func TestEvictRemovesTheLeastRecentlyUsedUntilUnderMaxBytes(t *testing.T) {
	repos := threeRepos(t)
	clk := &clock{now: t0}
	c := newCache(t, Config{Now: clk.Now})
	for i, name := range []string{"b", "a", "c"} {
		clk.Set(t0.Add(time.Duration(i) * time.Minute))
		clone(t, c, repos[name], "main")
	}
	all, err := c.Stats()
	if err != nil || all.Repos != 3 {
		t.Fatalf("Stats = %+v, %v; want 3 mirrors", all, err)
	}
	c.cfg.MaxBytes = all.Bytes - 1
	left := evict(t, c)
	if mirrored(c, repos["b"]) || !mirrored(c, repos["a"]) || !mirrored(c, repos["c"]) {
		t.Fatalf("after eviction to %d bytes: a:%v b:%v c:%v; want only b, the oldest used, gone",
			c.cfg.MaxBytes, mirrored(c, repos["a"]), mirrored(c, repos["b"]), mirrored(c, repos["c"]))
	}
	if left.Bytes > c.cfg.MaxBytes || left.Repos != 2 {
		t.Fatalf("left %+v, over %d bytes", left, c.cfg.MaxBytes)
	}
}

func TestEvictLeavesAMirrorInUse(t *testing.T) {
	repos := threeRepos(t)
	clk := &clock{now: t0}
	c := newCache(t, Config{Now: clk.Now, MaxAge: time.Hour, MaxBytes: 1})
	cloned, dir := clone(t, c, repos["a"], "main")
	writeFile(t, dir, "README.md", "changed\n")
	ch, err := c.Commit(context.Background(), repos["a"], dir, cloned.Base, "")
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	clk.Set(t0.Add(5 * time.Hour))
	evict(t, c)
	if !mirrored(c, repos["a"]) {
		t.Fatal("a mirror in use by a change was evicted")
	}
	if _, err := ch.Patch(context.Background(), 1<<20); err != nil {
		t.Fatalf("Patch after eviction: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	clk.Set(t0.Add(10 * time.Hour))
	if left := evict(t, c); mirrored(c, repos["a"]) || left.Repos != 0 {
		t.Fatalf("a closed change's mirror outlived eviction: %+v", left)
	}
}

func TestNewCleansWhatAStoppedGatewayLeft(t *testing.T) {
	dir := t.TempDir()
	half := filepath.Join(dir, "tmp", "mirror-123", "objects")
	gitLock := filepath.Join(dir, "mirrors", "abc.git", "packed-refs.lock")
	for _, p := range []string{half, filepath.Dir(gitLock)} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Dir(gitLock), "packed-refs.lock", "")
	newCache(t, Config{Dir: dir})
	if exists(half) || exists(gitLock) {
		t.Fatalf("left over: half-made mirror %v, git lock %v", exists(half), exists(gitLock))
	}
	if !exists(filepath.Dir(gitLock)) {
		t.Fatal("cleaning removed a whole mirror")
	}
}
