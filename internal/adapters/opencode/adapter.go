package opencode

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
	Name = "opencode"
	// VerifiedVersion is the CLI version the flags, output and failures
	// were verified against.
	VerifiedVersion = "1.18.33"
	// Package is the npm package of the CLI.
	Package = "opencode-ai"
	// InstallCommand installs the verified version. The package's install
	// script links the platform's native binary into place; without it
	// (npm --ignore-scripts, pnpm) ResolveBinary finds that binary.
	InstallCommand = "npm install -g " + Package + "@" + VerifiedVersion
)

// phoneHome are the settings that keep a run on its model endpoint: no
// update check, no session sharing, no fetch of the models.dev catalogue
// (the bundled copy is used) and no download of language servers. They
// are OpenCode's own environment switches, so that the operator's
// configuration, wherever it is, stays as written.
var phoneHome = []string{
	"OPENCODE_DISABLE_AUTOUPDATE=1",
	"OPENCODE_DISABLE_SHARE=1",
	"OPENCODE_DISABLE_MODELS_FETCH=1",
	"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
}

// credentialEnv are the variables always passed through from the
// gateway's environment: OpenCode's two ways of being given a
// configuration, and the key variables of its two most used built-in
// providers. A variable a configuration names as {env:NAME} is passed as
// well when the adapter can read that configuration (see homeEnvRefs).
var credentialEnv = []string{
	"OPENCODE_CONFIG_CONTENT",
	"OPENCODE_CONFIG",
	"OPENAI_API_KEY",
	"ANTHROPIC_API_KEY",
}

// permissionEnv is OPENCODE_PERMISSION per level: OpenCode merges it into
// the permission table after every configuration file and
// OPENCODE_CONFIG_CONTENT, so the run's level overrides what the
// operator's configuration says about the same permissions, and leaves
// the rest alone.
var permissionEnv = map[runs.Permission]string{
	runs.ReadOnly:       `{"edit":"deny","bash":"deny","external_directory":"deny"}`,
	runs.WorkspaceWrite: `{"edit":"allow","bash":"allow","external_directory":"deny"}`,
	runs.Full:           `{"*":"allow"}`,
}

// permissionDocs documents permissionEnv for Describe.
var permissionDocs = map[runs.Permission]string{
	runs.ReadOnly: `OPENCODE_PERMISSION={"edit":"deny","bash":"deny","external_directory":"deny"}: OpenCode offers the model ` +
		`no bash, edit or write tool (a call of one fails as unavailable); read, glob and grep stay, confined to the run's directory, ` +
		`and webfetch. With approvals ask the same, and every other tool (MCP, task) asks`,
	runs.WorkspaceWrite: `OPENCODE_PERMISSION={"edit":"allow","bash":"allow","external_directory":"deny"}: edits and shell commands run ` +
		`without asking; a file tool or a command whose arguments OpenCode sees reach outside the run's directory is refused; ` +
		`there is no sandbox, so a command can still write elsewhere. With approvals ask: bash, edit/write, task and MCP tools ask, ` +
		`the read-only tools run unasked, outside directories are still refused`,
	runs.Full: `OPENCODE_PERMISSION={"*":"allow"} and --auto: every tool runs without asking, anywhere. With approvals ask: ` +
		`every tool but the read-only ones asks, anywhere`,
}

// Adapter is the OpenCode adapter. It is stateless and safe for
// concurrent use.
type Adapter struct {
	// extraArgs are appended to the command line; tests use them to
	// play a CLI that rejects a flag.
	extraArgs []string
	// titles lets OpenCode generate the session's title with a model
	// request of its own, which it does not report; tests use it to show
	// why runs do not.
	titles bool
	// records opens what a Session run's decoder reads OpenCode's store
	// through, given the agent's home; nil is the home's database.
	// Tests give a store in memory.
	records func(home string) records
	// getenv reads the gateway's environment, where the operator's
	// OPENCODE_CONFIG_CONTENT and OPENCODE_CONFIG are: Command reads the
	// model's configuration there before it accepts images. Nil: only
	// the configuration files in the agent's home are seen (Preflight
	// checks the rest with the run's environment).
	getenv func(string) string
}

