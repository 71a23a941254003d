package acpagent

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/agentsfile"
	"github.com/agentgate/agentgate/internal/runs"
)

// Adapter runs one agent of the agents file over ACP. It is stateless
// and safe for concurrent use.
type Adapter struct {
	entry agentsfile.Agent
	// getenv is the gateway's environment, where a credential's from_env
	// is read.
	getenv func(string) string
}

// New returns the adapter of entry; getenv is the gateway's environment.
func New(entry agentsfile.Agent, getenv func(string) string) *Adapter {
	return &Adapter{entry: entry, getenv: getenv}
}

var (
	_ runs.SessionPreferrer = (*Adapter)(nil)
	_ runs.HomePreparer     = (*Adapter)(nil)
	_ runs.HomeKeeper       = (*Adapter)(nil)
)

// Name implements runs.Adapter.
func (a *Adapter) Name() string { return a.entry.Name }

// Describe implements runs.Adapter. The agent takes what the generic ACP
// client can give any CLI: interactive runs, approvals and MCP servers
// (session/new's mcpServers); the gateway adds cwd, permission (its
// sandbox, and the entry's modes), timeouts and max_turns. Nothing is
// known of its usage, cost or failures but what ACP itself says.
func (a *Adapter) Describe() runs.Description {
	e := a.entry
	display := e.DisplayName
	if display == "" {
		display = e.Name
	}
	var fromEnv []string
	for _, c := range e.Credentials {
		if c.FromEnv != "" {
			fromEnv = append(fromEnv, c.FromEnv)
		}
	}
	return adapterkit.Describe(runs.Description{
		Name:            e.Name,
		DisplayName:     display,
		DefaultBin:      e.Command,
		InstallCommand:  "install " + e.Command + " yourself: it is configured in the agents file (AGENTGATE_AGENTS_FILE)",
		VerifiedVersion: e.VerifiedVersion,
		VersionArgs:     slices.Clone(e.VersionArgs),
		Fields: []string{
			runs.FieldTimeoutSeconds, runs.FieldCwd, runs.FieldPermission,
			runs.FieldInteractive, runs.FieldApprovals, runs.FieldMCPServers,
		},
		Refused: map[string]string{
			runs.FieldModel:          refusedModel,
			runs.FieldSystemPrompt:   "ACP has no system prompt for a session",
			runs.FieldEffort:         "ACP has no thinking effort for a session",
			runs.FieldMaxBudgetUSD:   "an agent of the agents file reports no cost: ACP's prompt result carries none",
			runs.FieldMaxTotalTokens: "an agent of the agents file reports no usage: ACP's prompt result carries none",
		},
		// A second session/prompt during a turn is not sent (no steer):
		// what it does differs between CLIs. What a deny does is the
		// CLI's; the core does not depend on it.
		Interaction: runs.Interaction{Steer: false, DenyEndsTurn: false},
		Reports:     runs.Reports{Usage: runs.UsageUnknown, ErrorClasses: runs.ErrorClassesGeneric},
		Source:      runs.SourceConfigured,
	}, a.permissionDocs(), fromEnv)
}

// refusedModel says why a run names no model: ACP's session/new takes
// none, and its model selection (session/set_model) is not part of the
// stable protocol.
const refusedModel = "the model of an agent of the agents file is set in the file (its env or args); ACP's session/new takes none"

// permissionDocs says, per level, what the gateway does: the entry's mode
// and the gateway's sandbox where it has one.
func (a *Adapter) permissionDocs() map[runs.Permission]string {
	m := a.entry.Modes
	doc := func(mode string) string {
		if mode == "" {
			return "the CLI's own default ACP mode (the agents file names none); whatever the CLI asks is refused"
		}
		return "ACP session mode " + mode + " (session/set_mode); whatever the CLI still asks is refused"
	}
	return map[runs.Permission]string{
		runs.ReadOnly:       doc(m.ReadOnly),
		runs.WorkspaceWrite: doc(m.WorkspaceWrite),
		runs.Full:           doc(m.Full),
	}
}

// versionRE is the first semver-looking token of a version output:
// "0.24.4", "v1.2.3-beta.1", "Cline CLI 3.0.65".
var versionRE = regexp.MustCompile(`\bv?(\d+\.\d+(?:\.\d+)?(?:-[0-9A-Za-z.-]+)?)\b`)

