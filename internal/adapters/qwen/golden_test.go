package qwen

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/runs"
)

var update = flag.Bool("update", false, "TestGolden rewrites testdata/<case>.golden.json")

// A recording is what `qwen --acp` 0.24.4 printed to a client that sent
// initialize, session/new, session/set_mode and then the prompts, against
// the mock Chat Completions API. The client's request ids were renumbered
// to the Decoder's (initialize 1, session/new 2, set_mode 3, prompts 4
// and on) and the available_commands_update lines, 560 KB of slash
// commands the gateway ignores, were left out.
type recording struct {
	name string
	spec runs.Spec
	// then is sent after the first turn, as the next turn's prompt.
	then string
	// wantTypes are the event types, runs of one type collapsed.
	wantTypes  []runs.EventType
	wantStatus runs.State
	wantClass  runs.Class
	// wantUsage is what the mock billed for the run.
	wantUsage runs.Usage
}

func recordings() []recording {
	return []recording{
		{
			name: "tool_approved", spec: runs.Spec{Prompt: "run the command", Approvals: runs.ApprovalsAsk},
			wantTypes: []runs.EventType{runs.EventSessionStarted, runs.EventReasoningDelta, runs.EventReasoningCompleted,
				runs.EventToolCallStarted, runs.EventApprovalRequested, runs.EventToolCallCompleted,
				runs.EventMessageDelta, runs.EventMessageCompleted,
				runs.EventUsageUpdated, runs.EventTurnCompleted},
			wantStatus: runs.Succeeded,
			wantUsage:  runs.Usage{InputTokens: 10200, CacheReadTokens: 8900, OutputTokens: 80, ReasoningTokens: 19},
		},
		{
			name: "two_tools_yolo", spec: runs.Spec{Prompt: "run both", Permission: runs.Full},
			wantStatus: runs.Succeeded,
			wantUsage:  runs.Usage{InputTokens: 15400, CacheReadTokens: 13800, OutputTokens: 110, ReasoningTokens: 26},
		},
		{
			name: "two_turns", spec: runs.Spec{Prompt: "first", Permission: runs.Full, Interactive: true}, then: "second",
			wantStatus: runs.Succeeded,
			wantUsage:  runs.Usage{InputTokens: 3200, CacheReadTokens: 320, OutputTokens: 40, ReasoningTokens: 5},
		},
		{
			name: "failure_401", spec: runs.Spec{Prompt: "hi", Approvals: runs.ApprovalsAsk},
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated,
		},
	}
}

// replay decodes a recording as the supervisor would drive it: it allows
// every approval and sends c.then after the first turn.
func replay(t *testing.T, c recording, lines [][]byte) ([]runs.Event, runs.Outcome) {
	t.Helper()
	s := New().NewDecoder(runs.Invocation{RunID: "run-1", Spec: c.spec, Dir: "/work/project", Home: "/home/agent"}).(*session)
	s.Open()
	var evs []runs.Event
	turns := 0
	for _, l := range lines {
		got := s.Decode(l)
		evs = append(evs, got...)
		s.Pending()
		for _, ev := range got {
			switch d := ev.Data.(type) {
			case runs.ApprovalRequestedData:
				if err := s.Answer(d.ID, runs.Allow, ""); err != nil {
					t.Fatalf("answer %s: %v", d.ID, err)
				}
			case runs.TurnCompletedData:
				turns++
				if turns == 1 && c.then != "" {
					if err := s.Send(c.then, nil, false); err != nil {
						t.Fatalf("send: %v", err)
					}
				}
			}
		}
	}
	s.Close()
	s.Pending()
	o := s.Finish(runs.Exit{}, nil)
	return evs, o
}

