package gittest

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Repo is a bare repository a Server serves.
type Repo struct {
	Name string
	// Dir is the bare repository on disk.
	Dir string
	// URL is where the server serves it.
	URL string
}

// NewRepo makes a bare repository called name whose default branch "main"
// has two commits: the first holds files and is tagged "v1", the second
// adds CHANGES.md. Branch "dev" forks from the first with DEV.md added.
// The repository takes pushes.
func (s *Server) NewRepo(t testing.TB, name string, files map[string]string) *Repo {
	t.Helper()
	r := &Repo{Name: name, Dir: s.repoDir(name), URL: s.RepoURL(name)}
	Git(t, s.Root, "init", "-q", "--bare", "--initial-branch=main", r.Dir)
	Git(t, r.Dir, "config", "http.receivepack", "true")
	work := t.TempDir()
	Git(t, work, "init", "-q", "--initial-branch=main")
	commitFiles(t, work, files, "first")
	Git(t, work, "tag", "v1")
	Git(t, work, "checkout", "-q", "-b", "dev")
	commitFiles(t, work, map[string]string{"DEV.md": "dev\n"}, "dev work")
	Git(t, work, "checkout", "-q", "main")
	commitFiles(t, work, map[string]string{"CHANGES.md": "second\n"}, "second")
	Git(t, work, "push", "-q", r.Dir, "main", "dev", "v1")
	return r
}

// Commit adds a commit of files on top of branch in r (made when missing,
// from main) and returns it.
func Commit(t testing.TB, r *Repo, branch string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	Git(t, work, "clone", "-q", r.Dir, ".")
	Git(t, work, "checkout", "-q", "-B", branch, "origin/"+startOf(t, r, branch))
	commitFiles(t, work, files, "more on "+branch)
	Git(t, work, "push", "-q", "origin", branch)
	return Branch(t, r, branch)
}

func startOf(t testing.TB, r *Repo, branch string) string {
	if _, err := gitOutput(t, r.Dir, "rev-parse", "--verify", "-q", "refs/heads/"+branch); err == nil {
		return branch
	}
	return "main"
}

// Branch is the commit branch points at in r; empty when r has no such
// branch.
func Branch(t testing.TB, r *Repo, name string) string {
	t.Helper()
	out, err := gitOutput(t, r.Dir, "rev-parse", "--verify", "-q", "refs/heads/"+name)
	if err != nil {
		return ""
	}
	return out
}

// Show is path's content at ref in r.
func Show(t testing.TB, r *Repo, ref, path string) string {
	t.Helper()
	cmd := exec.Command("git", "show", ref+":"+path)
	cmd.Dir = r.Dir
	cmd.Env = Env(t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git show %s:%s in %s: %v", ref, path, r.Name, err)
	}
	return string(out)
}

// RefusePushes installs a pre-receive hook in r that refuses every push,
// saying reason.
func RefusePushes(t testing.TB, r *Repo, reason string) {
	t.Helper()
	hook := "#!/bin/sh\necho '" + strings.ReplaceAll(reason, "'", "") + "' >&2\nexit 1\n"
	path := filepath.Join(r.Dir, "hooks", "pre-receive")
	if err := os.WriteFile(path, []byte(hook), 0o755); err != nil {
		t.Fatalf("write pre-receive hook: %v", err)
	}
}

// Git runs git in dir with the test environment and returns its trimmed
// output, failing t on an error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitOutput(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	return out
}

func gitOutput(t testing.TB, dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = Env(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", &gitError{err: err, out: string(out)}
	}
	return strings.TrimSpace(string(out)), nil
}

type gitError struct {
	err error
	out string
}

func (e *gitError) Error() string { return e.err.Error() + ": " + e.out }

func commitFiles(t testing.TB, work string, files map[string]string, message string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, work, "add", "-A")
	Git(t, work, "commit", "-q", "--allow-empty", "-m", message)
}
