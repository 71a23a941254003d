package webhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// MaxPayloadBytes bounds a webhook's body: a larger run.completed loses its
// result, structured output and list of files (a receiver reads them with
// GET /v1/runs/{id}) and says so with "truncated": true.
const MaxPayloadBytes = 256 << 10

// Payload is the body of every webhook, in the Standard Webhooks shape.
type Payload struct {
	// Type is the event: run.completed or approval.requested.
	Type runs.EventType `json:"type"`
	// Timestamp is when the event happened (not when it was sent).
	Timestamp time.Time `json:"timestamp"`
	// Data is a *RunCompleted or an *ApprovalRequested.
	Data any `json:"data"`
	// Truncated says Data lost fields to fit MaxPayloadBytes.
	Truncated bool `json:"truncated,omitempty"`
}

// RunCompleted is the data of run.completed: the run as GET /v1/runs/{id}
// returns it once finished, less its diff (GET /v1/runs/{id}/diff has it),
// and the seq of its run.completed event in the run's log.
type RunCompleted struct {
	runs.Run
	Seq uint64 `json:"seq"`
}

// ApprovalRequested is the data of approval.requested: the run, and the
// request a client answers at AnswerPath with {"decision": …}.
type ApprovalRequested struct {
	RunID    string            `json:"run_id"`
	Agent    string            `json:"agent"`
	Tenant   string            `json:"tenant,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Approval is the approval.requested event's data: id, tool_call_id,
	// tool, input, mcp_server, options, expires_at.
	Approval json.RawMessage `json:"approval"`
	// AnswerPath is POST /v1/runs/{run_id}/approvals/{approval id}.
	AnswerPath string `json:"answer_path"`
	Seq        uint64 `json:"seq"`
}

// envelope is the part of a stored event's envelope a payload needs.
type envelope struct {
	Seq  uint64          `json:"seq"`
	Time time.Time       `json:"time"`
	Type runs.EventType  `json:"type"`
	Data json.RawMessage `json:"data"`
}

// buildPayload encodes the webhook of one event of run r: ev is the event
// as stored (its encoded envelope).
func buildPayload(r runs.Run, ev runs.StoredEvent) ([]byte, error) {
	var env envelope
	if err := json.Unmarshal(ev.JSON, &env); err != nil {
		return nil, fmt.Errorf("decode %s event: %w", ev.Type, err)
	}
	p := Payload{Type: ev.Type, Timestamp: env.Time.UTC()}
	switch ev.Type {
	case runs.EventRunCompleted:
		r.Diff = ""
		rc := &RunCompleted{Run: r, Seq: ev.Seq}
		p.Data = rc
		b, err := json.Marshal(p)
		if err != nil || len(b) <= MaxPayloadBytes {
			return b, err
		}
		rc.Result, rc.StructuredOutput, rc.Files = "", nil, nil
		rc.FilesTruncated = rc.FilesTruncated || len(r.Files) > 0
		p.Truncated = true
		return json.Marshal(p)
	case runs.EventApprovalRequested:
		var id struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(env.Data, &id); err != nil || id.ID == "" {
			return nil, fmt.Errorf("approval.requested without an id")
		}
		p.Data = &ApprovalRequested{
			RunID: r.ID, Agent: r.Agent, Tenant: r.Tenant, Metadata: r.Metadata, Approval: env.Data,
			AnswerPath: "/v1/runs/" + r.ID + "/approvals/" + id.ID, Seq: ev.Seq,
		}
		b, err := json.Marshal(p)
		if err != nil || len(b) <= MaxPayloadBytes {
			return b, err
		}
		return nil, fmt.Errorf("approval.requested is %d bytes, more than %d", len(b), MaxPayloadBytes)
	}
	return nil, fmt.Errorf("no webhook for %s events", ev.Type)
}

// messageID is the webhook-id of one event to one URL: the same however
// often, and by whichever replica, it is made, so that recording it twice
// records it once.
func messageID(runID string, seq uint64, target, url string) string {
	h := sha256.New()
	h.Write([]byte(runID))
	h.Write([]byte{0})
	h.Write(strconv.AppendUint(nil, seq, 10))
	h.Write([]byte{0})
	h.Write([]byte(target))
	h.Write([]byte{0})
	h.Write([]byte(url))
	return "msg_" + hex.EncodeToString(h.Sum(nil)[:16])
}
