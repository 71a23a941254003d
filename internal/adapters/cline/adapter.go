package cline

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"unicode"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// The static facts about the CLI.
const (
	// Name is the API's agent field.
	Name = "cline"
	// VerifiedVersion is the CLI version the flags, output and failures
	// were verified against.
	VerifiedVersion = "3.0.65"
	// Package is the npm package of the CLI.
	Package = "cline"
	// InstallCommand installs the verified version.
	InstallCommand = "npm install -g " + Package + "@" + VerifiedVersion
)

// The gateway's variables that configure Cline's provider. Cline has
// none for its endpoint or model: PrepareHome writes them into
// providers.json when BaseURLEnv is set. KeyEnv is Cline's own.
const (
	// KeyEnv is the provider's API key. `cline --acp` sends it in place
	// of providers.json's key; for `cline --json`, which reads only the
	// file, Preflight writes it there.
	KeyEnv = "CLINE_API_KEY"
	// BaseURLEnv is an OpenAI-compatible endpoint's base URL (…/v1).
	BaseURLEnv = "CLINE_BASE_URL"
	// ModelEnv is the model of a run that names none.
	ModelEnv = "CLINE_MODEL"
)

// fixedEnv is set for every run.
//
//   - CLINE_SESSION_BACKEND_MODE=local keeps the session in the CLI's own
//     process: otherwise the first run starts a hub daemon
//     (`cline --cline-hub-daemon`, parent pid 1) that outlives it.
//   - CLINE_NO_AUTO_UPDATE=1 backs up autoUpdateEnabled:false in the
//     global settings.
var fixedEnv = []string{
	"CLINE_SESSION_BACKEND_MODE=local",
	"CLINE_NO_AUTO_UPDATE=1",
}

// credentialEnv are passed through from the gateway's environment.
var credentialEnv = []string{KeyEnv}

var permissionDocs = map[runs.Permission]string{
	runs.ReadOnly: "--plan (one-shot) or ACP mode plan: Cline explores and plans without its edit and command tools; " +
		"there is no sandbox of Cline's own",
	runs.WorkspaceWrite: "act mode with every tool auto-approved (Cline's default headless): edits and commands run without asking; " +
		"Cline does not confine them to the workspace, the gateway's sandbox does. With approvals ask every tool call asks",
	runs.Full: "as workspace_write: Cline has no wider level",
}

// Adapter is the Cline adapter. It is stateless and safe for concurrent
// use.
type Adapter struct {
	// getenv reads the gateway's environment, for PrepareHome's
	// providers.json; nil: the home's file is the operator's.
	getenv func(string) string
}

// Option configures the adapter.
type Option func(*Adapter)

// WithGetenv gives the adapter the gateway's environment, from which
// PrepareHome writes providers.json when CLINE_BASE_URL is set.
func WithGetenv(getenv func(string) string) Option {
	return func(a *Adapter) { a.getenv = getenv }
}

