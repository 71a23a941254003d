package runs

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers wrap them with context (fmt.Errorf("...: %w"));
// the HTTP edge maps each to one status and one stable code.
var (
	// ErrNotFound: no run with that id.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request is malformed or a value is out of range.
	ErrInvalid = errors.New("invalid request")
	// ErrUnsupported: the agent cannot honour a field of the spec.
	ErrUnsupported = errors.New("unsupported option")
	// ErrUnknownAgent: no adapter has that name.
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrAgentUnavailable: the agent is known but its CLI is not installed.
	ErrAgentUnavailable = errors.New("agent not installed")
	// ErrCapacity: the run queue is full.
	ErrCapacity = errors.New("run queue is full")
	// ErrStreamCapacity: the store has as many event readers as it
	// allows; another stream must close first.
	ErrStreamCapacity = errors.New("the gateway has as many event streams open as its store allows")
	// ErrStorageFull: the gateway's disk is too full to take runs.
	ErrStorageFull = errors.New("the gateway's disk is full")
	// ErrClaimed: a queued run was taken by another replica, or ended,
	// before this one could claim it.
	ErrClaimed = errors.New("run already claimed")
	// ErrIdempotencyMismatch: an Idempotency-Key was used before with
	// another request.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with another request")
	// ErrShuttingDown: the gateway is draining and accepts no new runs.
	ErrShuttingDown = errors.New("gateway is shutting down")
	// ErrNoAgent: the startup probe found no agent's CLI, so every run
	// would fail; the replica is not ready.
	ErrNoAgent = errors.New("no agent CLI is installed")
)

// FieldError is an ErrInvalid or ErrUnsupported that names the request field
// at fault, so a client can point at it.
type FieldError struct {
	Field string
	// Agent is set when the field is valid in general but this agent
	// cannot honour it.
	Agent  string
	Reason string
	Kind   error // ErrInvalid or ErrUnsupported
	// Code, when set, is the API's code for the error instead of the
	// kind's (an MCP server the allow-lists refuse).
	Code string
}

func (e *FieldError) Error() string {
	if e.Agent != "" {
		return fmt.Sprintf("field %q: %s (agent %q)", e.Field, e.Reason, e.Agent)
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Reason)
}

func (e *FieldError) Unwrap() error { return e.Kind }

// Unsupported returns the error an adapter gives for a spec field its CLI
// cannot honour.
func Unsupported(agent, field, reason string) error {
	return &FieldError{Field: field, Agent: agent, Reason: reason, Kind: ErrUnsupported}
}

// Invalid returns the error for a field whose value is out of range.
func Invalid(field, reason string) error {
	return &FieldError{Field: field, Reason: reason, Kind: ErrInvalid}
}

// Class is why a run failed: one closed enum shared by every agent.
type Class string

// The error classes. Retryable reports which ones a client may retry as is.
const (
	NotAuthenticated  Class = "not_authenticated"
	RateLimited       Class = "rate_limited"
	TransientAPIError Class = "transient_api_error"
	APIError          Class = "api_error"
	FlagRejected      Class = "flag_rejected"
	// SessionNotFound: resume_session_id names a session the agent's CLI
	// does not have (never kept, another replica's home, expired).
	SessionNotFound Class = "session_not_found"
	MaxTurns        Class = "max_turns"
	ContextExceeded Class = "context_exceeded"
	BudgetExceeded  Class = "budget_exceeded"
	Refused         Class = "refused"
	Timeout         Class = "timeout"
	ClassCancelled  Class = "cancelled"
	ProcessKilled   Class = "process_killed"
	NotInstalled    Class = "not_installed"
	AgentCrashed    Class = "agent_crashed"
	Interrupted     Class = "interrupted"
	// SchemaMismatch: the final answer was not JSON matching the run's
	// output_schema.
	SchemaMismatch Class = "schema_mismatch"
	// StoreFailed: some of the run's events could not be stored, so its
	// log is not whole.
	StoreFailed Class = "store_failed"
	// DiskFull: the gateway's disk ran low, and the run was stopped so
	// that the store could still record it.
	DiskFull Class = "disk_full"
	Internal Class = "internal"
)

// Classes lists every class.
var Classes = []Class{
	NotAuthenticated, RateLimited, TransientAPIError, APIError, FlagRejected, SessionNotFound,
	MaxTurns, ContextExceeded, BudgetExceeded, Refused, Timeout, ClassCancelled, ProcessKilled,
	NotInstalled, AgentCrashed, Interrupted, SchemaMismatch, StoreFailed, DiskFull,
	GitAuthFailed, GitNotFound, GitUnreachable, GitFailed, PushRejected, WorkspaceFailed, Internal,
}

// Retryable reports whether the same request may succeed if sent again
// later. A process killed by a signal is never transient: something outside
// the agent killed it, and retrying would meet the same fate.
func (c Class) Retryable() bool {
	switch c {
	case RateLimited, TransientAPIError, Timeout, Interrupted, StoreFailed, DiskFull, GitUnreachable:
		return true
	}
	return false
}

// RunError is a run's failure as the API reports it.
type RunError struct {
	Class     Class  `json:"class"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	// Hint tells a person what to do about it.
	Hint string `json:"hint,omitempty"`
	// Budget names the budget that stopped the run (max_turns,
	// max_total_tokens or max_budget_usd), for the classes max_turns and
	// budget_exceeded.
	Budget string `json:"budget,omitempty"`
}

// NewRunError builds a RunError whose Retryable follows its class.
func NewRunError(class Class, message, hint string) *RunError {
	return &RunError{Class: class, Message: message, Retryable: class.Retryable(), Hint: hint}
}
