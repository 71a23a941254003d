package claude

import (
	"bytes"
	"encoding/json"
	"flag"
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
			evs, o := agenttest.Decode(t, dec, lines, meta.Exit, []byte(meta.Stderr), nil)

			all := append(append([]runs.Event(nil), evs...), o.Events...)
			if got := collapse(all); !slices.Equal(got, c.wantTypes) {
				t.Errorf("event types =\n  %v\nwant\n  %v", got, c.wantTypes)
			}
			checkUsageUpdates(t, all, o)
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
	for _, name := range sessionCases {
		known[name] = true
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
	f.Add([]byte(`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t1","name":"mcp__demo__reverse_text","input":{}},` +
		`{"type":"tool_use","id":"s1","name":"StructuredOutput","input":{}}]}}` + "\n" +
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"s1","is_error":true,"content":"Output does not match required schema: x"}]}}` + "\n" +
		`{"type":"stream_event","api_message_id":"m","event":{"type":"message_delta","usage":{"input_tokens":3,"output_tokens":4}}}` + "\n" +
		`{"type":"result","subtype":"success","result":"Done."}`))
	f.Add([]byte("{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}]}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// MCP servers and a schema, so that the tool names and the
		// StructuredOutput results are read too.
		dec := New().NewDecoder(runs.Invocation{CLIVersion: "9.9.9", Spec: runs.Spec{
			MCPServers: map[string]runs.MCPServer{"demo": {Command: "/bin/demo"}}, OutputSchema: json.RawMessage(`{}`)}})
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
		if _, err := json.Marshal(goldenOutcome{Status: o.Status, StructuredOutput: o.StructuredOutput, Error: o.Error, SessionCostUSD: o.SessionCostUSD}); err != nil {
			t.Fatalf("outcome does not marshal: %v", err)
		}
		fuzzSession(t, data)
	})
}

// fuzzSession feeds data to a session, answering every approval it asks
// for, steering and interrupting along the way: it must not panic, every
// event must marshal, and it reports at most one turn.completed per
// result line plus the one Finish may close.
func fuzzSession(t *testing.T, data []byte) {
	sess := New().NewDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p", Interactive: true, Approvals: runs.ApprovalsAsk},
		CLIVersion: "9.9.9"}).(runs.Session)
	sess.Open()
	decisions := runs.Decisions
	var evs []runs.Event
	for i, l := range bytes.Split(data, []byte("\n")) {
		for _, ev := range sess.Decode(l) {
			evs = append(evs, ev)
			if a, ok := ev.Data.(runs.ApprovalRequestedData); ok {
				if err := sess.Answer(a.ID, decisions[i%len(decisions)], "m"); err != nil {
					t.Fatalf("Answer(%s) of a pending approval: %v", a.ID, err)
				}
			}
		}
		switch i % 5 {
		case 1:
			_ = sess.Send("s", nil, true)
		case 3:
			_ = sess.InterruptTurn()
		}
		sess.Pending()
	}
	sess.Close()
	sess.Interrupt()
	sess.Pending()
	o := sess.Finish(runs.Exit{Code: 1}, data)
	for _, ev := range append(evs, o.Events...) {
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("event %s does not marshal: %v", ev.Type, err)
		}
	}
	if (o.Status == runs.Failed) != (o.Error != nil) {
		t.Fatalf("session status %s with error %+v", o.Status, o.Error)
	}
}

// sessionCases are the session tests' recordings (session_test.go).
var sessionCases = []string{
	"session_allow_deny", "session_allow_session", "session_deny_stop", "session_turns",
	"session_interrupt", "session_steer", "session_withdrawn", "session_stop",
}

// sessionGolden is what a session recording replays to: the events, what
// the session wrote to stdin, and the outcome.
type sessionGolden struct {
	Events  []agenttest.GoldenEvent `json:"events"`
	Stdin   []string                `json:"stdin"`
	Outcome goldenOutcome           `json:"outcome"`
}

// replaySession decodes a session recording with the same calls the test
// made after the same lines.
func replaySession(t *testing.T, lines [][]byte, meta sessionRecording) sessionGolden {
	t.Helper()
	sess, ok := New().NewDecoder(runs.Invocation{Spec: meta.Spec, CLIVersion: meta.CLIVersion}).(runs.Session)
	if !ok {
		t.Fatalf("no session for %+v", meta.Spec)
	}
	var g sessionGolden
	var evs []runs.Event
	stdin := func(b []byte) {
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(l) > 0 {
				g.Stdin = append(g.Stdin, string(l))
			}
		}
	}
	flush := func() {
		out, _ := sess.Pending()
		stdin(out)
	}
	stdin(sess.Open())
	act := 0
	apply := func(i int) {
		for ; act < len(meta.Actions) && meta.Actions[act].After == i; act++ {
			a := meta.Actions[act]
			switch a.Call {
			case "answer":
				_ = sess.Answer(a.ID, a.Decision, a.Text)
			case "send", "steer":
				if err := sess.Send(a.Text, nil, a.Call == "steer"); err != nil {
					t.Errorf("replayed Send: %v", err)
				}
			case "interrupt_turn":
				if err := sess.InterruptTurn(); err != nil {
					t.Errorf("replayed InterruptTurn: %v", err)
				}
			case "close":
				sess.Close()
			case "interrupt":
				stdin(sess.Interrupt())
			default:
				t.Fatalf("unknown action %q", a.Call)
			}
			flush()
		}
	}
	for i, l := range lines {
		apply(i)
		evs = append(evs, sess.Decode(l)...)
		flush()
	}
	apply(len(lines))
	if act != len(meta.Actions) {
		t.Errorf("%d of %d actions replayed", act, len(meta.Actions))
	}
	o := sess.Finish(meta.Exit, []byte(meta.Stderr))
	g.Events = agenttest.GoldenEvents(evs)
	g.Outcome = goldenOutcome{
		Events: agenttest.GoldenEvents(o.Events), Status: o.Status, StopReason: o.StopReason, Result: o.Result,
		StructuredOutput: o.StructuredOutput, Usage: o.Usage, SessionCostUSD: o.SessionCostUSD, NumTurns: o.NumTurns,
		SessionID: o.SessionID, Model: o.Model, Error: o.Error,
	}
	turns := 0
	for _, ev := range append(evs, o.Events...) {
		if ev.Type == runs.EventTurnCompleted {
			turns++
		}
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("unparsed: %+v", ev.Data)
		}
	}
	if turns != o.NumTurns {
		t.Errorf("%d turn.completed events, outcome says %d turns", turns, o.NumTurns)
	}
	return g
}

// TestSessionGolden replays each session recording of the real CLI with
// the calls its test made and compares the events, stdin and outcome
// with testdata/<case>.golden.json.
func TestSessionGolden(t *testing.T) {
	for _, name := range sessionCases {
		t.Run(name, func(t *testing.T) {
			var meta sessionRecording
			lines := agenttest.LoadRecording(t, name, &meta, "go test ./internal/adapters/claude -run TestSession -record")
			agenttest.CompareGolden(t, name, replaySession(t, lines, meta), *update)
		})
	}
}
