package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/netns"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// Name is what Enforcement reports, and what /v1/agents shows.
const Name = "bubblewrap"

// Options configure a Bubblewrap.
type Options struct {
	// Bwrap is the bwrap binary: a path, or a name looked up on the PATH
	// (default "bwrap").
	Bwrap string
	// Env is coreutils' env, which sets the signal dispositions around
	// bwrap (see Wrap): a path or a name (default "env").
	Env string
	// Hide lists paths no confined process may see: the gateway's data
	// directory, the workspace root, the API keys file, the operator's
	// extras. A directory is covered by an empty read-only tmpfs, a file
	// by /dev/null. A path missing when a run starts is skipped. The run's
	// own directory, home and temporary directory are bound back on top,
	// so a run still sees its own even when it lives under a hidden path.
	Hide []string
}

// Bubblewrap confines each run's agent with bwrap(1). It implements
// runs.Sandbox. Its methods are safe for concurrent use.
type Bubblewrap struct {
	bwrap string
	env   string
	hide  []string
	root  bool // the gateway runs as root: see rootFlags
}

// ErrUnavailable is wrapped by the errors of New and Probe when this
// machine cannot sandbox.
var ErrUnavailable = errors.New("bubblewrap sandbox unavailable")

// New returns a Bubblewrap over opts. It fails, wrapping ErrUnavailable,
// when bwrap or env cannot be found, and when a hidden path is not
// absolute. It does not run bwrap: Probe does.
func New(opts Options) (*Bubblewrap, error) {
	if opts.Bwrap == "" {
		opts.Bwrap = "bwrap"
	}
	if opts.Env == "" {
		opts.Env = "env"
	}
	bw, err := exec.LookPath(opts.Bwrap)
	if err != nil {
		return nil, fmt.Errorf("%w: %s not found (install the bubblewrap package): %w", ErrUnavailable, opts.Bwrap, err)
	}
	env, err := exec.LookPath(opts.Env)
	if err == nil {
		// Absolute: the network shim execs it by its path alone.
		env, err = filepath.Abs(env)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s not found (coreutils): %w", ErrUnavailable, opts.Env, err)
	}
	if strings.Contains(bw, "=") {
		// env would take it for a variable to set (see Wrap).
		return nil, fmt.Errorf("%w: the path of bwrap, %s, holds \"=\"", ErrUnavailable, bw)
	}
	b := &Bubblewrap{bwrap: bw, env: env, root: os.Geteuid() == 0}
	for _, p := range opts.Hide {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("hidden path %q is not absolute", p)
		}
		b.hide = append(b.hide, resolve(p))
	}
	return b, nil
}

// Enforcement returns Name.
func (b *Bubblewrap) Enforcement() string { return Name }

