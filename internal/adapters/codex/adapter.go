package codex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/probe"
	"github.com/agentgate/agentgate/internal/runs"
)

// The static facts about the CLI.
const (
	// Name is the API's agent field.
	Name = "codex"
	// Alias is the other name a client may use.
	Alias = "openai"
	// VerifiedVersion is the CLI version the protocol, output and
	// failures were verified against.
	VerifiedVersion = "0.171.0"
	// Package is the npm package of the CLI.
	Package = "@openai/codex"
	// InstallCommand installs the verified version.
	InstallCommand = "npm install -g " + Package + "@" + VerifiedVersion
)

// phoneHome are the switches that keep a run on the model endpoint: with
// them Codex sends no analytics, exports no OTel metrics and syncs no
// plugins or apps. Left on, they try GitHub and ChatGPT hosts and add
// about 5 s to every run.
var phoneHome = []string{
	"-c", "analytics.enabled=false",
	"-c", `otel.metrics_exporter="none"`,
	"--disable", "plugins",
	"--disable", "apps",
}

// sandboxSettings narrow Codex's workspace-write sandbox to the run's
// directory and its own TMPDIR. By default Codex also makes the host's
// /tmp writable, and protects a .git under each writable root: its
// bubblewrap then creates /tmp/.git as a mount point. Under the gateway's
// sandbox, where the host's /tmp is read-only, that fails, and every
// sandboxed command with it ("error building bubblewrap command:
// Read-only file system", reported to the model only); without it, the
// empty /tmp/.git is left on the host. Which happened depended on whether
// an earlier run had left that directory (verified with 0.171.0).
var sandboxSettings = []string{
	"-c", "sandbox_workspace_write.exclude_slash_tmp=true",
}

// credentialEnv are the variables passed through from the gateway's
// environment, besides the env_key (and env_http_headers) of the provider
// configured in config.toml. OPENAI_BASE_URL is not among them: codex
// 0.171.0 ignores it and still calls api.openai.com.
var credentialEnv = []string{"OPENAI_API_KEY", "CODEX_API_KEY"}

// sandboxModes maps permission levels onto Codex's sandbox modes.
var sandboxModes = map[runs.Permission]string{
	runs.ReadOnly:       "read-only",
	runs.WorkspaceWrite: "workspace-write",
	runs.Full:           "danger-full-access",
}

var permissionDocs = map[runs.Permission]string{
	runs.ReadOnly: "sandbox read-only, approval policy never: commands run in Codex's bubblewrap sandbox " +
		"and cannot write anywhere",
	runs.WorkspaceWrite: "sandbox workspace-write, approval policy never: commands run in Codex's bubblewrap sandbox, " +
		"which lets them write only inside the run's directory and its TMPDIR (not the host's /tmp), without network",
	runs.Full: "sandbox danger-full-access, approval policy never: commands run unsandboxed",
}

// Adapter is the Codex adapter. It is stateless and safe for concurrent
// use.
type Adapter struct {
	// extraArgs are appended to the command line and method renames the
	// protocol's requests; tests use them to play a CLI that rejects a
	// flag or a method.
	extraArgs []string
	methods   map[string]string
}

// New returns the Codex adapter.
func New() *Adapter { return &Adapter{} }

// Name implements runs.Adapter.
func (*Adapter) Name() string { return Name }

// Describe implements runs.Adapter.
func (*Adapter) Describe() runs.Description {
	return adapterkit.Describe(runs.Description{
		Name:            Name,
		DisplayName:     "Codex",
		Aliases:         []string{Alias},
		DefaultBin:      "codex",
		InstallCommand:  InstallCommand,
		VerifiedVersion: VerifiedVersion,
		VersionArgs:     []string{"--version"},
		Fields: []string{
			runs.FieldSystemPrompt, runs.FieldModel, runs.FieldEffort, runs.FieldTimeoutSeconds,
			runs.FieldOutputSchema, runs.FieldResumeSessionID, runs.FieldKeepSession, runs.FieldCwd,
			runs.FieldPermission, runs.FieldInteractive, runs.FieldApprovals,
			runs.FieldMCPServers, runs.FieldAttachments,
		},
		Refused: map[string]string{
			runs.FieldMaxBudgetUSD: "codex takes no spending limit; use timeout_seconds",
		},
		// Codex's decline lets the model go on; its turn/interrupt leaves
		// the running command alive, for the supervisor to kill.
		Interaction: runs.Interaction{Steer: true, DenyEndsTurn: false, KillToolsOnInterrupt: true, MessageAttachments: true, ResumesSession: true},
	}, permissionDocs, credentialEnv, "env_key of the model provider in config.toml")
}

