package gitrepo

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/internal/gittest"
	"github.com/agentgate/agentgate/internal/runs"
)

func TestCloneResolvesBranchTagCommitAndDefault(t *testing.T) {
	_, r, remote := server(t)
	c := newCache(t, Config{})
	main, dev := gittest.Branch(t, r, "main"), gittest.Branch(t, r, "dev")
	tag := gittest.Git(t, r.Dir, "rev-parse", "v1^{commit}")
	cases := []struct{ ref, wantRef, wantBase, file string }{
		{"", "refs/heads/main", main, "CHANGES.md"},
		{"main", "refs/heads/main", main, "CHANGES.md"},
		{"dev", "refs/heads/dev", dev, "DEV.md"},
		{"v1", "refs/tags/v1", tag, "README.md"},
		{"refs/tags/v1", "refs/tags/v1", tag, "README.md"},
		{tag, tag, tag, "README.md"},
		{dev[:9], dev, dev, "DEV.md"},
	}
	for _, tc := range cases {
		got, dir := clone(t, c, remote, tc.ref)
		if got.Ref != tc.wantRef || got.Base != tc.wantBase {
			t.Errorf("ref %q: got ref %s base %s, want %s %s", tc.ref, got.Ref, got.Base, tc.wantRef, tc.wantBase)
		}
		if head := gittest.Git(t, dir, "rev-parse", "HEAD"); head != tc.wantBase {
			t.Errorf("ref %q: workspace HEAD %s, want %s", tc.ref, head, tc.wantBase)
		}
		if !exists(filepath.Join(dir, tc.file)) {
			t.Errorf("ref %q: %s missing from the workspace", tc.ref, tc.file)
		}
		if origin := gittest.Git(t, dir, "remote", "get-url", "origin"); origin != r.URL {
			t.Errorf("ref %q: origin %s, want %s", tc.ref, origin, r.URL)
		}
	}
	if exists(filepath.Join(func() string { _, d := clone(t, c, remote, "v1"); return d }(), "CHANGES.md")) {
		t.Error("the tag's workspace has a file only main's second commit adds")
	}
}

func TestSecondCloneIsServedByTheCache(t *testing.T) {
	s, r, remote := server(t)
	c := newCache(t, Config{})
	first, _ := clone(t, c, remote, "main")
	firstBytes := s.BytesSent()
	if first.CacheHit {
		t.Fatal("first clone reported a cache hit")
	}
	second, _ := clone(t, c, remote, "main")
	secondBytes := s.BytesSent() - firstBytes
	if !second.CacheHit || secondBytes >= firstBytes {
		t.Fatalf("second clone: hit %v, %d bytes served after %d for the first; want a hit with fewer bytes",
			second.CacheHit, secondBytes, firstBytes)
	}
	newer := gittest.Commit(t, r, "main", map[string]string{"NEW.md": "new\n"})
	third, dir := clone(t, c, remote, "main")
	if !third.CacheHit || third.Base != newer || !exists(filepath.Join(dir, "NEW.md")) {
		t.Fatalf("after a push: hit %v base %s, want a hit at %s with NEW.md", third.CacheHit, third.Base, newer)
	}
}

func TestWrongTokenIsAuthFailedAndNotShown(t *testing.T) {
	_, r, _ := server(t)
	c := newCache(t, Config{})
	for _, token := range []string{"wrong-7d1e0b", ""} {
		_, err := c.Clone(context.Background(), Remote{URL: r.URL, Token: token}, "main", t.TempDir())
		wantClass(t, err, runs.GitAuthFailed)
		if token != "" && strings.Contains(err.Error(), token) {
			t.Fatalf("error shows the token: %v", err)
		}
	}
}

func TestUnknownRepoOrRefIsNotFound(t *testing.T) {
	s, r, remote := server(t)
	c := newCache(t, Config{})
	_, err := c.Clone(context.Background(), Remote{URL: s.RepoURL("nope"), Token: s.Token}, "", t.TempDir())
	wantClass(t, err, runs.GitNotFound)
	for _, ref := range []string{"no-such-branch", "deadbeef", strings.Repeat("ab", 20), "-upload-pack=x", "a..b"} {
		_, err := c.Clone(context.Background(), remote, ref, t.TempDir())
		wantClass(t, err, runs.GitNotFound)
	}
	if gittest.Branch(t, r, "main") == "" {
		t.Fatal("main vanished")
	}
}

func TestClosedPortIsUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := newCache(t, Config{})
	_, err = c.Clone(context.Background(), Remote{URL: "http://" + addr + "/x.git"}, "main", t.TempDir())
	wantClass(t, err, runs.GitUnreachable)
}

func TestURLWithCredentialsOrOtherSchemeIsRefused(t *testing.T) {
	c := newCache(t, Config{})
	for _, u := range []string{"http://u:p@127.0.0.1:1/x.git", "file:///etc", "/tmp/repo", "-oProxyCommand=x", "ext::sh -c x"} {
		_, err := c.Clone(context.Background(), Remote{URL: u}, "", t.TempDir())
		wantClass(t, err, runs.GitFailed)
		if strings.Contains(err.Error(), "u:p") {
			t.Fatalf("error shows the URL's credentials: %v", err)
		}
	}
}

func TestConcurrentClonesOfOneRepository(t *testing.T) {
	_, r, remote := server(t)
	c := newCache(t, Config{})
	const n = 4
	results := make([]Cloned, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = c.Clone(context.Background(), remote, "dev", filepath.Join(t.TempDir(), "ws"))
		})
	}
	wg.Wait()
	misses := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("clone %d: %v", i, errs[i])
		}
		if results[i].Base != gittest.Branch(t, r, "dev") {
			t.Fatalf("clone %d at %s, want dev", i, results[i].Base)
		}
		if !results[i].CacheHit {
			misses++
		}
	}
	if misses != 1 {
		t.Fatalf("%d clones made the mirror, want exactly 1", misses)
	}
}
