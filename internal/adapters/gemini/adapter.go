package gemini

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// The static facts about the CLI.
const (
	// Name is the API's agent field.
	Name = "gemini"
	// VerifiedVersion is the CLI version the flags, output and failures
	// were verified against.
	VerifiedVersion = "0.61.0"
	// Package is the npm package of the CLI.
	Package = "@google/gemini-cli"
	// InstallCommand installs the verified version.
	InstallCommand = "npm install -g " + Package + "@" + VerifiedVersion
)

// DefaultModel is the model of a run that names none, when the gateway's
// environment has no GEMINI_MODEL either. It is the CLI's own default
// model in 0.61.0 (DEFAULT_GEMINI_MODEL), the generally available Pro
// model, and PrepareHome writes it as model.name into the settings. The
// CLI must always have a concrete model: left to "auto", it sends every
// prompt to a routing model first, which has a retry loop of its own
// (about a minute of backoff per failure) that maxAttempts does not bound.
const DefaultModel = "gemini-2.5-pro"

// MaxAttempts is general.maxAttempts in the settings PrepareHome writes:
// the attempts of each model call, the first included. The CLI's default
// (10, with backoff from 5 s growing to 30 s) turns a persistent 429 or
// 5xx into minutes; two ride out a blip and fail in about 6 s. 4xx other
// than 429 are never retried.
const MaxAttempts = 2

// fixedEnv is set for every run.
//
//   - GEMINI_CLI_TRUST_WORKSPACE trusts the run's directory; without it
//     the CLI exits 55 before doing anything.
//   - GEMINI_CLI_NO_RELAUNCH keeps the CLI to one process: otherwise its
//     launcher re-executes itself with a larger heap and ignores SIGTERM
//     and SIGINT, and SIGKILLed it orphans the child.
//   - GEMINI_TELEMETRY_ENABLED=false backs up the settings' telemetry
//     switch (the variable wins over the file); usage statistics and
//     update checks have no variable and are off in the settings.
//   - NO_COLOR keeps the CLI's fatal errors on stderr free of escapes.
var fixedEnv = []string{
	"GEMINI_CLI_TRUST_WORKSPACE=true",
	"GEMINI_CLI_NO_RELAUNCH=true",
	"GEMINI_TELEMETRY_ENABLED=false",
	"NO_COLOR=1",
}

// credentialEnv are the CLI's credential, endpoint and model variables,
// passed through from the gateway's environment. Each was checked against
// the mock: GEMINI_API_KEY is sent as x-goog-api-key, the base URL
// receives every request, and GEMINI_MODEL is the model of a run that
// names none (the settings' model.name comes after it). GOOGLE_API_KEY is
// the key of the "vertex-ai" auth type (express mode), for a home whose
// settings select it; with "gemini-api-key" the CLI ignores it (and the
// SDK's warning "Using GOOGLE_API_KEY" is wrong: GEMINI_API_KEY is sent).
// GEMINI_MODEL is beyond the list: it is the CLI's own variable
// for the default model, the one way a gateway operator picks it without
// editing the home.
var credentialEnv = []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_MODEL"}

// Permission levels as approval modes. See doc.go for what each allows.
var approvalModes = map[runs.Permission]string{
	runs.ReadOnly:       "default",
	runs.WorkspaceWrite: "auto_edit",
	runs.Full:           "yolo",
}

var permissionDocs = map[runs.Permission]string{
	runs.ReadOnly: "--approval-mode default: headless, the CLI offers the model only its read tools (read_file, " +
		"list_directory, glob, grep_search, google_web_search, ...); run_shell_command, write_file, replace and web_fetch " +
		"are not registered, and a call to them fails as tool_not_registered",
	runs.WorkspaceWrite: "--approval-mode auto_edit with a policy allowing run_shell_command: write_file and replace run " +
		"without asking and only inside the workspace (the CLI's allowed-path check); shell commands run without asking " +
		"and are not confined to the workspace",
	runs.Full: "--approval-mode yolo: every tool runs without asking, edits anywhere, plus background processes, " +
		"skills and MCP tools",
}

// Adapter is the Gemini CLI adapter. It is stateless and safe for
// concurrent use.
type Adapter struct {
	// extraArgs are appended to the command line; tests use them to play
	// a CLI that rejects a flag.
	extraArgs []string
}

// New returns the Gemini CLI adapter.
func New() *Adapter { return &Adapter{} }

// Name implements runs.Adapter.
func (*Adapter) Name() string { return Name }

