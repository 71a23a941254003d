package aguitest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckerRefuses shows the Checker is not vacuous.
func TestCheckerRefuses(t *testing.T) {
	start := `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`
	for _, c := range []struct {
		name   string
		stream []string
		want   string
	}{
		{"first not a start", []string{`{"type":"TEXT_MESSAGE_START","messageId":"m"}`}, "first event"},
		{"content before start", []string{start, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`}, "no open text message"},
		{"empty delta", []string{start, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":""}`}, "empty"},
		{"open at the end", []string{start, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"x"}`,
			`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`}, "still open"},
		{"after the end", []string{start, `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`, `{"type":"CUSTOM","name":"x","value":1}`}, "follows RUN_FINISHED"},
		{"id reused", []string{start, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"m"}`}, "used again"},
		{"other run ends", []string{start, `{"type":"RUN_FINISHED","threadId":"t","runId":"q"}`}, "is open"},
		{"missing field", []string{start, `{"type":"STEP_STARTED"}`}, "stepName is missing"},
		{"bad patch", []string{start, `{"type":"STATE_SNAPSHOT","snapshot":{"a":1}}`,
			`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/b","value":2}]}`}, "no member"},
		{"delta without snapshot", []string{start, `{"type":"STATE_DELTA","delta":[]}`}, "no STATE_SNAPSHOT"},
		{"empty interrupts", []string{start, `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[]}}`}, "no interrupts"},
		{"null result", []string{start, `{"type":"RUN_FINISHED","threadId":"t","runId":"r","result":null}`}, "null"},
		{"two starts", []string{start, start}, "already open"},
		{"float timestamp", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r","timestamp":1.5}`}, "timestamp"},
		{"unknown type", []string{start, `{"type":"THINKING_START"}`}, "unknown event type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ch Checker
			var err error
			for _, ev := range c.stream {
				if err = ch.Check([]byte(ev)); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
	var ch Checker
	for _, ev := range []string{start, `{"type":"STATE_SNAPSHOT","snapshot":{"files":[],"a":{"b":1}}}`,
		`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/files/-","value":"x"},{"op":"replace","path":"/a/b","value":null},{"op":"add","path":"/c~1d","value":3}]}`} {
		if err := ch.Check([]byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := ch.State()
	if b, _ := json.Marshal(st); !bytes.Equal(b, []byte(`{"a":{"b":null},"c/d":3,"files":["x"]}`)) {
		t.Errorf("patched state %s", b)
	}
}
