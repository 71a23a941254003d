package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Approvals is whether a run's tool calls wait for a person's decision.
type Approvals string

// The approval modes of a run.
const (
	// ApprovalsNever runs every tool the run's permission level allows,
	// without asking (the default).
	ApprovalsNever Approvals = "never"
	// ApprovalsAsk asks the client before every tool call that can change
	// something: shell commands, edits and writes, MCP tools. Read-only
	// tools run without asking, and what the permission level forbids is
	// still refused without asking.
	ApprovalsAsk Approvals = "ask"
)

// Defaults and bounds of the interactive fields of a Spec.
const (
	DefaultApprovalTimeout = 300 * time.Second
	DefaultIdleTimeout     = 600 * time.Second
	MaxApprovalTimeout     = 24 * time.Hour
	// MaxIdleTimeout is the bound of the domain; an operator's bound
	// (the supervisor's) is at most this.
	MaxIdleTimeout = 30 * 24 * time.Hour
	// MaxMessageBytes bounds the text of one follow-up message.
	MaxMessageBytes = MaxPromptBytes
	// MaxDecisionMessageBytes bounds the message that goes with an
	// approval decision.
	MaxDecisionMessageBytes = 4 << 10
	// MaxQueuedMessages bounds the messages waiting for their turn.
	MaxQueuedMessages = 64
)

// Decision is a person's answer to an approval request.
type Decision string

// The decisions.
const (
	// Allow runs the tool call once.
	Allow Decision = "allow"
	// AllowSession runs it, and every identical call later in the same
	// session, without asking again. Nothing is written into the run's
	// working directory.
	AllowSession Decision = "allow_session"
	// Deny refuses the tool call. Whether the turn then goes on or ends
	// is the CLI's (Interaction.DenyEndsTurn).
	Deny Decision = "deny"
	// DenyAndStop refuses the tool call and ends the turn, on every CLI.
	DenyAndStop Decision = "deny_and_stop"
)

// Decisions lists every decision.
var Decisions = []Decision{Allow, AllowSession, Deny, DenyAndStop}

// Valid reports whether d is one of Decisions.
func (d Decision) Valid() bool {
	for _, v := range Decisions {
		if d == v {
			return true
		}
	}
	return false
}

// Why an approval was resolved.
const (
	// ResolvedByClient: a client answered it.
	ResolvedByClient = "client"
	// ResolvedByTimeout: nobody answered within approval_timeout_seconds;
	// the gateway denied it.
	ResolvedByTimeout = "timeout"
	// ResolvedWithdrawn: the CLI withdrew the request, on an interrupt or
	// at the end of the turn.
	ResolvedWithdrawn = "withdrawn"
	// ResolvedRunEnded: the run ended while it was pending.
	ResolvedRunEnded = "run_ended"
)

// Message modes.
const (
	// MessageQueue starts a new turn with the message once the running
	// one ends (at once when the session is idle).
	MessageQueue = "queue"
	// MessageSteer adds the message to the running turn, where the CLI
	// can (Interaction.Steer); with no turn running it is queued.
	MessageSteer = "steer"
)

// Activity is what an interactive run is doing while it is Running.
type Activity string

// The activities of a running run.
const (
	// InTurn: the agent is working on a turn.
	InTurn Activity = "in_turn"
	// AwaitingApproval: the turn waits for the answer to an approval.
	AwaitingApproval Activity = "awaiting_approval"
	// Idle: no turn runs; the session waits for a message.
	Idle Activity = "idle"
	// Stopping: the session is closing after its last turn.
	Stopping Activity = "stopping"
	// Hibernated: the run was idle long enough that its session was
	// kept in the cluster and its CLI stopped; the next message starts
	// the CLI again on whichever replica takes it (hibernate.go).
	Hibernated Activity = "hibernated"
)

