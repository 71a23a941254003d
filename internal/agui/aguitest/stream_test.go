package aguitest

import (
	"encoding/json"
	"strings"
	"testing"
)

// A run that opens, and events that open the things the cases close.
const (
	start      = `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`
	finish     = `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`
	snapshot   = `{"type":"STATE_SNAPSHOT","snapshot":{"a":1}}`
	textStart  = `{"type":"TEXT_MESSAGE_START","messageId":"m"}`
	spanStart  = `{"type":"REASONING_START","messageId":"s"}`
	thinkStart = `{"type":"REASONING_MESSAGE_START","messageId":"s/m","role":"reasoning"}`
	toolStart  = `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"Bash"}`
)

// validRun uses every event type the Checker knows, each the way package
// agui does: two AG-UI runs on one thread (the first ends in an
// interrupt), then a RUN_ERROR.
var validRun = []string{
	`{"type":"RUN_STARTED","threadId":"t","runId":"r","timestamp":1746100800000,"metadata":{"k":"v"},` +
		`"input":{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi"}]}}`,
	`{"type":"STATE_SNAPSHOT","snapshot":{"status":"running","files":[],"plan":[{"step":"a"}],"usage":{}}}`,
	`{"type":"STEP_STARTED","stepName":"turn 1"}`,
	`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hello"}`,
	`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
	`{"type":"REASONING_START","messageId":"r1"}`,
	`{"type":"REASONING_MESSAGE_START","messageId":"r1/m","role":"reasoning"}`,
	`{"type":"REASONING_MESSAGE_CONTENT","messageId":"r1/m","delta":"hmm"}`,
	`{"type":"REASONING_MESSAGE_END","messageId":"r1/m"}`,
	`{"type":"REASONING_END","messageId":"r1"}`,
	`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"Bash"}`,
	`{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"command\":\"ls\"}"}`,
	`{"type":"TOOL_CALL_END","toolCallId":"c1"}`,
	`{"type":"TOOL_CALL_RESULT","messageId":"c1/result","toolCallId":"c1","content":"a.txt","role":"tool"}`,
	`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/files/-","value":"a.txt"},` +
		`{"op":"replace","path":"/status","value":"awaiting_approval"},{"op":"remove","path":"/plan/0"},` +
		`{"op":"add","path":"/usage/input_tokens","value":3}]}`,
	`{"type":"CUSTOM","name":"agentgate.warning","value":{"code":"w"}}`,
	`{"type":"RAW","event":{"line":"?"},"source":"claude"}`,
	`{"type":"STEP_FINISHED","stepName":"turn 1"}`,
	`{"type":"RUN_FINISHED","threadId":"t","runId":"r","usage":[{"model":"m","provider":"p","input_tokens":3}],` +
		`"outcome":{"type":"interrupt","interrupts":[{"id":"i1","reason":"tool_call","message":"Run ls?",` +
		`"toolCallId":"c1","expiresAt":"2025-05-01T12:00:00Z","responseSchema":{"type":"object"}}]}}`,
	`{"type":"RUN_STARTED","threadId":"t","runId":"r2"}`,
	`{"type":"STATE_SNAPSHOT","snapshot":{"status":"running"}}`,
	`{"type":"RUN_FINISHED","threadId":"t","runId":"r2","result":"done","outcome":{"type":"success"}}`,
	`{"type":"RUN_ERROR","message":"failed","code":"agent_error","usage":[]}`,
}

