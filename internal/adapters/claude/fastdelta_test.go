package claude

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/runs"
)

// checkSameAsGeneral fails if decodeDelta takes line and decodes it into
// anything but the one event the general path gives. It reports whether
// decodeDelta took the line.
func checkSameAsGeneral(t *testing.T, line []byte) bool {
	t.Helper()
	line = bytes.TrimSpace(line)
	fast, ok := decodeDelta(line)
	if !ok {
		return false
	}
	general := newDecoder(runs.Invocation{}).decodeLine(line)
	if len(general) != 1 || !reflect.DeepEqual(general[0], fast) {
		t.Fatalf("line %q:\nfast path %#v\ngeneral   %#v", line, fast, general)
	}
	return true
}

// The fast path takes every delta the real CLI printed in the recordings,
// and decodes each as the general path does.
func TestDecodeDeltaTakesRecordedDeltas(t *testing.T) {
	var deltas, taken int
	for _, line := range agenttest.RecordedLines(t) {
		if bytes.Contains(line, []byte(`"content_block_delta"`)) &&
			(bytes.Contains(line, []byte(`"text_delta"`)) || bytes.Contains(line, []byte(`"thinking_delta"`))) {
			deltas++
		}
		if checkSameAsGeneral(t, line) {
			taken++
		}
	}
	if deltas == 0 {
		t.Fatal("no text or thinking deltas in the recordings")
	}
	if taken != deltas {
		t.Fatalf("the fast path took %d of the recordings' %d deltas", taken, deltas)
	}
}

func TestDecodeDeltaEdges(t *testing.T) {
	const tail = `,"session_id":"s","parent_tool_use_id":null,"uuid":"u","api_message_id":"m"}`
	text := func(delta string) string {
		return `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":` + delta + `}` + tail
	}
	for _, c := range []struct {
		name, line string
		take       bool
		want       string // the event's text, when taken
	}{
		{"plain", text(`{"type":"text_delta","text":"hi"}`), true, "hi"},
		{"escapes", text(`{"type":"text_delta","text":"a\n\"b\"\\\/\t\u00e9"}`), true, "a\n\"b\"\\/\té"},
		{"surrogate pair", text(`{"type":"text_delta","text":"\ud83d\ude00"}`), true, "😀"},
		{"lone high surrogate", text(`{"type":"text_delta","text":"\ud83dx"}`), true, "\uFFFDx"},
		{"lone low surrogate", text(`{"type":"text_delta","text":"\ude00"}`), true, "\uFFFD"},
		{"high then non-low", text(`{"type":"text_delta","text":"\ud83d\u0041"}`), true, "\uFFFDA"},
		{"invalid UTF-8", text("{\"type\":\"text_delta\",\"text\":\"a\xffb\"}"), true, "a\uFFFDb"},
		{"escaped type value", `{"type":"stream\u005fevent","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}}`, true, "x"},
		{"thinking", `{"type":"stream_event","event":{"type":"content_block_delta","index":-0,"delta":{"type":"thinking_delta","thinking":"t"}},"api_message_id":"m"}`, true, ""},
		{"parent", `{"type":"stream_event","parent_tool_use_id":"toolu_1","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}}`, true, "x"},
		{"whitespace", " {\n\"type\" : \"stream_event\" ,\t\"event\":{ \"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"} } }\r\n", true, "x"},
		{"unknown nested values", text(`{"type":"text_delta","text":"x","extra":[1,-2.5e+3,true,false,null,{"a":[]},"s"]}`), true, "x"},

		{"key folding to a field", `{"Type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}}`, false, ""},
		{"Kelvin sign folds to k", `{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}},"tool_name":"a","\u212a":1}`, false, ""},
		{"another field present", text(`{"type":"text_delta","text":"x"}`)[:len(text(`{"type":"text_delta","text":"x"}`))-1] + `,"model":"m"}`, false, ""},
		{"duplicate key", text(`{"type":"text_delta","text":"x","text":"y"}`), false, ""},
		{"escaped key", text(`{"type":"text_delta","t\u0065xt":"x"}`), false, ""},
		{"null text", text(`{"type":"text_delta","text":null}`), false, ""},
		{"null delta", text(`null`), false, ""},
		{"fraction index", `{"type":"stream_event","event":{"type":"content_block_delta","index":1.0,"delta":{"type":"text_delta","text":"x"}}}`, false, ""},
		{"huge index", `{"type":"stream_event","event":{"type":"content_block_delta","index":99999999999999999999,"delta":{"type":"text_delta","text":"x"}}}`, false, ""},
		{"other delta", text(`{"type":"input_json_delta","partial_json":"{"}`), false, ""},
		{"other event", `{"type":"stream_event","event":{"type":"message_stop"}}`, false, ""},
		{"other line", `{"type":"assistant","message":{}}`, false, ""},
		{"trailing garbage", text(`{"type":"text_delta","text":"x"}`) + `x`, false, ""},
		{"control character", text("{\"type\":\"text_delta\",\"text\":\"a\x01\"}"), false, ""},
		{"bad escape", text(`{"type":"text_delta","text":"\'"}`), false, ""},
		{"short unicode escape", text(`{"type":"text_delta","text":"\u12"}`), false, ""},
		{"unterminated", text(`{"type":"text_delta","text":"x`), false, ""},
		{"leading zero", text(`{"type":"text_delta","text":"x","n":01}`), false, ""},
		{"deep nesting", text(`{"type":"text_delta","text":"x","n":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`), false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			took := checkSameAsGeneral(t, []byte(c.line))
			if took != c.take {
				t.Fatalf("took %v, want %v: %s", took, c.take, c.line)
			}
			if took && c.want != "" {
				ev, _ := decodeDelta(bytes.TrimSpace([]byte(c.line)))
				if got := ev.Data.(runs.MessageData).Text; got != c.want {
					t.Fatalf("text %q, want %q", got, c.want)
				}
			}
		})
	}
}

