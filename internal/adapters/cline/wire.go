package cline

import "encoding/json"

// wireLine is one line of `cline --json`: {"ts","type",…}. The union of
// the fields of the types the decoder reads: hook_event, agent_event,
// run_result, and error (the one line of a refused invocation).
type wireLine struct {
	Type string `json:"type"`

	// hook_event
	HookEventName string `json:"hookEventName"`
	TaskID        string `json:"taskId"`

	// agent_event
	Event *wireEvent `json:"event"`

	// run_result
	FinishReason string     `json:"finishReason"`
	Iterations   int        `json:"iterations"`
	Usage        *wireUsage `json:"usage"`
	Text         string     `json:"text"`
	Model        *struct {
		ID string `json:"id"`
	} `json:"model"`

	// error
	Message string `json:"message"`
}

// wireEvent is an agent_event's event: iteration_start, content_start,
// content_update, content_end, usage, iteration_end, done, error.
type wireEvent struct {
	Type        string `json:"type"`
	ContentType string `json:"contentType"`

	// content_start of text: the chunk and the text so far.
	Text string `json:"text"`

	// content_start / content_end of a tool.
	ToolName   string          `json:"toolName"`
	ToolCallID string          `json:"toolCallId"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output"`
	Error      json.RawMessage `json:"error"`

	// usage: the running totals of the run.
	TotalInputTokens     int64    `json:"totalInputTokens"`
	TotalOutputTokens    int64    `json:"totalOutputTokens"`
	TotalCacheReadTokens int64    `json:"totalCacheReadTokens"`
	TotalCacheWrite      int64    `json:"totalCacheWriteTokens"`
	TotalCost            *float64 `json:"totalCost"`

	// error
	ErrorClass  string `json:"errorClass"`
	Recoverable bool   `json:"recoverable"`
}

// wireUsage is run_result's usage, and a session record's
// metadata.usage: inputTokens counts the cached tokens too.
type wireUsage struct {
	InputTokens      int64    `json:"inputTokens"`
	OutputTokens     int64    `json:"outputTokens"`
	CacheReadTokens  int64    `json:"cacheReadTokens"`
	CacheWriteTokens int64    `json:"cacheWriteTokens"`
	TotalCost        *float64 `json:"totalCost"`
}

// wireError is an error event's error: {"name","message","stack"}.
type wireError struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// wireCommandResult is one entry of run_commands' output:
// {"query","result","success"}.
type wireCommandResult struct {
	Query   string `json:"query"`
	Result  string `json:"result"`
	Error   string `json:"error"`
	Success *bool  `json:"success"`
}