// TestCheckerStreams holds the Checker to a table of streams: the valid
// ones pass whole, and each invalid one passes up to its last event,
// which fails for the reason given.
func TestCheckerStreams(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream []string
		want   string // "" for a valid stream
	}{
		{"every event type", validRun, ""},
		{"an error alone", []string{`{"type":"RUN_ERROR","message":"no agent"}`}, ""},
		{"a new run after an error", []string{`{"type":"RUN_ERROR","message":"x"}`, start, finish}, ""},

		{"two lines", []string{"{\"type\":\"RUN_STARTED\",\n\"threadId\":\"t\",\"runId\":\"r\"}"}, "event 1: is not on one line"},
		{"not an object", []string{`[1]`}, "event 1: is not a JSON object"},
		{"no type", []string{`{"threadId":"t"}`}, "event 1: type is missing"},
		{"type not a string", []string{`{"type":1}`}, "event 1: type is not a string"},
		{"huge timestamp", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r","timestamp":1e300}`}, "event 1 (RUN_STARTED): timestamp is not an integer"},
		{"metadata not an object", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r","metadata":[]}`}, "metadata is not an object"},
		{"start without run id", []string{`{"type":"RUN_STARTED","threadId":"t"}`}, "runId is missing"},
		{"input without messages", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r"}}`}, "input: messages is not an array"},
		{"input message without role", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r",` +
			`"input":{"threadId":"t","runId":"r","messages":[{"id":"u"}]}}`}, "input: messages[0]: role is missing"},
		{"after an error", []string{`{"type":"RUN_ERROR","message":"x"}`, `{"type":"RUN_ERROR","message":"y"}`}, "event 2 (RUN_ERROR): follows RUN_ERROR; only RUN_STARTED may"},
		{"error without message", []string{`{"type":"RUN_ERROR"}`}, "message is missing"},
		{"error code not a string", []string{`{"type":"RUN_ERROR","message":"x","code":7}`}, "code is not a string"},
		{"negative usage", []string{`{"type":"RUN_ERROR","message":"x","usage":[{"input_tokens":-1}]}`}, "usage[0].input_tokens is not a count"},
		{"usage not an array", []string{start, `{"type":"RUN_FINISHED","threadId":"t","runId":"r","usage":{}}`}, "usage is not an array of objects"},
		{"success with interrupts", []string{start, `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success","interrupts":[]}}`},
			"a success outcome carries interrupts"},
		{"unknown outcome", []string{start, `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"done"}}`},
			`outcome type "done" is neither success nor interrupt`},
		{"interrupt without reason", []string{start, `{"type":"RUN_FINISHED","threadId":"t","runId":"r",` +
			`"outcome":{"type":"interrupt","interrupts":[{"id":"i"}]}}`}, "outcome.interrupts[0]: reason is missing or empty"},
		{"interrupt schema not an object", []string{start, `{"type":"RUN_FINISHED","threadId":"t","runId":"r",` +
			`"outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"x","responseSchema":true}]}}`},
			"outcome.interrupts[0]: responseSchema is not an object"},
		{"text open at the end", []string{start, textStart, finish}, "text messages are still open: [m]"},
		{"text role", []string{start, `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"tool"}`}, `role "tool" is not a text message's`},
		{"text opened twice", []string{start, textStart, textStart}, `text message "m" is already open`},
		{"text end unopened", []string{start, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`}, `no open text message "m"`},
		{"content without delta", []string{start, textStart, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}`}, "delta is missing"},
		{"step finished unstarted", []string{start, `{"type":"STEP_FINISHED","stepName":"s"}`}, `no open step "s"`},
		{"tool call without name", []string{start, `{"type":"TOOL_CALL_START","toolCallId":"c"}`}, "toolCallName is missing"},
		{"args of a closed call", []string{start, toolStart, `{"type":"TOOL_CALL_END","toolCallId":"c"}`,
			`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}`}, `no open tool call "c"`},
		{"tool call id reused", []string{start, toolStart, `{"type":"TOOL_CALL_END","toolCallId":"c"}`, toolStart}, `tool call id "c" is used again`},
		{"result without content", []string{start, `{"type":"TOOL_CALL_RESULT","messageId":"x","toolCallId":"c"}`}, "content is missing"},
		{"result role", []string{start, `{"type":"TOOL_CALL_RESULT","messageId":"x","toolCallId":"c","content":"","role":"assistant"}`}, "role must be tool"},
		{"result id reused", []string{start, textStart, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
			`{"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":""}`}, `message id "m" is used again`},
		{"span reused", []string{start, spanStart, `{"type":"REASONING_END","messageId":"s"}`, spanStart}, `reasoning span id "s" is used again`},
		{"span open at the end", []string{start, spanStart, finish}, "reasoning spans are still open: [s]"},
		{"thought role", []string{start, `{"type":"REASONING_MESSAGE_START","messageId":"x","role":"assistant"}`}, "role must be reasoning"},
		{"thought content closed", []string{start, thinkStart, `{"type":"REASONING_MESSAGE_END","messageId":"s/m"}`,
			`{"type":"REASONING_MESSAGE_CONTENT","messageId":"s/m","delta":"x"}`}, `no open reasoning message "s/m"`},
		{"thought open at the end", []string{start, thinkStart, finish}, "reasoning messages are still open: [s/m]"},
		{"snapshot missing", []string{start, `{"type":"STATE_SNAPSHOT"}`}, "snapshot is missing"},
		{"delta not an array", []string{start, snapshot, `{"type":"STATE_DELTA","delta":{}}`}, "delta is not an array of operations"},
		{"second op fails", []string{start, snapshot, `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/b","value":2},{"op":"copy","path":"/c"}]}`},
			`delta[1]: op "copy" is not one this stream uses`},
		{"custom without value", []string{start, `{"type":"CUSTOM","name":"x"}`}, "value is missing"},
		{"raw without event", []string{start, `{"type":"RAW","source":"x"}`}, "event is missing"},
		{"raw source not a string", []string{start, `{"type":"RAW","event":1,"source":2}`}, "source is not a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ch Checker
			for i, ev := range c.stream {
				err := ch.Check([]byte(ev))
				last := i == len(c.stream)-1
				switch {
				case err != nil && (c.want == "" || !last):
					t.Fatalf("event %d of %d: %v", i+1, len(c.stream), err)
				case last && c.want != "" && err == nil:
					t.Fatalf("the stream passed, want an error saying %q", c.want)
				case last && c.want != "" && !strings.Contains(err.Error(), c.want):
					t.Fatalf("error %q, want one saying %q", err, c.want)
				}
			}
		})
	}
}

// TestCheckerValidRunState: the state a valid run leaves is its
// snapshots with their deltas applied.
func TestCheckerValidRunState(t *testing.T) {
	var ch Checker
	for _, ev := range validRun[:16] {
		if err := ch.Check([]byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	st, ok := ch.State()
	b, _ := json.Marshal(st)
	if want := `{"files":["a.txt"],"plan":[],"status":"awaiting_approval","usage":{"input_tokens":3}}`; !ok || string(b) != want {
		t.Errorf("state %s (snapshot %v), want %s", b, ok, want)
	}
}