// New returns the Cline adapter.
func New(opts ...Option) *Adapter {
	a := &Adapter{}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Name implements runs.Adapter.
func (*Adapter) Name() string { return Name }

// Describe implements runs.Adapter.
func (*Adapter) Describe() runs.Description {
	return adapterkit.Describe(runs.Description{
		Name:            Name,
		DisplayName:     "Cline",
		DefaultBin:      "cline",
		InstallCommand:  InstallCommand,
		VerifiedVersion: VerifiedVersion,
		VersionArgs:     []string{"--version"},
		Fields: []string{
			runs.FieldModel, runs.FieldTimeoutSeconds, runs.FieldCwd, runs.FieldPermission,
			runs.FieldInteractive, runs.FieldApprovals, runs.FieldMCPServers, runs.FieldAttachments,
			runs.FieldResumeSessionID, // over ACP only (PrefersSession)
		},
		Refused: map[string]string{
			runs.FieldSystemPrompt: "the gateway does not pass cline's --system, which replaces its whole prompt, tool instructions included",
			runs.FieldEffort:       "cline's --thinking is not verified with the gateway",
			runs.FieldMaxBudgetUSD: "cline reports a cost of 0 for an OpenAI-compatible model",
		},
		// A session/prompt during a turn is not verified to join it: no
		// steer. A rejected call lets the model go on.
		Interaction: runs.Interaction{Steer: false, DenyEndsTurn: false, ResumesSession: true},
		Reports: runs.Reports{
			Usage: runs.UsageExact, Cost: runs.CostUnknown, ErrorClasses: runs.ErrorClassesHTTPStatus,
		},
	}, permissionDocs, credentialEnv, BaseURLEnv+" and "+ModelEnv+" (read at start into providers.json)")
}

// version reads `cline --version`: "3.0.65".
var version = adapterkit.VersionParser{
	Command: "cline --version",
	Pattern: regexp.MustCompile(`^v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$`),
}

// ParseVersion implements runs.Adapter.
func (*Adapter) ParseVersion(output []byte) (string, error) { return version.Parse(output) }

// NewDecoder implements runs.Adapter.
func (a *Adapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	if overACP(inv.Spec) {
		return newSessionDecoder(inv)
	}
	return newDecoder(inv)
}

// Command implements runs.Adapter. The prompt is the positional
// argument after "--", so that one starting with "-" is not read as a
// flag: `cline --json` reads stdin only when no prompt is given. Images
// are mentions of their files in the prompt, and MCP servers a settings
// file of the run's own, which Preflight writes (mcp.go).
func (a *Adapter) Command(inv runs.Invocation) (runs.Command, error) {
	s := inv.Spec
	if s.Prompt == "" {
		return runs.Command{}, runs.Invalid("prompt", "must not be empty")
	}
	perm := adapterkit.Permission(s.Permission)
	if _, ok := permissionDocs[perm]; !ok {
		return runs.Command{}, runs.Invalid(runs.FieldPermission, fmt.Sprintf("unknown permission %q", perm))
	}
	if err := checkResume(s); err != nil {
		return runs.Command{}, err
	}
	for name, m := range s.MCPServers {
		if m.Remote() == (m.Command != "") {
			return runs.Command{}, runs.Invalid(runs.FieldMCPServers, fmt.Sprintf("server %q must have either a command or a url", name))
		}
	}
	if len(s.MCPServers) > 0 && inv.Home == "" {
		return runs.Command{}, errors.New("cline: the invocation has no home, where the run's MCP settings go")
	}
	if overACP(s) {
		if len(s.Attachments)+len(inv.Images) > 0 {
			return runs.Command{}, runs.Unsupported(Name, runs.FieldAttachments, sessionImagesRefusal)
		}
		return a.sessionCommand(inv)
	}
	args := []string{"--json"}
	if s.Model != "" {
		args = append(args, "--model="+s.Model)
	}
	if perm == runs.ReadOnly {
		args = append(args, "--plan")
	}
	if err := checkImagePaths(inv.Images); err != nil {
		return runs.Command{}, err
	}
	args = append(args, "--", promptArg(imageMentions(s.Prompt, inv.Images)))
	return runs.Command{
		Args: args,
		Env:  append(append([]string(nil), fixedEnv...), mcpEnv(inv)...),
		// The MCP settings file carries the servers' env and header
		// values.
		Secrets: acp.MCPSecrets(s.MCPServers),
		PassEnv: append([]string(nil), credentialEnv...),
		// Cline ignores SIGTERM (verified: it lived until SIGKILL 5 s
		// later, taking more model turns meanwhile); SIGINT ends it at
		// once, with run_result finishReason "aborted".
		InterruptSignal: int(syscall.SIGINT),
	}, nil
}

// promptArg is the prompt as Cline's argument. Cline 3.0.65 takes an
// argument without whitespace for a subcommand, even after "--" ("Unknown
// command or unquoted prompt: hi"), and refuses a prompt on stdin with
// --json; it trims the prompt it sends, so a newline after such a prompt
// makes it one and changes nothing the model sees (verified: the
// session's prompt is "hi").
func promptArg(p string) string {
	if strings.IndexFunc(p, unicode.IsSpace) < 0 {
		return p + "\n"
	}
	return p
}

// PrefersSession implements runs.SessionPreferrer: a run that resumes a
// session runs over ACP, even one-shot, as a session of one turn that
// loads it (session/load): `cline --json` cannot resume one (--id makes
// the run interactive).
func (*Adapter) PrefersSession(s runs.Spec) bool { return s.ResumeSessionID != "" }

// overACP reports whether a run with spec s runs `cline --acp`: a
// Session run, or one PrefersSession sends there.
func overACP(s runs.Spec) bool { return s.Session() || s.ResumeSessionID != "" }

// checkResume checks the session a run resumes.
func checkResume(s runs.Spec) error {
	switch id := s.ResumeSessionID; {
	case id == "":
		return nil
	case strings.ContainsAny(id, "/\\ \t\n") || id == "." || id == "..":
		return runs.Invalid(runs.FieldResumeSessionID, "must be a cline session id such as 1796457409360_GikKf_cli")
	}
	return nil
}

// Preflight implements runs.Preflighter. It points the index row of a
// session an interactive run resumes at this home (relink.go), and
// writes the run's MCP settings file, when it names servers (mcp.go). Without a provider that Cline
// takes, it falls back to its own (api.cline.bot), tries for a minute
// and then hangs; without a key the model API refuses it. Both fail at
// once here. The run's key is written into providers.json, the only
// place `cline --json` reads it, and where a session run's command took
// it from (PrepareHome wrote it there at start).
func (*Adapter) Preflight(ctx context.Context, inv runs.Invocation, env []string) *runs.RunError {
	if err := relinkSession(ctx, inv); err != nil {
		return runs.NewRunError(runs.Internal, "cannot give cline the session it resumes: "+err.Error(), "submit the run again")
	}
	if err := writeMCPSettings(inv); err != nil {
		return runs.NewRunError(runs.Internal, "cannot give cline the run's MCP servers: "+err.Error(), "submit the run again")
	}
	p, ok := readProviders(runs.HostFiles{}, inv.Home)
	if !ok {
		return runs.NewRunError(runs.NotAuthenticated,
			"cline has no provider: "+providersPath(inv.Home)+" is missing, unreadable or lacks updatedAt", hintAuth)
	}
	key := envValue(env, KeyEnv)
	if key == "" && p.Key == "" {
		return runs.NewRunError(runs.NotAuthenticated, "cline has no API key: "+KeyEnv+" is not set and providers.json has none", hintAuth)
	}
	if key != "" {
		if err := syncKey(inv.Home, key); err != nil {
			return runs.NewRunError(runs.AgentCrashed, "cannot give cline its key: "+err.Error(), hintAuth)
		}
	}
	return nil
}

// envValue is name's value in env ("NAME=value" entries), the last one.
func envValue(env []string, name string) string {
	v := ""
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok && k == name {
			v = val
		}
	}
	return v
}
