package copilot

import (
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// The static facts about the CLI.
const (
	// Name is the API's agent field.
	Name = "copilot"
	// VerifiedVersion is the CLI version the flags, output and failures
	// were verified against.
	VerifiedVersion = "1.0.102"
	// Package is the npm package of the CLI.
	Package = "@github/copilot"
	// InstallCommand installs the verified version.
	InstallCommand = "npm install -g " + Package + "@" + VerifiedVersion
)

// usageDir is where, under the CLI's home, each run's usage file is
// written (see UsagePath).
const usageDir = ".agentgate-usage"

// UsagePath is the file the run's CLI writes its token usage to
// (--usage-output-file): one per run, under the agent's home, named after
// the run. The decoder reads it and removes it when the run ends.
func UsagePath(inv runs.Invocation) string {
	return filepath.Join(inv.Home, usageDir, inv.RunID+".json")
}

// phoneHome are the flags that keep a run to its model endpoint: no
// update download and no client telemetry (without it, even a run that
// fails for want of a login looks up a telemetry host).
var phoneHome = []string{"--no-auto-update", "--disable-client-telemetry"}

// noPhoneHomeEnv repeats the update switch as the CLI's variable.
var noPhoneHomeEnv = []string{"COPILOT_AUTO_UPDATE=false", "NO_COLOR=1"}

// credentialEnv are the CLI's credential, endpoint and model variables,
// passed through from the gateway's environment: the GitHub tokens (in
// the CLI's order of precedence), offline mode, and the custom provider
// (BYOK) variables of `copilot help providers`.
var credentialEnv = []string{
	"COPILOT_GITHUB_TOKEN",
	"GH_TOKEN",
	"GITHUB_TOKEN",
	"COPILOT_OFFLINE",
	"COPILOT_PROVIDER_BASE_URL",
	"COPILOT_PROVIDER_TYPE",
	"COPILOT_PROVIDER_API_KEY",
	"COPILOT_PROVIDER_API_KEY_COMMAND",
	"COPILOT_PROVIDER_BEARER_TOKEN",
	"COPILOT_PROVIDER_WIRE_API",
	"COPILOT_PROVIDER_TRANSPORT",
	"COPILOT_PROVIDER_AZURE_API_VERSION",
	"COPILOT_PROVIDER_HEADERS",
	"COPILOT_PROVIDER_MODEL_ID",
	"COPILOT_PROVIDER_WIRE_MODEL",
	"COPILOT_PROVIDER_MAX_PROMPT_TOKENS",
	"COPILOT_PROVIDER_MAX_OUTPUT_TOKENS",
	"COPILOT_MODEL",
}

// efforts are the values --reasoning-effort accepts.
var efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// permissionArgs maps permission levels onto the CLI's flags. See doc.go
// for what each was seen to allow.
var permissionArgs = map[runs.Permission][]string{
	runs.ReadOnly:       {"--deny-tool=write"},
	runs.WorkspaceWrite: {"--allow-all-tools"},
	runs.Full:           {"--allow-all"},
}

var permissionDocs = map[runs.Permission]string{
	runs.ReadOnly: "--deny-tool=write, no tool pre-approved: with nobody to approve, the CLI runs only what it classes as " +
		"read-only (ls, git status, viewing files in the working directory); commands that write (touch, redirections), " +
		"the create and edit tools, and paths outside the working directory are denied; in an interactive run every call the " +
		"CLI asks for (every shell command, ls included) is refused, which ends the turn",
	runs.WorkspaceWrite: "--allow-all-tools: every tool runs without asking, but the CLI's path check denies commands " +
		"and file edits naming a path outside the working directory and the temp directory; the check reads the " +
		"command line and is no sandbox (sh -c '…' gets past it); with approvals no tool is pre-approved: every shell and edit " +
		"call is asked, a path outside the working directory included, and runs once allowed; view, glob and grep run unasked",
	runs.Full: "--allow-all (--allow-all-tools --allow-all-paths --allow-all-urls): every tool runs on any path without asking; " +
		"with approvals --allow-all-paths --allow-all-urls, and every shell and edit call is asked",
}

// Adapter is the GitHub Copilot CLI adapter. It is stateless and safe for
// concurrent use.
type Adapter struct {
	// extraArgs are appended to the command line; tests use them to play
	// a CLI that rejects a flag.
	extraArgs []string
}

// New returns the GitHub Copilot CLI adapter.
func New() *Adapter { return &Adapter{} }

// Name implements runs.Adapter.
func (*Adapter) Name() string { return Name }

// Describe implements runs.Adapter.
func (*Adapter) Describe() runs.Description {
	return adapterkit.Describe(runs.Description{
		Name:            Name,
		DisplayName:     "GitHub Copilot CLI",
		DefaultBin:      "copilot",
		InstallCommand:  InstallCommand,
		VerifiedVersion: VerifiedVersion,
		VersionArgs:     []string{"--version"},
		Fields: []string{
			runs.FieldModel, runs.FieldEffort, runs.FieldResumeSessionID, runs.FieldTimeoutSeconds, runs.FieldCwd,
			runs.FieldPermission, runs.FieldInteractive, runs.FieldApprovals, runs.FieldMCPServers, runs.FieldAttachments,
		},
		Refused: map[string]string{
			runs.FieldSystemPrompt: "copilot has no system prompt option; it reads instructions from AGENTS.md and .github/copilot-instructions.md in the working directory",
			runs.FieldMaxBudgetUSD: "copilot limits spending in AI credits (--max-ai-credits), not dollars, and reports no cost",
		},
		// A second session/prompt cancels the running one: no steer. A
		// reject_once ends the turn. session/cancel stops the running
		// command.
		Interaction: runs.Interaction{Steer: false, DenyEndsTurn: true, MessageAttachments: true, ResumesSession: true},
	}, permissionDocs, credentialEnv)
}

// version reads the first line of `copilot --version`: "GitHub Copilot
// CLI 1.0.102." (the CLI ends it with a full stop, and adds a line about
// `copilot update`).
var version = adapterkit.VersionParser{
	Command:       "copilot --version",
	Pattern:       regexp.MustCompile(`^GitHub Copilot CLI (\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\.?$`),
	FirstLineOnly: true,
}

// ParseVersion implements runs.Adapter.
func (*Adapter) ParseVersion(output []byte) (string, error) { return version.Parse(output) }

// Command implements runs.Adapter. The prompt goes on stdin, which the CLI
// reads as the prompt when it is not a terminal and -p is absent: its size
// is not bounded by the kernel's argument limit, and a prompt starting
// with "-" is not read as a flag. A new run's session is named after the
// run (--session-id), so its id is known from the start.
func (a *Adapter) Command(inv runs.Invocation) (runs.Command, error) {
	s := inv.Spec
	if s.Prompt == "" {
		return runs.Command{}, runs.Invalid("prompt", "must not be empty")
	}
	if inv.Home == "" || !filepath.IsAbs(inv.Home) {
		return runs.Command{}, fmt.Errorf("copilot: the agent's home %q is not an absolute path", inv.Home)
	}
	perm := adapterkit.Permission(s.Permission)
	pargs, ok := permissionArgs[perm]
	if !ok {
		return runs.Command{}, runs.Invalid(runs.FieldPermission, fmt.Sprintf("unknown permission %q", perm))
	}
	if s.Session() {
		return a.sessionCommand(inv, perm)
	}
	session := "--session-id=" + inv.RunID
	if s.ResumeSessionID != "" {
		session = "--resume=" + s.ResumeSessionID // keeps the session's id
	}
	args := []string{"--output-format=json", session, "--usage-output-file=" + UsagePath(inv)}
	args = append(args, phoneHome...)
	if s.Model != "" {
		args = append(args, "--model="+s.Model)
	}
	if s.Effort != "" {
		if !slices.Contains(efforts, s.Effort) {
			return runs.Command{}, runs.Unsupported(Name, runs.FieldEffort, "copilot accepts "+strings.Join(efforts, ", "))
		}
		args = append(args, "--reasoning-effort="+s.Effort)
	}
	args = append(args, pargs...)
	margs, err := mcpArgs(s.MCPServers, perm == runs.ReadOnly)
	if err != nil {
		return runs.Command{}, err
	}
	args = append(args, margs...)
	iargs, err := attachmentArgs(inv.Images)
	if err != nil {
		return runs.Command{}, err
	}
	args = append(args, iargs...)
	args = append(args, a.extraArgs...)
	return runs.Command{
		Args:    args,
		Env:     append([]string(nil), noPhoneHomeEnv...),
		PassEnv: append([]string(nil), credentialEnv...),
		Stdin:   []byte(s.Prompt),
		Secrets: mcpSecrets(s.MCPServers),
	}, nil
}

// attachmentArgs passes each image with the prompt: --attachment=<path>,
// a file the supervisor wrote under the run's own TMPDIR. The CLI sends
// the model the text "Image file at path <path>" and the image as a data
// URL, and removes a file under its TMPDIR once it has read it.
func attachmentArgs(images []runs.Image) ([]string, error) {
	var args []string
	for i, im := range images {
		if !filepath.IsAbs(im.Path) {
			return nil, fmt.Errorf("copilot: attachment %d is not at an absolute path (%q)", i, im.Path)
		}
		args = append(args, "--attachment="+im.Path)
	}
	return args, nil
}

// NewDecoder implements runs.Adapter. A run whose Spec.Session() gets
// the ACP client (session.go).
func (*Adapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	if inv.Spec.Session() {
		return newSessionDecoder(inv)
	}
	return newDecoder(inv, inv.FilesOrNone())
}

// ResolveBinary implements runs.BinaryResolver. The npm package's copilot
// command is a Node launcher (npm-loader.js) that runs the native binary
// of the platform package with spawnSync; killed by SIGKILL, it leaves
// that binary, and the command it runs, going. The gateway therefore runs
// the native binary, which also starts a second faster and without the
// launcher's 40 MB of Node.
func (*Adapter) ResolveBinary(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if adapterkit.IsELF(real) || filepath.Base(real) != "npm-loader.js" {
		return real, nil
	}
	scope := filepath.Dir(filepath.Dir(real)) // …/node_modules/@github
	pkg := filepath.Dir(real)                 // …/@github/copilot
	var candidates []string
	for _, plat := range platforms() {
		candidates = append(candidates,
			filepath.Join(scope, "copilot-"+plat, "copilot"),                          // hoisted
			filepath.Join(pkg, "node_modules", "@github", "copilot-"+plat, "copilot"), // nested under the package
		)
	}
	for _, c := range candidates {
		if adapterkit.IsELF(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s is the Node launcher and its native binary is not installed (looked for %s)",
		path, strings.Join(candidates, ", "))
}

// platforms names the platform packages that may hold the native binary
// on this machine. npm installs only the one whose libc matches, glibc's
// or musl's.
func platforms() []string {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" {
		return nil
	}
	return []string{"linux-" + arch, "linuxmusl-" + arch}
}
