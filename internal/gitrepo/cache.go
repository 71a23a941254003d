package gitrepo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// Config is a Cache's: where it keeps mirrors and how large and old they
// may grow.
type Config struct {
	// Dir holds the cache; nothing else may write there.
	Dir string
	// MaxBytes bounds the mirrors' total size for Evict; 0 is no bound.
	MaxBytes int64
	// MaxAge is how long Evict keeps a mirror no run used; 0 keeps it.
	MaxAge time.Duration
	// Now is the clock of mirrors' last use; time.Now when nil.
	Now func() time.Time
	// Logger is told of evictions and cleanups; a no-op when nil.
	Logger *zap.Logger
	// Git is the git program; "git" on the gateway's PATH when empty.
	Git string
	// Timeout bounds each git process; 0 is 10 minutes.
	Timeout time.Duration
	// Pin, when set, is asked for each git that reaches a remote: it
	// resolves the URL's host, checks where it leads, and returns the
	// entry git is pinned to ("host:port:address", http.curloptResolve),
	// so that git dials the address that was checked and no other ("" to
	// leave git to resolve a literal address). See Policy.Pinner.
	Pin func(ctx context.Context, rawURL string) (string, error)
	// AuthorName and AuthorEmail sign the commits of runs' changes;
	// "agentgate" and "agentgate@localhost" when empty.
	AuthorName, AuthorEmail string
}

// Cache keeps one bare mirror of each repository a run cloned, so another
// run of it fetches only what changed, and makes runs' directories from
// them.
type Cache struct {
	cfg     Config
	log     *zap.Logger
	git     *runner
	mirrors string // Dir/mirrors
	tmp     string // Dir/tmp: half-made mirrors, commits' git dirs

	mu    sync.Mutex
	state map[string]*mirrorState
}

// New makes a cache in cfg.Dir, removing what a gateway that stopped
// mid-way left there: half-made mirrors, commits' git dirs and git's lock
// files.
func New(cfg Config) (*Cache, error) {
	if cfg.Dir == "" {
		return nil, errors.New("gitrepo: Config.Dir is empty")
	}
	cfg = withDefaults(cfg)
	gitPath, err := exec.LookPath(cfg.Git)
	if err != nil {
		return nil, fmt.Errorf("find git: %w", err)
	}
	c := &Cache{cfg: cfg, log: cfg.Logger, state: map[string]*mirrorState{},
		mirrors: filepath.Join(cfg.Dir, "mirrors"), tmp: filepath.Join(cfg.Dir, "tmp")}
	if err := c.clean(); err != nil {
		return nil, err
	}
	if c.git, err = newRunner(gitPath, cfg.Dir, cfg.Timeout); err != nil {
		return nil, err
	}
	return c, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Git == "" {
		cfg.Git = "git"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.AuthorName == "" {
		cfg.AuthorName = "agentgate"
	}
	if cfg.AuthorEmail == "" {
		cfg.AuthorEmail = "agentgate@localhost"
	}
	return cfg
}

// clean empties tmp and removes lock files under mirrors: at start no git
// of this cache runs, so every one is stale.
func (c *Cache) clean() error {
	if err := os.RemoveAll(c.tmp); err != nil {
		return fmt.Errorf("clean git cache: %w", err)
	}
	for _, d := range []string{c.tmp, c.mirrors} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("make git cache: %w", err)
		}
	}
	return filepath.WalkDir(c.mirrors, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".lock") {
			return err
		}
		c.log.Info("stale git lock removed", zap.String("path", path))
		return os.Remove(path)
	})
}

// Cloned is how a run's directory was made.
type Cloned struct {
	// Base is the commit the directory holds.
	Base string
	// Ref is what the run's ref resolved to: "refs/heads/NAME",
	// "refs/tags/NAME", or the commit when it named one.
	Ref string
	// CacheHit says the mirror was there, so only a fetch was needed.
	CacheHit bool
	// Duration is how long it took.
	Duration time.Duration
}

// Clone makes dir (missing or empty) a clone of remote at ref: a branch, a
// tag, a full or abbreviated commit, or empty for the remote's default
// branch. The clone copies the mirror's objects, so nothing the run does
// reaches the mirror and evicting the mirror leaves it whole; its origin
// is remote.URL.
func (c *Cache) Clone(ctx context.Context, remote Remote, ref, dir string) (Cloned, error) {
	start := time.Now()
	if err := c.checkInputs(ctx, remote, ref); err != nil {
		return Cloned{}, err
	}
	m, err := c.lock(ctx, remote.URL)
	if err != nil {
		return Cloned{}, err
	}
	defer c.unlock(m)
	hit, err := c.update(ctx, m, remote)
	if err != nil {
		return Cloned{}, err
	}
	out := Cloned{CacheHit: hit}
	if out.Ref, out.Base, err = c.resolve(ctx, m, remote, ref); err != nil {
		return Cloned{}, err
	}
	if err := c.checkout(ctx, m, remote.URL, out, dir); err != nil {
		return Cloned{}, err
	}
	out.Duration = time.Since(start)
	return out, nil
}

func (c *Cache) checkInputs(ctx context.Context, remote Remote, ref string) error {
	if err := checkURL(remote.URL); err != nil {
		return err
	}
	if ref == "" || isHex(ref) {
		return nil
	}
	return c.checkRefName(ctx, runs.GitNotFound, "ref", ref)
}

// checkURL refuses what git would take for an option or a local path, and
// credentials in the URL, which would end up in the workspace's config.
// Which hosts are allowed is the policy's to say.
func checkURL(raw string) error {
	if !strings.HasPrefix(raw, "https://") && !strings.HasPrefix(raw, "http://") {
		return &Error{Class: runs.GitFailed, Op: "clone", Msg: "the repository URL must be https or http"}
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || strings.ContainsAny(raw, " \t\r\n") {
		return &Error{Class: runs.GitFailed, Op: "clone", Msg: "the repository URL must carry no credentials or spaces"}
	}
	return nil
}

// checkRefName refuses a ref git would read as an option or that is not a
// valid ref name.
func (c *Cache) checkRefName(ctx context.Context, class runs.Class, what, name string) error {
	invalid := &Error{Class: class, Op: "check " + what, Msg: fmt.Sprintf("%q is not a valid %s name", name, what)}
	if name == "" || strings.HasPrefix(name, "-") || len(name) > 255 {
		return invalid
	}
	full := name
	if !strings.HasPrefix(name, "refs/") {
		full = "refs/heads/" + name
	}
	if _, err := c.git.run(ctx, call{op: "check-ref-format", dir: c.tmp, args: []string{"check-ref-format", full}}); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return invalid
	}
	return nil
}

// isHex says s could be a full or abbreviated commit id.
func isHex(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// mirrorKey names a repository's mirror: a hash, so a URL never becomes a
// path.
func mirrorKey(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:16])
}
