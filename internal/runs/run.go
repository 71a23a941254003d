package runs

import (
	"encoding/json"
	"time"
)

// State is where a run is in its life. A run moves Queued → Running → one of
// the terminal states, and never leaves a terminal state.
type State string

// The states of a run.
const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
	TimedOut  State = "timed_out"
)

// States lists every state, in lifecycle order.
var States = []State{Queued, Running, Succeeded, Failed, Cancelled, TimedOut}

// Terminal reports whether s is a final state.
func (s State) Terminal() bool {
	switch s {
	case Succeeded, Failed, Cancelled, TimedOut:
		return true
	}
	return false
}

// Valid reports whether s is one of States.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Permission is how much a run's agent may do to the machine. Each adapter
// maps it onto its CLI's own flags and documents the mapping.
type Permission string

// The permission levels, from least to most.
const (
	ReadOnly       Permission = "read_only"
	WorkspaceWrite Permission = "workspace_write"
	Full           Permission = "full"
)

// Spec is what a client asks for when it creates a run. Zero values mean
// "the agent's default", except Permission, which the API defaults to
// WorkspaceWrite, and Cwd, which defaults to a fresh directory.
type Spec struct {
	Agent           string          `json:"agent"`
	Prompt          string          `json:"prompt"`
	SystemPrompt    string          `json:"system_prompt,omitempty"`
	Model           string          `json:"model,omitempty"`
	Effort          string          `json:"effort,omitempty"`
	MaxTurns        int             `json:"max_turns,omitempty"`
	TimeoutSeconds  int             `json:"timeout_seconds,omitempty"`
	MaxBudgetUSD    float64         `json:"max_budget_usd,omitempty"`
	OutputSchema    json.RawMessage `json:"output_schema,omitempty"`
	ResumeSessionID string          `json:"resume_session_id,omitempty"`
	// KeepSession asks the agent to keep the run's session so that a
	// later run can resume it. Agents whose sessions are ephemeral unless
	// asked (Codex) need it; others always keep them.
	KeepSession bool              `json:"keep_session,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	Permission  Permission        `json:"permission,omitempty"`
	// Approvals is ApprovalsNever (the default) or ApprovalsAsk.
	Approvals Approvals `json:"approvals,omitempty"`
	// ApprovalTimeoutSeconds bounds how long an approval waits for its
	// answer before the gateway denies it (default 300).
	ApprovalTimeoutSeconds int `json:"approval_timeout_seconds,omitempty"`
	// Interactive keeps the CLI's process up between turns: the run ends
	// on close, on cancel, at its timeout, or after IdleTimeoutSeconds
	// with no turn.
	Interactive bool `json:"interactive,omitempty"`
	// IdleTimeoutSeconds ends an interactive run that waited this long
	// for a message (default 600).
	IdleTimeoutSeconds int `json:"idle_timeout_seconds,omitempty"`
	// HibernateAfterSeconds is how long an interactive run waits idle,
	// its CLI running, before it hibernates (hibernate.go); 0: the
	// operator's default.
	HibernateAfterSeconds int `json:"hibernate_after_seconds,omitempty"`
	// MaxTotalTokens stops the run once its usage (input plus output
	// tokens) reaches it. The gateway enforces it for every agent.
	MaxTotalTokens int64 `json:"max_total_tokens,omitempty"`
	// MCPServers are the run's own MCP servers, by name. Their env and
	// header values are kept sealed in the stored spec (MCPServer).
	MCPServers map[string]MCPServer `json:"mcp_servers,omitempty"`
	// Attachments are the images attached to the prompt, as uploaded
	// files (inline ones are uploaded at submission).
	Attachments []Attachment `json:"attachments,omitempty"`
	// WebhookURL receives the run's run.completed and approval.requested,
	// signed (see internal/webhooks). Kept in the stored spec, not in the
	// public run: its query may hold a token.
	WebhookURL string `json:"webhook_url,omitempty"`

	// Workspace is where the run's directory comes from: a repository,
	// an uploaded archive or another run's result; Cwd is then relative
	// to it. Nil: a fresh empty directory, or Cwd, a directory that
	// exists under the workspace root.
	Workspace *WorkspaceSource `json:"workspace,omitempty"`
	// Push asks for what the agent changed in a git workspace to be
	// pushed on a new branch.
	Push *PushSpec `json:"push,omitempty"`
	// Network is what the agent may reach (see Network); empty until the
	// supervisor resolves the default of the run's tenant at submission.
	Network Network `json:"network,omitempty"`
	// AllowHosts are the hosts NetworkAllow adds: names, addresses or
	// CIDRs, each with or without a port (internal/egress.ParseRule).
	AllowHosts []string `json:"allow_hosts,omitempty"`

	// WorkDir is the run's directory, relative to its tenant's workspace
	// root, as the supervisor made or restored it: Cwd lies in it. Set by
	// the supervisor; empty for a run that ran in Cwd, a directory it was
	// given.
	WorkDir string `json:"work_dir,omitempty"`

	// IdempotencyKey is the request's Idempotency-Key header, not part of
	// its body: submissions with one key make one run.
	IdempotencyKey string `json:"-"`
	// Tenant is the tenant of the API key that created the run (empty on
	// a gateway without keys). It is not part of the request body: the
	// supervisor sets it from the request's Actor.
	Tenant string `json:"tenant,omitempty"`
}

// Asks reports whether the run's tool calls wait for approvals.
func (s Spec) Asks() bool { return s.Approvals == ApprovalsAsk }

// Session reports whether the run needs a Session of its adapter: it is
// interactive, or it asks for approvals.
func (s Spec) Session() bool { return s.Interactive || s.Asks() }

// Field names of Spec as the API spells them, for errors that name a field.
const (
	FieldSystemPrompt    = "system_prompt"
	FieldModel           = "model"
	FieldEffort          = "effort"
	FieldMaxTurns        = "max_turns"
	FieldTimeoutSeconds  = "timeout_seconds"
	FieldMaxBudgetUSD    = "max_budget_usd"
	FieldOutputSchema    = "output_schema"
	FieldResumeSessionID = "resume_session_id"
	FieldKeepSession     = "keep_session"
	FieldCwd             = "cwd"
	FieldPermission      = "permission"
	// FieldApprovals and the fields after it are those of interactive
	// runs.
	FieldApprovals              = "approvals"
	FieldApprovalTimeoutSeconds = "approval_timeout_seconds"
	FieldInteractive            = "interactive"
	FieldIdleTimeoutSeconds     = "idle_timeout_seconds"
	FieldHibernateAfterSeconds  = "hibernate_after_seconds"
	// The fields of what a run is given.
	FieldMaxTotalTokens = "max_total_tokens"
	FieldMCPServers     = "mcp_servers"
	FieldAttachments    = "attachments"
	FieldWebhookURL     = "webhook_url"
)

// Run is the stored record of one run. Only the supervisor that owns the run
// writes it; everyone else reads it from the Store.
type Run struct {
	ID               string          `json:"id"`
	Agent            string          `json:"agent"`
	Model            string          `json:"model,omitempty"`
	Status           State           `json:"status"`
	CreatedAt        time.Time       `json:"created_at"`
	StartedAt        *time.Time      `json:"started_at,omitempty"`
	FinishedAt       *time.Time      `json:"finished_at,omitempty"`
	SessionID        string          `json:"session_id,omitempty"`
	Result           string          `json:"result,omitempty"`
	StructuredOutput json.RawMessage `json:"structured_output,omitempty"`
	Usage            Usage           `json:"usage"`
	// UsageUnknown says the agent reports no usage (Reports.Usage
	// unknown): Usage's zeros are not a free run.
	UsageUnknown bool     `json:"usage_unknown,omitempty"`
	CostUSD      *float64 `json:"cost_usd,omitempty"`
	NumTurns     int      `json:"num_turns,omitempty"`
	// PromptPreview is the start of the run's prompt on one line (at most
	// MaxPromptPreview characters), for a list of runs to tell them apart;
	// the prompt itself is not part of the run object.
	PromptPreview string `json:"prompt_preview,omitempty"`
	// Diff is the unified diff of every file the run changed, for an
	// agent that reports one.
	Diff string `json:"diff,omitempty"`
	// DiffTruncated says Diff was cut at the gateway's bound.
	DiffTruncated bool `json:"diff_truncated,omitempty"`
	// Files are the files the run changed in its directory, found by
	// comparing the directory at its start and at its end.
	Files []ChangedFile `json:"files,omitempty"`
	// FilesTruncated says Files was cut at the record's bound
	// (artifacts.MaxRecordedFiles); GET /v1/runs/{id}/files has them all.
	FilesTruncated bool      `json:"files_truncated,omitempty"`
	Error          *RunError `json:"error,omitempty"`
	Exit           *Exit     `json:"exit,omitempty"`
	AgentVersion   string    `json:"agent_version,omitempty"`
	// Network repeats the run's policy; NetworkDenied counts the
	// connections it refused (each also a warning network_denied, once
	// per host and port).
	Network       Network           `json:"network,omitempty"`
	NetworkDenied int               `json:"network_denied,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// QueuePosition is, while the run is queued, its place in the queue
	// all replicas share: 1 is the next run to start. It is read when
	// the run is, not stored.
	QueuePosition int `json:"queue_position,omitempty"`

	// Interactive and Approvals repeat the run's spec; the fields after
	// them are kept for a run that has a Session.
	Interactive bool      `json:"interactive,omitempty"`
	Approvals   Approvals `json:"approvals,omitempty"`
	// Activity says, while the run is Running, whether it is in a turn,
	// waiting for an approval, or idle between turns.
	Activity Activity `json:"activity,omitempty"`
	// HibernatedAt is when the run last hibernated, while its activity
	// is Hibernated; ClosesAt is when it is closed if no message comes.
	HibernatedAt *time.Time `json:"hibernated_at,omitempty"`
	ClosesAt     *time.Time `json:"closes_at,omitempty"`
	// Turns lists the run's turns, oldest first (at most
	// MaxRecordedTurns, the newest).
	Turns []Turn `json:"turns,omitempty"`
	// PendingApprovals are the approval requests waiting for an answer.
	PendingApprovals []Approval `json:"pending_approvals,omitempty"`

	// Git is what became of a git workspace: its base commit and, for a
	// run that asked for a push, the branch and whether it was pushed.
	Git *GitResult `json:"git,omitempty"`

	// Tenant owns the run: only its keys see, stream, cancel, answer or
	// delete it. Empty on a gateway without keys.
	Tenant string `json:"tenant,omitempty"`
	// CreatedBy and CancelledBy are the audit trail: the API keys that
	// created and cancelled the run (absent on a gateway without keys).
	CreatedBy   *Actor `json:"created_by,omitempty"`
	CancelledBy *Actor `json:"cancelled_by,omitempty"`

	// Spec is kept so that a run can be audited and, after a restart,
	// explained. It is not part of the public run object.
	Spec Spec `json:"-"`
	// Owner is the replica whose supervisor executes the run.
	Owner string `json:"-"`
}

