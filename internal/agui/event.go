package agui

import (
	"encoding/json"
)

// EventType is the type of an AG-UI event, as AG-UI spells it.
type EventType string

// The AG-UI event types a Translator produces.
const (
	RunStarted              EventType = "RUN_STARTED"
	RunFinished             EventType = "RUN_FINISHED"
	RunError                EventType = "RUN_ERROR"
	StepStarted             EventType = "STEP_STARTED"
	StepFinished            EventType = "STEP_FINISHED"
	TextMessageStart        EventType = "TEXT_MESSAGE_START"
	TextMessageContent      EventType = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          EventType = "TEXT_MESSAGE_END"
	ToolCallStart           EventType = "TOOL_CALL_START"
	ToolCallArgs            EventType = "TOOL_CALL_ARGS"
	ToolCallEnd             EventType = "TOOL_CALL_END"
	ToolCallResult          EventType = "TOOL_CALL_RESULT"
	ReasoningStart          EventType = "REASONING_START"
	ReasoningMessageStart   EventType = "REASONING_MESSAGE_START"
	ReasoningMessageContent EventType = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     EventType = "REASONING_MESSAGE_END"
	ReasoningEnd            EventType = "REASONING_END"
	StateSnapshot           EventType = "STATE_SNAPSHOT"
	StateDelta              EventType = "STATE_DELTA"
	Custom                  EventType = "CUSTOM"
	Raw                     EventType = "RAW"
)

// Ends reports whether an event of type t ends an AG-UI run.
func (t EventType) Ends() bool { return t == RunFinished || t == RunError }

// Event is one AG-UI event a Translator produced.
type Event struct {
	Type EventType
	// JSON is the event as it goes on the wire: one line of JSON with
	// AG-UI's camelCase field names.
	JSON []byte
	// Resumes is set on the RUN_STARTED of an AG-UI run that an answer to
	// an interrupt opened: that interrupt's id.
	Resumes string
	// Interrupt is set on a RUN_FINISHED that ends an AG-UI run with an
	// interrupt: the interrupt's id.
	Interrupt string
}

// The names of the CUSTOM events, "agentgate." and the event type.
const customPrefix = "agentgate."

// The wire shapes of the events. Each embeds head; a field AG-UI requires
// has no omitempty, so that an empty string still goes out.
type head struct {
	Type      EventType `json:"type"`
	Timestamp int64     `json:"timestamp,omitempty"`
}

type runStartedEvent struct {
	head
	ThreadID        string    `json:"threadId"`
	RunID           string    `json:"runId"`
	ProtocolVersion string    `json:"protocolVersion"`
	Input           *runInput `json:"input,omitempty"`
}

// ProtocolVersion is the AG-UI version whose schemas the events are
// checked against (tools/agui pins them). RUN_STARTED declares it; AG-UI
// 0.0.x clients ignore it, and read the events alike.
const ProtocolVersion = "1.0"

// runInput is the RunAgentInput a RUN_STARTED echoes: the prompt, as the
// one user message, so that a client that did not send it sees what the
// run was asked.
type runInput struct {
	ThreadID string         `json:"threadId"`
	RunID    string         `json:"runId"`
	Messages []inputMessage `json:"messages"`
	Tools    []struct{}     `json:"tools"`
	Context  []struct{}     `json:"context"`
}

type inputMessage struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

type runFinishedEvent struct {
	head
	ThreadID string          `json:"threadId"`
	RunID    string          `json:"runId"`
	Result   json.RawMessage `json:"result,omitempty"`
	Outcome  *outcome        `json:"outcome,omitempty"`
	Usage    []tokenUsage    `json:"usage,omitempty"`
}

type outcome struct {
	Type       string      `json:"type"`
	Interrupts []interrupt `json:"interrupts,omitempty"`
}

type interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
	Metadata       *gatewayMeta    `json:"metadata,omitempty"`
}

// gatewayMeta is the metadata of an event or interrupt: agentgate's own
// facts, under its own key.
type gatewayMeta struct {
	Agentgate any `json:"agentgate"`
}

type tokenUsage struct {
	Model                 string `json:"model,omitempty"`
	InputTokens           int64  `json:"inputTokens"`
	OutputTokens          int64  `json:"outputTokens"`
	TotalTokens           int64  `json:"totalTokens"`
	ReasoningTokens       int64  `json:"reasoningTokens"`
	CachedInputTokens     int64  `json:"cachedInputTokens"`
	CacheWriteInputTokens int64  `json:"cacheWriteInputTokens"`
}

type runErrorEvent struct {
	head
	Message string       `json:"message"`
	Code    string       `json:"code,omitempty"`
	Usage   []tokenUsage `json:"usage,omitempty"`
}

type stepEvent struct {
	head
	StepName string `json:"stepName"`
}

type textStartEvent struct {
	head
	MessageID string `json:"messageId"`
	Role      string `json:"role"`
}

// contentEvent is TEXT_MESSAGE_CONTENT and REASONING_MESSAGE_CONTENT.
type contentEvent struct {
	head
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
}

// idEvent is the events that carry a message id alone: TEXT_MESSAGE_END,
// REASONING_START, REASONING_MESSAGE_END and REASONING_END.
type idEvent struct {
	head
	MessageID string `json:"messageId"`
}

type toolStartEvent struct {
	head
	ToolCallID   string `json:"toolCallId"`
	ToolCallName string `json:"toolCallName"`
}

type toolArgsEvent struct {
	head
	ToolCallID string `json:"toolCallId"`
	Delta      string `json:"delta"`
}

type toolEndEvent struct {
	head
	ToolCallID string `json:"toolCallId"`
}

type toolResultEvent struct {
	head
	MessageID  string       `json:"messageId"`
	ToolCallID string       `json:"toolCallId"`
	Content    string       `json:"content"`
	Role       string       `json:"role"`
	Metadata   *gatewayMeta `json:"metadata,omitempty"`
}

type snapshotEvent struct {
	head
	Snapshot *State `json:"snapshot"`
}

type deltaEvent struct {
	head
	Delta []patchOp `json:"delta"`
}

// patchOp is one RFC 6902 operation: only add and replace are produced,
// and both carry a value, null included.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

type customEvent struct {
	head
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

type rawEvent struct {
	head
	Event  json.RawMessage `json:"event"`
	Source string          `json:"source,omitempty"`
}
