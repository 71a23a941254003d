package copilot

import (
	"encoding/json"
	"errors"
)

// wireLine is one line of `--output-format json`. Every line but the last
// is an event {type, data, id, timestamp, parentId, ephemeral?}; the last
// is {type: "result", sessionId, exitCode, usage}, whose usage holds
// durations, not tokens.
type wireLine struct {
	Type      string          `json:"type"`
	Ephemeral bool            `json:"ephemeral"`
	Data      json.RawMessage `json:"data"`

	// result
	SessionID string `json:"sessionId"`
	ExitCode  *int   `json:"exitCode"`
}

// wireData is the union of the data fields the decoder reads from every
// event type it knows, so that a line is scanned once. A field of an
// unexpected type is left empty (see lenient).
type wireData struct {
	// session.tools_updated, assistant.message, model.call_failure
	Model string `json:"model"`
	// session.start, session.resume
	SessionID string `json:"sessionId"`

	// assistant.message, assistant.message_delta
	MessageID     string            `json:"messageId"`
	Content       string            `json:"content"`
	DeltaContent  string            `json:"deltaContent"`
	ToolRequests  []wireToolRequest `json:"toolRequests"`
	ReasoningText string            `json:"reasoningText"`
	// APICallID names the model request that answered (the provider's
	// response id), as the session's usage record does.
	APICallID       string `json:"apiCallId"`
	ReasoningOpaque string `json:"reasoningOpaque"`
	ReasoningBlocks *struct {
		Provider string `json:"provider"`
	} `json:"reasoningBlocks"`

	// tool.execution_start, tool.execution_complete
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Arguments  json.RawMessage `json:"arguments"`
	wireMCP
	Success *bool `json:"success"`
	Result  *struct {
		Content string `json:"content"`
		// DetailedContent holds a file tool's diff.
		DetailedContent string `json:"detailedContent"`
	} `json:"result"`
	// FileEdits are the files a file tool (create, edit) changed.
	FileEdits []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"fileEdits"`
	// Error is {message, code} on tool.execution_complete.
	Error json.RawMessage `json:"error"`

	// subagent.failed; its error is a string
	AgentDisplayName string `json:"agentDisplayName"`

	// assistant.turn_retry, abort
	Reason string `json:"reason"`

	// session.mcp_server_status_changed
	ServerName string `json:"serverName"`
	Status     string `json:"status"`

	// model.call_failure
	StatusCode   int    `json:"statusCode"`
	FailureKind  string `json:"failureKind"`
	ErrorCode    string `json:"errorCode"`
	ErrorMessage string `json:"errorMessage"`

	// session.error; Message also of session.info and session.warning
	ErrorType   string `json:"errorType"`
	Message     string `json:"message"`
	InfoType    string `json:"infoType"`
	WarningType string `json:"warningType"`
}

// wireToolRequest is one tool call an assistant.message asks for.
// Arguments is an object for function tools.
type wireToolRequest struct {
	ToolCallID string          `json:"toolCallId"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	wireMCP
}

// wireMCP names the MCP server and tool of a call of an MCP tool, on
// toolRequests entries and tool.execution_start: mcpServerName "demo",
// mcpToolName "reverse_text" for the tool "demo-reverse_text".
type wireMCP struct {
	MCPServerName string `json:"mcpServerName"`
	MCPToolName   string `json:"mcpToolName"`
}

// wireToolError is the error of a tool call that did not run or failed:
// code "denied" when the permission rules refused it.
type wireToolError struct {
	Message string `json:"message"`
	Code    string `json:"code"`
}

// wireUsageFile is what --usage-output-file holds: the session's
// accounting, whose modelMetrics.<model>.usage has the token counts. Its
// inputTokens includes cacheReadTokens and its outputTokens includes
// reasoningTokens, as the OpenAI APIs count them.
type wireUsageFile struct {
	CurrentModel string                     `json:"currentModel"`
	ModelMetrics map[string]wireModelMetric `json:"modelMetrics"`
}

type wireModelMetric struct {
	Usage wireTokens `json:"usage"`
}

type wireTokens struct {
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens"`
	CacheWriteTokens int64 `json:"cacheWriteTokens"`
	ReasoningTokens  int64 `json:"reasoningTokens"`
}

// lenient unmarshals b into v, leaving a field of an unexpected type at
// its zero value: json.Unmarshal fills the other fields all the same. The
// CLI's event payloads change faster than the adapter.
func lenient(b []byte, v any) error {
	err := json.Unmarshal(b, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return nil
	}
	return err
}