// Usage is token usage with one meaning for every agent. InputTokens
// includes both cache counts; OutputTokens includes ReasoningTokens. Adapters
// normalize their CLI's counters into this shape and never pass them
// through raw.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
	}
}

// Sub returns u less v, each count at least 0.
func (u Usage) Sub(v Usage) Usage {
	return Usage{
		InputTokens:      max(u.InputTokens-v.InputTokens, 0),
		CacheReadTokens:  max(u.CacheReadTokens-v.CacheReadTokens, 0),
		CacheWriteTokens: max(u.CacheWriteTokens-v.CacheWriteTokens, 0),
		OutputTokens:     max(u.OutputTokens-v.OutputTokens, 0),
		ReasoningTokens:  max(u.ReasoningTokens-v.ReasoningTokens, 0),
	}
}

// IsZero reports whether no tokens were counted.
func (u Usage) IsZero() bool { return u == Usage{} }

// Exit is how the agent's process ended: data, not an error.
type Exit struct {
	// Code is the exit status, or -1 when the process was killed by a
	// signal or never started.
	Code int `json:"code"`
	// Signal names the signal that killed the process ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`
	// Reason says why the supervisor ended the process, when it did:
	// "cancelled", "timeout", "shutdown"; empty when the process exited on
	// its own.
	Reason string `json:"reason,omitempty"`
}

// Filter selects runs for a listing. Zero fields match everything but
// Tenant: a listing is of one tenant's runs unless AllTenants says
// otherwise.
type Filter struct {
	// Tenant selects one tenant's runs; the empty tenant is that of a
	// gateway without keys. The API always sets it, to the caller's
	// tenant.
	Tenant string
	// AllTenants lists every tenant's runs, Tenant ignored: for the
	// supervisor's own walks (recovery, the sweep of dead replicas),
	// which must find every run whoever submitted it. The API never sets
	// it, and nothing a client sends can.
	AllTenants bool
	Status     State
	Agent      string
	// Limit is the page size; the store caps it.
	Limit int
	// Cursor is the opaque value of Page.NextCursor from the previous page.
	Cursor string
}

// Page is one page of runs, newest first.
type Page struct {
	Runs []Run `json:"runs"`
	// NextCursor is empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}
