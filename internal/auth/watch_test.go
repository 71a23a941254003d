package auth

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// deadline bounds every wait for the watcher: generous, because a loaded
// machine may starve its goroutine, and never reached when it works.
const deadline = 30 * time.Second

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up after %v waiting for %s", deadline, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replace writes data to path atomically, as an operator's tooling should.
func replace(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// watched starts a watcher on a file of content, and stops it (and checks
// that its goroutine ended) when the test ends.
func watched(t *testing.T, content string) (*KeyFile, string, *observer.ObservedLogs) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	ctx, cancel := context.WithCancel(t.Context())
	f, err := Watch(ctx, path, zap.New(core), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.done:
		case <-time.After(deadline):
			t.Error("the watcher did not stop with its context")
		}
	})
	return f, path, logs
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	lineA = "a acme write " + hashOf("sa") + "\n"
	lineB = "b beta read " + hashOf("sb") + "\n"
	lineC = "c acme admin " + hashOf("sc") + "\n"
)

func TestWatchRevokeByRename(t *testing.T) {
	f, path, _ := watched(t, lineA+lineB)
	if k, ok := f.Lookup("sb"); !ok || k.ID != "b" {
		t.Fatalf("Lookup(sb) at start = %+v, %v", k, ok)
	}
	if f.Path() != path {
		t.Errorf("Path = %q, want %q", f.Path(), path)
	}
	if got := f.Tenants(); !slices.Equal(got, []string{"acme", "beta"}) {
		t.Errorf("Tenants = %q", got)
	}
	replace(t, path, lineA+lineC)
	waitFor(t, "the revoked key to stop working", func() bool { _, ok := f.Lookup("sb"); return !ok })
	if _, ok := f.Lookup("sa"); !ok {
		t.Error("the kept key stopped working")
	}
	if k, ok := f.Lookup("sc"); !ok || k.Role != RoleAdmin {
		t.Errorf("the added key: %+v, %v", k, ok)
	}
	if _, ok := f.ByID("b"); ok {
		t.Error("ByID still finds the revoked key")
	}
	if got := f.Tenants(); !slices.Equal(got, []string{"acme"}) {
		t.Errorf("Tenants after revoking beta's only key = %q", got)
	}
}

func TestWatchEditInPlace(t *testing.T) {
	f, path, _ := watched(t, lineA+lineB)
	// Truncate and rewrite the same file, as an editor saving in place
	// does: the inode stays, the size and times change.
	if err := os.WriteFile(path, []byte(lineB+lineC), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the edit to take effect", func() bool {
		_, a := f.Lookup("sa")
		_, b := f.Lookup("sb")
		_, c := f.Lookup("sc")
		return !a && b && c
	})
}

func TestWatchEmptyFileKeepsKeys(t *testing.T) {
	f, path, logs := watched(t, lineA)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the empty file to be refused", func() bool {
		return logs.FilterMessage("keys file not reloaded, keeping the last valid version").Len() > 0
	})
	if _, ok := f.Lookup("sa"); !ok {
		t.Error("an empty file revoked every key")
	}
	replace(t, path, "# every key revoked\n")
	waitFor(t, "a file of only a comment to revoke every key", func() bool { _, ok := f.Lookup("sa"); return !ok })
}

func TestWatchSameSizeEdit(t *testing.T) {
	// Same length, same inode: only the content and the times change.
	f, path, _ := watched(t, lineA)
	same := strings.Replace(lineA, "write", "admin", 1)
	if len(same) != len(lineA) {
		t.Fatal("the edit must keep the size")
	}
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte(same), 0); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	waitFor(t, "the role change", func() bool { k, _ := f.Lookup("sa"); return k.Role == RoleAdmin })
}

func TestWatchKeepsLastGood(t *testing.T) {
	f, path, logs := watched(t, lineA+lineB)
	replace(t, path, lineA+"b beta reader "+hashOf("sb")+"\n")
	waitFor(t, "the error to be logged", func() bool {
		return logs.FilterMessage("keys file not reloaded, keeping the last valid version").Len() > 0
	})
	e := logs.FilterMessage("keys file not reloaded, keeping the last valid version").All()[0]
	if e.Level != zapcore.ErrorLevel {
		t.Errorf("logged at %v, want error", e.Level)
	}
	if fields := e.ContextMap(); fields["line"] != int64(2) || fields["path"] != path ||
		!strings.Contains(fields["error"].(string), "line 2: role") {
		t.Errorf("log fields = %v, want the path, line 2 and the error", fields)
	}
	for _, s := range []string{"sa", "sb"} {
		if _, ok := f.Lookup(s); !ok {
			t.Errorf("Lookup(%s) failed after a bad edit: the last valid keyring must stay", s)
		}
	}
	// A bad version is logged once, not once per tick: a later good
	// version is what the log shows next.
	replace(t, path, lineA)
	waitFor(t, "the fixed file to load", func() bool { _, ok := f.Lookup("sb"); return !ok })
	if n := logs.FilterMessage("keys file not reloaded, keeping the last valid version").Len(); n != 1 {
		t.Errorf("the bad version was logged %d times, want 1", n)
	}
	if logs.FilterMessage("keys file reloaded").Len() != 1 {
		t.Errorf("want one reload logged, have %v", logs.All())
	}
}

func TestWatchFileRemoved(t *testing.T) {
	f, path, logs := watched(t, lineA)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the missing file to be logged", func() bool {
		return logs.FilterMessage("keys file not reloaded, keeping the last valid version").Len() > 0
	})
	if _, ok := f.Lookup("sa"); !ok {
		t.Error("a removed file dropped the last valid keyring")
	}
	replace(t, path, lineB)
	waitFor(t, "the file to come back", func() bool { _, ok := f.Lookup("sb"); return ok })
	if _, ok := f.Lookup("sa"); ok {
		t.Error("the key removed from the new file still works")
	}
}

func TestWatchSymlinkSwap(t *testing.T) {
	// A Kubernetes secret volume: keys -> ..data/keys, and an update
	// swaps the ..data symlink.
	dir := t.TempDir()
	for name, content := range map[string]string{"v1": lineA, "v2": lineB} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "keys"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keys")
	if err := os.Symlink("..data/keys", path); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	f, err := Watch(ctx, path, nil, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-f.done }()
	if _, ok := f.Lookup("sa"); !ok {
		t.Fatal("the first version did not load")
	}
	if err := os.Symlink("v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the swapped version", func() bool { _, ok := f.Lookup("sb"); return ok })
}

func TestWatchFailsAtStart(t *testing.T) {
	dir := t.TempDir()
	if _, err := Watch(t.Context(), filepath.Join(dir, "missing"), nil, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte(lineA+"x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Watch(t.Context(), bad, nil, 0)
	if pe, ok := errors.AsType[*ParseError](err); !ok || pe.Line != 2 || !strings.Contains(err.Error(), bad) {
		t.Errorf("invalid file: err = %v, want the path and line 2", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Watch(t.Context(), empty, nil, 0); !errors.Is(err, errEmpty) {
		t.Errorf("empty file: err = %v", err)
	}
	if _, err := Watch(t.Context(), dir, nil, 0); err == nil {
		t.Error("a directory was accepted as a keys file")
	}
}
