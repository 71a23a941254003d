package qwen

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// The static facts about the CLI.
const (
	// Name is the API's agent field.
	Name = "qwen"
	// VerifiedVersion is the CLI version the flags, output and failures
	// were verified against.
	VerifiedVersion = "0.24.4"
	// Package is the npm package of the CLI.
	Package = "@qwen-code/qwen-code"
	// InstallCommand installs the verified version.
	InstallCommand = "npm install -g " + Package + "@" + VerifiedVersion
)

// fixedEnv is set for every run.
//
//   - QWEN_CODE_SUPPRESS_YOLO_WARNING keeps a notice about yolo mode off
//     stderr, whose tail classifies failures.
//   - QWEN_CODE_LEGACY_MCP_BLOCKING makes session/new answer once the
//     run's MCP servers are connected and their tools registered: by
//     default discovery goes on in the background, and a first model
//     request that calls an MCP tool at once finds it "not found in
//     registry" (seen in the suite's mcp_tool case).
//   - NO_COLOR keeps the CLI's fatal errors on stderr free of escapes.
var fixedEnv = []string{
	"QWEN_CODE_SUPPRESS_YOLO_WARNING=1",
	"QWEN_CODE_LEGACY_MCP_BLOCKING=1",
	"NO_COLOR=1",
}

// credentialEnv are the CLI's key, endpoint and model variables for an
// OpenAI-compatible API (its "openai" auth type, which it picks by itself
// when OPENAI_API_KEY is set), passed through from the gateway's
// environment.
var credentialEnv = []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"}

// permissionDocs documents the modes sessionModes picks.
var permissionDocs = map[runs.Permission]string{
	runs.ReadOnly: "ACP mode plan: the CLI offers the model only its read tools; a shell command or an edit is refused " +
		"(with approvals: the same, nothing is asked)",
	runs.WorkspaceWrite: "ACP mode auto-edit: edits run without asking; a shell command asks, and without approvals is refused. " +
		"With approvals: mode default, every edit and shell command asks",
	runs.Full: "ACP mode yolo: every tool runs without asking. With approvals: mode default, every edit and shell command asks",
}

// Adapter is the Qwen Code adapter. It is stateless and safe for
// concurrent use.
type Adapter struct {
	// extraArgs are appended to the command line; tests use them to
	// play a CLI that rejects a flag.
	extraArgs []string
}

// New returns the Qwen Code adapter.
func New() *Adapter { return &Adapter{} }

// Name implements runs.Adapter.
func (*Adapter) Name() string { return Name }

// Describe implements runs.Adapter.
func (*Adapter) Describe() runs.Description {
	return adapterkit.Describe(runs.Description{
		Name:            Name,
		DisplayName:     "Qwen Code",
		DefaultBin:      "qwen",
		InstallCommand:  InstallCommand,
		VerifiedVersion: VerifiedVersion,
		VersionArgs:     []string{"--version"},
		Fields: []string{
			runs.FieldModel, runs.FieldTimeoutSeconds, runs.FieldCwd, runs.FieldPermission,
			runs.FieldInteractive, runs.FieldApprovals, runs.FieldMCPServers, runs.FieldAttachments,
			runs.FieldResumeSessionID, // ACP session/load (checkResume)
		},
		Refused: map[string]string{
			runs.FieldSystemPrompt: "qwen takes a system prompt only for a headless run (--system-prompt), not over ACP, where every run goes",
			runs.FieldEffort:       "qwen has no flag for thinking effort",
			runs.FieldMaxBudgetUSD: "qwen reports no cost",
			runs.FieldKeepSession:  "qwen resumes a session only in an interactive run (ACP session/load), whose session the gateway keeps",
		},
		// A message steered into a turn is handed to the CLI when it asks
		// for queued messages after each tool call; a deny lets the
		// model go on.
		Interaction: runs.Interaction{Steer: true, DenyEndsTurn: false, MessageAttachments: true, ResumesSession: true},
		Reports: runs.Reports{
			Usage:        runs.UsageExact,
			Cost:         runs.CostUnknown,
			ErrorClasses: runs.ErrorClassesHTTPStatus,
		},
	}, permissionDocs, credentialEnv)
}

// version reads `qwen --version`: "0.24.4".
var version = adapterkit.VersionParser{
	Command: "qwen --version",
	Pattern: regexp.MustCompile(`^v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$`),
}

// ParseVersion implements runs.Adapter.
func (*Adapter) ParseVersion(output []byte) (string, error) { return version.Parse(output) }

// PrefersSession implements runs.SessionPreferrer: every run goes over
// ACP, a one-shot run as a session of one turn. Headless stream-json
// reports no reasoning tokens (doc.go, Usage), ACP reports every model
// request's whole usage, so only there is a run's usage the bill.
func (*Adapter) PrefersSession(runs.Spec) bool { return true }

// Command implements runs.Adapter: `qwen --acp`. The prompt goes as
// turn 1's session/prompt, so there is no stdin payload. Values are
// passed as --flag=value so that one starting with "-" is not read as a
// flag.
func (a *Adapter) Command(inv runs.Invocation) (runs.Command, error) {
	s := inv.Spec
	if s.Prompt == "" {
		return runs.Command{}, runs.Invalid("prompt", "must not be empty")
	}
	perm := adapterkit.Permission(s.Permission)
	if _, ok := sessionModes[perm]; !ok {
		return runs.Command{}, runs.Invalid(runs.FieldPermission, fmt.Sprintf("unknown permission %q", perm))
	}
	if inv.Home == "" {
		return runs.Command{}, errors.New("qwen: the invocation has no home, where the settings PrepareHome wrote live")
	}
	if err := checkResume(s); err != nil {
		return runs.Command{}, err
	}
	if err := checkImages(inv, len(s.Attachments)+len(inv.Images)); err != nil {
		return runs.Command{}, err
	}
	for name, m := range s.MCPServers {
		if m.Remote() == (m.Command != "") {
			return runs.Command{}, runs.Invalid(runs.FieldMCPServers, fmt.Sprintf("server %q must have either a command or a url", name))
		}
	}
	args := []string{"--acp"}
	if s.Model != "" {
		args = append(args, "--model="+s.Model)
	}
	args = append(args, a.extraArgs...)
	return runs.Command{
		Args:    args,
		Env:     append([]string(nil), fixedEnv...),
		PassEnv: append([]string(nil), credentialEnv...),
		// session/new carries the MCP servers' env and header values.
		Secrets: acp.MCPSecrets(s.MCPServers),
	}, nil
}

// checkResume checks the session a run resumes: every run is an ACP
// session, which loads it (session/load) instead of starting one, a
// one-shot run as a session of one turn.
func checkResume(s runs.Spec) error {
	switch id := s.ResumeSessionID; {
	case id == "":
		return nil
	case strings.ContainsAny(id, "/\\ \t\n") || id == "." || id == "..":
		return runs.Invalid(runs.FieldResumeSessionID, "must be a qwen session id such as 0196f0c2-7e1a-7000-8000-000000000001")
	}
	return nil
}

// NewDecoder implements runs.Adapter: the ACP client of acp.go.
func (*Adapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	return newSession(inv)
}