// Wrap returns the argv that runs argv confined as c says. Under Full
// without c.Network it is argv itself. Otherwise it is
//
//	env --ignore-signal=INT,TERM bwrap <flags> -- [shim] env --default-signal=INT,TERM argv...
//
// bwrap's outer process forwards no signal, and dies of the SIGTERM the
// supervisor sends to the run's process group, taking the whole sandbox
// down with it (--die-with-parent) before the CLI could stop gracefully.
// Ignoring SIGINT and SIGTERM there lets the group's SIGTERM reach the CLI
// and its tools, which share the group; inside, the CLI gets the default
// dispositions back. So the supervisor sends a CLI's interrupt signal to
// the group too: sent to the started process alone it would be lost.
//
// With c.Network the sandbox has a network namespace of its own, and the
// shim, when there is one, hands the gateway its proxy listener before it
// execs env (netns.RunShim). Under Full the flags are then those of
// fullNetFlags: the run keeps the whole file system, writable.
//
// The dirs of c must exist; a hidden path that does not exist is skipped.
func (b *Bubblewrap) Wrap(c supervisor.Confinement, argv []string) ([]string, error) {
	if c.Permission == runs.Full && c.Network == nil {
		return argv, nil
	}
	if len(argv) == 0 {
		return nil, errors.New("sandbox: empty argv")
	}
	if c.Permission != runs.ReadOnly && c.Permission != runs.WorkspaceWrite && c.Permission != runs.Full {
		return nil, fmt.Errorf("sandbox: unknown permission %q", c.Permission)
	}
	for name, d := range map[string]string{"dir": c.Dir, "home": c.Home, "temp dir": c.TempDir} {
		if d == "" || !filepath.IsAbs(d) {
			return nil, fmt.Errorf("sandbox: the run's %s %q is not an absolute path", name, d)
		}
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("sandbox: the run's %s %s is not a directory", name, d)
		}
	}
	dir, tmp := resolve(c.Dir), resolve(c.TempDir)
	inner, err := b.inner(c, tmp, argv)
	if err != nil {
		return nil, err
	}
	out := []string{b.env, "--ignore-signal=INT,TERM", b.bwrap}
	if c.Permission == runs.Full {
		out = append(out, fullNetFlags...)
		if b.root {
			out = append(out, "--cap-drop", "ALL")
		}
	} else {
		out = append(out, b.mounts(c, dir, tmp)...)
	}
	out = append(out, "--chdir", dir, "--")
	return append(out, inner...), nil
}

// mounts returns the flags of a read_only or workspace_write run.
func (b *Bubblewrap) mounts(c supervisor.Confinement, dir, tmp string) []string {
	out := slices.Clone(baseFlags)
	if c.Network != nil {
		out = append(out, "--unshare-net")
	}
	if b.root {
		out = append(out, rootFlags...)
	}
	hide := b.hide
	if c.Network != nil {
		hide = append(slices.Clone(hide), networkHidden()...)
	}
	var readOnly []string
	for _, p := range hide {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			out = append(out, "--tmpfs", p)
			readOnly = append(readOnly, p)
		default:
			out = append(out, "--ro-bind", os.DevNull, p)
		}
	}
	home := resolve(c.Home)
	out = append(out, "--bind", home, home, "--bind", tmp, tmp)
	if c.Permission == runs.WorkspaceWrite {
		out = append(out, "--bind", dir, dir)
	} else {
		out = append(out, "--ro-bind", dir, dir)
	}
	// The hiding tmpfs turn read-only last: the binds above may have had
	// to make their mount points in them.
	for _, p := range readOnly {
		out = append(out, "--remount-ro", p)
	}
	return out
}

// networkHidden are the directories a run confined to its network
// namespace must not see besides: the host's /run holds Unix sockets
// (systemd-resolved's, the D-Bus system bus, a container engine's) that
// are ways out no network namespace closes, DNS among them. A read-only
// mount does not stop a connect() to a socket: the directory is hidden.
func networkHidden() []string { return []string{resolve("/run")} }

// inner returns what bwrap runs: argv under env, which gives it the
// default signal dispositions back, under the shim when c has one. tmp is
// c.TempDir resolved, where the sandbox sees the shim's socket.
func (b *Bubblewrap) inner(c supervisor.Confinement, tmp string, argv []string) ([]string, error) {
	var out []string
	if n := c.Network; n != nil && n.Shim != "" {
		socket, err := socketInside(c, tmp)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(n.Shim) {
			return nil, fmt.Errorf("sandbox: the network shim %q is not an absolute path", n.Shim)
		}
		out = append([]string{n.Shim}, netns.ShimArgs(socket, nil)...)
	}
	out = append(out, b.env, "--default-signal=INT,TERM")
	if strings.Contains(argv[0], "=") {
		// env takes every word with "=" before the command for a
		// variable to set, and has no way to say otherwise: a CLI
		// installed under such a path is started through sh, which
		// keeps the signals env gave it.
		out = append(out, "/bin/sh", "-c", `exec "$0" "$@"`)
	}
	return append(out, argv...), nil
}