// Option configures the adapter.
type Option func(*Adapter)

// WithGetenv gives the adapter the gateway's environment, so that it
// checks the operator's OPENCODE_CONFIG_CONTENT and OPENCODE_CONFIG, as
// well as the home's files, for a model that takes images before a run
// or a message with images is accepted.
func WithGetenv(getenv func(string) string) Option {
	return func(a *Adapter) { a.getenv = getenv }
}

// New returns the OpenCode adapter.
func New(opts ...Option) *Adapter {
	a := &Adapter{}
	for _, o := range opts {
		o(a)
	}
	return a
}

// gatewayConfigEnv is the part of the gateway's environment that holds
// OpenCode's configuration, as configSources reads it.
func (a *Adapter) gatewayConfigEnv() []string {
	if a.getenv == nil {
		return nil
	}
	var env []string
	for _, name := range []string{"OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT"} {
		if v := a.getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// checkImages refuses images the run's model would not get.
func (a *Adapter) checkImages(inv runs.Invocation) error {
	if len(inv.Spec.Attachments) == 0 && len(inv.Images) == 0 {
		return nil
	}
	if err := imageSupport(configSources(inv.FilesOrNone(), inv.Home, a.gatewayConfigEnv()), inv.Spec.Model); err != nil {
		return refuseImages(err)
	}
	return nil
}

// Name implements runs.Adapter.
func (*Adapter) Name() string { return Name }

// Describe implements runs.Adapter.
func (*Adapter) Describe() runs.Description {
	return adapterkit.Describe(runs.Description{
		Name:            Name,
		DisplayName:     "OpenCode",
		DefaultBin:      "opencode",
		InstallCommand:  InstallCommand,
		VerifiedVersion: VerifiedVersion,
		VersionArgs:     []string{"--version"},
		Fields: []string{
			runs.FieldModel, runs.FieldEffort, runs.FieldTimeoutSeconds, runs.FieldResumeSessionID,
			runs.FieldKeepSession, runs.FieldCwd, runs.FieldPermission, runs.FieldInteractive, runs.FieldApprovals,
			runs.FieldMCPServers, runs.FieldAttachments,
		},
		Refused: map[string]string{
			runs.FieldSystemPrompt: "opencode run takes no system prompt; an agent's prompt lives in OpenCode's configuration",
		},
		// A second session/prompt joins the running turn; a rejected
		// permission ends the turn with no further model request; a
		// session/cancel stops the running tool.
		Interaction: runs.Interaction{Steer: true, DenyEndsTurn: true, MessageAttachments: true, ResumesSession: true},
		ReportsCost: true,
	}, permissionDocs, credentialEnv, "variables the configuration in the agent's home names as {env:NAME}")
}

// version reads `opencode --version`: "1.18.33".
var version = adapterkit.VersionParser{
	Command: "opencode --version",
	Pattern: regexp.MustCompile(`^v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$`),
}

// ParseVersion implements runs.Adapter.
func (*Adapter) ParseVersion(output []byte) (string, error) { return version.Parse(output) }

// NewDecoder implements runs.Adapter.
func (a *Adapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	if a.sessionRun(inv.Spec) {
		var rec records = sqliteStore{files: inv.FilesOrNone(), path: storePath(inv.Home)}
		if a.records != nil {
			rec = a.records(inv.Home)
		}
		return newSessionDecoder(inv, rec, a.checkImages)
	}
	return newDecoder(inv)
}

// Command implements runs.Adapter. The prompt goes on stdin, which `run`
// reads when it is not a terminal, so that it arrives as written: given
// as an argument, OpenCode sends it to the model wrapped in quotes.
// Values are passed as --flag=value so that one starting with "-" is not
// read as a flag.
func (a *Adapter) Command(inv runs.Invocation) (runs.Command, error) {
	s := inv.Spec
	if s.Prompt == "" {
		return runs.Command{}, runs.Invalid("prompt", "must not be empty")
	}
	perm := adapterkit.Permission(s.Permission)
	permission, ok := permissionEnv[perm]
	if !ok {
		return runs.Command{}, runs.Invalid(runs.FieldPermission, fmt.Sprintf("unknown permission %q", perm))
	}
	if err := a.checkImages(inv); err != nil {
		return runs.Command{}, err
	}
	if a.sessionRun(s) {
		return a.sessionCommand(inv, perm)
	}
	// --thinking prints the reasoning parts; --pure loads no external
	// plugin, which would be installed from npm first.
	args := []string{"run", "--format=json", "--pure", "--thinking"}
	if !a.titles {
		// A title keeps OpenCode from asking the model for one: that
		// request is billed, and no output reports it. With an empty
		// value OpenCode takes the prompt's first 50 characters.
		args = append(args, "--title=")
	}
	if s.ResumeSessionID != "" {
		if strings.TrimSpace(s.ResumeSessionID) != s.ResumeSessionID || strings.ContainsAny(s.ResumeSessionID, " \t\r\n") {
			return runs.Command{}, runs.Invalid(runs.FieldResumeSessionID, "must be an OpenCode session id such as ses_dd68ef5c8ffejlVfgwiGwYTdi9")
		}
		args = append(args, "--session="+s.ResumeSessionID)
	}
	if s.Model != "" {
		args = append(args, "--model="+s.Model)
	}
	if s.Effort != "" {
		args = append(args, "--variant="+s.Effort)
	}
	if perm == runs.Full {
		args = append(args, "--auto")
	}
	args = append(args, a.extraArgs...)

	pass := append([]string(nil), credentialEnv...)
	// A configuration that cannot be read is OpenCode's to report, in
	// its own words, when it starts.
	for _, name := range homeEnvRefs(inv.FilesOrNone(), inv.Home) {
		if !slices.Contains(pass, name) {
			pass = append(pass, name)
		}
	}
	env := append([]string(nil), phoneHome...)
	env = append(env, "OPENCODE_PERMISSION="+permission)
	return runs.Command{
		Args:    args,
		Env:     env,
		PassEnv: pass,
		Stdin:   []byte(s.Prompt),
		// SIGTERM (the default) ends OpenCode at once; SIGINT does not
		// stop a running tool (verified: the run went on until the tool
		// finished). A tool's process runs in a session of its own and
		// outlives OpenCode; the supervisor's tree kill takes it.
	}, nil
}

// ResolveBinary implements runs.BinaryResolver. The npm package's
// bin/opencode.exe is replaced by its install script with a hard link to
// the native binary of the platform's package; until then it is a shell
// stub that only prints "postinstall script was not run" and exits 1.
// So a native binary is returned as is, and the stub is mapped to the
// platform package's binary beside it.
func (*Adapter) ResolveBinary(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if adapterkit.IsELF(real) {
		return real, nil
	}
	pkg := filepath.Dir(filepath.Dir(real)) // …/node_modules/opencode-ai
	if filepath.Base(pkg) != Package {
		return real, nil // not the npm package: whatever it is, run it
	}
	var candidates []string
	for _, p := range platformPackages() {
		candidates = append(candidates,
			filepath.Join(filepath.Dir(pkg), p, "bin", "opencode"),   // hoisted beside opencode-ai
			filepath.Join(pkg, "node_modules", p, "bin", "opencode")) // nested under it
	}
	for _, c := range candidates {
		if adapterkit.IsELF(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s is the npm package's stub and no native binary is installed (looked for %s)",
		path, strings.Join(candidates, ", "))
}

// platformPackages names the npm packages that carry a native binary for
// this machine, in the order the package's install script prefers them
// on a glibc system with AVX2.
func platformPackages() []string {
	switch runtime.GOARCH {
	case "amd64":
		return []string{"opencode-linux-x64", "opencode-linux-x64-baseline", "opencode-linux-x64-musl", "opencode-linux-x64-baseline-musl"}
	case "arm64":
		return []string{"opencode-linux-arm64", "opencode-linux-arm64-musl"}
	}
	return nil
}
