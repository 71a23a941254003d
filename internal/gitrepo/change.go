package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// Change is what a run changed in its workspace, as a commit on its base
// in a git directory the gateway owns. Close it when done.
type Change struct {
	c      *Cache
	m      *mirrorState
	gitDir string
	url    string
	// Base is the commit the run started from.
	Base string
	// Commit is the commit of the run's changes on Base; empty when the
	// workspace is as Base left it.
	Commit string
}

// Commit makes a commit of dir's files on base, signed by the gateway,
// with message. It reads dir only as a work tree of its own git
// directory: dir's .git (config, hooks, attributes' filters) is never
// used, and .git directories are never committed. remote is needed only
// when the cache lost the base commit since the clone.
func (c *Cache) Commit(ctx context.Context, remote Remote, dir, base, message string) (*Change, error) {
	if !isHex(base) || len(base) < 40 {
		return nil, &Error{Class: runs.GitFailed, Op: "commit", Msg: fmt.Sprintf("%q is not a commit id", base)}
	}
	if err := checkURL(remote.URL); err != nil {
		return nil, err
	}
	m, err := c.useMirror(ctx, remote, base)
	if err != nil {
		return nil, err
	}
	ch := &Change{c: c, m: m, url: remote.URL, Base: base}
	if err := ch.commit(ctx, dir, message); err != nil {
		ch.Close()
		return nil, err
	}
	return ch, nil
}

// useMirror marks the mirror of remote in use, so Evict leaves it, once it
// holds base.
func (c *Cache) useMirror(ctx context.Context, remote Remote, base string) (*mirrorState, error) {
	m, err := c.lock(ctx, remote.URL)
	if err != nil {
		return nil, err
	}
	defer c.unlock(m)
	if _, ok := c.commitOf(ctx, m.dir, base); !ok {
		if _, err := c.update(ctx, m, remote); err != nil {
			return nil, err
		}
		if _, _, err := c.resolve(ctx, m, remote, base); err != nil {
			return nil, err
		}
	}
	c.touch(m)
	c.mu.Lock()
	m.inUse++
	c.mu.Unlock()
	return m, nil
}

func (ch *Change) commit(ctx context.Context, dir, message string) error {
	work, err := filepath.Abs(dir)
	if err != nil {
		return &Error{Class: runs.GitFailed, Op: "commit", Msg: "bad workspace path", Err: err}
	}
	if ch.gitDir, err = ch.c.privateGitDir(ctx, ch.m); err != nil {
		return err
	}
	if _, err := ch.git(ctx, work, "read-tree", ch.Base); err != nil {
		return err
	}
	if _, err := ch.git(ctx, work, "add", "-A"); err != nil {
		return err
	}
	tree, err := ch.git(ctx, work, "write-tree")
	if err != nil {
		return err
	}
	baseTree, err := ch.git(ctx, work, "rev-parse", "--verify", ch.Base+"^{tree}")
	if err != nil || tree == baseTree {
		return err
	}
	ch.Commit, err = ch.commitTree(ctx, work, tree, message)
	return err
}

// privateGitDir makes an empty bare repository that borrows the mirror's
// objects, so the base need not be copied.
func (c *Cache) privateGitDir(ctx context.Context, m *mirrorState) (string, error) {
	dir, err := os.MkdirTemp(c.tmp, "change-")
	if err != nil {
		return "", &Error{Class: runs.GitFailed, Op: "commit", Msg: "cannot make a git directory", Err: err}
	}
	if _, err := c.git.run(ctx, call{op: "commit", dir: dir, args: []string{"init", "-q", "--bare", dir}}); err != nil {
		return dir, err
	}
	alternates := filepath.Join(dir, "objects", "info", "alternates")
	if err := os.WriteFile(alternates, []byte(filepath.Join(m.dir, "objects")+"\n"), 0o600); err != nil {
		return dir, &Error{Class: runs.GitFailed, Op: "commit", Msg: "cannot link the repository's cache", Err: err}
	}
	return dir, nil
}

