package gemini

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
	Events     []agenttest.GoldenEvent `json:"events,omitempty"`
	Status     runs.State              `json:"status"`
	StopReason string                  `json:"stop_reason,omitempty"`
	Result     string                  `json:"result,omitempty"`
	Usage      runs.Usage              `json:"usage"`
	SessionID  string                  `json:"session_id,omitempty"`
	Model      string                  `json:"model,omitempty"`
	Error      *runs.RunError          `json:"error,omitempty"`
}

// loadRecording reads testdata/<name>.jsonl and its .meta.json.
func loadRecording(t *testing.T, name string) ([][]byte, recorded) {
	t.Helper()
	var meta recorded
	lines := agenttest.LoadRecording(t, name, &meta, "go test ./internal/adapters/gemini -run TestRealCLI -record")
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
			evs, o := agenttest.Decode(t, dec, lines, meta.Exit, []byte(meta.Stderr), nil)

			all := append(append([]runs.Event(nil), evs...), o.Events...)
			// A recording holds stdout alone: the usage the real run read
			// from the CLI's chat recording before each tool call is not
			// in it.
			if want := withoutLiveUsage(c.wantTypes); !reflect.DeepEqual(collapse(all), want) {
				t.Errorf("event types =\n  %v\nwant\n  %v", collapse(all), want)
			}
			if o.Status != c.wantStatus {
				t.Errorf("status = %s, want %s", o.Status, c.wantStatus)
			}
			if (c.wantClass == "") != (o.Error == nil) || (o.Error != nil && o.Error.Class != c.wantClass) {
				t.Errorf("error = %+v, want class %q", o.Error, c.wantClass)
			}

			g := golden{Events: agenttest.GoldenEvents(evs), Outcome: goldenOutcome{
				Events: agenttest.GoldenEvents(o.Events), Status: o.Status, StopReason: o.StopReason, Result: o.Result,
				Usage: o.Usage, SessionID: o.SessionID, Model: o.Model, Error: o.Error,
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
	f.Add([]byte(`{"type":"message","role":"assistant","content":["not a string"],"delta":true}`))
	f.Add([]byte("{\"type\":\"tool_result\",\"tool_id\":\"x\",\"status\":\"odd\",\"output\":{\"a\":\"\xff\"}}"))
	f.Add([]byte(`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":429,\"details\":[{\"reason\":7}]}}]"},"stats":{"total_tokens":-5,"models":{"a":{"total_tokens":9}}}}`))
	f.Add([]byte(`{"type":"error","severity":"error","message":"Maximum session turns exceeded"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := New().NewDecoder(runs.Invocation{CLIVersion: "9.9.9"})
		evs, o := agenttest.Decode(t, dec, bytes.Split(data, []byte("\n")), runs.Exit{Code: 1}, data, nil)
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
		u := o.Usage
		if u.InputTokens < 0 || u.CacheReadTokens < 0 || u.CacheReadTokens > u.InputTokens || u.ReasoningTokens < 0 || u.OutputTokens < u.ReasoningTokens {
			t.Fatalf("usage %+v breaks the convention", u)
		}
		if _, err := json.Marshal(goldenOutcome{Status: o.Status, Usage: o.Usage, Error: o.Error}); err != nil {
			t.Fatalf("outcome does not marshal: %v", err)
		}
	})
}

// withoutLiveUsage is types without the usage.updated that come just
// before a tool call: those read from the CLI's chat recording in the
// home, which a replay of stdout does not have.
func withoutLiveUsage(types []runs.EventType) []runs.EventType {
	var out []runs.EventType
	for i, ty := range types {
		if ty == runs.EventUsageUpdated && i+1 < len(types) && types[i+1] == runs.EventToolCallStarted {
			continue
		}
		out = append(out, ty)
	}
	return out
}
