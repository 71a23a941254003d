package gemini

import "encoding/json"

// wireLine is one stream-json line: the union of the fields the decoder
// reads from every line type, so that a line is scanned once. content and
// output are strings in 0.61.0 but read raw, so that another shape
// becomes agent.unparsed rather than a lost line.
type wireLine struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`

	// init
	SessionID string `json:"session_id"`
	Model     string `json:"model"`

	// message
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Delta   bool            `json:"delta"`

	// tool_use
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`

	// tool_result and result; error is also on a failed result
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  *wireError      `json:"error"`

	// error
	Severity string `json:"severity"`
	Message  string `json:"message"`

	// result
	Stats *wireStats `json:"stats"`
}

// wireError is the error of a failed tool_result or result.
type wireError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// wireStats is result.stats: sums over every model call of the run, in
// Gemini's semantics. input_tokens is Σ promptTokenCount and includes
// cached; output_tokens is Σ candidatesTokenCount and excludes thoughts;
// total_tokens is Σ totalTokenCount, which includes thoughts.
type wireStats struct {
	TotalTokens  int64                    `json:"total_tokens"`
	InputTokens  int64                    `json:"input_tokens"`
	OutputTokens int64                    `json:"output_tokens"`
	Cached       int64                    `json:"cached"`
	Input        int64                    `json:"input"`
	DurationMS   int64                    `json:"duration_ms"`
	ToolCalls    int                      `json:"tool_calls"`
	Models       map[string]wireModelStat `json:"models"`
}

// wireModelStat is one model's entry of result.stats.models.
type wireModelStat struct {
	TotalTokens  int64 `json:"total_tokens"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Cached       int64 `json:"cached"`
	Input        int64 `json:"input"`
}

// googleError is the body of a Google API error, which the CLI quotes in
// a failed result's message: {"error":{"code","message","status","details"}}.
type googleError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type   string `json:"@type"`
			Reason string `json:"reason"`
		} `json:"details"`
	} `json:"error"`
}
