package runs

import (
	"encoding/json"
	"time"
)

// EnvelopeVersion is the version of the event envelope, the "v" field.
const EnvelopeVersion = 1

// EventType names the kind of an event. The set is closed per envelope
// version; events.schema.json, at the repository root, has one branch for each.
type EventType string

// The event types.
const (
	EventRunQueued          EventType = "run.queued"
	EventRunStarted         EventType = "run.started"
	EventSessionStarted     EventType = "session.started"
	EventMessageDelta       EventType = "message.delta"
	EventMessageCompleted   EventType = "message.completed"
	EventReasoningDelta     EventType = "reasoning.delta"
	EventReasoningCompleted EventType = "reasoning.completed"
	EventToolCallStarted    EventType = "tool_call.started"
	EventToolCallOutput     EventType = "tool_call.output_delta"
	EventToolCallProgress   EventType = "tool_call.progress"
	EventToolCallCompleted  EventType = "tool_call.completed"
	EventFileChanged        EventType = "file.changed"
	EventPlanUpdated        EventType = "plan.updated"
	EventUsageUpdated       EventType = "usage.updated"
	EventRateLimit          EventType = "rate_limit"
	EventWarning            EventType = "warning"
	EventAgentUnparsed      EventType = "agent.unparsed"
	EventRunCompleted       EventType = "run.completed"
	EventApprovalRequested  EventType = "approval.requested"
	EventApprovalResolved   EventType = "approval.resolved"
	EventTurnStarted        EventType = "turn.started"
	EventTurnCompleted      EventType = "turn.completed"
	EventMessageQueued      EventType = "message.queued"
	EventRunResumed         EventType = "run.resumed"
	EventRunHibernated      EventType = "run.hibernated"
)

// EventTypes lists every event type.
var EventTypes = []EventType{
	EventRunQueued, EventRunStarted, EventSessionStarted, EventMessageDelta,
	EventMessageCompleted, EventReasoningDelta, EventReasoningCompleted, EventToolCallStarted,
	EventToolCallOutput, EventToolCallProgress, EventToolCallCompleted, EventFileChanged, EventPlanUpdated, EventUsageUpdated, EventRateLimit, EventWarning,
	EventAgentUnparsed, EventRunCompleted,
	EventApprovalRequested, EventApprovalResolved, EventTurnStarted, EventTurnCompleted, EventMessageQueued,
	EventRunResumed, EventRunHibernated,
}

// Event is one entry of a run's log. Decoders fill Type, Data and, where
// the CLI says so, SessionID and ParentToolCallID; the supervisor stamps the
// rest, bounds Data (see Limits) and appends it to the Store, which is the
// source of truth. Data is one of the *Data payload types below.
type Event struct {
	V                int       `json:"v"`
	RunID            string    `json:"run_id"`
	Seq              uint64    `json:"seq"`
	Time             time.Time `json:"time"`
	Type             EventType `json:"type"`
	Agent            string    `json:"agent"`
	SessionID        string    `json:"session_id,omitempty"`
	ParentToolCallID string    `json:"parent_tool_call_id,omitempty"`
	Data             any       `json:"data"`
}

// StoredEvent is an event as read back from the Store: its sequence, type
// and the exact JSON envelope that was appended, so that readers never
// re-encode it.
type StoredEvent struct {
	Seq  uint64
	Type EventType
	JSON []byte
}