// version reads `codex --version`: "codex-cli 0.171.0".
var version = adapterkit.VersionParser{
	Command: "codex --version",
	Pattern: regexp.MustCompile(`^codex-cli (\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$`),
}

// ParseVersion implements runs.Adapter.
func (*Adapter) ParseVersion(output []byte) (string, error) { return version.Parse(output) }

// Command implements runs.Adapter. Everything about the run travels over
// the protocol on stdin (see the decoder), its MCP servers and images
// too; the command line only starts
// the app-server, stops phone-home and bounds the provider's retries.
// It reads the Codex home's config.toml to find the active provider, so
// that it passes that provider's key variable through and never
// overrides a setting the operator made there.
func (a *Adapter) Command(inv runs.Invocation) (runs.Command, error) {
	s := inv.Spec
	if s.Prompt == "" {
		return runs.Command{}, runs.Invalid("prompt", "must not be empty")
	}
	perm := adapterkit.Permission(s.Permission)
	if _, ok := sandboxModes[perm]; !ok {
		return runs.Command{}, runs.Invalid(runs.FieldPermission, fmt.Sprintf("unknown permission %q", perm))
	}
	args := append(append([]string{"app-server"}, phoneHome...), sandboxSettings...)
	pass := append([]string(nil), credentialEnv...)
	// A config.toml that cannot be read is Codex's to report, in its own
	// words, when it starts.
	prov, err := loadProvider(inv.FilesOrNone(), inv.Home)
	if err := checkMCPServers(s.MCPServers, prov.MCPServers); err != nil {
		return runs.Command{}, err
	}
	if err == nil {
		args = append(args, prov.overrides()...)
		if k := prov.Config.EnvKey; k != "" {
			pass = append(pass, k)
		}
		for _, v := range prov.Config.EnvHTTPHeaders {
			pass = append(pass, v)
		}
	}
	args = append(args, a.extraArgs...)
	return runs.Command{
		Args: args,
		// CODEX_HOME holds config.toml, auth.json and the sessions; NO_COLOR
		// keeps stderr, which classifies a crash, free of escapes.
		Env:     []string{"CODEX_HOME=" + inv.Home, "NO_COLOR=1", "RUST_LOG=error"},
		PassEnv: pass,
		// The MCP servers' env and header values travel in thread/start,
		// on stdin; a tool may still echo them.
		Secrets: mcpSecrets(s.MCPServers),
	}, nil
}

// HostAdvisory implements runs.HostAdvisor. Without bwrap on the agent's
// PATH, Codex sandboxes commands with the bubblewrap it bundles and says so
// in a configWarning at the start of every session; the decoder drops that
// warning, and the agent's advisory says it once instead.
func (a *Adapter) HostAdvisory(env []string) string {
	if _, err := probe.LookPathIn("bwrap", env); err == nil {
		return ""
	}
	return "bubblewrap (bwrap) is not on the agent's PATH, so Codex sandboxes commands with the copy it bundles; install bubblewrap (scripts/install-sandbox.sh), which the gateway's own sandbox needs too"
}

// NewDecoder implements runs.Adapter. A run that needs a Session (it is
// interactive, or asks for approvals) gets one.
func (a *Adapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	d := newDecoder(inv, a.methods)
	if len(inv.Spec.MCPServers) > 0 {
		// The operator's own MCP servers, which the run's thread turns
		// off; Command reads the same file.
		if prov, err := loadProvider(inv.FilesOrNone(), inv.Home); err == nil {
			d.operatorMCP = prov.MCPServers
		}
	}
	if inv.Spec.Session() {
		return session{d}
	}
	return d
}

