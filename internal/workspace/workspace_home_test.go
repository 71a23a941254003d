package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuildHomeCopiesTheListedFilesAndDirectories(t *testing.T) {
	base, home := t.TempDir(), filepath.Join(t.TempDir(), "home")
	writeTree(t, base, map[string]string{
		".claude/.credentials.json": "login",
		".claude/settings.json":     "settings",
		".claude/projects/p/s.json": "someone's session",
		".claude.json":              "config",
		"unlisted.txt":              "no",
	})
	paths := []string{".claude/.credentials.json", ".claude/settings.json", ".claude.json", ".config/missing", "absent.json"}
	if err := BuildHome(base, home, paths, 0); err != nil {
		t.Fatalf("BuildHome: %v", err)
	}
	sameTree(t, "the home", readTree(t, home), map[string]string{
		".claude/.credentials.json": "login", ".claude/settings.json": "settings", ".claude.json": "config",
	})
	// A copy, not a link: writing the home leaves the base alone.
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte("changed by a run"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(base, ".claude.json")); string(b) != "config" {
		t.Fatalf("the base's .claude.json became %q", b)
	}
}

func TestBuildHomeCopiesADirectoryWhole(t *testing.T) {
	base, home := t.TempDir(), t.TempDir()
	writeTree(t, base, map[string]string{".codex/auth.json": "a", ".codex/rules/x.rules": "r"})
	if err := BuildHome(base, home, []string{".codex"}, 0); err != nil {
		t.Fatalf("BuildHome: %v", err)
	}
	sameTree(t, "the home", readTree(t, home), map[string]string{".codex/auth.json": "a", ".codex/rules/x.rules": "r"})
}

func TestBuildHomeFollowsASymlinkToAFile(t *testing.T) {
	base, home, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	target := filepath.Join(elsewhere, "credentials.json")
	if err := os.WriteFile(target, []byte("mounted secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(base, "creds.json")); err != nil {
		t.Fatal(err)
	}
	if err := BuildHome(base, home, []string{"creds.json"}, 0); err != nil {
		t.Fatalf("BuildHome: %v", err)
	}
	p := filepath.Join(home, "creds.json")
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the copy of a symlink is %v (%v), want a regular file", fi, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "mounted secret" {
		t.Fatalf("the copy holds %q", b)
	}
}

func TestBuildHomeRefusesPathsOutsideTheHome(t *testing.T) {
	parent := t.TempDir()
	base := filepath.Join(parent, "base")
	writeTree(t, parent, map[string]string{"secret.txt": "outside", "base/ok": "ok"})
	for _, p := range []string{"/etc/passwd", "../secret.txt", "a/../../secret.txt", ".", ""} {
		home := filepath.Join(t.TempDir(), "home")
		if err := BuildHome(base, home, []string{p}, 0); err == nil {
			t.Errorf("BuildHome of %q succeeded: %v", p, readTree(t, home))
		}
	}
}

func TestBuildHomeBoundsASymlinkLoop(t *testing.T) {
	base, home := t.TempDir(), t.TempDir()
	writeTree(t, base, map[string]string{"d/file": "x"})
	if err := os.Symlink("..", filepath.Join(base, "d", "up")); err != nil {
		t.Fatal(err)
	}
	err := BuildHome(base, home, []string{"d"}, 0)
	if err == nil || !strings.Contains(err.Error(), "deep") {
		t.Fatalf("BuildHome through a symlink loop: %v, want an error about depth", err)
	}
}

func TestBuildHomeBoundsTheBytes(t *testing.T) {
	base, home := t.TempDir(), t.TempDir()
	writeTree(t, base, map[string]string{"a": strings.Repeat("a", 600), "b": strings.Repeat("b", 600)})
	if err := BuildHome(base, home, []string{"a"}, 1000); err != nil {
		t.Fatalf("BuildHome within the bound: %v", err)
	}
	home2 := t.TempDir()
	if err := BuildHome(base, home2, []string{"a", "b"}, 1000); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Fatalf("BuildHome of 1200 bytes bounded by 1000: %v, want an error", err)
	}
}