func (ch *Change) commitTree(ctx context.Context, work, tree, message string) (string, error) {
	if strings.TrimSpace(message) == "" {
		message = "Changes made by agentgate"
	}
	cfg := ch.c.cfg
	date := cfg.Now().Format("2006-01-02T15:04:05Z07:00")
	env := []string{
		"GIT_AUTHOR_NAME=" + cfg.AuthorName, "GIT_AUTHOR_EMAIL=" + cfg.AuthorEmail, "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + cfg.AuthorName, "GIT_COMMITTER_EMAIL=" + cfg.AuthorEmail, "GIT_COMMITTER_DATE=" + date,
	}
	out, err := ch.c.git.run(ctx, call{op: "commit", dir: work, env: env, stdin: strings.NewReader(message),
		args: ch.gitArgs(work, "commit-tree", tree, "-p", ch.Base, "-F", "-")})
	return strings.TrimSpace(string(out)), err
}

// git runs git in the change's own git directory with work as work tree.
func (ch *Change) git(ctx context.Context, work string, args ...string) (string, error) {
	out, err := ch.c.git.run(ctx, call{op: "commit", dir: work, args: ch.gitArgs(work, args...)})
	return strings.TrimSpace(string(out)), err
}

func (ch *Change) gitArgs(work string, args ...string) []string {
	return append([]string{"--git-dir=" + ch.gitDir, "--work-tree=" + work}, args...)
}

// Push pushes the change's commit to a new branch of remote. It refuses,
// before pushing, a branch that is not a valid name or that is the ref
// the run started from (startRef: "NAME" or "refs/heads/NAME"), and never
// overwrites a branch: one that exists makes it fail with PushRejected,
// as does a remote that refuses the push. ErrNoChange when the run changed
// nothing.
func (ch *Change) Push(ctx context.Context, remote Remote, branch, startRef string) error {
	if ch.Commit == "" {
		return ErrNoChange
	}
	branch = strings.TrimPrefix(branch, "refs/heads/")
	if err := ch.c.checkRefName(ctx, runs.PushRejected, "branch", branch); err != nil || branch == "HEAD" {
		return &Error{Class: runs.PushRejected, Op: "push", Msg: fmt.Sprintf("%q is not a valid branch name", branch)}
	}
	if branch == strings.TrimPrefix(startRef, "refs/heads/") {
		return &Error{Class: runs.PushRejected, Op: "push", Msg: fmt.Sprintf("branch %q is the ref the run started from; push to a new branch", branch)}
	}
	target := "refs/heads/" + branch
	// The lease with an empty value makes the push create the branch or
	// fail: a plain push would move a branch that exists at an ancestor.
	// It can never overwrite anything.
	args := []string{"--git-dir=" + ch.gitDir, "push", "--no-verify", "--force-with-lease=" + target + ":",
		remote.URL, ch.Commit + ":" + target}
	pin, err := ch.c.pin(ctx, remote.URL)
	if err != nil {
		return err
	}
	_, err = ch.c.git.run(ctx, call{op: "push", dir: ch.gitDir, token: remote.Token, pin: pin, args: args})
	return pushFailure(err)
}

// pushFailure reclassifies a push that reached the remote but was refused.
func pushFailure(err error) error {
	ge, ok := err.(*Error)
	if !ok || ge.Err == nil || contextError(ge.Err) != nil {
		return err
	}
	lower := strings.ToLower(ge.stderr)
	for _, w := range []string{"[rejected]", "[remote rejected]", "stale info", "hook declined", "failed to push some refs"} {
		if strings.Contains(lower, w) {
			ge.Class = runs.PushRejected
		}
	}
	return ge
}

// Patch is the change as mail, as git format-patch makes it, failing with
// ErrTooLarge past max bytes; ErrNoChange when the run changed nothing.
func (ch *Change) Patch(ctx context.Context, max int64) ([]byte, error) {
	if ch.Commit == "" {
		return nil, ErrNoChange
	}
	return ch.c.git.run(ctx, call{op: "format-patch", dir: ch.gitDir, stdoutMax: max,
		args: []string{"--git-dir=" + ch.gitDir, "format-patch", "--stdout", "--binary", ch.Base + ".." + ch.Commit}})
}

// Close removes the change's git directory and lets Evict have the mirror.
// It may be called more than once.
func (ch *Change) Close() error {
	if ch.m == nil {
		return nil
	}
	var err error
	if ch.gitDir != "" {
		err = os.RemoveAll(ch.gitDir)
	}
	ch.c.mu.Lock()
	ch.m.inUse--
	ch.c.mu.Unlock()
	ch.c.touch(ch.m)
	ch.m = nil
	return err
}