// Interaction is what an agent offers interactive runs, for clients to
// branch on and for the supervisor to enforce. It is part of AgentInfo.
type Interaction struct {
	// Steer reports whether a message can be added to a running turn.
	Steer bool `json:"steer"`
	// DenyEndsTurn reports whether a plain deny ends the turn (OpenCode,
	// Copilot) rather than letting the model go on (Claude, Codex,
	// Gemini). deny_and_stop ends the turn on every agent.
	DenyEndsTurn bool `json:"deny_ends_turn"`
	// MessageAttachments reports whether a follow-up message may carry
	// images, for an agent that takes attachments: Cline takes them only
	// with a one-shot run's prompt, and drops a session prompt's images,
	// so its messages with images are refused by name.
	MessageAttachments bool `json:"message_attachments"`
	// ResumesSession says the agent's interactive session can begin
	// from a session its CLI kept (resume_session_id on an interactive
	// run): what a hibernated run needs to wake. Gemini's session resumes
	// only in one-shot runs (its ACP session/load is not safe, see its
	// doc.go).
	ResumesSession bool `json:"-"`
	// Hibernate reports whether an idle run of the agent hibernates
	// (its session kept in the cluster, its CLI stopped) and wakes on
	// the next message. The gateway sets it: the agent must resume a
	// session from files the gateway keeps. An agent without it keeps
	// its CLI running until the run ends.
	Hibernate bool `json:"hibernate"`
	// KillToolsOnInterrupt is set for a CLI whose turn interrupt leaves
	// the running tool alive (Codex): the supervisor then kills every
	// process of the run but the CLI's own once the interrupted turn has
	// ended.
	KillToolsOnInterrupt bool `json:"-"`
}

// Session is implemented by a Conversation whose CLI stays up between
// turns and takes input while it runs: answers to approvals, follow-up
// messages, turn interrupts. The adapter returns one from NewDecoder for
// a run whose Spec is Interactive or asks for approvals.
//
// The supervisor drives a Session from one goroutine at a time: Decode,
// Pending and the methods below are never called concurrently (Interrupt,
// which ends the whole run, still may be). After each call it writes what
// Pending returns to stdin. A Session reports what happens through the
// events Decode returns:
//   - EventApprovalRequested when the CLI asks to run a tool. The ID is
//     the decoder's, unique in the run; ExpiresAt is the supervisor's.
//   - EventApprovalResolved with reason ResolvedWithdrawn when the CLI
//     withdraws a request.
//   - EventTurnCompleted once per turn, with the turn's own usage and
//     cost (not the process's or the session's cumulative figures). Turn
//     is the supervisor's. After it the session is idle until Send.
//
// The first turn's text is the Spec's prompt, sent by Open. A Session
// ends its conversation (Pending's done) only after Close, or when the
// CLI ends it.
type Session interface {
	Conversation
	// Answer answers the approval request id. message goes to the model
	// with a deny, where the CLI passes one on. It returns an error
	// wrapping ErrNotFound when id is not pending.
	Answer(id string, d Decision, message string) error
	// Send starts the next turn with text, and images after it, while the
	// session is idle. With
	// steer, and a turn running, the text is added to that turn; the
	// supervisor calls it so only for an agent whose Interaction.Steer is
	// set.
	Send(text string, images []Image, steer bool) error
	// InterruptTurn ends the running turn and keeps the session for the
	// next message; the turn still ends with EventTurnCompleted.
	InterruptTurn() error
	// Close ends the conversation once no turn runs: Pending then
	// reports done, and stdin is closed.
	Close()
}

// Approval is an approval request as the run record keeps it while it is
// pending.
type Approval struct {
	ID         string          `json:"id"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Tool       string          `json:"tool"`
	Input      json.RawMessage `json:"input,omitempty"`
	// MCPServer names the run's MCP server of the tool, if it is one.
	MCPServer string     `json:"mcp_server,omitempty"`
	Options   []Decision `json:"options"`
	Turn      int        `json:"turn"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
}