// ResolveBinary implements runs.BinaryResolver. The npm package's codex
// command is a Node launcher that starts the native binary as a child;
// killed by SIGKILL, it leaves that child running with stdout open for
// minutes. The gateway therefore runs the native binary, which the
// package installs from a platform package next to it.
func (*Adapter) ResolveBinary(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if adapterkit.IsELF(real) || filepath.Base(real) != "codex.js" {
		return real, nil
	}
	pkg := filepath.Dir(filepath.Dir(real)) // …/@openai/codex
	plat, triple, err := platform()
	if err != nil {
		return "", err
	}
	native := filepath.Join("vendor", triple, "bin", "codex")
	candidates := []string{
		filepath.Join(filepath.Dir(pkg), plat, native),              // hoisted: …/@openai/codex-linux-x64
		filepath.Join(pkg, "node_modules", "@openai", plat, native), // nested under the package
		filepath.Join(pkg, native),                                  // older packages vendored it
	}
	for _, c := range candidates {
		if adapterkit.IsELF(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s is the Node launcher and its native binary is not installed (looked for %s)",
		path, strings.Join(candidates, ", "))
}

// platform names the npm platform package and target triple of the
// native binary for this machine.
func platform() (pkg, triple string, err error) {
	switch runtime.GOARCH {
	case "amd64":
		return "codex-linux-x64", "x86_64-unknown-linux-musl", nil
	case "arm64":
		return "codex-linux-arm64", "aarch64-unknown-linux-musl", nil
	}
	return "", "", fmt.Errorf("no native codex for %s", runtime.GOARCH)
}

// loginTimeout bounds `codex login status`.
const loginTimeout = 10 * time.Second

// Preflight implements runs.Preflighter. Offline and without credentials
// Codex never says it is not authenticated: it retries the network for
// as long as it is let. So the run checks first, where its provider gets
// credentials from: the provider's env_key variable, or for Codex's own
// provider an API key variable or a login in the Codex home (`codex login
// status`, which knows nothing of custom providers).
func (*Adapter) Preflight(ctx context.Context, inv runs.Invocation, env []string) *runs.RunError {
	if err := ensureDaemonDir(daemonDir()); err != nil {
		return runs.NewRunError(runs.AgentCrashed, "Codex's sandbox needs "+daemonDir()+": "+err.Error(),
			"remove it, or make it a directory of the gateway's user with mode 0700")
	}
	prov, err := loadProvider(runs.HostFiles{}, inv.Home)
	if err != nil {
		return runs.NewRunError(runs.AgentCrashed, "Codex's config.toml cannot be read: "+err.Error(),
			"fix "+filepath.Join(inv.Home, "config.toml"))
	}
	config := filepath.Join(inv.Home, "config.toml")
	switch {
	case !prov.Builtin && prov.Config.EnvKey != "":
		if lookupEnv(env, prov.Config.EnvKey) == "" {
			return runs.NewRunError(runs.NotAuthenticated,
				fmt.Sprintf("model provider %q reads its API key from %s, which the gateway's environment does not set", prov.ID, prov.Config.EnvKey),
				fmt.Sprintf("set %s for the gateway (it is passed to Codex), or change env_key in %s", prov.Config.EnvKey, config))
		}
		return nil
	case !prov.Builtin && !prov.Config.RequiresOpenAIAuth:
		return nil // a provider that takes no key, or a bearer token in the file
	case prov.Builtin && prov.ID != builtinOpenAI:
		return nil // Codex's local providers (ollama, lmstudio) take no key
	}
	if lookupEnv(env, "CODEX_API_KEY") != "" || lookupEnv(env, "OPENAI_API_KEY") != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, inv.Bin, "login", "status")
	cmd.Env, cmd.Dir = env, inv.Home
	cmd.Env = append(cmd.Env, "CODEX_HOME="+inv.Home, "NO_COLOR=1")
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return runs.NewRunError(runs.AgentCrashed, "`codex login status` failed: "+err.Error(), "")
	}
	return runs.NewRunError(runs.NotAuthenticated,
		fmt.Sprintf("Codex is not logged in (`codex login status`: %s)", clip.Text(lastLine(out), 200)),
		fmt.Sprintf("log in once with `CODEX_HOME=%s codex login` (or `codex login --with-api-key`), set OPENAI_API_KEY or CODEX_API_KEY for the gateway, "+
			"or configure a model provider in %s", inv.Home, config))
}

// lookupEnv returns the value of name in env ("KEY=value" entries).
func lookupEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// lastLine returns the last non-empty line of b: the verdict of `codex
// login status`, after any warning Codex prints first.
func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	return strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
}

// daemonDir is the directory Codex's sandbox makes for itself in the
// host's /tmp, named by the user (not $TMPDIR: verified with 0.171.0).
// Under the gateway's sandbox the host's /tmp is read-only, so when no
// run outside it had made the directory first, building every sandboxed
// command failed ("error building bubblewrap command: Read-only file
// system"), reported to the model only, and the run went on without its
// tools.
func daemonDir() string { return fmt.Sprintf("/tmp/codex-daemon-%d", os.Geteuid()) }

// ensureDaemonDir makes dir as Codex would, outside the sandbox, before
// the run starts. One that is there already must be the gateway user's
// own directory: in a /tmp every user can write to, another user's
// directory, or a link, would be theirs to control.
func ensureDaemonDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case ok && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not the gateway's %d", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s is open to other users (mode %o)", dir, fi.Mode().Perm())
	}
	return nil
}
