package agui

import (
	"encoding/json"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// State is the AG-UI state of a run: what a client shows beside the
// conversation. It goes out whole (STATE_SNAPSHOT) when an AG-UI run
// opens and as JSON Patch operations (STATE_DELTA) after, and every member
// is always present, so that a patch's replace always finds its path. An
// AG-UI client sends the state back with its next input, and run_id there
// lets the gateway continue that run's session.
type State struct {
	RunID     string `json:"run_id"`
	Agent     string `json:"agent"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	// Status is the run's status, or awaiting_approval while an AG-UI run
	// has ended with an interrupt.
	Status  string                `json:"status"`
	Usage   runs.Usage            `json:"usage"`
	CostUSD *float64              `json:"cost_usd"`
	Plan    *runs.PlanUpdatedData `json:"plan"`
	// FilesChanged are the files the agent changed with its edit tools, in
	// order (a file changed twice is listed twice), then, at the run's
	// end, the other files the run changed in its directory (by shell
	// commands, say), each once.
	FilesChanged    []FileChange     `json:"files_changed"`
	PendingApproval *PendingApproval `json:"pending_approval"`
}

// StatusAwaitingApproval is State.Status while the run waits for the
// answer to an interrupt.
const StatusAwaitingApproval = "awaiting_approval"

// FileChange is one file.changed, without its diff.
type FileChange struct {
	Path       string `json:"path"`
	Kind       string `json:"kind"`
	MovePath   string `json:"move_path,omitempty"`
	Status     string `json:"status,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// PendingApproval is the approval an AG-UI run was interrupted for.
type PendingApproval struct {
	ID string `json:"id"`
	// InterruptID is the id of the interrupt, which a resume entry names.
	InterruptID string          `json:"interrupt_id"`
	ToolCallID  string          `json:"tool_call_id,omitempty"`
	Tool        string          `json:"tool"`
	Input       json.RawMessage `json:"input,omitempty"`
	MCPServer   string          `json:"mcp_server,omitempty"`
	Options     []runs.Decision `json:"options"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
}

// The JSON pointers of State's members.
const (
	pathSessionID       = "/session_id"
	pathModel           = "/model"
	pathStatus          = "/status"
	pathUsage           = "/usage"
	pathCost            = "/cost_usd"
	pathPlan            = "/plan"
	pathFiles           = "/files_changed/-"
	pathPendingApproval = "/pending_approval"
)

func replace(path string, v any) patchOp { return patchOp{Op: "replace", Path: path, Value: v} }