// ResolvedApproval is an approval once answered, as POST
// /v1/runs/{id}/approvals/{approval_id} returns it.
type ResolvedApproval struct {
	Approval
	Decision   Decision  `json:"decision"`
	Reason     string    `json:"reason"`
	Message    string    `json:"message,omitempty"`
	ResolvedAt time.Time `json:"resolved_at"`
	// DecidedBy is the API key that answered, for an answer by a client.
	DecidedBy *Actor `json:"decided_by,omitempty"`
}

// Turn is one turn of a run as its record keeps it.
type Turn struct {
	Turn       int        `json:"turn"`
	MessageID  string     `json:"message_id"`
	Status     State      `json:"status,omitempty"` // empty while it runs
	StopReason string     `json:"stop_reason,omitempty"`
	Usage      Usage      `json:"usage"`
	CostUSD    *float64   `json:"cost_usd,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Error      *RunError  `json:"error,omitempty"`
}

// MaxRecordedTurns bounds the turns a run record lists: the oldest are
// dropped from the record beyond it (the events keep them all).
const MaxRecordedTurns = 100

// Input is something sent to a running interactive run from outside: an
// approval decision, a message, an interrupt or a close. It may arrive on
// any replica and is delivered to the run's owner.
type Input struct {
	Kind InputKind `json:"kind"`
	// ApprovalID and Decision are an InputDecision's; Message goes with
	// the decision.
	ApprovalID string   `json:"approval_id,omitempty"`
	Decision   Decision `json:"decision,omitempty"`
	Message    string   `json:"message,omitempty"`
	// Text and Mode are an InputMessage's.
	Text string `json:"text,omitempty"`
	Mode string `json:"mode,omitempty"`
	// Attachments are images attached to a message.
	Attachments []Attachment `json:"attachments,omitempty"`
	// By is who sent the input, for the audit trail; the supervisor sets
	// it from the request's Actor.
	By *Actor `json:"by,omitempty"`
}

// InputKind names an Input.
type InputKind string

// The kinds of input.
const (
	InputDecision  InputKind = "decision"
	InputMessage   InputKind = "message"
	InputInterrupt InputKind = "interrupt"
	InputClose     InputKind = "close"
)

// InputResult is what the owner answers to an Input: the resolved
// approval of a decision, or the id of a queued message.
type InputResult struct {
	Approval  *ResolvedApproval `json:"approval,omitempty"`
	MessageID string            `json:"message_id,omitempty"`
}

// ErrConflict: the request does not fit the run's state: the approval was
// already resolved, the run is not interactive or has ended, no turn is
// running. Errors wrapping it are a *ConflictError naming which.
var ErrConflict = errors.New("conflict")

// ErrOwnerUnavailable: the replica that executes the run cannot be
// reached, so input for the run cannot be delivered.
var ErrOwnerUnavailable = errors.New("the replica running the run is unavailable")

// The codes of a ConflictError.
const (
	ConflictApprovalResolved = "approval_resolved"
	ConflictNotInteractive   = "not_interactive"
	ConflictRunEnded         = "run_ended"
	ConflictNoTurn           = "no_turn_running"
	ConflictQueueFull        = "message_queue_full"
	ConflictClosing          = "session_closing"
	ConflictNotStarted       = "run_not_started"
	// ConflictRunNotFinished: what is asked of the run (delete it, its
	// diff, its changes) needs it to have ended.
	ConflictRunNotFinished = "run_not_finished"
	// ConflictSessionBusy: another run uses the session the run would
	// resume; a session is used by one run at a time.
	ConflictSessionBusy = "session_busy"
	// ConflictHibernated: the run sleeps (activity hibernated): it has no
	// turn to steer or interrupt until a message wakes it.
	ConflictHibernated = "run_hibernated"
)

// ConflictError is an ErrConflict with a stable code and a sentence.
type ConflictError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *ConflictError) Error() string { return e.Message }
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Conflict returns a *ConflictError.
func Conflict(code, message string) error { return &ConflictError{Code: code, Message: message} }

// ApprovalRequestedData is the payload of approval.requested: the CLI asks
// to run a tool call and waits for the answer.
type ApprovalRequestedData struct {
	ID         string          `json:"id"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Tool       string          `json:"tool"`
	Input      json.RawMessage `json:"input,omitempty"`
	// MCPServer names the run's MCP server of the tool, if it is one.
	MCPServer string `json:"mcp_server,omitempty"`
	// Options are the decisions the client may give.
	Options   []Decision `json:"options"`
	ExpiresAt time.Time  `json:"expires_at"`
}

