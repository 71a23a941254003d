package codex

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
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
	Events           []goldenEvent   `json:"events,omitempty"`
	Status           runs.State      `json:"status"`
	StopReason       string          `json:"stop_reason,omitempty"`
	Result           string          `json:"result,omitempty"`
	StructuredOutput json.RawMessage `json:"structured_output,omitempty"`
	Usage            runs.Usage      `json:"usage"`
	SessionID        string          `json:"session_id,omitempty"`
	Model            string          `json:"model,omitempty"`
	Diff             string          `json:"diff,omitempty"`
	Error            *runs.RunError  `json:"error,omitempty"`
}

func goldenEvents(evs []runs.Event) []goldenEvent {
	out := make([]goldenEvent, 0, len(evs))
	for _, ev := range evs {
		out = append(out, goldenEvent{Type: ev.Type, SessionID: ev.SessionID, ParentToolCallID: ev.ParentToolCallID, Data: ev.Data})
	}
	return out
}

// recordedCase reports whether c starts the CLI, and so has a
// recording: a case failed by the pre-run check never does.
func recordedCase(c cliCase) bool { return (!c.noKey || c.noPreflight) && !c.builtinProvider }

// loadRecording reads testdata/<name>.jsonl and its .meta.json.
func loadRecording(t *testing.T, name string) ([][]byte, recorded) {
	t.Helper()
	base := filepath.Join("testdata", name)
	stdout, err := os.ReadFile(base + ".jsonl")
	if err != nil {
		t.Fatalf("%v: record it with `go test ./internal/adapters/codex -run TestRealCLI -record`", err)
	}
	b, err := os.ReadFile(base + ".meta.json")
	if err != nil {
		t.Fatal(err)
	}
	var meta recorded
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatalf("%s.meta.json: %v", base, err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(stdout, []byte("\n")) {
		if len(l) > 0 {
			lines = append(lines, l)
		}
	}
	return lines, meta
}

// TestGolden decodes each recording of the real app-server and compares
// the events and outcome with testdata/<case>.golden.json. It also checks
// the case's expectations and that the decoder answers the recorded
// server with the conversation it had, so that a golden file cannot bless
// a wrong decoding.
func TestGolden(t *testing.T) {
	for _, c := range cliCases() {
		if !recordedCase(c) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			lines, meta := loadRecording(t, c.name)
			dec := newDecoder(runs.Invocation{CLIVersion: meta.CLIVersion, Dir: meta.Dir, Spec: c.spec}, c.methods)
			dec.Open()
			var evs []runs.Event
			for _, l := range lines {
				evs = append(evs, dec.Decode(l)...)
				dec.Pending()
			}
			o := dec.Finish(meta.Exit, []byte(meta.Stderr))
			all := append(append([]runs.Event(nil), evs...), o.Events...)
			if c.wantTypes != nil {
				if got := story(all); !reflect.DeepEqual(got, c.wantTypes) {
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
				StructuredOutput: o.StructuredOutput, Usage: o.Usage, SessionID: o.SessionID, Model: o.Model,
				Diff: o.Diff, Error: o.Error,
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
		known[c.name] = recordedCase(c)
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
			t.Errorf("%s has no recorded case in cliCases", f)
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

// FuzzDecode feeds arbitrary server output to a decoder that holds a
// conversation, asking for its replies and an interrupt along the way,
// then finishes it: it must not panic, everything it writes must be JSON
// lines, and every event and the outcome must marshal. The seeds are
// every line of every recording.
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
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(l) > 0 {
				f.Add(l)
			}
		}
	}
	f.Add([]byte(`{"id":2,"result":{"thread":{"id":"t"}}}` + "\n" + `{"id":"x","method":"item/tool/call","params":null}`))
	f.Add([]byte(`{"method":"item/completed","params":{"threadId":"t","item":{"type":"fileChange","changes":[{"path":"/a","kind":{"type":"update","move_path":"/b"}}]}}}`))
	f.Add([]byte(`{"method":"turn/completed","params":{"threadId":"","turn":{"status":"failed","error":{"codexErrorInfo":{"httpConnectionFailed":{"httpStatusCode":-1}}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := newDecoder(runs.Invocation{CLIVersion: "9.9.9", Dir: "/w", Spec: runs.Spec{Prompt: "p", OutputSchema: json.RawMessage(`{}`)}}, nil)
		check := func(b []byte) {
			for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
				if len(l) > 0 && !json.Valid(l) {
					t.Fatalf("decoder wrote %q", l)
				}
			}
		}
		check(dec.Open())
		var evs []runs.Event
		for i, l := range bytes.Split(data, []byte("\n")) {
			evs = append(evs, dec.Decode(l)...)
			out, _ := dec.Pending()
			check(out)
			if i == 2 {
				check(dec.Interrupt())
			}
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
