package api

// Add to internal/api once /tmp/agui-openapi.yaml is merged into openapi.yaml:
// the AG-UI schemas of the document describe what the handlers send and take.

import (
	"encoding/json"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestOpenAPIDescribesAGUI: the RunAgentInputs the tests post validate
// against AGUIRunAgentInput, every AG-UI event of a realistic run against
// AGUIEvent, and each snapshot's state against AGUIState.
func TestOpenAPIDescribesAGUI(t *testing.T) {
	for _, body := range []string{
		aguiRunInput(`,"forwardedProps":{"agent":"claude","approvals":"ask"}`),
		`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"` + runA + `/approval_1","status":"resolved","payload":{"approved":true}}]}`,
	} {
		validateOpenAPI(t, "AGUIRunAgentInput", []byte(body))
	}
	h := newHarness(t, Config{}, streamService(newMemLog(aguiSampleLog(t, runA)...), fixed(runs.Succeeded)))
	_, b := h.do(t, "GET", "/v1/runs/"+runA+"/events?format=ag-ui", "")
	snapshots := 0
	for _, f := range aguiFrames(t, b) {
		validateOpenAPI(t, "AGUIEvent", []byte(f.data))
		var ev struct {
			Type     string
			Snapshot json.RawMessage
		}
		json.Unmarshal([]byte(f.data), &ev)
		if ev.Type == "STATE_SNAPSHOT" {
			validateOpenAPI(t, "AGUIState", ev.Snapshot)
			snapshots++
		}
	}
	if snapshots < 2 {
		t.Errorf("%d snapshots", snapshots)
	}
}
