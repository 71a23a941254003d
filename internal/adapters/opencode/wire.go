package opencode

import "encoding/json"

// wireLine is one line of `opencode run --format json`:
// {"type","timestamp","sessionID","part":{…}} or, for a failure,
// {"type":"error",…,"error":{…}}.
type wireLine struct {
	Type      string     `json:"type"`
	Timestamp int64      `json:"timestamp"`
	SessionID string     `json:"sessionID"`
	Part      *wirePart  `json:"part"`
	Error     *wireError `json:"error"`
}

// wirePart is a message part: the union of the fields the decoder reads
// from step-start, text, reasoning, tool and step-finish parts.
type wirePart struct {
	ID        string `json:"id"`
	MessageID string `json:"messageID"`
	SessionID string `json:"sessionID"`
	Type      string `json:"type"`

	// text, reasoning
	Text string `json:"text"`

	// tool
	Tool   string     `json:"tool"`
	CallID string     `json:"callID"`
	State  *wireState `json:"state"`

	// step-finish
	Reason string      `json:"reason"`
	Tokens *wireTokens `json:"tokens"`
	Cost   *float64    `json:"cost"`
}

// wireState is a tool part's state; run prints a tool only once its
// status is completed or error.
type wireState struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Output   string          `json:"output"`
	Error    string          `json:"error"`
	Title    string          `json:"title"`
	Metadata json.RawMessage `json:"metadata"`
}

// wireToolMeta is the part of a tool's metadata the decoder reads: bash's
// exit status, write's file and whether it existed, edit's file and diff,
// todowrite's list.
type wireToolMeta struct {
	Exit     *int64 `json:"exit"`
	Filepath string `json:"filepath"`
	Exists   *bool  `json:"exists"`
	Diff     string `json:"diff"`
	Filediff *struct {
		File string `json:"file"`
	} `json:"filediff"`
	Todos []wireTodo `json:"todos"`
}

// wireTodo is one entry of todowrite's list.
type wireTodo struct {
	Content string `json:"content"`
	Status  string `json:"status"`
}

// wireInput is the part of a file tool's input the decoder reads.
type wireInput struct {
	FilePath string `json:"filePath"`
}

// wireTokens is a step's usage. OpenCode takes the cache out of input
// and the reasoning out of output: input = prompt tokens - cache read
// (- cache write), output = completion tokens - reasoning.
type wireTokens struct {
	Total     int64 `json:"total"`
	Input     int64 `json:"input"`
	Output    int64 `json:"output"`
	Reasoning int64 `json:"reasoning"`
	Cache     struct {
		Read  int64 `json:"read"`
		Write int64 `json:"write"`
	} `json:"cache"`
}

// wireError is a session error: {"name","data":{…}}. APIError's data has
// message, statusCode, isRetryable, responseHeaders and responseBody;
// the other errors a message at most.
type wireError struct {
	Name string         `json:"name"`
	Data *wireErrorData `json:"data"`
}

type wireErrorData struct {
	Message         string            `json:"message"`
	StatusCode      *int              `json:"statusCode"`
	IsRetryable     *bool             `json:"isRetryable"`
	ResponseHeaders map[string]string `json:"responseHeaders"`
	ResponseBody    string            `json:"responseBody"`
	ProviderID      string            `json:"providerID"`
}

// wireBody is the OpenAI-shaped error body many providers send, which
// APIError's responseBody keeps: its code tells a full context apart from
// other 400s.
type wireBody struct {
	Error *struct {
		Code    json.RawMessage `json:"code"`
		Type    string          `json:"type"`
		Message string          `json:"message"`
	} `json:"error"`
}
