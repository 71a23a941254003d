package acp

import (
	"encoding/json"
	"strings"
)

// message is one JSON-RPC 2.0 object as read from the agent: a response
// (id with result or error), a request from the agent (id and method) or a
// notification (method without id).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// hasID reports whether the message carries an id (null is none).
func (m *message) hasID() bool {
	return len(m.ID) > 0 && string(m.ID) != "null"
}

// RPCError is a JSON-RPC error object, as the agent answers a request it
// could not serve.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Text is the error's message with its data, for a person: agents put the
// model API's own error (a quoted body, a status) in either.
func (e *RPCError) Text() string {
	if e == nil {
		return ""
	}
	msg := strings.TrimSpace(e.Message)
	if d := strings.TrimSpace(string(e.Data)); d != "" && d != "null" && d != `""` && d != "{}" {
		var s string
		if json.Unmarshal(e.Data, &s) == nil {
			d = s
		}
		if !strings.Contains(msg, d) {
			msg += ": " + d
		}
	}
	return msg
}

// The JSON-RPC error codes the client answers with.
const (
	codeMethodNotFound = -32601
)

// outRequest is a request or notification the client sends.
type outRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int64 `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// outResponse is the client's answer to an agent's request.
type outResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// The methods of the protocol the client uses.
const (
	methodInitialize        = "initialize"
	methodSessionNew        = "session/new"
	methodSessionLoad       = "session/load"
	methodSetMode           = "session/set_mode"
	methodSetConfigOption   = "session/set_config_option"
	methodPrompt            = "session/prompt"
	methodCancel            = "session/cancel"
	methodUpdate            = "session/update"
	methodRequestPermission = "session/request_permission"
)

type initializeParams struct {
	ProtocolVersion    int                `json:"protocolVersion"`
	ClientCapabilities clientCapabilities `json:"clientCapabilities"`
	ClientInfo         *clientInfo        `json:"clientInfo,omitempty"`
}

type clientCapabilities struct {
	FS       fsCapabilities `json:"fs"`
	Terminal bool           `json:"terminal"`
}

type fsCapabilities struct {
	ReadTextFile  bool `json:"readTextFile"`
	WriteTextFile bool `json:"writeTextFile"`
}

type clientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type sessionNewParams struct {
	Cwd        string            `json:"cwd"`
	MCPServers []json.RawMessage `json:"mcpServers"`
}

// initializeResult is what the client reads of initialize's answer.
type initializeResult struct {
	AgentCapabilities struct {
		LoadSession bool `json:"loadSession"`
	} `json:"agentCapabilities"`
}

type sessionLoadParams struct {
	SessionID  string            `json:"sessionId"`
	Cwd        string            `json:"cwd"`
	MCPServers []json.RawMessage `json:"mcpServers"`
}

// sessionModels is the models state a session/new or session/load
// answer may carry.
type sessionModels struct {
	CurrentModelID string `json:"currentModelId"`
}

// sessionNewResult is what the client reads of session/new's answer.
type sessionNewResult struct {
	SessionID string         `json:"sessionId"`
	Models    *sessionModels `json:"models"`
}

// sessionLoadResult is what the client reads of session/load's answer
// (null for some agents).
type sessionLoadResult struct {
	Models *sessionModels `json:"models"`
}

type setConfigOptionParams struct {
	SessionID string `json:"sessionId"`
	ConfigID  string `json:"configId"`
	Type      string `json:"type,omitempty"`
	Value     any    `json:"value"`
}

type setModeParams struct {
	SessionID string `json:"sessionId"`
	ModeID    string `json:"modeId"`
}

type promptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []ContentBlock `json:"prompt"`
}

// promptResult is session/prompt's answer, the end of a turn.
type promptResult struct {
	StopReason string `json:"stopReason"`
}

type cancelParams struct {
	SessionID string `json:"sessionId"`
}

// ContentBlock is an ACP content block: text here; images and resources
// keep their fields raw.
type ContentBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// MimeType and Data (base64) are an image block's.
	MimeType string `json:"mimeType,omitempty"`
	Data     string `json:"data,omitempty"`
}

// updateParams are session/update's params.
type updateParams struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

// update is the union of the session/update kinds the core reads.
type update struct {
	SessionUpdate string `json:"sessionUpdate"`
	// agent_message_chunk, agent_thought_chunk, user_message_chunk
	Content json.RawMessage `json:"content"`
	// plan
	Entries []planEntry `json:"entries"`
}

type planEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority"`
	Status   string `json:"status"`
}

// ToolCall is an ACP tool call as tool_call, tool_call_update and
// session/request_permission carry it. In an update only the fields that
// changed are set.
type ToolCall struct {
	ToolCallID string            `json:"toolCallId"`
	Title      string            `json:"title,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Status     string            `json:"status,omitempty"`
	RawInput   json.RawMessage   `json:"rawInput,omitempty"`
	RawOutput  json.RawMessage   `json:"rawOutput,omitempty"`
	Content    []ToolCallContent `json:"content,omitempty"`
	Locations  []struct {
		Path string `json:"path"`
	} `json:"locations,omitempty"`
}

// ToolCallContent is one entry of a tool call's content: "content" (a
// content block), "diff" (a file edit) or "terminal".
type ToolCallContent struct {
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content,omitempty"`
	Path    string          `json:"path,omitempty"`
	OldText *string         `json:"oldText,omitempty"`
	NewText *string         `json:"newText,omitempty"`
}

// The tool call statuses.
const (
	toolPending    = "pending"
	toolInProgress = "in_progress"
	toolCompleted  = "completed"
	toolFailed     = "failed"
)

// permissionParams are session/request_permission's params.
type permissionParams struct {
	SessionID string             `json:"sessionId"`
	ToolCall  ToolCall           `json:"toolCall"`
	Options   []permissionOption `json:"options"`
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// The permission option kinds; options are picked by kind, never by id,
// which differ per agent.
const (
	kindAllowOnce    = "allow_once"
	kindAllowAlways  = "allow_always"
	kindRejectOnce   = "reject_once"
	kindRejectAlways = "reject_always"
)

// permissionOutcome is the client's answer to session/request_permission.
type permissionOutcome struct {
	Outcome outcome `json:"outcome"`
}

type outcome struct {
	Outcome  string `json:"outcome"` // "selected" or "cancelled"
	OptionID string `json:"optionId,omitempty"`
}
