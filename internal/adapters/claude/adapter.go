package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// The static facts about the CLI.
const (
	// Name is the API's agent field.
	Name = "claude"
	// VerifiedVersion is the CLI version the flags, output and failures
	// were verified against.
	VerifiedVersion = "2.1.332"
	// InstallCommand installs the verified version.
	InstallCommand = "npm install -g @anthropic-ai/claude-code@" + VerifiedVersion
)

// MaxRetries is CLAUDE_CODE_MAX_RETRIES for every run. The CLI's default
// (10, with delays growing to 35 s) turns a persistent 401, 429 or 5xx
// into minutes; two retries still ride out a blip.
const MaxRetries = 2

// The bounds of API_TIMEOUT_MS, the CLI's limit on one API attempt.
const (
	// maxAPITimeout is the CLI's own default.
	maxAPITimeout = 10 * time.Minute
	minAPITimeout = time.Second
)

// maxArg bounds a value passed on the command line. Linux refuses a
// single argument of 128 KiB or more (MAX_ARG_STRLEN) with E2BIG; the
// prompt goes on stdin and has no such limit.
const maxArg = 100 << 10

// efforts are the values --effort accepts. The CLI ignores any other value
// with a warning on stderr, so the adapter refuses it instead.
var efforts = []string{"low", "medium", "high", "xhigh", "max"}

// phoneHome stops the CLI's telemetry, update checks, error reports and
// other non-essential traffic: with all four set a run talks only to the
// model endpoint.
var phoneHome = []string{
	"DISABLE_TELEMETRY=1",
	"DISABLE_AUTOUPDATER=1",
	"DISABLE_ERROR_REPORTING=1",
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
}

// credentialEnv are the CLI's credential and endpoint variables, passed
// through from the gateway's environment. Each was checked against the
// mock server: the key is sent as x-api-key, both tokens as
// "Authorization: Bearer", the base URL receives every request, the model
// becomes the request's model, and the custom headers ("Name: value"
// lines) are sent.
var credentialEnv = []string{
	"ANTHROPIC_API_KEY",
	"ANTHROPIC_AUTH_TOKEN",
	"CLAUDE_CODE_OAUTH_TOKEN",
	"ANTHROPIC_BASE_URL",
	"ANTHROPIC_MODEL",
	"ANTHROPIC_CUSTOM_HEADERS",
}

// Permission levels as CLI flags. See doc.go for what each allows.
var permissionArgs = map[runs.Permission][]string{
	runs.ReadOnly:       {"--permission-mode=dontAsk", "--disallowedTools=Edit,Write,NotebookEdit"},
	runs.WorkspaceWrite: {"--permission-mode=acceptEdits", "--allowedTools=Bash"},
	runs.Full:           {"--dangerously-skip-permissions"},
}

// askPermissionArgs are the flags of a permission level for a run with
// approvals: ask. What the level forbids stays refused without asking;
// every other call that can change something goes to the client through
// --permission-prompt-tool=stdio. See doc.go for what was verified.
var askPermissionArgs = map[runs.Permission][]string{
	runs.ReadOnly:       {"--permission-mode=dontAsk", "--disallowedTools=Edit,Write,NotebookEdit"},
	runs.WorkspaceWrite: {"--permission-mode=default"},
	runs.Full:           {"--permission-mode=default"},
}

// sessionArgs make the CLI echo each user line when it takes it up, which
// is how the session tells a steered line folded into the running turn
// from one queued as a turn of its own. Every run reads stream-json user
// lines and control messages on stdin (--input-format=stream-json): one
// transport, whose one-shot form is a single user line and the end of
// stdin.
var sessionArgs = []string{"--replay-user-messages"}

// permissionDocs documents permissionArgs for Describe.
var permissionDocs = map[runs.Permission]string{
	runs.ReadOnly: "--permission-mode dontAsk --disallowedTools Edit,Write,NotebookEdit: Edit, Write and NotebookEdit are " +
		"removed; Bash runs only commands the CLI itself classes as read-only (ls, git status); anything else is refused, " +
		"also with approvals ask, which then asks for nothing",
	runs.WorkspaceWrite: "--permission-mode acceptEdits --allowedTools Bash: file edits run without asking and so does every " +
		"Bash command; Bash is not confined to the workspace. With approvals ask: --permission-mode default " +
		"--permission-prompt-tool stdio: Bash, Edit, Write, NotebookEdit and MCP tools are asked; Read, Grep, Glob and " +
		"read-only Bash (ls) run without asking",
	runs.Full: "--dangerously-skip-permissions with IS_SANDBOX=1 (the CLI refuses the flag as root without it): " +
		"every tool runs without asking. With approvals ask: as workspace_write with approvals ask",
}

// Adapter is the Claude Code adapter. It is stateless and safe for
// concurrent use.
type Adapter struct{}

// New returns the Claude Code adapter.
func New() *Adapter { return &Adapter{} }

// Name implements runs.Adapter.
func (*Adapter) Name() string { return Name }

