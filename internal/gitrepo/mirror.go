package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// mirrorState is what the gateway knows of one mirror while it runs.
type mirrorState struct {
	key  string
	dir  string // the bare mirror
	sem  chan struct{}
	lock *os.File // the flock of the holder of sem
	// inUse counts changes reading the mirror's objects; guarded by
	// Cache.mu. Evict leaves a mirror in use alone.
	inUse int
}

// lock gives the caller the mirror of url alone: in the process by a
// semaphore that ctx can give up on, across processes by a flock.
func (c *Cache) lock(ctx context.Context, url string) (*mirrorState, error) {
	m := c.stateOf(mirrorKey(url))
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, &Error{Class: runs.GitFailed, Op: "lock mirror", Msg: "gave up waiting for the repository's cache", Err: ctx.Err()}
	}
	if err := c.flock(m, syscall.LOCK_EX); err != nil {
		<-m.sem
		return nil, err
	}
	return m, nil
}

// tryLock is lock that does not wait: false when another holds the mirror.
func (c *Cache) tryLock(m *mirrorState) bool {
	select {
	case m.sem <- struct{}{}:
	default:
		return false
	}
	if err := c.flock(m, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		<-m.sem
		return false
	}
	return true
}

func (c *Cache) flock(m *mirrorState, how int) error {
	f, err := os.OpenFile(filepath.Join(c.mirrors, m.key+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return &Error{Class: runs.GitFailed, Op: "lock mirror", Msg: "cannot open the cache's lock file", Err: err}
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return &Error{Class: runs.GitFailed, Op: "lock mirror", Msg: "cannot lock the repository's cache", Err: err}
	}
	m.lock = f
	return nil
}

func (c *Cache) unlock(m *mirrorState) {
	// Closing the file drops the flock.
	m.lock.Close()
	m.lock = nil
	<-m.sem
}

// update fetches remote's branches and tags into the mirror, making the
// mirror first when there is none; hit says it was there.
func (c *Cache) update(ctx context.Context, m *mirrorState, remote Remote) (hit bool, err error) {
	defer c.touch(m)
	if _, err := os.Stat(m.dir); err == nil {
		return true, c.fetch(ctx, m.dir, remote)
	}
	return false, c.create(ctx, m, remote)
}

// create makes the mirror in tmp and renames it into place once fetched,
// so a mirror in place is always whole.
func (c *Cache) create(ctx context.Context, m *mirrorState, remote Remote) error {
	half, err := os.MkdirTemp(c.tmp, "mirror-")
	if err != nil {
		return &Error{Class: runs.GitFailed, Op: "clone", Msg: "cannot make the repository's cache", Err: err}
	}
	defer os.RemoveAll(half)
	if _, err := c.git.run(ctx, call{op: "init", dir: half, args: []string{"init", "-q", "--bare", half}}); err != nil {
		return err
	}
	if err := c.fetch(ctx, half, remote); err != nil {
		return err
	}
	if err := os.Rename(half, m.dir); err != nil {
		return &Error{Class: runs.GitFailed, Op: "clone", Msg: "cannot keep the repository's cache", Err: err}
	}
	return nil
}

// fetch brings the mirror's branches and tags to the remote's. The URL is
// given on the command line, so no mirror's config names a remote.
func (c *Cache) fetch(ctx context.Context, gitDir string, remote Remote, refspecs ...string) error {
	if len(refspecs) == 0 {
		refspecs = []string{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}
	}
	args := append([]string{"--git-dir=" + gitDir, "fetch", "-q", "--prune", "--no-tags",
		"--no-write-fetch-head", remote.URL}, refspecs...)
	pin, err := c.pin(ctx, remote.URL)
	if err != nil {
		return err
	}
	_, err = c.git.run(ctx, call{op: "fetch", dir: gitDir, args: args, token: remote.Token, pin: pin})
	return err
}

// pin is the resolve entry git reaching url is pinned to (Config.Pin).
func (c *Cache) pin(ctx context.Context, url string) (string, error) {
	if c.cfg.Pin == nil {
		return "", nil
	}
	pin, err := c.cfg.Pin(ctx, url)
	if err != nil {
		return "", &Error{Class: runs.GitUnreachable, Op: "resolve", Msg: err.Error(), Err: err}
	}
	return pin, nil
}

// resolve finds ref in the mirror: a branch, then a tag, then a commit. A
// full commit that no branch or tag holds is fetched by its id.
func (c *Cache) resolve(ctx context.Context, m *mirrorState, remote Remote, ref string) (name, commit string, err error) {
	if ref == "" {
		if ref, err = c.defaultBranch(ctx, remote); err != nil {
			return "", "", err
		}
	}
	for _, candidate := range refCandidates(ref) {
		if commit, ok := c.commitOf(ctx, m.dir, candidate); ok && strings.HasPrefix(candidate, "refs/") {
			return candidate, commit, nil
		} else if ok {
			return commit, commit, nil
		}
	}
	if isHex(ref) && (len(ref) == 40 || len(ref) == 64) {
		if err := c.fetch(ctx, m.dir, remote, ref); err == nil {
			if commit, ok := c.commitOf(ctx, m.dir, ref); ok {
				return commit, commit, nil
			}
		}
	}
	return "", "", &Error{Class: runs.GitNotFound, Op: "resolve", Msg: fmt.Sprintf("no branch, tag or commit %q in the repository", ref)}
}

func refCandidates(ref string) []string {
	if strings.HasPrefix(ref, "refs/") {
		return []string{ref}
	}
	candidates := []string{"refs/heads/" + ref, "refs/tags/" + ref}
	if isHex(ref) {
		candidates = append(candidates, ref)
	}
	return candidates
}

// commitOf is the commit name points at in gitDir, when there is one.
func (c *Cache) commitOf(ctx context.Context, gitDir, name string) (string, bool) {
	out, err := c.git.run(ctx, call{op: "rev-parse", dir: gitDir, args: []string{"--git-dir=" + gitDir,
		"rev-parse", "--verify", "--quiet", "--end-of-options", name + "^{commit}"}})
	if err != nil {
		return "", false
	}
	commit := strings.TrimSpace(string(out))
	// A hex name must have resolved as a commit id, not as some other
	// ref that happens to be spelt in hex.
	if !isHex(commit) || len(commit) < 40 || (isHex(name) && !strings.HasPrefix(commit, name)) {
		return "", false
	}
	return commit, true
}

// defaultBranch asks the remote which branch its HEAD names.
func (c *Cache) defaultBranch(ctx context.Context, remote Remote) (string, error) {
	pin, err := c.pin(ctx, remote.URL)
	if err != nil {
		return "", err
	}
	out, err := c.git.run(ctx, call{op: "ls-remote", dir: c.tmp, token: remote.Token, pin: pin,
		args: []string{"ls-remote", "--symref", remote.URL, "HEAD"}})
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		target, ok := strings.CutPrefix(line, "ref: ")
		if name, _, found := strings.Cut(target, "\t"); ok && found && strings.HasPrefix(name, "refs/heads/") {
			return name, nil
		}
	}
	return "", &Error{Class: runs.GitNotFound, Op: "resolve", Msg: "the repository has no default branch (is it empty?)"}
}

