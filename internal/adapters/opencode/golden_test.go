package opencode

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
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
	CostUSD    *float64                `json:"cost_usd,omitempty"`
	NumTurns   int                     `json:"num_turns,omitempty"`
	SessionID  string                  `json:"session_id,omitempty"`
	Model      string                  `json:"model,omitempty"`
	Error      *runs.RunError          `json:"error,omitempty"`
}

// recordedCase reports whether c starts the CLI, and so has a recording:
// a case the pre-run check fails never does.
func recordedCase(c cliCase) bool {
	switch c.name {
	case "no_key", "resume_unknown":
		return false
	}
	return true
}

// loadRecording reads testdata/<name>.jsonl and its .meta.json.
func loadRecording(t *testing.T, name string) ([][]byte, recorded) {
	t.Helper()
	var meta recorded
	lines := agenttest.LoadRecording(t, name, &meta, "go test ./internal/adapters/opencode -run TestRealCLI -record")
	return lines, meta
}

// TestGolden decodes each recording of the real CLI and compares the
// events and outcome with testdata/<case>.golden.json. It also checks the
// case's expectations, so that a golden file cannot bless a wrong
// decoding.
func TestGolden(t *testing.T) {
	for _, c := range cliCases() {
		if !recordedCase(c) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			lines, meta := loadRecording(t, c.name)
			dec := newDecoder(runs.Invocation{CLIVersion: meta.CLIVersion, Dir: meta.Dir, Spec: meta.Spec})
			evs, o := agenttest.Decode(t, dec, lines, meta.Exit, []byte(meta.Stderr), nil)
			all := append(append([]runs.Event(nil), evs...), o.Events...)
			if c.wantTypes != nil {
				if got := story(all); !reflect.DeepEqual(got, c.wantTypes) && !(len(got) == 0 && len(c.wantTypes) == 0) {
					t.Errorf("event types =\n  %v\nwant\n  %v", got, c.wantTypes)
				}
			}
			if o.Status != c.wantStatus {
				t.Errorf("status = %s, want %s", o.Status, c.wantStatus)
			}
			if c.wantClass != "" && (o.Error == nil || o.Error.Class != c.wantClass) {
				t.Errorf("error = %+v, want class %q", o.Error, c.wantClass)
			}
			for _, ev := range all {
				if ev.Type == runs.EventAgentUnparsed {
					t.Errorf("unparsed: %+v", ev.Data)
				}
			}

			g := golden{Events: agenttest.GoldenEvents(evs), Outcome: goldenOutcome{
				Events: agenttest.GoldenEvents(o.Events), Status: o.Status, StopReason: o.StopReason, Result: o.Result,
				Usage: o.Usage, CostUSD: o.CostUSD, NumTurns: o.NumTurns, SessionID: o.SessionID, Model: o.Model, Error: o.Error,
			}}
			agenttest.CompareGolden(t, c.name, g, *update)
		})
	}
}

// TestRecordingsHaveCases keeps testdata free of recordings no case
// replays, and makes sure every case that starts the CLI has one.
func TestRecordingsHaveCases(t *testing.T) {
	known := map[string]bool{}
	for _, c := range cliCases() {
		known[c.name] = recordedCase(c)
		if _, err := os.Stat(filepath.Join("testdata", c.name+".jsonl")); recordedCase(c) && err != nil {
			t.Errorf("case %s has no recording: %v", c.name, err)
		}
	}
	agenttest.CheckRecordings(t, func(name string) bool { return known[name] })
}

// FuzzDecode feeds arbitrary output to a decoder and finishes it: it
// must not panic, every event and the outcome must marshal, and a failed
// outcome carries an error. The seeds are every line of every recording,
// and a few lines no recording holds.
func FuzzDecode(f *testing.F) {
	for _, l := range agenttest.RecordedLines(f) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"tool_use","sessionID":"s","part":{"tool":"edit","callID":"c","state":{"status":"completed","input":null,"metadata":{"filediff":{"file":"/w/a"},"exit":-1,"todos":[{}]}}}}`))
	f.Add([]byte(`{"type":"step_finish","part":{"tokens":{"input":-5,"output":1e3,"reasoning":2,"cache":{"read":-1,"write":3}},"cost":-2}}`))
	f.Add([]byte(`{"type":"error","error":{"name":"UnknownError","data":{"message":"{\"type\":\"server_error\",\"code\":5}"}}}`))
	f.Add([]byte(`{"type":"error","error":{"name":"APIError","data":{"statusCode":400,"responseBody":"{\"error\":{\"code\":\"context_length_exceeded\"}}"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := newDecoder(runs.Invocation{CLIVersion: "9.9.9", Dir: "/w", Spec: runs.Spec{Prompt: "p", Model: "m/x"}})
		evs, o := agenttest.Decode(t, dec, bytes.Split(data, []byte("\n")), runs.Exit{Code: 1}, data, nil)
		evs = append(evs, o.Events...)
		for _, ev := range evs {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("event %+v does not marshal: %v", ev, err)
			}
			if ev.Type == runs.EventToolCallStarted && !json.Valid(ev.Data.(runs.ToolCallStartedData).Input) {
				t.Fatalf("tool input %q is not JSON", ev.Data.(runs.ToolCallStartedData).Input)
			}
		}
		if _, err := json.Marshal(o); err != nil {
			t.Fatalf("outcome does not marshal: %v", err)
		}
		if o.Status != runs.Succeeded && o.Status != runs.Failed {
			t.Fatalf("status %q", o.Status)
		}
		if o.Status == runs.Failed && o.Error == nil {
			t.Fatal("failed without an error")
		}
		if u := o.Usage; u.InputTokens < u.CacheReadTokens+u.CacheWriteTokens || u.OutputTokens < u.ReasoningTokens {
			t.Fatalf("usage %+v breaks the convention", u)
		}
	})
}
