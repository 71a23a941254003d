package claude

import "encoding/json"

// wireLine is one stream-json line: the union of the fields the decoder
// reads from every line type it knows, so that a line is scanned once.
// "message" is an object on assistant and user lines and a string on
// system/permission_denied lines, hence raw.
type wireLine struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	SessionID       string          `json:"session_id"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	Message         json.RawMessage `json:"message"`

	// system/init
	Model string   `json:"model"`
	Tools []string `json:"tools"`

	// system/api_retry; Error is also the assistant line's error kind.
	Attempt      int    `json:"attempt"`
	MaxRetries   int    `json:"max_retries"`
	RetryDelayMS int64  `json:"retry_delay_ms"`
	ErrorStatus  *int   `json:"error_status"`
	Error        string `json:"error"`

	// system/permission_denied
	ToolName  string `json:"tool_name"`
	ToolUseID string `json:"tool_use_id"`

	// tool_progress; ToolName and ToolUseID above too.
	ElapsedTimeSeconds *int64             `json:"elapsed_time_seconds"`
	SubagentType       string             `json:"subagent_type"`
	SubagentRetry      *wireSubagentRetry `json:"subagent_retry"`

	// assistant
	IsAPIErrorMessage bool `json:"is_api_error_message"`

	// user: a line of ours echoed by --replay-user-messages
	IsReplay bool `json:"isReplay"`

	// control_request, control_cancel_request, control_response
	RequestID string               `json:"request_id"`
	Request   *wireControlRequest  `json:"request"`
	Response  *wireControlResponse `json:"response"`

	// stream_event
	Event        *wireStreamEvent `json:"event"`
	APIMessageID string           `json:"api_message_id"`

	// rate_limit_event
	RateLimitInfo *wireRateLimit `json:"rate_limit_info"`

	// result
	IsError           bool              `json:"is_error"`
	Result            string            `json:"result"`
	NumTurns          int               `json:"num_turns"`
	TotalCostUSD      *float64          `json:"total_cost_usd"`
	StopReason        *string           `json:"stop_reason"`
	TerminalReason    string            `json:"terminal_reason"`
	APIErrorStatus    *int              `json:"api_error_status"`
	PermissionDenials []wireDenial      `json:"permission_denials"`
	Errors            []string          `json:"errors"`
	StructuredOutput  json.RawMessage   `json:"structured_output"`
	Usage             *wireUsage        `json:"usage"`
	ModelUsage        map[string]wireMU `json:"modelUsage"`
	// ModelUsageSinceLastResult is the turn's own, where modelUsage
	// adds up over the process.
	ModelUsageSinceLastResult map[string]wireMU `json:"model_usage_since_last_result"`
}

// wireSubagentRetry is a tool_progress line's subagent_retry: a
// subagent's API call failed and will be retried.
type wireSubagentRetry struct {
	Attempt       int    `json:"attempt"`
	MaxRetries    int    `json:"max_retries"`
	RetryDelayMS  int64  `json:"retry_delay_ms"`
	ErrorStatus   *int   `json:"error_status"`
	ErrorCategory string `json:"error_category"`
}

// wireControlRequest is a control_request's request: the CLI asks
// (can_use_tool) whether a tool call may run.
type wireControlRequest struct {
	Subtype               string            `json:"subtype"`
	ToolName              string            `json:"tool_name"`
	Input                 json.RawMessage   `json:"input"`
	ToolUseID             string            `json:"tool_use_id"`
	PermissionSuggestions []json.RawMessage `json:"permission_suggestions"`
}

// wireControlResponse is a control_response's response.
type wireControlResponse struct {
	Subtype   string `json:"subtype"`
	RequestID string `json:"request_id"`
	Error     string `json:"error"`
}

// wireMessage is the message of an assistant or user line. Content is a
// block array, or a string on user lines.
type wireMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
}

// wireBlock is one content block. Content is a tool_result's content: a
// string or a block array.
type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// wireStreamEvent is the raw API event a stream_event line wraps; only
// text and thinking deltas, and the usage of message_start and
// message_delta, are read.
type wireStreamEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta *struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"delta"`
	// Usage is message_delta's: the API's running totals.
	Usage   *wireUsage `json:"usage"`
	Message *struct {
		Usage *wireUsage `json:"usage"`
	} `json:"message"`
}

// wireRateLimit is a rate_limit_event's rate_limit_info.
type wireRateLimit struct {
	Status        string `json:"status"`
	ResetsAt      int64  `json:"resetsAt"`
	RateLimitType string `json:"rateLimitType"`
}

// wireDenial is one entry of result.permission_denials.
type wireDenial struct {
	ToolName  string `json:"tool_name"`
	ToolUseID string `json:"tool_use_id"`
}

// wireUsage is result.usage, Anthropic semantics: input_tokens excludes
// both cache counts.
type wireUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// wireMU is one model's entry of result.modelUsage, in camelCase.
type wireMU struct {
	InputTokens              int64   `json:"inputTokens"`
	OutputTokens             int64   `json:"outputTokens"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
	ThinkingTokens           int64   `json:"thinkingTokens"`
	CostUSD                  float64 `json:"costUSD"`
}
