package agenttest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// An adapter's tests record what its real CLI printed into the package's
// testdata, as <case>.jsonl (stdout, one line each) and <case>.meta.json
// (what else its decoder needs, such as the exit and stderr), and replay
// each recording against <case>.golden.json. The helpers below are that
// machinery, shared by every adapter.

// testdata is where recordings and golden files live, relative to the
// package under test.
const testdata = "testdata"

// WriteRecording writes testdata/<name>.jsonl from stdout and
// testdata/<name>.meta.json from meta.
func WriteRecording(t testing.TB, name string, stdout [][]byte, meta any) {
	t.Helper()
	var buf bytes.Buffer
	for _, l := range stdout {
		buf.Write(l)
		buf.WriteByte('\n')
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(testdata, 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(testdata, name)
	if err := os.WriteFile(base+".jsonl", buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".meta.json", append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s.jsonl (%d lines)", base, len(stdout))
}

// LoadRecording returns the lines of testdata/<name>.jsonl and decodes
// its .meta.json into meta. record says how to make a missing recording.
func LoadRecording(t testing.TB, name string, meta any, record string) [][]byte {
	t.Helper()
	base := filepath.Join(testdata, name)
	stdout, err := os.ReadFile(base + ".jsonl")
	if err != nil {
		t.Fatalf("%v: record it with `%s`", err, record)
	}
	b, err := os.ReadFile(base + ".meta.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, meta); err != nil {
		t.Fatalf("%s.meta.json: %v", base, err)
	}
	return lines(stdout)
}

func lines(b []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// RecordedLines returns every line of every recording, to seed a fuzzer.
// It fails when there is none.
func RecordedLines(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in %s: %v", testdata, err)
	}
	var out [][]byte
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lines(b)...)
	}
	return out
}

// CheckRecordings fails for a recording no case replays (replayed reports
// whether a case of that name does), and when there is none at all.
func CheckRecordings(t testing.TB, replayed func(name string) bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no recordings in %s", testdata)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".jsonl"); !replayed(name) {
			t.Errorf("%s has no recorded case", f)
		}
	}
}

// GoldenEvent is an event as a golden file keeps it: what the decoder
// said, without what the supervisor stamps.
type GoldenEvent struct {
	Type             runs.EventType `json:"type"`
	SessionID        string         `json:"session_id,omitempty"`
	ParentToolCallID string         `json:"parent_tool_call_id,omitempty"`
	Data             any            `json:"data"`
}

// GoldenEvents returns evs as a golden file keeps them.
func GoldenEvents(evs []runs.Event) []GoldenEvent {
	out := make([]GoldenEvent, 0, len(evs))
	for _, ev := range evs {
		out = append(out, GoldenEvent{Type: ev.Type, SessionID: ev.SessionID, ParentToolCallID: ev.ParentToolCallID, Data: ev.Data})
	}
	return out
}

// CompareGolden compares v, as indented JSON, with
// testdata/<name>.golden.json, or writes it there when update is set.
func CompareGolden(t testing.TB, name string, v any, update bool) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join(testdata, name+".golden.json")
	if update {
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
		t.Errorf("%s differs (rewrite it with -update after checking):\n%s", path, firstDiff(string(want), string(got)))
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