// TestGolden decodes each recording of the real CLI and compares the
// events and outcome with testdata/<case>.golden.json; it also checks the
// case's expectations, so that a golden file cannot bless a wrong
// decoding.
func TestGolden(t *testing.T) {
	for _, c := range recordings() {
		t.Run(c.name, func(t *testing.T) {
			lines := readLines(t, c.name)
			evs, o := replay(t, c, lines)
			if c.wantTypes != nil && !slices.Equal(collapse(evs), c.wantTypes) {
				t.Errorf("event types =\n  %v\nwant\n  %v", collapse(evs), c.wantTypes)
			}
			for _, ev := range evs {
				if ev.Type == runs.EventAgentUnparsed || ev.Type == runs.EventWarning {
					t.Errorf("%s: %+v", ev.Type, ev.Data)
				}
			}
			if o.Status != c.wantStatus {
				t.Errorf("status = %s, want %s", o.Status, c.wantStatus)
			}
			if (c.wantClass == "") != (o.Error == nil) || (o.Error != nil && o.Error.Class != c.wantClass) {
				t.Errorf("error = %+v, want class %q", o.Error, c.wantClass)
			}
			if o.Usage != c.wantUsage {
				t.Errorf("usage = %+v, the mock billed %+v", o.Usage, c.wantUsage)
			}
			agenttest.CompareGolden(t, c.name, struct {
				Events  []agenttest.GoldenEvent `json:"events"`
				Outcome runs.Outcome            `json:"outcome"`
			}{agenttest.GoldenEvents(evs), o}, *update)
		})
	}
}

// TestRecordingsHaveCases keeps testdata free of recordings no case
// replays.
func TestRecordingsHaveCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recordings in testdata")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		if !slices.ContainsFunc(recordings(), func(c recording) bool { return c.name == name }) {
			t.Errorf("%s: no case replays it", f)
		}
	}
}

func readLines(t testing.TB, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	return lines
}

// collapse is the types of evs, each run of one type as one.
func collapse(evs []runs.Event) []runs.EventType {
	var out []runs.EventType
	for _, ev := range evs {
		if len(out) == 0 || out[len(out)-1] != ev.Type {
			out = append(out, ev.Type)
		}
	}
	return out
}

// FuzzDecode feeds arbitrary lines to an up session, answers whatever it
// asks, steers a message in, and checks that nothing panics, every event
// marshals and the usage keeps the gateway's convention. The seeds are
// every line of every recording.
func FuzzDecode(f *testing.F) {
	for _, c := range recordings() {
		for _, l := range readLines(f, c.name) {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""},"_meta":{"usage":{"inputTokens":-5,"outputTokens":"x"}}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"craft/drainMidTurnQueue","params":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"options":[{"optionId":"proceed_always_project"}],"toolCall":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := New().NewDecoder(runs.Invocation{Dir: "/d", Home: "/h", Spec: runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk}}).(*session)
		s.Open()
		var evs []runs.Event
		for _, l := range []string{
			`{"jsonrpc":"2.0","id":1,"result":{}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S"}}`,
			`{"jsonrpc":"2.0","id":3,"result":{}}`,
		} {
			evs = append(evs, s.Decode([]byte(l))...)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			got := s.Decode(line)
			evs = append(evs, got...)
			for _, ev := range got {
				if r, ok := ev.Data.(runs.ApprovalRequestedData); ok {
					_ = s.Answer(r.ID, runs.Deny, "")
				}
			}
			_ = s.Send("steer", nil, true)
			out, _ := s.Pending()
			for _, w := range bytes.Split(out, []byte("\n")) {
				if len(w) > 0 && !json.Valid(w) {
					t.Fatalf("wrote %q, not JSON", w)
				}
			}
		}
		s.Close()
		s.Pending()
		o := s.Finish(runs.Exit{Code: 1}, data)
		for _, ev := range append(evs, o.Events...) {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("event %s does not marshal: %v", ev.Type, err)
			}
		}
		u := o.Usage
		if u.InputTokens < 0 || u.CacheReadTokens < 0 || u.ReasoningTokens < 0 || u.OutputTokens < 0 {
			t.Fatalf("usage %+v breaks the convention", u)
		}
	})
}