// Describe implements runs.Adapter.
func (*Adapter) Describe() runs.Description {
	return adapterkit.Describe(runs.Description{
		Name:            Name,
		DisplayName:     "Claude Code",
		DefaultBin:      "claude",
		InstallCommand:  InstallCommand,
		VerifiedVersion: VerifiedVersion,
		VersionArgs:     []string{"--version"},
		Fields: []string{
			runs.FieldSystemPrompt, runs.FieldModel, runs.FieldEffort, runs.FieldMaxTurns,
			runs.FieldTimeoutSeconds, runs.FieldMaxBudgetUSD, runs.FieldOutputSchema,
			runs.FieldResumeSessionID, runs.FieldCwd, runs.FieldPermission,
			runs.FieldInteractive, runs.FieldApprovals, runs.FieldMCPServers, runs.FieldAttachments,
		},
		// A deny lets the model go on; a line sent mid-turn is folded
		// into the turn; the interrupt kills the running tool itself.
		Interaction: runs.Interaction{Steer: true, DenyEndsTurn: false, MessageAttachments: true, ResumesSession: true},
		ReportsCost: true,
	}, permissionDocs, credentialEnv)
}

// version reads `claude --version`: "2.1.332 (Claude Code)".
var version = adapterkit.VersionParser{
	Command: "claude --version",
	Pattern: regexp.MustCompile(`^(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?) \(Claude Code\)$`),
}

// ParseVersion implements runs.Adapter.
func (*Adapter) ParseVersion(output []byte) (string, error) { return version.Parse(output) }

// NewDecoder implements runs.Adapter. A run whose Spec wants a Session
// gets one (a runs.Session).
func (*Adapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	if inv.Spec.Session() {
		return newSession(inv)
	}
	return newDecoder(inv)
}

// Command implements runs.Adapter. The prompt goes on stdin as a
// stream-json user line, so its size is not bounded by the kernel's
// argument limit and a prompt starting with "-" is not read as a flag.
// Values are passed as --flag=value for the same reason.
func (*Adapter) Command(inv runs.Invocation) (runs.Command, error) {
	s := inv.Spec
	if s.Prompt == "" {
		return runs.Command{}, runs.Invalid("prompt", "must not be empty")
	}
	args := []string{"-p", "--input-format=stream-json", "--output-format=stream-json", "--verbose", "--include-partial-messages"}
	if s.Session() {
		args = append(args, sessionArgs...)
	}
	session, err := sessionFlag(inv)
	if err != nil {
		return runs.Command{}, err
	}
	args = append(args, session)
	oargs, err := optionArgs(s)
	if err != nil {
		return runs.Command{}, err
	}
	args = append(args, oargs...)
	perm := adapterkit.Permission(s.Permission)
	pargs, err := permissionFlags(s, perm)
	if err != nil {
		return runs.Command{}, err
	}
	args = append(args, pargs...)
	margs, allow, secrets, err := mcpArgs(s.MCPServers)
	if err != nil {
		return runs.Command{}, err
	}
	args = append(args, margs...)
	if len(allow) > 0 && !s.Asks() && perm != runs.Full {
		// Without approvals nobody could answer the CLI's question, so
		// the run's own servers, which the client chose, run unasked
		// at every level. (Full skips every permission check.)
		args = allowTools(args, allow)
	}
	first, err := userLine(s.Prompt, inv.Images)
	if err != nil {
		return runs.Command{}, err
	}
	cmd := runs.Command{
		Args:            args,
		Env:             runEnv(inv, perm),
		PassEnv:         append([]string(nil), credentialEnv...),
		Stdin:           first,
		InterruptSignal: int(syscall.SIGINT),
		Secrets:         secrets,
	}
	if s.Session() {
		// The prompt is the first user line, written by the session's
		// Open; stdin stays open for the conversation.
		cmd.Stdin = nil
	}
	return cmd, nil
}

// sessionFlag names the run's session: the one it resumes, whose id
// --resume keeps, or a new one with the run's id.
func sessionFlag(inv runs.Invocation) (string, error) {
	if id := inv.Spec.ResumeSessionID; id != "" {
		if !isUUID(id) {
			return "", runs.Invalid(runs.FieldResumeSessionID, "must be a UUID such as 0196f0c2-7e1a-7000-8000-000000000001")
		}
		return "--resume=" + id, nil
	}
	if !isUUID(inv.RunID) {
		return "", fmt.Errorf("claude: run id %q is not a UUID, which --session-id requires", inv.RunID)
	}
	return "--session-id=" + inv.RunID, nil
}

