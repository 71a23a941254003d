package runs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds on a Spec, checked by Validate. Together they keep a stored run
// record under NATS's default 1 MiB message size.
const (
	MaxPromptBytes       = 512 << 10
	MaxSystemPromptBytes = 128 << 10
	MaxModelBytes        = 128
	MaxTurnsLimit        = 1000
	MaxMetadataKeys      = 16
	MaxMetadataKeyBytes  = 64
	MaxMetadataValBytes  = 512
	MaxOutputSchemaBytes = 64 << 10
	MaxCwdBytes          = 1024
	MaxGitURLBytes       = 2048
	MaxGitRefBytes       = 255
)

// Validate checks the fields of s that do not depend on the agent. Agent
// specific checks are the adapter's (Adapter.Command). Errors are
// *FieldError wrapping ErrInvalid.
func (s Spec) Validate() error {
	for _, check := range specChecks {
		if err := check(s); err != nil {
			return err
		}
	}
	return nil
}

// specChecks are Validate's checks, one concern each, in the order their
// errors take precedence: the first that fails is the error reported.
var specChecks = []func(Spec) error{
	checkPrompt,
	checkSystemPrompt,
	checkModel,
	checkLimits,
	checkResumeSessionID,
	checkApprovals,
	checkTimeouts,
	checkEffort,
	checkPermission,
	checkOutputSchema,
	checkMetadata,
	checkCwd,
	checkWorkspace,
	checkNetwork,
	func(s Spec) error { return checkWebhookSyntax(s.WebhookURL) },
}

func checkPrompt(s Spec) error {
	switch {
	case strings.TrimSpace(s.Prompt) == "":
		return Invalid("prompt", "is required and must not be blank")
	case len(s.Prompt) > MaxPromptBytes:
		return Invalid("prompt", fmt.Sprintf("is %d bytes; the limit is %d", len(s.Prompt), MaxPromptBytes))
	case !utf8.ValidString(s.Prompt):
		return Invalid("prompt", "is not valid UTF-8")
	}
	return nil
}

func checkSystemPrompt(s Spec) error {
	if len(s.SystemPrompt) > MaxSystemPromptBytes {
		return Invalid(FieldSystemPrompt, fmt.Sprintf("is %d bytes; the limit is %d", len(s.SystemPrompt), MaxSystemPromptBytes))
	}
	return nil
}

func checkModel(s Spec) error {
	if len(s.Model) > MaxModelBytes || strings.ContainsAny(s.Model, " \t\r\n\x00") {
		return Invalid(FieldModel, "must be a model name without spaces, at most 128 bytes")
	}
	return nil
}

// checkLimits checks the bounds on the run's turns, time and spending.
func checkLimits(s Spec) error {
	switch {
	case s.MaxTurns < 0 || s.MaxTurns > MaxTurnsLimit:
		return Invalid(FieldMaxTurns, fmt.Sprintf("must be between 1 and %d", MaxTurnsLimit))
	case s.TimeoutSeconds < 0:
		return Invalid(FieldTimeoutSeconds, "must be positive")
	case s.MaxBudgetUSD < 0:
		return Invalid(FieldMaxBudgetUSD, "must be positive")
	}
	return nil
}

func checkResumeSessionID(s Spec) error {
	if len(s.ResumeSessionID) > 256 || strings.ContainsAny(s.ResumeSessionID, " \t\r\n\x00/") {
		return Invalid(FieldResumeSessionID, "is not a session id")
	}
	return nil
}

func checkApprovals(s Spec) error {
	switch s.Approvals {
	case "", ApprovalsNever, ApprovalsAsk:
		return nil
	default:
		return Invalid(FieldApprovals, "must be one of never, ask")
	}
}

// checkTimeouts checks the approval and idle timeouts: their bounds
// first, then that the run has approvals or is interactive for them.
func checkTimeouts(s Spec) error {
	if s.ApprovalTimeoutSeconds < 0 || time.Duration(s.ApprovalTimeoutSeconds)*time.Second > MaxApprovalTimeout {
		return Invalid(FieldApprovalTimeoutSeconds, fmt.Sprintf("must be between 1 and %d", int(MaxApprovalTimeout/time.Second)))
	}
	if s.IdleTimeoutSeconds < 0 || time.Duration(s.IdleTimeoutSeconds)*time.Second > MaxIdleTimeout {
		return Invalid(FieldIdleTimeoutSeconds, fmt.Sprintf("must be between 1 and %d", int(MaxIdleTimeout/time.Second)))
	}
	if s.IdleTimeoutSeconds > 0 && !s.Interactive {
		return Invalid(FieldIdleTimeoutSeconds, "applies only to an interactive run")
	}
	if n := time.Duration(s.HibernateAfterSeconds) * time.Second; s.HibernateAfterSeconds != 0 && (n < MinHibernateAfter || n > MaxHibernateAfter) {
		return Invalid(FieldHibernateAfterSeconds, fmt.Sprintf("must be between %d and %d", int(MinHibernateAfter/time.Second), int(MaxHibernateAfter/time.Second)))
	}
	if s.HibernateAfterSeconds > 0 && !s.Interactive {
		return Invalid(FieldHibernateAfterSeconds, "applies only to an interactive run")
	}
	if s.ApprovalTimeoutSeconds > 0 && !s.Asks() {
		return Invalid(FieldApprovalTimeoutSeconds, "applies only to a run with approvals: ask")
	}
	return nil
}

