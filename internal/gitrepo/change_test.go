package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/gittest"
	"github.com/agentgate/agentgate/internal/runs"
)

// edited clones demo at ref and changes, adds and removes a file.
func edited(t *testing.T, c *Cache, remote Remote, ref string) (Cloned, string) {
	t.Helper()
	cloned, dir := clone(t, c, remote, ref)
	writeFile(t, dir, "README.md", "changed\n")
	writeFile(t, dir, "docs/new.md", "new\n")
	if err := os.Remove(filepath.Join(dir, "src/main.go")); err != nil {
		t.Fatal(err)
	}
	return cloned, dir
}

func commitOf(t *testing.T, c *Cache, remote Remote, dir, base string) *Change {
	t.Helper()
	ch, err := c.Commit(context.Background(), remote, dir, base, "agent work")
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

func TestPushMakesANewBranchOfTheChange(t *testing.T) {
	_, r, remote := server(t)
	c := newCache(t, Config{})
	cloned, dir := edited(t, c, remote, "main")
	ch := commitOf(t, c, remote, dir, cloned.Base)
	if err := ch.Push(context.Background(), remote, "agent/run-1", cloned.Ref); err != nil {
		t.Fatalf("Push: %v", err)
	}
	if got := gittest.Branch(t, r, "agent/run-1"); got != ch.Commit || got == "" {
		t.Fatalf("branch agent/run-1 at %q, want the change's commit %q", got, ch.Commit)
	}
	if got := gittest.Show(t, r, "agent/run-1", "README.md"); got != "changed\n" {
		t.Fatalf("README.md on the branch = %q", got)
	}
	if got := gittest.Show(t, r, "agent/run-1", "docs/new.md"); got != "new\n" {
		t.Fatalf("docs/new.md on the branch = %q", got)
	}
	files := gittest.Git(t, r.Dir, "ls-tree", "-r", "--name-only", "agent/run-1")
	if strings.Contains(files, "src/main.go") || strings.Contains(files, ".git/") {
		t.Fatalf("branch holds a removed file or .git: %s", files)
	}
	if parent := gittest.Git(t, r.Dir, "rev-parse", "agent/run-1^"); parent != cloned.Base {
		t.Fatalf("commit's parent %s, want the base %s", parent, cloned.Base)
	}
	if author := gittest.Git(t, r.Dir, "log", "-1", "--format=%an %s", "agent/run-1"); author != "agentgate agent work" {
		t.Fatalf("author and subject %q", author)
	}
}

func TestPushNeverMovesABranchThatExists(t *testing.T) {
	_, r, remote := server(t)
	c := newCache(t, Config{})
	cloned, dir := edited(t, c, remote, "main")
	// "ahead" is at the base, so a plain push would fast-forward it.
	gittest.Git(t, r.Dir, "branch", "ahead", cloned.Base)
	ch := commitOf(t, c, remote, dir, cloned.Base)
	for _, branch := range []string{"dev", "ahead"} {
		before := gittest.Branch(t, r, branch)
		err := ch.Push(context.Background(), remote, branch, cloned.Base)
		wantClass(t, err, runs.PushRejected)
		if after := gittest.Branch(t, r, branch); after != before {
			t.Fatalf("branch %s moved from %s to %s", branch, before, after)
		}
	}
}

func TestPushToTheStartingBranchIsRefusedBeforePushing(t *testing.T) {
	s, r, remote := server(t)
	c := newCache(t, Config{})
	cloned, dir := edited(t, c, remote, "main")
	ch := commitOf(t, c, remote, dir, cloned.Base)
	requests := s.Requests()
	for _, branch := range []string{"main", "refs/heads/main", "-f", "a..b", "HEAD", ""} {
		err := ch.Push(context.Background(), remote, branch, cloned.Ref)
		wantClass(t, err, runs.PushRejected)
	}
	if s.Requests() != requests || gittest.Branch(t, r, "main") != cloned.Base {
		t.Fatalf("a refused push reached the server: %d requests after %d", s.Requests(), requests)
	}
}

func TestAHookRefusingIsPushRejected(t *testing.T) {
	_, r, remote := server(t)
	c := newCache(t, Config{})
	cloned, dir := edited(t, c, remote, "main")
	gittest.RefusePushes(t, r, "pushes are frozen")
	ch := commitOf(t, c, remote, dir, cloned.Base)
	err := ch.Push(context.Background(), remote, "agent/x", cloned.Ref)
	wantClass(t, err, runs.PushRejected)
	if !strings.Contains(err.Error(), "pushes are frozen") || strings.Contains(err.Error(), remote.Token) {
		t.Fatalf("error %q: want the hook's reason and no token", err)
	}
}

func TestPushWithAWrongTokenIsAuthFailed(t *testing.T) {
	_, _, remote := server(t)
	c := newCache(t, Config{})
	cloned, dir := edited(t, c, remote, "main")
	ch := commitOf(t, c, remote, dir, cloned.Base)
	err := ch.Push(context.Background(), Remote{URL: remote.URL, Token: "wrong-5b2c"}, "agent/x", cloned.Ref)
	wantClass(t, err, runs.GitAuthFailed)
	if strings.Contains(err.Error(), "wrong-5b2c") {
		t.Fatalf("error shows the token: %v", err)
	}
}

func TestNoChangeMakesNoCommitAndNoPush(t *testing.T) {
	s, _, remote := server(t)
	c := newCache(t, Config{})
	cloned, dir := clone(t, c, remote, "main")
	requests := s.Requests()
	ch := commitOf(t, c, remote, dir, cloned.Base)
	if ch.Commit != "" {
		t.Fatalf("commit %s of an untouched workspace", ch.Commit)
	}
	if err := ch.Push(context.Background(), remote, "agent/x", cloned.Ref); !errors.Is(err, ErrNoChange) {
		t.Fatalf("Push: %v, want ErrNoChange", err)
	}
	if _, err := ch.Patch(context.Background(), 1<<20); !errors.Is(err, ErrNoChange) {
		t.Fatalf("Patch: %v, want ErrNoChange", err)
	}
	if s.Requests() != requests {
		t.Fatalf("%d requests after %d with nothing to push", s.Requests(), requests)
	}
}

func TestPatchAppliesToAFreshClone(t *testing.T) {
	_, r, remote := server(t)
	c := newCache(t, Config{})
	cloned, dir := edited(t, c, remote, "dev")
	writeFile(t, dir, "bin.dat", "\x00\x01\x02binary\xff")
	ch := commitOf(t, c, remote, dir, cloned.Base)
	patch, err := ch.Patch(context.Background(), 1<<20)
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	fresh := t.TempDir()
	gittest.Git(t, fresh, "clone", "-q", r.Dir, ".")
	gittest.Git(t, fresh, "checkout", "-q", cloned.Base)
	mbox := filepath.Join(t.TempDir(), "change.mbox")
	if err := os.WriteFile(mbox, patch, 0o600); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, fresh, "am", "-q", mbox)
	if err := ch.Push(context.Background(), remote, "agent/patch", cloned.Ref); err != nil {
		t.Fatalf("Push: %v", err)
	}
	if got, want := gittest.Git(t, fresh, "rev-parse", "HEAD^{tree}"), gittest.Git(t, r.Dir, "rev-parse", "agent/patch^{tree}"); got != want {
		t.Fatalf("tree after git am %s, pushed tree %s", got, want)
	}
	if _, err := ch.Patch(context.Background(), 64); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Patch bounded to 64 bytes: %v, want ErrTooLarge", err)
	}
}