// ApprovalResolvedData is the payload of approval.resolved.
type ApprovalResolvedData struct {
	ID       string   `json:"id"`
	Decision Decision `json:"decision"`
	// Reason is one of the Resolved* constants.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// DecidedBy is the API key that answered, for an answer by a client.
	DecidedBy *Actor `json:"decided_by,omitempty"`
}

// TurnStartedData is the payload of turn.started.
type TurnStartedData struct {
	Turn      int    `json:"turn"`
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
	// Attachments name the turn's images (never their bytes).
	Attachments []Attachment `json:"attachments,omitempty"`
}

// TurnCompletedData is the payload of turn.completed. Usage and CostUSD are
// the turn's own, as the model server billed it for that turn.
type TurnCompletedData struct {
	Turn       int       `json:"turn"`
	Status     State     `json:"status"` // Succeeded, Failed or Cancelled (interrupted)
	StopReason string    `json:"stop_reason,omitempty"`
	Result     string    `json:"result,omitempty"`
	Usage      Usage     `json:"usage"`
	CostUSD    *float64  `json:"cost_usd,omitempty"`
	Error      *RunError `json:"error,omitempty"`
}

// RunResumedData is the payload of run.resumed: the replica that ran an
// interactive run died, and another took the run over from its last
// finished turn. The run goes on: its next message starts the CLI again
// on Replica, resuming the same session in the same files.
type RunResumedData struct {
	Replica         string `json:"replica"`
	PreviousReplica string `json:"previous_replica"`
	// Turn is the last turn that finished; a turn after it that was cut
	// off ended interrupted.
	Turn int `json:"turn"`
	// Reason is why: "replica_lost" or "woken".
	Reason string `json:"reason"`
}

// The reasons of run.resumed.
const (
	// ResumedReplicaLost: the run's replica stopped answering.
	ResumedReplicaLost = "replica_lost"
	// ResumedWoken: a message woke the hibernated run; its CLI starts
	// again on Replica, resuming the session.
	ResumedWoken = "woken"
)

// MessageQueuedData is the payload of message.queued: a message was
// accepted and waits for its turn (or, steered, for the running turn).
type MessageQueuedData struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
	Mode      string `json:"mode"`
	// Attachments name the message's images (never their bytes).
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Validate checks what an input says on its own, before it is delivered.
func (in Input) Validate() error {
	switch in.Kind {
	case InputDecision:
		switch {
		case in.ApprovalID == "" || len(in.ApprovalID) > 256:
			return Invalid("approval_id", "is not an approval id")
		case !in.Decision.Valid():
			return Invalid("decision", "must be one of allow, allow_session, deny, deny_and_stop")
		case len(in.Message) > MaxDecisionMessageBytes || !utf8.ValidString(in.Message):
			return Invalid("message", fmt.Sprintf("must be valid UTF-8 of at most %d bytes", MaxDecisionMessageBytes))
		}
	case InputMessage:
		switch {
		case strings.TrimSpace(in.Text) == "":
			return Invalid("text", "is required and must not be blank")
		case len(in.Text) > MaxMessageBytes || !utf8.ValidString(in.Text):
			return Invalid("text", fmt.Sprintf("must be valid UTF-8 of at most %d bytes", MaxMessageBytes))
		}
		switch in.Mode {
		case "", MessageQueue, MessageSteer:
		default:
			return Invalid("mode", "must be one of queue, steer")
		}
	case InputInterrupt, InputClose:
	default:
		return Invalid("kind", "must be one of decision, message, interrupt, close")
	}
	return nil
}
