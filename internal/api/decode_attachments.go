package api

import (
	"encoding/json"

	"github.com/agentgate/agentgate/internal/runs"
)

// decodeAttachments parses the attachments of a run request or a message,
// named field: nil when absent.
func decodeAttachments(field string, raw json.RawMessage) ([]runs.Attachment, error) {
	if raw == nil {
		return nil, nil
	}
	return nil, invalidField(field, "is not supported yet")
}