// plantedMarker is a file the workspace's own git setup writes when git
// runs it.
const plantedMarker = "/PWNED"

// plant makes the workspace's .git run a command that writes a marker
// through every door git has: hooks, core.hooksPath, core.fsmonitor and a
// clean filter, and returns the marker's path.
func plant(t *testing.T, dir string) string {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "marker")
	touch := "#!/bin/sh\necho ran >> " + marker + "\ncat\n"
	for _, hook := range []string{"pre-commit", "post-commit", "pre-push", "post-checkout", "reference-transaction"} {
		writeFile(t, dir, ".git/hooks/"+hook, touch)
		writeFile(t, dir, "planted-hooks/"+hook, touch)
	}
	writeFile(t, dir, "touch.sh", touch)
	config, err := os.OpenFile(filepath.Join(dir, ".git/config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer config.Close()
	script := filepath.Join(dir, "touch.sh")
	config.WriteString("[core]\n\tfsmonitor = " + script + "\n\thooksPath = " + filepath.Join(dir, "planted-hooks") +
		"\n[filter \"evil\"]\n\tclean = " + script + "\n\tsmudge = " + script + "\n\trequired = true\n")
	writeFile(t, dir, ".gitattributes", "* filter=evil\n")
	return marker
}

func TestTheWorkspacesOwnGitSetupIsNeverRun(t *testing.T) {
	_, r, remote := server(t)
	c := newCache(t, Config{})
	cloned, dir := edited(t, c, remote, "main")
	marker := plant(t, dir)

	ch := commitOf(t, c, remote, dir, cloned.Base)
	if exists(marker) {
		t.Fatalf("Commit ran the workspace's git setup: %s", fileIn(t, filepath.Dir(marker), "marker"))
	}
	if err := ch.Push(context.Background(), remote, "agent/planted", cloned.Ref); err != nil {
		t.Fatalf("Push: %v", err)
	}
	if _, err := ch.Patch(context.Background(), 1<<20); err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if exists(marker) {
		t.Fatalf("the workspace's git setup ran: %s", fileIn(t, filepath.Dir(marker), "marker"))
	}
	if got := gittest.Show(t, r, "agent/planted", "README.md"); got != "changed\n" {
		t.Fatalf("README.md pushed as %q", got)
	}
	// The plant is real: the workspace's own git runs it.
	gittest.Git(t, dir, "add", "-A")
	if !exists(marker) {
		t.Fatal("the planted setup does not run even with the workspace's git; the test proves nothing")
	}
}
