package copilot

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"path/filepath"
	"slices"
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
	NumTurns   int                     `json:"num_turns,omitempty"`
	SessionID  string                  `json:"session_id,omitempty"`
	Model      string                  `json:"model,omitempty"`
	Error      *runs.RunError          `json:"error,omitempty"`
}

// replayFiles plays the usage file a recording kept.
type replayFiles struct{ usage []byte }

func (f replayFiles) ReadFile(name string) ([]byte, error) {
	if f.usage == nil || filepath.Base(filepath.Dir(name)) != usageDir {
		return nil, fs.ErrNotExist
	}
	return f.usage, nil
}

func (replayFiles) Remove(string) error { return nil }

// loadRecording reads testdata/<name>.jsonl and its .meta.json.
func loadRecording(t *testing.T, name string) ([][]byte, recorded) {
	t.Helper()
	var meta recorded
	lines := agenttest.LoadRecording(t, name, &meta, "go test ./internal/adapters/copilot -run TestRealCLI -record")
	return lines, meta
}

// replay decodes a recording as the run decoded it.
func replay(t testing.TB, c cliCase, lines [][]byte, meta recorded) ([]runs.Event, runs.Outcome) {
	inv := runs.Invocation{RunID: meta.RunID, Home: meta.Home, Dir: meta.Dir, CLIVersion: meta.CLIVersion, Spec: c.spec}
	dec := newDecoder(inv, replayFiles{usage: meta.Usage})
	return agenttest.Decode(t, dec, lines, meta.Exit, []byte(meta.Stderr), nil)
}

// TestGolden decodes each recording of the real CLI and compares the
// events and outcome with testdata/<case>.golden.json. It also checks the
// case's expectations, so that a golden file cannot bless a wrong
// decoding.
func TestGolden(t *testing.T) {
	for _, c := range cliCases() {
		t.Run(c.name, func(t *testing.T) {
			lines, meta := loadRecording(t, c.name)
			evs, o := replay(t, c, lines, meta)
			all := append(append([]runs.Event(nil), evs...), o.Events...)
			if c.wantTypes != nil {
				if got := story(all); !slices.Equal(got, c.wantTypes) {
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
				Usage: o.Usage, NumTurns: o.NumTurns, SessionID: o.SessionID, Model: o.Model, Error: o.Error,
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

// FuzzDecode feeds arbitrary output to a decoder, then finishes it with
// the input as stderr and as the usage file: it must not panic, and every
// event and the outcome must marshal. The seeds are every line of every
// recording, and every recorded usage file.
func FuzzDecode(f *testing.F) {
	for _, l := range agenttest.RecordedLines(f) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"tool.execution_complete","data":{"toolCallId":"c","success":false,"error":"plain"}}`))
	f.Add([]byte(`{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"c","arguments":"not json"}]}}`))
	f.Add([]byte(`{"type":"result","exitCode":null,"sessionId":7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv := runs.Invocation{RunID: "r", Home: "/h", CLIVersion: "9.9.9", Spec: runs.Spec{Prompt: "p"}}
		dec := newDecoder(inv, replayFiles{usage: data})
		evs, o := agenttest.Decode(t, dec, bytes.Split(data, []byte("\n")), runs.Exit{Code: 1}, data, nil)
		evs = append(evs, o.Events...)
		for _, ev := range evs {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("event %+v does not marshal: %v", ev, err)
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
	})
}