// Describe implements runs.Adapter.
func (*Adapter) Describe() runs.Description {
	return adapterkit.Describe(runs.Description{
		Name:            Name,
		DisplayName:     "Gemini CLI",
		DefaultBin:      "gemini",
		InstallCommand:  InstallCommand,
		VerifiedVersion: VerifiedVersion,
		VersionArgs:     []string{"--version"},
		Fields: []string{
			runs.FieldModel, runs.FieldTimeoutSeconds, runs.FieldResumeSessionID, runs.FieldKeepSession,
			runs.FieldCwd, runs.FieldPermission, runs.FieldInteractive, runs.FieldApprovals,
			runs.FieldMCPServers, runs.FieldAttachments,
		},
		Refused: map[string]string{
			runs.FieldSystemPrompt: "gemini takes no system prompt for one run (GEMINI_SYSTEM_MD replaces its whole prompt, tool instructions included, from a file)",
			runs.FieldEffort:       "gemini has no flag for thinking effort",
			runs.FieldMaxBudgetUSD: "gemini takes no spending limit and reports no cost",
		},
		// A second session/prompt cancels the running turn (no steer);
		// a deny lets the model go on; session/cancel stops the tool.
		Interaction: runs.Interaction{Steer: false, DenyEndsTurn: false, MessageAttachments: true},
	}, permissionDocs, credentialEnv)
}

// version reads `gemini --version`: "0.61.0".
var version = adapterkit.VersionParser{
	Command: "gemini --version",
	Pattern: regexp.MustCompile(`^(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$`),
}

// ParseVersion implements runs.Adapter.
func (*Adapter) ParseVersion(output []byte) (string, error) { return version.Parse(output) }

// uuidRE matches a UUID in its canonical text form, any case.
var uuidRE = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

// Command implements runs.Adapter. The prompt goes on stdin, which the CLI
// reads when it is not a terminal and puts before the (empty) -p text, so
// its size is not bounded by the kernel's argument limit and a prompt
// starting with "-" is not read as a flag. Values are passed as
// --flag=value for the same reason.
func (a *Adapter) Command(inv runs.Invocation) (runs.Command, error) {
	s := inv.Spec
	if s.Prompt == "" {
		return runs.Command{}, runs.Invalid("prompt", "must not be empty")
	}
	perm := adapterkit.Permission(s.Permission)
	mode, ok := approvalModes[perm]
	if !ok {
		return runs.Command{}, runs.Invalid(runs.FieldPermission, fmt.Sprintf("unknown permission %q", perm))
	}
	if inv.Home == "" {
		return runs.Command{}, errors.New("gemini: the invocation has no home, where the settings PrepareHome wrote live")
	}
	if overACP(s) {
		return a.sessionCommand(inv, perm)
	}

	args := []string{"--output-format=stream-json", "-p", ""}
	// A new run keeps the session id the CLI draws (a random UUID), not
	// the run id: the CLI names a session's file after the minute and the
	// id's first 8 characters, which for the gateway's UUIDv7 run ids are
	// the same for every run within about a minute, so two sessions in
	// one directory would share a file. The resumed session keeps its id.
	if s.ResumeSessionID != "" {
		if !uuidRE.MatchString(s.ResumeSessionID) {
			return runs.Command{}, runs.Invalid(runs.FieldResumeSessionID, "must be a UUID such as 0196f0c2-7e1a-7000-8000-000000000001")
		}
		args = append(args, "--resume="+s.ResumeSessionID)
	}
	// Without a model on the command line the CLI takes GEMINI_MODEL,
	// then the settings' model.name, which PrepareHome sets to
	// DefaultModel: never "auto" and its router.
	if s.Model != "" {
		args = append(args, "--model="+s.Model)
	}
	args = append(args, "--approval-mode="+mode)
	if perm == runs.WorkspaceWrite {
		args = append(args, "--policy="+policyPath(inv.Home))
	}
	args = append(args, a.extraArgs...)
	return runs.Command{
		Args:    args,
		Env:     append([]string(nil), fixedEnv...),
		PassEnv: append([]string(nil), credentialEnv...),
		Stdin:   []byte(s.Prompt),
	}, nil
}

// NewDecoder implements runs.Adapter.
// A run whose Spec.Session() gets the ACP client (acp.go).
func (a *Adapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	fs := inv.FilesOrNone()
	if overACP(inv.Spec) {
		return acp.NewDecoder(inv, sessionProfile(inv, fs))
	}
	d := newDecoder(inv)
	if inv.Spec.ResumeSessionID == "" {
		// A resumed session's recording holds the runs before this one
		// too, and 0.61.0 may record the resumed run elsewhere than the
		// file found first: its usage comes from the result line alone.
		d.log = newChatLog(fs, inv.Home, inv.Dir)
	}
	return d
}

// PrefersSession implements runs.SessionPreferrer: a run given MCP
// servers or images runs over ACP, even one-shot. -p takes an MCP server
// only from settings.json, in the home every run shares, and an image
// only as an @path inside the workspace; ACP takes both per session
// (session/new's mcpServers, image blocks in session/prompt).
func (*Adapter) PrefersSession(s runs.Spec) bool {
	return len(s.MCPServers) > 0 || len(s.Attachments) > 0
}

// overACP reports whether a run with spec s runs `gemini --acp`: a
// Session run, or one PrefersSession sends there.
func overACP(s runs.Spec) bool {
	return s.Session() || len(s.MCPServers) > 0 || len(s.Attachments) > 0
}

// policyPath is the policy file PrepareHome writes for workspace_write.
func policyPath(home string) string {
	return filepath.Join(home, ".gemini", "agentgate-workspace-write.toml")
}