// ParseVersion implements runs.Adapter: the first semver-looking token of
// the output, since each CLI words its version differently.
func (a *Adapter) ParseVersion(output []byte) (string, error) {
	m := versionRE.FindSubmatch(output)
	if m == nil {
		return "", fmt.Errorf("%s %s: no version in %q", a.entry.Command, strings.Join(a.entry.VersionArgs, " "), clipped(output))
	}
	return string(m[1]), nil
}

func clipped(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// PrefersSession implements runs.SessionPreferrer: every run is an ACP
// session, the one-shot ones a single turn, since ACP is all the agent
// speaks.
func (*Adapter) PrefersSession(runs.Spec) bool { return true }

// Command implements runs.Adapter: the entry's command and args, its
// fixed env and credentials, and the gateway's variables it passes
// through. The prompt goes as session/prompt, so there is no stdin
// payload.
func (a *Adapter) Command(inv runs.Invocation) (runs.Command, error) {
	s := inv.Spec
	if s.Prompt == "" {
		return runs.Command{}, runs.Invalid("prompt", "must not be empty")
	}
	if s.ResumeSessionID != "" {
		return runs.Command{}, runs.Unsupported(a.entry.Name, runs.FieldResumeSessionID,
			"an agent of the agents file starts a new ACP session for every run; ACP's session/load is optional and not used")
	}
	if len(s.Attachments) > 0 {
		return runs.Command{}, runs.Unsupported(a.entry.Name, runs.FieldAttachments, "an agent of the agents file takes no attachments")
	}
	if _, ok := sessionModes(a.entry.Modes)[adapterkit.Permission(s.Permission)]; !ok {
		return runs.Command{}, runs.Invalid(runs.FieldPermission, fmt.Sprintf("unknown permission %q", s.Permission))
	}
	env := make([]string, 0, len(a.entry.Env)+len(a.entry.Credentials))
	for _, k := range slices.Sorted(maps.Keys(a.entry.Env)) {
		env = append(env, k+"="+a.entry.Env[k])
	}
	secrets := acp.MCPSecrets(s.MCPServers)
	for _, c := range a.entry.Credentials {
		v, err := a.credential(inv, c)
		if err != nil {
			return runs.Command{}, err
		}
		if v == "" {
			continue // unset: the CLI says it has no credentials
		}
		env = append(env, c.Name+"="+v)
		secrets = append(secrets, v)
	}
	return runs.Command{
		Args:    slices.Clone(a.entry.Args),
		Env:     env,
		PassEnv: slices.Clone(a.entry.PassEnv),
		Secrets: secrets,
	}, nil
}

// credential reads c's value: the gateway's variable, or the file, read
// at every run so that a rotated secret needs no restart. A file ends
// with a newline as often as not; it is no part of the secret.
func (a *Adapter) credential(inv runs.Invocation, c agentsfile.Credential) (string, error) {
	if c.FromEnv != "" {
		if a.getenv == nil {
			return "", nil
		}
		return a.getenv(c.FromEnv), nil
	}
	b, err := inv.FilesOrNone().ReadFile(c.FromFile)
	if err != nil {
		return "", fmt.Errorf("%s: credential %s: %w", a.entry.Name, c.Name, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// NewDecoder implements runs.Adapter: the generic ACP client, told only
// the entry's modes. Usage, cost and failures are ACP's alone: no usage
// is read (a prompt result carries none), a JSON-RPC error is api_error
// and an exit agent_crashed, or process_killed for a signal.
func (a *Adapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	s := inv.Spec
	perm := adapterkit.Permission(s.Permission)
	mode := sessionModes(a.entry.Modes)[perm]
	refuse := true
	if s.Asks() {
		mode = a.entry.Modes.Ask
		// read_only forbids whatever asks: refuse it without asking
		// the client.
		refuse = perm == runs.ReadOnly
	}
	return &decoder{Decoder: acp.NewDecoder(inv, acp.Profile{
		Agent:      a.entry.Name,
		Mode:       mode,
		RefuseAll:  refuse,
		Steering:   acp.SteerCancels,
		MCPServers: acp.MCPServers(s.MCPServers),
	}), sessionOption: a.entry.SessionAllowOption}
}

// sessionModes maps each permission level to the entry's mode for it.
func sessionModes(m agentsfile.Modes) map[runs.Permission]string {
	return map[runs.Permission]string{
		runs.ReadOnly:       m.ReadOnly,
		runs.WorkspaceWrite: m.WorkspaceWrite,
		runs.Full:           m.Full,
	}
}
