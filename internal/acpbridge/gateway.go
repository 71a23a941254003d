package acpbridge

import (
	"context"
	"encoding/json"
)

// Gateway is the part of the gateway's HTTP API the bridge uses. Every
// method's error is an *APIError when the gateway answered with one, and
// any other error when it could not be reached.
type Gateway interface {
	// CreateRun creates a run (POST /v1/runs) and returns its id.
	CreateRun(ctx context.Context, req RunRequest) (string, error)
	// SendMessage sends a follow-up message to an interactive run (POST
	// /v1/runs/{id}/messages) and returns the message's id, the
	// message_id of the turn.started that begins its turn.
	SendMessage(ctx context.Context, runID string, msg Message) (string, error)
	// Decide answers an approval request (POST
	// /v1/runs/{id}/approvals/{approval}).
	Decide(ctx context.Context, runID, approvalID, decision string) error
	// Interrupt ends the running turn (POST /v1/runs/{id}/interrupt).
	Interrupt(ctx context.Context, runID string) error
	// Close ends an interactive run's session (POST /v1/runs/{id}/close).
	Close(ctx context.Context, runID string) error
	// UploadImage stores an image (POST /v1/files) and returns its file id.
	UploadImage(ctx context.Context, mediaType string, data []byte) (string, error)
	// Follow delivers the run's events in order, each once, resuming a
	// dropped stream, until run.completed (delivered too) or ctx ends.
	// It returns nil after run.completed or when the run ended with
	// nothing more to deliver, and the error that stopped it otherwise.
	Follow(ctx context.Context, runID string, deliver func(Event)) error
}

// APIError is an error answer of the gateway: its stable code and its
// sentence for a person.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Event is one of a run's events, as the gateway streams it.
type Event struct {
	Seq  uint64
	Type string
	Data json.RawMessage
}

// Attachment is an image of a prompt, uploaded to the gateway.
type Attachment struct {
	FileID string `json:"file_id"`
}

// Workspace is the run's directory as POST /v1/runs takes it: kept as
// the JSON the flags or the editor gave, which the gateway checks.
type Workspace = json.RawMessage

// RunRequest is the body of POST /v1/runs that the bridge sends: zero
// values are left out, which the gateway reads as its defaults.
type RunRequest struct {
	Agent          string               `json:"agent"`
	Prompt         string               `json:"prompt"`
	Model          string               `json:"model,omitempty"`
	Permission     string               `json:"permission,omitempty"`
	Approvals      string               `json:"approvals,omitempty"`
	Interactive    bool                 `json:"interactive"`
	TimeoutSeconds int                  `json:"timeout_seconds,omitempty"`
	Workspace      Workspace            `json:"workspace,omitempty"`
	Metadata       map[string]string    `json:"metadata,omitempty"`
	Attachments    []Attachment         `json:"attachments,omitempty"`
	MCPServers     map[string]MCPServer `json:"mcp_servers,omitempty"`
}

// MCPServer is one of a run's MCP servers as POST /v1/runs takes it: a
// stdio server (Command) or a remote one (URL).
type MCPServer struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Message is the body of POST /v1/runs/{id}/messages.
type Message struct {
	Text        string       `json:"text"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Settings are what a new session's run is made with: the command's
// flags, which a session/new's _meta.agentgate may override.
type Settings struct {
	Agent          string            `json:"agent"`
	Model          string            `json:"model,omitempty"`
	Permission     string            `json:"permission,omitempty"`
	Approvals      string            `json:"approvals,omitempty"`
	Workspace      Workspace         `json:"workspace,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	TimeoutSeconds int               `json:"-"`
}
