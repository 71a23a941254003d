package supervisor

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// reflectEncode is encodeEvent's general path, through encoding/json.
func reflectEncode(t testing.TB, ev runs.Event) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// checkDeltaEnvelope fails unless the fast encoding of ev is byte for byte
// what encoding/json writes, and reports whether the fast path took it.
func checkDeltaEnvelope(t testing.TB, ev runs.Event) bool {
	fast, ok := appendDeltaEnvelope(nil, &ev)
	if !ok {
		return false
	}
	if want := reflectEncode(t, ev); !bytes.Equal(fast, want) {
		t.Fatalf("fast encoding\n%s\nencoding/json\n%s", fast, want)
	}
	return true
}

func TestDeltaEnvelopeEncoding(t *testing.T) {
	base := runs.Event{V: runs.EnvelopeVersion, RunID: "run_1", Seq: 42, Time: time.Date(2026, 12, 2, 10, 0, 0, 120000000, time.UTC),
		Type: runs.EventMessageDelta, Agent: "claude"}
	with := func(f func(*runs.Event)) runs.Event { ev := base; f(&ev); return ev }
	for name, c := range map[string]struct {
		ev   runs.Event
		take bool
	}{
		"text":            {with(func(e *runs.Event) { e.Data = runs.MessageData{MessageID: "m", Text: "hello"} }), true},
		"no message id":   {with(func(e *runs.Event) { e.Data = runs.MessageData{Text: ""} }), true},
		"reasoning":       {with(func(e *runs.Event) { e.Type, e.Data = runs.EventReasoningDelta, runs.DeltaData{ID: "m:0", Text: "t"} }), true},
		"session, parent": {with(func(e *runs.Event) { e.SessionID, e.ParentToolCallID, e.Data = "s", "p", runs.MessageData{Text: "x"} }), true},
		"escapes":         {with(func(e *runs.Event) { e.Data = runs.MessageData{Text: "\"\\\b\f\n\r\t\x00\x1f\x7f<a href='x'>&"} }), true},
		"unicode":         {with(func(e *runs.Event) { e.Data = runs.MessageData{Text: "é😀\u2028\u2029\ufffd"} }), true},
		"invalid UTF-8":   {with(func(e *runs.Event) { e.RunID, e.Data = "r\xff", runs.MessageData{Text: "a\xc3\x28b\xed\xa0\x80"} }), true},
		"whole seconds":   {with(func(e *runs.Event) { e.Time = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); e.Data = runs.MessageData{} }), true},
		"zero time":       {with(func(e *runs.Event) { e.Time = time.Time{}; e.Data = runs.MessageData{} }), true},
		"year out of range": {with(func(e *runs.Event) {
			e.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			e.Data = runs.MessageData{}
		}), false},
		"other payload":   {with(func(e *runs.Event) { e.Data = runs.WarningData{Code: "c"} }), false},
		"pointer payload": {with(func(e *runs.Event) { e.Data = &runs.MessageData{Text: "x"} }), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := checkDeltaEnvelope(t, c.ev); got != c.take {
				t.Fatalf("fast path took it: %v, want %v", got, c.take)
			}
			// encodeEvent gives encoding/json's bytes either way.
			if c.ev.Time.Year() <= 9999 {
				b, err := encodeEvent(c.ev)
				if err != nil || !bytes.Equal(b, reflectEncode(t, c.ev)) {
					t.Fatalf("encodeEvent: %s, %v", b, err)
				}
			}
		})
	}
}

func FuzzDeltaEnvelope(f *testing.F) {
	f.Add("run_1", uint64(1), int64(1764669600123456789), "claude", "s", "", "m", "hello\n", false)
	f.Add("r\xff", uint64(0), int64(0), "", "", "p\u2028", "", "\x00\"\\", true)
	f.Fuzz(func(t *testing.T, runID string, seq uint64, nanos int64, agent, session, parent, id, text string, reasoning bool) {
		ev := runs.Event{V: runs.EnvelopeVersion, RunID: runID, Seq: seq, Time: time.Unix(0, nanos).UTC(), Type: runs.EventMessageDelta,
			Agent: agent, SessionID: session, ParentToolCallID: parent, Data: runs.MessageData{MessageID: id, Text: text}}
		if reasoning {
			ev.Type, ev.Data = runs.EventReasoningDelta, runs.DeltaData{ID: id, Text: text}
		}
		if !checkDeltaEnvelope(t, ev) {
			t.Fatalf("a delta envelope did not take the fast path: %+v", ev)
		}
	})
}

func BenchmarkEncodeDeltaEnvelope(b *testing.B) {
	ev := runs.Event{V: runs.EnvelopeVersion, RunID: "run_01JABCDEFGHJKMNPQRSTVWXYZ0", Seq: 1234, Time: time.Now().UTC(),
		Type: runs.EventMessageDelta, Agent: "claude", SessionID: "01a228f2-29ca-7d15-b787-3795ac845e87",
		Data: runs.MessageData{MessageID: "msg_mock_0001", Text: "Hello, world. "}}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeEvent(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflect", func(b *testing.B) {
		for b.Loop() {
			reflectEncode(b, ev)
		}
	})
}