// socketInside returns the path of c.Network's socket under tmp, where the
// sandbox mounts the run's temporary directory.
func socketInside(c supervisor.Confinement, tmp string) (string, error) {
	rel, err := filepath.Rel(c.TempDir, c.Network.Socket)
	if err != nil || !filepath.IsAbs(c.Network.Socket) || rel == "." || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("sandbox: the shim's socket %q is not inside the run's temp dir %s", c.Network.Socket, c.TempDir)
	}
	return filepath.Join(tmp, rel), nil
}

// baseFlags are the namespaces and mounts of every confined run, before
// the hidden paths and the run's own directories; doc.go explains each.
var baseFlags = []string{
	"--die-with-parent",
	"--unshare-pid", "--unshare-ipc",
	"--ro-bind", "/", "/",
	"--dev", "/dev",
	"--proc", "/proc",
}

// rootFlags are added when the gateway runs as root, whose sandboxed
// processes bwrap would otherwise leave every capability: with
// CAP_SYS_ADMIN in the sandbox's mount namespace, a tool can unmount what
// hides a path, or remount / read-write. CAP_SETFCAP alone is kept, for
// a CLI that sandboxes its own tools with bwrap (Codex): mapping uid 0
// into a new user namespace needs it (Linux 5.12 and later). doc.go says
// what it still allows.
var rootFlags = []string{"--cap-drop", "ALL", "--cap-add", "CAP_SETFCAP"}

// fullNetFlags confine a full run with a network namespace of its own, and
// nothing else: the host's whole tree stays writable. The PID namespace
// and its /proc keep the run from the gateway's processes, whose network
// namespace /proc/<pid>/ns/net would be a way back to the host's; as root
// every capability is dropped too (Wrap), since with CAP_SYS_ADMIN a
// process can setns(2) into any namespace it can open.
var fullNetFlags = []string{
	"--die-with-parent",
	"--dev-bind", "/", "/",
	"--unshare-net",
	"--unshare-pid", "--proc", "/proc",
}

// probeTimeout bounds Probe's bwrap run.
const probeTimeout = 15 * time.Second

// Probe runs `true` confined the way a workspace_write run is, with the
// same flags and hidden paths, and returns why it failed, wrapping
// ErrUnavailable: no user or mount namespaces for this user, a seccomp
// profile in a container that refuses them, a missing /proc.
func (b *Bubblewrap) Probe(ctx context.Context) error {
	return b.probe(ctx, nil)
}

// ProbeNetwork is Probe with a network namespace of the run's own
// (--unshare-net), which a container's seccomp profile or a kernel
// without network namespaces may refuse where the rest works. The probe
// has no shim: it tests the namespace, not the gateway's binary.
func (b *Bubblewrap) ProbeNetwork(ctx context.Context) error {
	return b.probe(ctx, &supervisor.NetConfinement{})
}

func (b *Bubblewrap) probe(ctx context.Context, network *supervisor.NetConfinement) error {
	root, err := os.MkdirTemp("", "agentgate-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer os.RemoveAll(root)
	c := supervisor.Confinement{RunID: "probe", Permission: runs.WorkspaceWrite, Network: network,
		Dir: filepath.Join(root, "dir"), Home: filepath.Join(root, "home"), TempDir: filepath.Join(root, "tmp")}
	for _, d := range []string{c.Dir, c.Home, c.TempDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("%w: no true(1) to probe with: %w", ErrUnavailable, err)
	}
	argv, err := b.Wrap(c, []string{truePath})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return runProbe(ctx, argv)
}

// runProbe runs argv, bounded by probeTimeout, and says why it failed.
func runProbe(ctx context.Context, argv []string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%w: `%s` failed: %s", ErrUnavailable, strings.Join(argv, " "), msg)
	}
	return nil
}

// resolve returns p cleaned, with its symlinks resolved when it exists:
// bwrap mounts on the real path, and a hidden path reached through a
// symlink must be hidden where it really is.
func resolve(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
