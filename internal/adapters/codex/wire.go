package codex

import (
	"encoding/json"

	"github.com/agentgate/agentgate/internal/runs"
)

// The app-server protocol as far as the adapter reads it: JSON-RPC 2.0
// without the "jsonrpc" member, one object per line. Every struct is
// lenient: unknown members are ignored, and a member that is missing
// or of another type leaves its zero value, so that a newer CLI adding
// fields changes nothing here.

// message is any line from the server: a response (id with result or
// error), a notification (method and params) or a request to the client
// (id, method and params).
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// The JSON-RPC error codes the adapter tells apart.
const (
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

// request is a message to the server.
type request struct {
	ID     int    `json:"id"`
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// notification is a message to the server that has no answer.
type notification struct {
	Method string `json:"method"`
}

// reply answers a server→client request.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

type initializeParams struct {
	ClientInfo   clientInfo   `json:"clientInfo"`
	Capabilities capabilities `json:"capabilities"`
}

type clientInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title"`
	Version string `json:"version"`
}

type capabilities struct {
	// OptOut names notifications the gateway has no use for, so that the
	// server does not send them.
	OptOut []string `json:"optOutNotificationMethods,omitempty"`
}

// threadParams are the parameters of thread/start and thread/resume.
type threadParams struct {
	ThreadID              string `json:"threadId,omitempty"`
	Cwd                   string `json:"cwd"`
	Model                 string `json:"model,omitempty"`
	Sandbox               string `json:"sandbox"`
	ApprovalPolicy        string `json:"approvalPolicy"`
	DeveloperInstructions string `json:"developerInstructions,omitempty"`
	// Ephemeral is only sent to thread/start; a resumed thread keeps
	// being recorded where it is.
	Ephemeral *bool `json:"ephemeral,omitempty"`
	// Config overrides config.toml for this thread only, as -c would for
	// the process: the run's MCP servers travel here, so that nothing of
	// one run is written where another run would read it.
	Config *threadConfig `json:"config,omitempty"`
}

// threadConfig is the part of config.toml a thread overrides.
type threadConfig struct {
	MCPServers map[string]mcpServerConfig `json:"mcp_servers,omitempty"`
	// StartupGraceMS is mcp_optional_startup_grace_ms: how long the
	// first turn waits for servers still starting.
	StartupGraceMS int `json:"mcp_optional_startup_grace_ms,omitempty"`
}

// mcpServerConfig is one [mcp_servers.<name>] table: a stdio server
// (command, args, env) or a streamable HTTP one (url, http_headers).
type mcpServerConfig struct {
	Command     string            `json:"command,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	URL         string            `json:"url,omitempty"`
	HTTPHeaders map[string]string `json:"http_headers,omitempty"`
	// ToolsApproval is default_tools_approval_mode: "approve" runs the
	// server's tools unasked. Codex with approval policy never fails
	// every MCP call without it ("MCP tool call requires approval, but
	// approval policy is never"); "auto" fails too.
	ToolsApproval string `json:"default_tools_approval_mode,omitempty"`
	// Enabled false turns off a server of the operator's config.toml for
	// the thread.
	Enabled *bool `json:"enabled,omitempty"`
	// StartupTimeout is startup_timeout_sec: how long Codex waits for
	// the server to answer initialize before it drops the server.
	StartupTimeout int `json:"startup_timeout_sec,omitempty"`
}

type turnStartParams struct {
	ThreadID     string          `json:"threadId"`
	Input        []inputItem     `json:"input"`
	Effort       string          `json:"effort,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// inputItem is one UserInput of turn/start and turn/steer: text, or an
// image file by its path (localImage).
type inputItem struct {
	Type string
	Text string
	Path string
}

// MarshalJSON writes a text item with its text, even an empty one, which
// Codex requires, and an image with its path only.
func (in inputItem) MarshalJSON() ([]byte, error) {
	if in.Type == itemLocalImage {
		return json.Marshal(struct {
			Type string `json:"type"`
			Path string `json:"path"`
		}{in.Type, in.Path})
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{in.Type, in.Text})
}

// The kinds of input item the adapter sends.
const (
	itemText       = "text"
	itemLocalImage = "localImage"
)

// userInput is a prompt or message as Codex takes it: its images, each
// by the path the supervisor wrote it to, then its text. Codex reads the
// files itself and sends each to the model as an input_image, wrapped in
// <image name=[Image #n] path=…> text.
func userInput(text string, images []runs.Image) []inputItem {
	in := make([]inputItem, 0, len(images)+1)
	for _, im := range images {
		in = append(in, inputItem{Type: itemLocalImage, Path: im.Path})
	}
	if text != "" || len(in) == 0 {
		in = append(in, inputItem{Type: itemText, Text: text})
	}
	return in
}

type turnInterruptParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
}

// threadResult is the result of thread/start and thread/resume.
type threadResult struct {
	Thread struct {
		ID string `json:"id"`
	} `json:"thread"`
	Model         string `json:"model"`
	ModelProvider string `json:"modelProvider"`
}

type turnResult struct {
	Turn turn `json:"turn"`
}

type turn struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Error  *turnError      `json:"error"`
	Items  []item          `json:"items"`
	Raw    json.RawMessage `json:"-"`
}

// turnError is a failed turn's error. Info is codexErrorInfo: a string
// such as "contextWindowExceeded", or an object with one member such as
// {"httpConnectionFailed":{"httpStatusCode":401}}.
type turnError struct {
	Message           string          `json:"message"`
	Info              json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails string          `json:"additionalDetails"`
}