// FuzzDecodeDelta holds the fast path to the general one: whatever line
// it takes, it must decode into exactly the event encoding/json gives.
func FuzzDecodeDelta(f *testing.F) {
	for _, l := range agenttest.RecordedLines(f) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"\ud83d\ude00\n"}},"session_id":"s","parent_tool_use_id":"p","api_message_id":"m"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		checkSameAsGeneral(t, line)
	})
}

func BenchmarkDecodeDelta(b *testing.B) {
	line := []byte(`{"type":"stream_event","event":{"delta":{"text":"Hello, wor","type":"text_delta"},"index":0,"type":"content_block_delta"},"session_id":"01a228f2-29ca-7d15-b787-3795ac845e87","parent_tool_use_id":null,"uuid":"12180311-7982-4979-99ac-f9da572efa4b","api_message_id":"msg_mock_0001"}`)
	d := newDecoder(runs.Invocation{})
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			if evs := d.Decode(line); len(evs) != 1 {
				b.Fatal(evs)
			}
		}
	})
	b.Run("general", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			if evs := d.decodeLine(line); len(evs) != 1 {
				b.Fatal(evs)
			}
		}
	})
}

// TestScannerNumber holds jsonScanner.number to JSON's grammar: it reads
// exactly the numbers encoding/json accepts, and no more of the input.
func TestScannerNumber(t *testing.T) {
	for _, in := range []string{
		"0", "-0", "7", "-12", "10", "01", "-", "", "1.", "1.5", "-0.25", ".5", "1e5", "1E+5", "1e-05", "1e", "1e+",
		"2.5e3", "1.e3", "--1", "+1", "0x1", "1.5.5", "00",
	} {
		s := &jsonScanner{b: []byte(in + ",")}
		got := s.number() && s.i == len(in)
		if want := json.Valid([]byte(in)); got != want {
			t.Errorf("number(%q) read %d bytes, ok %v; encoding/json says valid: %v", in, s.i, got, want)
		}
	}
}