func checkEffort(s Spec) error {
	switch s.Effort {
	case "", "low", "medium", "high":
		return nil
	default:
		return Invalid(FieldEffort, "must be one of low, medium, high")
	}
}

func checkPermission(s Spec) error {
	switch s.Permission {
	case "", ReadOnly, WorkspaceWrite, Full:
		return nil
	default:
		return Invalid(FieldPermission, "must be one of read_only, workspace_write, full")
	}
}

func checkOutputSchema(s Spec) error {
	if len(s.OutputSchema) == 0 {
		return nil
	}
	if len(s.OutputSchema) > MaxOutputSchemaBytes {
		return Invalid(FieldOutputSchema, fmt.Sprintf("is larger than %d bytes", MaxOutputSchemaBytes))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(s.OutputSchema, &obj); err != nil {
		return Invalid(FieldOutputSchema, "must be a JSON Schema object")
	}
	return nil
}

func checkMetadata(s Spec) error {
	if len(s.Metadata) > MaxMetadataKeys {
		return Invalid("metadata", fmt.Sprintf("has %d keys; the limit is %d", len(s.Metadata), MaxMetadataKeys))
	}
	for k, v := range s.Metadata {
		if k == "" || len(k) > MaxMetadataKeyBytes || len(v) > MaxMetadataValBytes {
			return Invalid("metadata", fmt.Sprintf("keys must be 1 to %d bytes and values at most %d bytes", MaxMetadataKeyBytes, MaxMetadataValBytes))
		}
	}
	return nil
}

func checkCwd(s Spec) error {
	if s.Cwd == "" {
		return nil
	}
	_, err := cleanRelative(s.Cwd)
	return err
}

// cleanRelative returns cwd cleaned, or an error when it is absolute or
// climbs out of the directory it is relative to.
func cleanRelative(cwd string) (string, error) {
	if len(cwd) > MaxCwdBytes || strings.ContainsRune(cwd, 0) {
		return "", Invalid(FieldCwd, "is not a usable path")
	}
	if filepath.IsAbs(cwd) {
		return "", Invalid(FieldCwd, "must be relative to the workspace root")
	}
	c := filepath.Clean(cwd)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", Invalid(FieldCwd, "must stay inside the workspace root")
	}
	return c, nil
}

// ResolveCwd returns the absolute directory for cwd under root. An empty
// cwd gets a fresh directory named fresh. A given cwd must exist, be a
// directory and, after symlinks are resolved, lie inside root.
func ResolveCwd(root, cwd, fresh string) (dir string, created bool, err error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", false, fmt.Errorf("workspace root: %w", err)
	}
	if cwd == "" {
		dir = filepath.Join(realRoot, fresh)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", false, fmt.Errorf("create run directory: %w", err)
		}
		return dir, true, nil
	}
	c, err := cleanRelative(cwd)
	if err != nil {
		return "", false, err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(realRoot, c))
	if err != nil {
		return "", false, Invalid(FieldCwd, "does not exist under the workspace root")
	}
	if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return "", false, Invalid(FieldCwd, "resolves outside the workspace root")
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", false, Invalid(FieldCwd, "is not a directory")
	}
	return real, false, nil
}

// checkWorkspace checks what does not need the gateway's policy: one
// source, and a push only of a git workspace, to a branch other than the
// ref it starts from.
func checkWorkspace(s Spec) error {
	if w := s.Workspace; w != nil {
		n := 0
		for _, set := range []bool{w.Git != nil, w.Archive != "", w.FromRun != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			return Invalid(FieldWorkspace, `must have exactly one of "git", "archive" or "from_run"`)
		}
		if w.Git != nil && w.Git.URL == "" {
			return Invalid(FieldWorkspace+".git.url", "is required")
		}
	}
	if s.Push == nil {
		return nil
	}
	if s.Workspace == nil || s.Workspace.Git == nil {
		return Invalid(FieldPush, "needs a git workspace (workspace.git) to push to")
	}
	if s.Push.Branch == "" {
		return Invalid(FieldPush+".branch", "is required")
	}
	if ref := s.Workspace.Git.Ref; ref != "" && (s.Push.Branch == ref || "refs/heads/"+s.Push.Branch == ref) {
		return Invalid(FieldPush+".branch", "must not be the ref the run starts from: a run's changes go to a new branch")
	}
	return nil
}