// checkout makes dir a copy of the mirror at cloned's commit, on the branch
// when the ref was one, with origin set to url.
func (c *Cache) checkout(ctx context.Context, m *mirrorState, url string, cloned Cloned, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return &Error{Class: runs.GitFailed, Op: "clone", Msg: "bad workspace path", Err: err}
	}
	steps := [][]string{
		// --no-hardlinks: an agent that wrote into a hardlinked object
		// file would change the mirror every later run clones from.
		{"clone", "-q", "--local", "--no-hardlinks", "--no-checkout", "--", m.dir, abs},
		{"-C", abs, "remote", "set-url", "origin", url},
	}
	if branch, ok := strings.CutPrefix(cloned.Ref, "refs/heads/"); ok {
		steps = append(steps, []string{"-C", abs, "checkout", "-q", "-B", branch, cloned.Base})
	} else {
		steps = append(steps, []string{"-C", abs, "checkout", "-q", "--detach", cloned.Base})
	}
	for _, args := range steps {
		if _, err := c.git.run(ctx, call{op: "checkout", dir: c.tmp, local: true, args: args}); err != nil {
			return err
		}
	}
	return nil
}

// touch records that the mirror was used now, on disk so that it outlives
// the process.
func (c *Cache) touch(m *mirrorState) {
	stamp := filepath.Join(c.mirrors, m.key+".used")
	now := c.cfg.Now()
	if err := os.WriteFile(stamp, nil, 0o600); err == nil {
		err = os.Chtimes(stamp, now, now)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("cannot record the use of a git mirror")
		}
	}
}

// lastUsed is when the mirror was last used, or the mirror's own time when
// it has no record.
func (c *Cache) lastUsed(key string) time.Time {
	for _, path := range []string{filepath.Join(c.mirrors, key+".used"), filepath.Join(c.mirrors, key+".git")} {
		if info, err := os.Stat(path); err == nil {
			return info.ModTime()
		}
	}
	return time.Time{}
}
