package api

import (
	"encoding/json"

	"github.com/agentgate/agentgate/internal/runs"
)

// decodeMCPServers parses a run request's mcp_servers: nil when absent.
func decodeMCPServers(raw json.RawMessage) (map[string]runs.MCPServer, error) {
	if raw == nil {
		return nil, nil
	}
	return nil, invalidField(runs.FieldMCPServers, "is not supported yet")
}
