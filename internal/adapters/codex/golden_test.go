package codex

import (
	"bytes"
	"encoding/json"
	"flag"
	"reflect"
	"strings"
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
	SessionID        string                  `json:"session_id,omitempty"`
	Model            string                  `json:"model,omitempty"`
	Diff             string                  `json:"diff,omitempty"`
	Error            *runs.RunError          `json:"error,omitempty"`
}

// recordedCase reports whether c starts the CLI, and so has a
// recording: a case failed by the pre-run check never does.
func recordedCase(c cliCase) bool { return (!c.noKey || c.noPreflight) && !c.builtinProvider }

// loadRecording reads testdata/<name>.jsonl and its .meta.json.
func loadRecording(t *testing.T, name string) ([][]byte, recorded) {
	t.Helper()
	var meta recorded
	lines := agenttest.LoadRecording(t, name, &meta, "go test ./internal/adapters/codex -run TestRealCLI -record")
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
			evs, o := agenttest.Decode(t, dec, lines, meta.Exit, []byte(meta.Stderr), &agenttest.Around{
				Before: func(l []byte) { replayInterrupt(dec, c, l) },
				After:  func() { dec.Pending() },
			})
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

			g := golden{Events: agenttest.GoldenEvents(evs), Outcome: goldenOutcome{
				Events: agenttest.GoldenEvents(o.Events), Status: o.Status, StopReason: o.StopReason, Result: o.Result,
				StructuredOutput: o.StructuredOutput, Usage: o.Usage, SessionID: o.SessionID, Model: o.Model,
				Diff: o.Diff, Error: o.Error,
			}}
			agenttest.CompareGolden(t, c.name, g, *update)
		})
	}
}

// replayInterrupt calls the decoder's Interrupt, as the live run did,
// before the line that answers it: a response to an id the decoder has
// not given out yet, in a case that interrupted.
func replayInterrupt(dec *decoder, c cliCase, line []byte) {
	if !c.interrupt && c.deadline == 0 {
		return
	}
	var m struct {
		ID     *int            `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(line, &m) != nil || m.ID == nil || m.Method != "" {
		return
	}
	dec.mu.Lock()
	next := dec.nextID
	dec.mu.Unlock()
	if *m.ID >= next {
		dec.Interrupt()
	}
}

// TestRecordingsHaveCases keeps testdata free of recordings no case
// replays.
func TestRecordingsHaveCases(t *testing.T) {
	known := map[string]bool{}
	for _, c := range cliCases() {
		known[c.name] = recordedCase(c)
	}
	// TestSessionGolden replays every session_ recording.
	agenttest.CheckRecordings(t, func(name string) bool { return known[name] || strings.HasPrefix(name, "session_") })
}

// FuzzDecode feeds arbitrary server output to a decoder that holds a
// conversation, asking for its replies and an interrupt along the way,
// then finishes it: it must not panic, everything it writes must be JSON
// lines, and every event and the outcome must marshal. The seeds are
// every line of every recording.
func FuzzDecode(f *testing.F) {
	for _, l := range agenttest.RecordedLines(f) {
		f.Add(l)
	}
	f.Add([]byte(`{"id":2,"result":{"thread":{"id":"t"}}}` + "\n" + `{"id":"x","method":"item/tool/call","params":null}`))
	f.Add([]byte(`{"method":"item/completed","params":{"threadId":"t","item":{"type":"fileChange","changes":[{"path":"/a","kind":{"type":"update","move_path":"/b"}}]}}}`))
	f.Add([]byte(`{"method":"turn/completed","params":{"threadId":"","turn":{"status":"failed","error":{"codexErrorInfo":{"httpConnectionFailed":{"httpStatusCode":-1}}}}}}`))
	// MCP tool calls: a result with text, one without, an error.
	f.Add([]byte(`{"id":2,"result":{"thread":{"id":"t"}}}` + "\n" + `{"id":3,"result":{"turn":{"id":"u"}}}` + "\n" +
		`{"method":"item/started","params":{"threadId":"t","item":{"type":"mcpToolCall","id":"m","server":"demo","tool":"reverse_text","arguments":{"text":"x"}}}}` + "\n" +
		`{"method":"item/completed","params":{"threadId":"t","item":{"type":"mcpToolCall","id":"m","server":"demo","tool":"reverse_text","status":"completed","result":{"content":[{"type":"text","text":"reversed:x"}]}}}}` + "\n" +
		`{"method":"item/completed","params":{"threadId":"t","item":{"type":"mcpToolCall","id":"n","server":"demo","tool":"t","status":"failed","result":{"content":3},"error":{"message":7}}}}`))
	// A session's thread, turn, approvals of each kind, their withdrawal,
	// and the turn's end.
	f.Add([]byte(`{"id":1,"result":{}}` + "\n" + `{"id":2,"result":{"thread":{"id":"t"}}}` + "\n" + `{"id":3,"result":{"turn":{"id":"u"}}}` + "\n" +
		`{"method":"item/started","params":{"threadId":"t","item":{"type":"fileChange","id":"f","changes":[{"path":"/w/a","kind":{"type":"add"},"diff":"x"}]}}}` + "\n" +
		`{"id":0,"method":"item/fileChange/requestApproval","params":{"threadId":"t","turnId":"u","itemId":"f"}}` + "\n" +
		`{"id":1,"method":"item/commandExecution/requestApproval","params":{"threadId":"t","itemId":"c","command":"touch a","commandActions":[{"type":"unknown"}]}}` + "\n" +
		`{"id":2,"method":"item/commandExecution/requestApproval","params":{"threadId":"t","itemId":"c","command":"ls","commandActions":[{"type":"listFiles"}]}}` + "\n" +
		`{"id":3,"method":"mcpServer/elicitation/request","params":{"threadId":"t","serverName":"s","_meta":{"codex_approval_kind":"mcp_tool_call","tool_name":"x","tool_params":{"a":1}}}}` + "\n" +
		`{"method":"serverRequest/resolved","params":{"threadId":"t","requestId":3}}` + "\n" +
		`{"method":"thread/tokenUsage/updated","params":{"threadId":"t","turnId":"u","tokenUsage":{"last":{"inputTokens":3}}}}` + "\n" +
		`{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u","status":"interrupted"}}}` + "\n" +
		`{"id":4,"error":{"code":-32600,"message":"no active turn to interrupt"}}` + "\n" + `{"id":5,"error":{"code":-32600,"message":"x"}}`))
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
		i := 0
		evs, o := agenttest.Decode(t, dec, bytes.Split(data, []byte("\n")), runs.Exit{Code: 1}, data, &agenttest.Around{
			After: func() {
				out, _ := dec.Pending()
				check(out)
				if i == 2 {
					check(dec.Interrupt())
				}
				i++
			},
		})
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
		fuzzSession(t, data, check)
	})
}

