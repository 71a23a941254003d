package copilot

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

var update = flag.Bool("update", false, "TestGolden rewrites testdata/<case>.golden.json")

// golden is what a recording decodes to: the events, then the outcome.
type golden struct {
	Events  []goldenEvent `json:"events"`
	Outcome goldenOutcome `json:"outcome"`
}

type goldenEvent struct {
	Type             runs.EventType `json:"type"`
	SessionID        string         `json:"session_id,omitempty"`
	ParentToolCallID string         `json:"parent_tool_call_id,omitempty"`
	Data             any            `json:"data"`
}

type goldenOutcome struct {
	Events     []goldenEvent  `json:"events,omitempty"`
	Status     runs.State     `json:"status"`
	StopReason string         `json:"stop_reason,omitempty"`
	Result     string         `json:"result,omitempty"`
	Usage      runs.Usage     `json:"usage"`
	NumTurns   int            `json:"num_turns,omitempty"`
	SessionID  string         `json:"session_id,omitempty"`
	Model      string         `json:"model,omitempty"`
	Error      *runs.RunError `json:"error,omitempty"`
}

func goldenEvents(evs []runs.Event) []goldenEvent {
	out := make([]goldenEvent, 0, len(evs))
	for _, ev := range evs {
		out = append(out, goldenEvent{Type: ev.Type, SessionID: ev.SessionID, ParentToolCallID: ev.ParentToolCallID, Data: ev.Data})
	}
	return out
}

// replayFiles plays the usage file a recording kept.
type replayFiles struct{ usage []byte }

func (f replayFiles) ReadFile(string) ([]byte, error) {
	if f.usage == nil {
		return nil, fs.ErrNotExist
	}
	return f.usage, nil
}

func (replayFiles) Remove(string) error { return nil }

// loadRecording reads testdata/<name>.jsonl and its .meta.json.
func loadRecording(t *testing.T, name string) ([][]byte, recorded) {
	t.Helper()
	base := filepath.Join("testdata", name)
	stdout, err := os.ReadFile(base + ".jsonl")
	if err != nil {
		t.Fatalf("%v: record it with `go test ./internal/adapters/copilot -run TestRealCLI -record`", err)
	}
	b, err := os.ReadFile(base + ".meta.json")
	if err != nil {
		t.Fatal(err)
	}
	var meta recorded
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatalf("%s.meta.json: %v", base, err)
	}
	return stdoutLines(stdout), meta
}

// replay decodes a recording as the run decoded it.
func replay(c cliCase, lines [][]byte, meta recorded) ([]runs.Event, runs.Outcome) {
	inv := runs.Invocation{RunID: meta.RunID, Home: meta.Home, Dir: meta.Dir, CLIVersion: meta.CLIVersion, Spec: c.spec}
	dec := newDecoder(inv, replayFiles{usage: meta.Usage})
	var evs []runs.Event
	for _, l := range lines {
		evs = append(evs, dec.Decode(l)...)
	}
	return evs, dec.Finish(meta.Exit, []byte(meta.Stderr))
}

// TestGolden decodes each recording of the real CLI and compares the
// events and outcome with testdata/<case>.golden.json. It also checks the
// case's expectations, so that a golden file cannot bless a wrong
// decoding.
func TestGolden(t *testing.T) {
	for _, c := range cliCases() {
		t.Run(c.name, func(t *testing.T) {
			lines, meta := loadRecording(t, c.name)
			evs, o := replay(c, lines, meta)
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

			g := golden{Events: goldenEvents(evs), Outcome: goldenOutcome{
				Events: goldenEvents(o.Events), Status: o.Status, StopReason: o.StopReason, Result: o.Result,
				Usage: o.Usage, NumTurns: o.NumTurns, SessionID: o.SessionID, Model: o.Model, Error: o.Error,
			}}
			got, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", c.name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v: write it with -update", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs (rewrite with -update after checking):\n%s", path, firstDiff(string(want), string(got)))
			}
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
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recordings in testdata")
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".jsonl"); !known[name] {
			t.Errorf("%s has no case in cliCases", f)
		}
	}
}

// firstDiff shows the first differing line of two texts.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want " + wl + "\n  got  " + gl
		}
	}
	return "(equal)"
}

// FuzzDecode feeds arbitrary output to a decoder, then finishes it with
// the input as stderr and as the usage file: it must not panic, and every
// event and the outcome must marshal. The seeds are every line of every
// recording, and every recorded usage file.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no recordings to seed from: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range stdoutLines(b) {
			f.Add(l)
		}
		meta, err := os.ReadFile(strings.TrimSuffix(file, ".jsonl") + ".meta.json")
		if err != nil {
			f.Fatal(err)
		}
		var m recorded
		if json.Unmarshal(meta, &m) == nil && len(m.Usage) > 0 {
			f.Add([]byte(m.Usage))
		}
	}
	f.Add([]byte(`{"type":"tool.execution_complete","data":{"toolCallId":"c","success":false,"error":"plain"}}`))
	f.Add([]byte(`{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"c","arguments":"not json"}]}}`))
	f.Add([]byte(`{"type":"result","exitCode":null,"sessionId":7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv := runs.Invocation{RunID: "r", Home: "/h", CLIVersion: "9.9.9", Spec: runs.Spec{Prompt: "p"}}
		dec := newDecoder(inv, replayFiles{usage: data})
		var evs []runs.Event
		for _, l := range bytes.Split(data, []byte("\n")) {
			evs = append(evs, dec.Decode(l)...)
		}
		o := dec.Finish(runs.Exit{Code: 1}, data)
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