// item is a thread item. Only the members of the types the adapter maps
// are listed; the rest stay in the raw line.
type item struct {
	Type string `json:"type"`
	ID   string `json:"id"`

	// agentMessage
	Text string `json:"text"`
	// reasoning: Summary, and Content, which is a list of strings here
	// but of input objects in a userMessage.
	Summary []string        `json:"summary"`
	Content json.RawMessage `json:"content"`
	// commandExecution
	Command          string `json:"command"`
	Cwd              string `json:"cwd"`
	AggregatedOutput string `json:"aggregatedOutput"`
	ExitCode         *int   `json:"exitCode"`
	Status           string `json:"status"`
	// fileChange
	Changes []fileChange `json:"changes"`
	// mcpToolCall, dynamicToolCall, collabAgentToolCall
	Server            string          `json:"server"`
	Tool              string          `json:"tool"`
	Arguments         json.RawMessage `json:"arguments"`
	Result            json.RawMessage `json:"result"`
	Error             json.RawMessage `json:"error"`
	Prompt            string          `json:"prompt"`
	ReceiverThreadIDs []string        `json:"receiverThreadIds"`
	// webSearch
	Query string `json:"query"`
}

type fileChange struct {
	Path string `json:"path"`
	Kind struct {
		Type     string `json:"type"`
		MovePath string `json:"move_path"`
	} `json:"kind"`
	Diff string `json:"diff"`
}

// scoped is the part of most notifications that says where they belong.
type scoped struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
}

type itemNotification struct {
	scoped
	Item item `json:"item"`
}

type deltaNotification struct {
	scoped
	ItemID string `json:"itemId"`
	Delta  string `json:"delta"`
}

type turnNotification struct {
	ThreadID string `json:"threadId"`
	Turn     turn   `json:"turn"`
}

type tokenUsageNotification struct {
	scoped
	TokenUsage struct {
		Total tokenBreakdown `json:"total"`
		Last  tokenBreakdown `json:"last"`
	} `json:"tokenUsage"`
}

// tokenBreakdown is Codex's usage: input includes cached input, output
// includes reasoning, as the Responses API reports them.
type tokenBreakdown struct {
	Total      int64 `json:"totalTokens"`
	Input      int64 `json:"inputTokens"`
	Cached     int64 `json:"cachedInputTokens"`
	CacheWrite int64 `json:"cacheWriteInputTokens"`
	Output     int64 `json:"outputTokens"`
	Reasoning  int64 `json:"reasoningOutputTokens"`
}

type errorNotification struct {
	scoped
	Error     turnError `json:"error"`
	WillRetry bool      `json:"willRetry"`
}

type diffNotification struct {
	scoped
	Diff string `json:"diff"`
}

type planNotification struct {
	scoped
	Explanation string `json:"explanation"`
	Plan        []struct {
		Step   string `json:"step"`
		Status string `json:"status"`
	} `json:"plan"`
}

type warningNotification struct {
	ThreadID string `json:"threadId"`
	Message  string `json:"message"`
	Summary  string `json:"summary"`
	Details  string `json:"details"`
}

type rateLimitsNotification struct {
	RateLimits struct {
		LimitID              string          `json:"limitId"`
		RateLimitReachedType json.RawMessage `json:"rateLimitReachedType"`
		Primary              *struct {
			UsedPercent float64 `json:"usedPercent"`
			ResetsAt    int64   `json:"resetsAt"`
		} `json:"primary"`
	} `json:"rateLimits"`
}

// turnSteerParams adds input to the running turn, which must be
// expectedTurnId.
type turnSteerParams struct {
	ThreadID       string      `json:"threadId"`
	ExpectedTurnID string      `json:"expectedTurnId"`
	Input          []inputItem `json:"input"`
}

// steerResult is the answer to turn/steer.
type steerResult struct {
	TurnID string `json:"turnId"`
}

// commandApprovalParams are the parameters of
// item/commandExecution/requestApproval.
type commandApprovalParams struct {
	scoped
	ItemID  string          `json:"itemId"`
	Command string          `json:"command"`
	Cwd     string          `json:"cwd"`
	Reason  string          `json:"reason"`
	Actions json.RawMessage `json:"commandActions"`
}

// fileChangeApprovalParams are the parameters of
// item/fileChange/requestApproval; the changes themselves are only in
// the item/started of the item.
type fileChangeApprovalParams struct {
	scoped
	ItemID    string `json:"itemId"`
	Reason    string `json:"reason"`
	GrantRoot string `json:"grantRoot"`
}

// elicitationParams are the parameters of mcpServer/elicitation/request.
// Codex asks this way before an MCP tool call, with
// _meta.codex_approval_kind "mcp_tool_call".
type elicitationParams struct {
	scoped
	ServerName string `json:"serverName"`
	Message    string `json:"message"`
	Meta       struct {
		Kind       string          `json:"codex_approval_kind"`
		ToolName   string          `json:"tool_name"`
		ToolParams json.RawMessage `json:"tool_params"`
		CallID     string          `json:"call_id"`
	} `json:"_meta"`
}

// resolvedParams are the parameters of serverRequest/resolved: the
// server no longer waits for the answer to requestId.
type resolvedParams struct {
	ThreadID  string          `json:"threadId"`
	RequestID json.RawMessage `json:"requestId"`
}
