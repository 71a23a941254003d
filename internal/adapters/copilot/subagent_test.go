package copilot

import (
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestSubagentLines decodes the durable subagent.* lines. They are built
// from the CLI's own event schema (schemas/session-events.schema.json
// and copilot-sdk/generated/session-events.d.ts in the package it unpacks
// under ~/.cache/copilot/pkg), not recorded: no test of ours makes the
// CLI start a subagent. Before, each became agent.unparsed.
func TestSubagentLines(t *testing.T) {
	quiet := []string{
		`{"type":"subagent.selected","data":{"agentName":"explore","agentDisplayName":"Explore","tools":null},"id":"e1","timestamp":"2026-01-01T00:00:00Z","parentId":null}`,
		`{"type":"subagent.started","data":{"toolCallId":"call_1","agentName":"explore","agentDisplayName":"Explore","agentDescription":"d"},"id":"e2","timestamp":"2026-01-01T00:00:00Z","parentId":"e1"}`,
		`{"type":"subagent.configured","data":{"model":"m","multiTurn":false},"id":"e3","timestamp":"2026-01-01T00:00:00Z","parentId":"e2","agentId":"a1"}`,
		`{"type":"subagent.completed","data":{"toolCallId":"call_1","agentName":"explore","agentDisplayName":"Explore","durationMs":1200},"id":"e4","timestamp":"2026-01-01T00:00:01Z","parentId":"e3"}`,
		`{"type":"subagent.deselected","data":{},"id":"e5","timestamp":"2026-01-01T00:00:01Z","parentId":"e4"}`,
	}
	for _, line := range quiet {
		if evs := New().NewDecoder(runs.Invocation{}).Decode([]byte(line)); len(evs) != 0 {
			t.Errorf("%s: events %+v, want none (the task call tells it)", line, evs)
		}
	}
	failed := `{"type":"subagent.failed","data":{"toolCallId":"call_1","agentName":"explore","agentDisplayName":"Explore","error":"model refused"},"id":"e6","timestamp":"2026-01-01T00:00:01Z","parentId":"e4"}`
	evs := New().NewDecoder(runs.Invocation{}).Decode([]byte(failed))
	if len(evs) != 1 || evs[0].Type != runs.EventWarning || evs[0].ParentToolCallID != "call_1" ||
		evs[0].Data != (runs.WarningData{Code: "subagent_failed", Message: "Explore failed: model refused"}) {
		t.Errorf("subagent.failed: events %+v, want a subagent_failed warning inside call_1", evs)
	}
}