// RunQueuedData is the payload of run.queued.
type RunQueuedData struct {
	Agent    string            `json:"agent"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Position is the run's place in the shared queue when it was queued:
	// 1 means it is the next to start. GET /v1/runs/{id} has the place
	// now.
	Position int `json:"position"`
}

// RunStartedData is the payload of run.started. It repeats what the run was
// asked to do, so that a trace is readable on its own.
type RunStartedData struct {
	Prompt          string     `json:"prompt"`
	SystemPrompt    string     `json:"system_prompt,omitempty"`
	Model           string     `json:"model,omitempty"`
	Effort          string     `json:"effort,omitempty"`
	Permission      Permission `json:"permission"`
	Cwd             string     `json:"cwd"`
	ResumeSessionID string     `json:"resume_session_id,omitempty"`
	CLIVersion      string     `json:"cli_version,omitempty"`
	VersionStatus   string     `json:"version_status"`
	// Attachments name the prompt's images (never their bytes).
	Attachments []Attachment `json:"attachments,omitempty"`
	// Workspace says how the run's directory was prepared.
	Workspace *WorkspaceInfo `json:"workspace,omitempty"`
}

// SessionStartedData is the payload of session.started.
type SessionStartedData struct {
	SessionID string   `json:"session_id"`
	Model     string   `json:"model,omitempty"`
	Tools     []string `json:"tools"`
}

// MessageData is the payload of message.delta and message.completed.
type MessageData struct {
	// MessageID groups the deltas of one message, when the CLI has one.
	MessageID string `json:"message_id,omitempty"`
	Text      string `json:"text"`
}

// Reasoning visibility: how much of the model's reasoning the CLI exposed.
const (
	VisibilityFull     = "full"
	VisibilitySummary  = "summary"
	VisibilityRedacted = "redacted"
)

// ReasoningData is the payload of reasoning.completed. It is emitted even
// when no text is exposed, because the reasoning tokens were billed.
type ReasoningData struct {
	Text       string `json:"text"`
	Visibility string `json:"visibility"`
}

// DeltaData is the payload of reasoning.delta and tool_call.output_delta:
// a piece of text as it streams. The completed event that follows carries
// the whole text, so a client may ignore the deltas.
type DeltaData struct {
	// ID groups the deltas: the reasoning block, or the tool call whose
	// output this is.
	ID   string `json:"id,omitempty"`
	Text string `json:"text"`
}

// ToolCallStartedData is the payload of tool_call.started.
type ToolCallStartedData struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// MCPServer names the run's MCP server whose tool this is (a key of
	// Spec.MCPServers), and MCPTool the tool's own name on that server;
	// both are empty for the CLI's built-in tools.
	MCPServer string `json:"mcp_server,omitempty"`
	MCPTool   string `json:"mcp_tool,omitempty"`
}

// ToolCallProgressData is the payload of tool_call.progress: a tool call
// is still running. The CLI says so while the tool gives it nothing else
// to report (Claude Code every 30 s), so that a client can show the call
// alive and for how long.
type ToolCallProgressData struct {
	// ID is the running tool call's, as in tool_call.started.
	ID string `json:"id"`
	// Name is the tool's name, when the CLI repeats it.
	Name string `json:"name,omitempty"`
	// ElapsedMS is how long the call has run, by the CLI's clock.
	ElapsedMS int64 `json:"elapsed_ms"`
}

// ToolCallCompletedData is the payload of tool_call.completed.
type ToolCallCompletedData struct {
	ID      string `json:"id"`
	Output  string `json:"output"`
	IsError bool   `json:"is_error"`
}

// The kinds of a file change.
const (
	ChangeAdd    = "add"
	ChangeUpdate = "update"
	ChangeDelete = "delete"
)

// FileChangedData is the payload of file.changed: the agent changed one
// file, by its own edit tool rather than a shell command.
type FileChangedData struct {
	// Path is the file's path as the agent reported it.
	Path string `json:"path"`
	// Kind is one of ChangeAdd, ChangeUpdate, ChangeDelete.
	Kind string `json:"kind"`
	// MovePath is the new path of a file that was moved.
	MovePath string `json:"move_path,omitempty"`
	// Diff is the change as a unified diff, bounded like any text.
	Diff string `json:"diff,omitempty"`
	// Status is how applying the change went: completed, failed or
	// declined, when the agent says.
	Status string `json:"status,omitempty"`
	// ToolCallID links the change to the tool call that made it.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// The statuses of a plan step.
const (
	StepPending    = "pending"
	StepInProgress = "in_progress"
	StepCompleted  = "completed"
)

// PlanUpdatedData is the payload of plan.updated: the agent's whole plan as
// it stands now, replacing any earlier one.
type PlanUpdatedData struct {
	Explanation string     `json:"explanation,omitempty"`
	Steps       []PlanStep `json:"steps"`
}

// PlanStep is one step of a plan.
type PlanStep struct {
	Step   string `json:"step"`
	Status string `json:"status"`
}

// UsageData is the payload of usage.updated: the run's usage so far.
type UsageData struct {
	Usage   Usage    `json:"usage"`
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// RateLimitData is the payload of rate_limit: the agent met a limit and
// will retry, or has given up.
type RateLimitData struct {
	Attempt      int    `json:"attempt,omitempty"`
	MaxRetries   int    `json:"max_retries,omitempty"`
	RetryDelayMS int64  `json:"retry_delay_ms,omitempty"`
	Status       int    `json:"status,omitempty"`
	Error        string `json:"error,omitempty"`
}

// WarningData is the payload of warning.
type WarningData struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// UnparsedData is the payload of agent.unparsed: a line the decoder did not
// understand, bounded.
type UnparsedData struct {
	Line      string `json:"line"`
	Truncated bool   `json:"truncated,omitempty"`
	// Bytes is the length of the original line.
	Bytes int `json:"bytes"`
	// Reason says why the line was not understood.
	Reason string `json:"reason"`
}

// RunCompletedData is the payload of run.completed, the last event of every
// run.
type RunCompletedData struct {
	Status           State           `json:"status"`
	StopReason       string          `json:"stop_reason,omitempty"`
	Result           string          `json:"result,omitempty"`
	StructuredOutput json.RawMessage `json:"structured_output,omitempty"`
	Usage            Usage           `json:"usage"`
	CostUSD          *float64        `json:"cost_usd,omitempty"`
	NumTurns         int             `json:"num_turns,omitempty"`
	// Diff is the unified diff of every file the run changed, when the
	// agent reports one.
	Diff          string `json:"diff,omitempty"`
	DiffTruncated bool   `json:"diff_truncated,omitempty"`
	// Files are the files the run changed, as the run record has them.
	Files          []ChangedFile `json:"files,omitempty"`
	FilesTruncated bool          `json:"files_truncated,omitempty"`
	DurationMS     int64         `json:"duration_ms"`
	Exit           *Exit         `json:"exit,omitempty"`
	Error          *RunError     `json:"error,omitempty"`
	// Git is what became of a git workspace, as the run record has it.
	Git *GitResult `json:"git,omitempty"`
}
