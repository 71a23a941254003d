package claude

import (
	"bytes"
	"encoding/json"
	"flag"
	"reflect"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/runs"
)

var update = flag.Bool("update", false, "TestGolden rewrites testdata/<case>.golden.json")

// golden is what a recording decodes to: the events, then the outcome.
type golden struct {
	Events  []agenttest.GoldenEvent `json:"events"`
	Outcome goldenOutcome           `json:"outcome"`
}

type goldenOutcome struct {
	Events           []agenttest.GoldenEvent `json:"events,omitempty"`
	Status           runs.State              `json:"status"`
	StopReason       string                  `json:"stop_reason,omitempty"`
	Result           string                  `json:"result,omitempty"`
	StructuredOutput json.RawMessage         `json:"structured_output,omitempty"`
	Usage            runs.Usage              `json:"usage"`
	SessionCostUSD   *float64                `json:"session_cost_usd,omitempty"`
	NumTurns         int                     `json:"num_turns,omitempty"`
	SessionID        string                  `json:"session_id,omitempty"`
	Model            string                  `json:"model,omitempty"`
	Error            *runs.RunError          `json:"error,omitempty"`
}

// loadRecording reads testdata/<name>.jsonl and its .meta.json.
func loadRecording(t *testing.T, name string) ([][]byte, recorded) {
	t.Helper()
	var meta recorded
	lines := agenttest.LoadRecording(t, name, &meta, "go test ./internal/adapters/claude -run TestRealCLI -record")
	return lines, meta
}

// TestGolden decodes each recording of the real CLI and compares the
// events and outcome with testdata/<case>.golden.json; it also checks the
// case's expectations, so that a golden file cannot bless a wrong
// decoding.
func TestGolden(t *testing.T) {
	for _, c := range cliCases() {
		t.Run(c.name, func(t *testing.T) {
			lines, meta := loadRecording(t, c.name)
			dec := New().NewDecoder(runs.Invocation{CLIVersion: meta.CLIVersion})
			var evs []runs.Event
			for _, l := range lines {
				evs = append(evs, dec.Decode(l)...)
			}
			o := dec.Finish(meta.Exit, []byte(meta.Stderr))

			all := append(append([]runs.Event(nil), evs...), o.Events...)
			if got := collapse(all); !reflect.DeepEqual(got, c.wantTypes) {
				t.Errorf("event types =\n  %v\nwant\n  %v", got, c.wantTypes)
			}
			if o.Status != c.wantStatus {
				t.Errorf("status = %s, want %s", o.Status, c.wantStatus)
			}
			if (c.wantClass == "") != (o.Error == nil) || (o.Error != nil && o.Error.Class != c.wantClass) {
				t.Errorf("error = %+v, want class %q", o.Error, c.wantClass)
			}

			g := golden{Events: agenttest.GoldenEvents(evs), Outcome: goldenOutcome{
				Events: agenttest.GoldenEvents(o.Events), Status: o.Status, StopReason: o.StopReason, Result: o.Result,
				StructuredOutput: o.StructuredOutput, Usage: o.Usage, SessionCostUSD: o.SessionCostUSD, NumTurns: o.NumTurns,
				SessionID: o.SessionID, Model: o.Model, Error: o.Error,
			}}
			agenttest.CompareGolden(t, c.name, g, *update)
		})
	}
}

// TestRecordingsHaveCases keeps testdata free of recordings no case
// replays.
func TestRecordingsHaveCases(t *testing.T) {
	known := map[string]bool{}
	for _, c := range cliCases() {
		known[c.name] = true
	}
	agenttest.CheckRecordings(t, func(name string) bool { return known[name] })
}

// FuzzDecode feeds arbitrary stdout to a decoder, then finishes it: it
// must not panic, and every event and the outcome must marshal. The seeds
// are every line of every recording.
func FuzzDecode(f *testing.F) {
	for _, l := range agenttest.RecordedLines(f) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"assistant","message":{"content":"not an array"}}`))
	f.Add([]byte("{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}]}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := New().NewDecoder(runs.Invocation{CLIVersion: "9.9.9"})
		var evs []runs.Event
		for _, l := range bytes.Split(data, []byte("\n")) {
			evs = append(evs, dec.Decode(l)...)
		}
		o := dec.Finish(runs.Exit{Code: 1}, data)
		evs = append(evs, o.Events...)
		for _, ev := range evs {
			if ev.Type == "" || ev.Data == nil {
				t.Fatalf("event without type or data: %+v", ev)
			}
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("event %s does not marshal: %v", ev.Type, err)
			}
		}
		if o.Status != runs.Succeeded && o.Status != runs.Failed {
			t.Fatalf("status %q", o.Status)
		}
		if (o.Status == runs.Failed) != (o.Error != nil) {
			t.Fatalf("status %s with error %+v", o.Status, o.Error)
		}
		if _, err := json.Marshal(goldenOutcome{Status: o.Status, StructuredOutput: o.StructuredOutput, Error: o.Error, SessionCostUSD: o.SessionCostUSD}); err != nil {
			t.Fatalf("outcome does not marshal: %v", err)
		}
	})
}