// fuzzSession feeds data to a Session, answering every approval it
// reports and sending, steering, interrupting and closing along the way.
func fuzzSession(t *testing.T, data []byte, check func([]byte)) {
	s := New().NewDecoder(runs.Invocation{CLIVersion: "9.9.9", Dir: "/w",
		Spec: runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk, Interactive: true}}).(session)
	check(s.Open())
	var evs []runs.Event
	for i, l := range bytes.Split(data, []byte("\n")) {
		got := s.Decode(l)
		evs = append(evs, got...)
		for j, ev := range got {
			if a, ok := ev.Data.(runs.ApprovalRequestedData); ok && ev.Type == runs.EventApprovalRequested {
				if err := s.Answer(a.ID, runs.Decisions[(i+j)%len(runs.Decisions)], "m"); err != nil {
					t.Fatalf("Answer(%s): %v", a.ID, err)
				}
			}
		}
		switch i {
		case 1:
			_ = s.Send("steer", nil, true)
		case 2:
			_ = s.InterruptTurn()
			check(s.Interrupt())
		case 3:
			_ = s.Send("next", nil, false)
		case 5:
			s.Close()
		}
		out, _ := s.Pending()
		check(out)
	}
	o := s.Finish(runs.Exit{Code: 1}, data)
	evs = append(evs, o.Events...)
	for _, ev := range evs {
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("event %+v does not marshal: %v", ev, err)
		}
	}
	if o.NumTurns != countTurns(evs) {
		t.Fatalf("%d turns, %d turn.completed", o.NumTurns, countTurns(evs))
	}
	if o.Status != runs.Succeeded && o.Status != runs.Failed && o.Status != runs.Cancelled || (o.Status != runs.Succeeded && o.Error == nil) {
		t.Fatalf("outcome %s, %+v", o.Status, o.Error)
	}
}
