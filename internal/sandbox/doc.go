// Package sandbox confines an agent's processes with bubblewrap (bwrap),
// the same way for every CLI, so that a run's permission does not rest on
// the CLI's own flags alone. Bubblewrap implements runs.Sandbox; the
// supervisor wraps the CLI's argv with it, under the reaper when there is
// one (reaper → env → bwrap → bwrap's init → env → CLI), so that the
// reaper, the cookie and the run's cgroup work as without it.
//
// # What is enforced
//
// Under read_only and workspace_write the whole file system is read-only,
// except the agent's home, the run's own temporary directory (its TMPDIR,
// TMP and TEMP, made under supervisor.Config.TempRoot and removed with the run)
// and, under workspace_write only, the run's directory. full is unconfined
// (Wrap returns the argv unchanged) unless the run's network is (below).
// The mounts, in order (order matters:
// a later mount covers an earlier one):
//
//	--ro-bind / /              the host's tree, read-only (the host's /tmp stays, read-only:
//	                           CLIs and their install dirs may live there)
//	--dev /dev                 a minimal /dev
//	--proc /proc               a /proc of the sandbox's own PID namespace
//	--tmpfs <hidden dir>       each hidden directory (Options.Hide): empty
//	--ro-bind /dev/null <file> each hidden file: empty
//	--bind <home> <home>       the agent's home, writable (also under a hidden dir)
//	--bind <tmp> <tmp>         the run's temporary directory, writable
//	--bind <dir> <dir>         the run's directory: --ro-bind under read_only
//	--remount-ro <hidden dir>  the hiding tmpfs, read-only once the binds made their mount points
//
// Hidden are the gateway's data directory (the embedded store holds every
// run's prompts and outputs), the workspace root (every other run's
// directory), the API keys file and the operator's extras.
//
// Namespaces: --unshare-pid with the fresh /proc, because an agent of the
// gateway's user could otherwise read every secret of the gateway from
// /proc/<gateway pid>/environ; --unshare-ipc; --die-with-parent, so that
// the sandbox dies with whoever started it. When the gateway runs as root
// every capability is dropped but CAP_SETFCAP (below): with CAP_SYS_ADMIN
// in the sandbox's mount namespace, root undoes it (umount of a hiding
// tmpfs showed the data dir again, and `mount -o remount,bind,rw /` made
// the root writable; both were tried and worked before the drop).
//
// # The network
//
// A run whose Confinement has a Network gets a network namespace of its
// own (--unshare-net): only lo, which bwrap brings up. Nothing reaches the
// host's network from there, not its loopback, nor a DNS server, by TCP,
// UDP or raw sockets. The CLI's only way out is the gateway's egress
// proxy: bwrap runs the shim first (netns.RunShim), which listens on the
// namespace's 127.0.0.1:3128, hands that listener to the gateway and execs
// the CLI (shim → env → CLI, one process), so the gateway serves the
// proxy from outside and decides each connection. With no shim (policy
// none) the run has no way out at all.
//
// A Unix socket on the file system is reached by its path, whatever the
// network namespace, and a read-only mount does not stop a connect(2) to
// it: the host's /run, where systemd-resolved, the D-Bus system bus and
// container engines keep theirs, is hidden from such a run as the hidden
// paths are (networkHidden). Sockets kept elsewhere need Options.Hide.
//
// A full run with a Network is wrapped too, minimally: the host's whole
// tree stays writable (--dev-bind / /), with --unshare-net, --unshare-pid
// and a fresh /proc (the gateway's /proc/<pid>/ns/net would lead back to
// the host's network), --die-with-parent, and as root every capability
// dropped, since with CAP_SYS_ADMIN a process can setns(2) into any
// network namespace it can open. Such a root keeps uid 0 but loses what
// the capabilities gave it, such as reading files of other users
// regardless of their mode.
//
// # Signals and exit status
//
// bwrap forwards no signal, and its outer process dies of the SIGTERM that
// the supervisor sends to the run's process group, taking the sandbox down
// at once (--die-with-parent) instead of letting the CLI stop gracefully.
// So the outer bwrap is started with SIGINT and SIGTERM ignored (coreutils'
// env --ignore-signal), and the CLI gets the default dispositions back
// (env --default-signal): the group's SIGTERM then reaches the CLI and its
// tools, which share the group. The interrupt signal of a CLI that has
// one (Claude's and Cline's SIGINT before SIGTERM) goes to the group too,
// as a terminal's Ctrl-C does: sent to the started process alone it would
// be lost, and the run would go on until the SIGTERM a grace period later. bwrap reports a CLI killed by signal n as
// exit code 128+n; it is left so, since Gemini CLI exits with 144…255 on
// purpose (the HTTP status mod 256), and a code cannot tell the two apart.
//
// The supervisor kills an interrupted turn's tools below the sandbox's
// init, the CLI's parent in the sandbox, so that the CLI itself survives
// (runs' session.confined).
//
// # Codex inside
//
// Codex sandboxes its own tools with bwrap too (a user namespace, its own
// PID namespace and mounts). Nested under this sandbox as root with every
// capability dropped, its bwrap failed with "setting up uid map: Operation
// not permitted": since Linux 5.12, mapping uid 0 into a new user
// namespace needs CAP_SETFCAP, and the tool call failed. So CAP_SETFCAP is
// kept; Codex's tools then run, and write in its workspace. A plain
// nested `bwrap --unshare-user --proc /proc` still fails to mount its
// /proc ("Can't mount proc on /newroot/proc": this sandbox's /proc has
// read-only submounts, so it is not fully visible to an unprivileged
// mount); Codex is documented to retry without a /proc of its own then.
// Codex's bwrap also makes a mount point for each .git it protects under
// a writable root, and this sandbox's /tmp is the host's, read-only; the
// Codex adapter therefore keeps /tmp out of Codex's writable roots (the
// run's own TMPDIR stays in them).
// A user namespace made inside cannot undo this sandbox's mounts: they
// are locked together when they pass into it (TestCannotUnhide). What CAP_SETFCAP still allows:
// giving files the confined agent can write (its workspace, home and
// temporary directory) file capabilities, which count when someone
// outside the sandbox executes them (inside, bwrap's no_new_privs makes
// them void). A gateway that does not run as root keeps no capability.
//
// # What is not enforced
//
// Without a Network in its Confinement, a run shares the host's network:
// it can reach anything the gateway's host can, the gateway's own ports
// and the cloud's metadata address included. With one, what it reaches
// through the proxy is the proxy's policy, not this package's. The
// agent's home is shared by all
// the runs of that agent (its login and sessions live there): a run can
// read and change what earlier runs of the same agent left in it. The
// adapters' Preflight commands run unconfined, before the sandboxed CLI.
// The confined processes keep the gateway's uid, and bwrap gives them no
// new session (--new-session would take them out of the run's process
// group): they can reach the gateway's controlling terminal, if it has
// one. Limits on CPU, memory and processes are the run's cgroup's, not
// this package's.
package sandbox
