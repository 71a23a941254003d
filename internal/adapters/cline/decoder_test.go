package cline

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// decodeFile feeds testdata/name, lines recorded from `cline --json`
// 3.0.65 against the mock, to a fresh decoder and finishes it with exit.
func decodeFile(t testing.TB, name string, exit runs.Exit) ([]runs.Event, runs.Outcome) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	d := newDecoder(runs.Invocation{Spec: runs.Spec{Model: "mock-model"}})
	var evs []runs.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		evs = append(evs, d.Decode(sc.Bytes())...)
	}
	return evs, d.Finish(exit, nil)
}

func TestDecodeText(t *testing.T) {
	evs, out := decodeFile(t, "text.jsonl", runs.Exit{})
	var deltas []string
	for _, ev := range evs {
		switch ev.Type {
		case runs.EventAgentUnparsed:
			t.Errorf("unparsed: %+v", ev.Data)
		case runs.EventMessageDelta:
			deltas = append(deltas, ev.Data.(runs.MessageData).Text)
		}
	}
	if got := strings.Join(deltas, ""); got != "Hello from the mock." {
		t.Errorf("deltas = %q", got)
	}
	if out.Status != runs.Succeeded || out.Result != "Hello from the mock." || out.NumTurns != 1 {
		t.Errorf("outcome = %+v", out)
	}
	// The mock billed 1000 prompt tokens (600 cached) and 20 completion
	// tokens; Cline's inputTokens include the cached ones.
	want := runs.Usage{InputTokens: 1000, CacheReadTokens: 600, OutputTokens: 20}
	if out.Usage != want {
		t.Errorf("usage = %+v, want %+v", out.Usage, want)
	}
	if out.SessionID == "" || evs[0].Type != runs.EventSessionStarted {
		t.Errorf("no session: %+v first %s", out, evs[0].Type)
	}
}

func TestDecodeFailures(t *testing.T) {
	for _, c := range []struct {
		file  string
		class runs.Class
	}{
		{"http401.jsonl", runs.NotAuthenticated},
		{"http429.jsonl", runs.RateLimited},
		{"http500.jsonl", runs.TransientAPIError},
	} {
		t.Run(c.file, func(t *testing.T) {
			_, out := decodeFile(t, c.file, runs.Exit{Code: 1})
			if out.Status != runs.Failed || out.Error == nil || out.Error.Class != c.class || out.Error.Hint == "" {
				t.Fatalf("outcome = %+v, error %+v; want %s", out, out.Error, c.class)
			}
		})
	}
}

func TestDecodeTool(t *testing.T) {
	d := newDecoder(runs.Invocation{})
	lines := []string{
		`{"ts":"x","type":"agent_event","event":{"type":"content_start","contentType":"tool","toolName":"run_commands","toolCallId":"call_1","input":{"commands":["echo hello > out.txt"]}}}`,
		`{"ts":"x","type":"agent_event","event":{"type":"content_end","contentType":"tool","toolName":"run_commands","toolCallId":"call_1","output":[{"query":"echo hello > out.txt","result":"","success":false}],"durationMs":15}}`,
	}
	var evs []runs.Event
	for _, l := range lines {
		evs = append(evs, d.Decode([]byte(l))...)
	}
	if len(evs) != 2 || evs[0].Type != runs.EventToolCallStarted || evs[1].Type != runs.EventToolCallCompleted {
		t.Fatalf("events = %+v", evs)
	}
	if s := evs[0].Data.(runs.ToolCallStartedData); s.Name != "run_commands" || !strings.Contains(string(s.Input), "echo hello") {
		t.Errorf("started = %+v", s)
	}
	if c := evs[1].Data.(runs.ToolCallCompletedData); c.ID != "call_1" || !c.IsError {
		t.Errorf("completed = %+v: a command that failed is a failed call", c)
	}
	if out := d.Finish(runs.Exit{Code: 0}, nil); out.Status != runs.Failed || out.Error.Class != runs.AgentCrashed {
		t.Errorf("a run without run_result = %+v", out)
	}
}

func TestDecodeUnknownLines(t *testing.T) {
	d := newDecoder(runs.Invocation{})
	for _, l := range []string{`not json`, `{"type":"brand_new"}`, `{"ts":"x"}`, `{"type":"agent_event","event":{"type":"telepathy"}}`} {
		evs := d.Decode([]byte(l))
		if len(evs) != 1 || evs[0].Type != runs.EventAgentUnparsed {
			t.Errorf("%s → %+v, want agent.unparsed", l, evs)
		}
	}
}

// FuzzDecode checks that no line makes the decoder panic, seeded with the
// recorded lines.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d := newDecoder(runs.Invocation{})
		d.Decode(line)
		d.Decode(line)
		d.Finish(runs.Exit{Code: 1}, line)
	})
}