// optionArgs are the flags of the spec's optional fields: model, system
// prompt, effort, limits and output schema.
func optionArgs(s runs.Spec) ([]string, error) {
	var args []string
	if s.Model != "" {
		args = append(args, "--model="+s.Model)
	}
	if s.SystemPrompt != "" {
		if len(s.SystemPrompt) > maxArg {
			return nil, runs.Unsupported(Name, runs.FieldSystemPrompt,
				fmt.Sprintf("is %d bytes; claude takes it on the command line, which holds at most %d", len(s.SystemPrompt), maxArg))
		}
		args = append(args, "--append-system-prompt="+s.SystemPrompt)
	}
	if s.Effort != "" {
		if !slices.Contains(efforts, s.Effort) {
			return nil, runs.Unsupported(Name, runs.FieldEffort, "claude accepts low, medium, high, xhigh or max")
		}
		args = append(args, "--effort="+s.Effort)
	}
	largs, err := limitArgs(s)
	if err != nil {
		return nil, err
	}
	args = append(args, largs...)
	if len(s.OutputSchema) > 0 {
		schema, err := schemaArg(s.OutputSchema)
		if err != nil {
			return nil, err
		}
		args = append(args, schema)
	}
	return args, nil
}

// limitArgs are the flags of the run's turn and spending limits.
func limitArgs(s runs.Spec) ([]string, error) {
	var args []string
	if s.MaxTurns < 0 {
		return nil, runs.Invalid(runs.FieldMaxTurns, "must not be negative")
	}
	if s.MaxTurns > 0 {
		args = append(args, "--max-turns="+strconv.Itoa(s.MaxTurns))
	}
	if s.MaxBudgetUSD < 0 || math.IsNaN(s.MaxBudgetUSD) || math.IsInf(s.MaxBudgetUSD, 0) {
		return nil, runs.Invalid(runs.FieldMaxBudgetUSD, "must be a positive number of dollars")
	}
	if s.MaxBudgetUSD > 0 {
		args = append(args, "--max-budget-usd="+strconv.FormatFloat(s.MaxBudgetUSD, 'f', -1, 64))
	}
	return args, nil
}

// schemaArg is the --json-schema flag of an output schema, compacted to
// fit the command line.
func schemaArg(raw json.RawMessage) (string, error) {
	schema, err := compactObject(raw)
	if err != nil {
		return "", runs.Invalid(runs.FieldOutputSchema, err.Error())
	}
	if len(schema) > maxArg {
		return "", runs.Unsupported(Name, runs.FieldOutputSchema,
			fmt.Sprintf("is %d bytes; claude takes it on the command line, which holds at most %d", len(schema), maxArg))
	}
	return "--json-schema=" + schema, nil
}

// permissionFlags are the flags of permission level perm, or of the
// level with approvals asked through --permission-prompt-tool=stdio.
func permissionFlags(s runs.Spec, perm runs.Permission) ([]string, error) {
	pargs, ok := permissionArgs[perm]
	if !ok {
		return nil, runs.Invalid(runs.FieldPermission, fmt.Sprintf("unknown permission %q", perm))
	}
	if s.Asks() {
		return append(append([]string(nil), askPermissionArgs[perm]...), "--permission-prompt-tool=stdio"), nil
	}
	return pargs, nil
}

// runEnv is the environment the gateway sets for the run: no phoning
// home, bounded retries and a per-attempt timeout that fits the run's.
func runEnv(inv runs.Invocation, perm runs.Permission) []string {
	env := append([]string(nil), phoneHome...)
	env = append(env,
		"CLAUDE_CODE_MAX_RETRIES="+strconv.Itoa(MaxRetries),
		"API_TIMEOUT_MS="+strconv.FormatInt(APITimeout(inv.Timeout).Milliseconds(), 10),
	)
	if perm == runs.Full && !inv.Spec.Asks() {
		// The CLI refuses --dangerously-skip-permissions as root unless
		// told it runs in a sandbox; the gateway may well run as root.
		env = append(env, "IS_SANDBOX=1")
	}
	return env
}

// allowTools adds rules to the --allowedTools flag of args, or adds the
// flag: one flag holds the whole list, as the CLI reads it.
func allowTools(args, rules []string) []string {
	const flag = "--allowedTools="
	for i, a := range args {
		if strings.HasPrefix(a, flag) {
			args[i] = a + "," + strings.Join(rules, ",")
			return args
		}
	}
	return append(args, flag+strings.Join(rules, ","))
}

// APITimeout is the API_TIMEOUT_MS a run with the given timeout gets: its
// share of the run's time for each of the 1+MaxRetries attempts, so that a
// server that never answers ends the run with the CLI's own "timed out"
// result before the deadline kills it; at least a second, and at most the
// CLI's default of ten minutes (also used without a run timeout).
func APITimeout(run time.Duration) time.Duration {
	if run <= 0 {
		return maxAPITimeout
	}
	return min(max(run/(MaxRetries+1), minAPITimeout), maxAPITimeout)
}

// isUUID reports whether s is a UUID in its canonical 36-character form,
// the only one --session-id and --resume accept.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// compactObject returns raw, which must hold a JSON object, without
// insignificant space.
func compactObject(raw json.RawMessage) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("must be a JSON Schema object: %v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("must be a JSON Schema object: %v", err)
	}
	return buf.String(), nil
}
