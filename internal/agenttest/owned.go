package agenttest

import (
	"encoding/json"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// Decode decodes stdout with dec line by line, then finishes it with exit
// and stderr, as the supervisor does, and checks what the supervisor
// relies on: that an event owns its data once Decode has returned it. The
// supervisor emits a line's events on another goroutine while the next
// line is decoded, into the same reused buffer, so an event that still
// points into the line, or into state that the decoder changes later,
// would be stored wrong or raced over. Each line is therefore decoded from
// a buffer that is overwritten as soon as Decode returns, and each event's
// JSON as Decode returned it must equal its JSON once every line is
// decoded and the decoder finished. Around, when given, is called about
// each line, for a Conversation's replies.
func Decode(t testing.TB, dec runs.Decoder, stdout [][]byte, exit runs.Exit, stderr []byte, around *Around) ([]runs.Event, runs.Outcome) {
	t.Helper()
	var evs []runs.Event
	var at [][]byte
	var buf []byte
	for i, l := range stdout {
		buf = append(buf[:0], l...)
		if around != nil && around.Before != nil {
			around.Before(buf)
		}
		got := dec.Decode(buf)
		for k, ev := range got {
			b, err := json.Marshal(ev)
			if err != nil {
				t.Fatalf("line %d, event %d (%s) does not marshal: %v", i+1, k, ev.Type, err)
			}
			at = append(at, b)
		}
		// A quote keeps a raw message that aliases the line valid JSON
		// of another value, so that the comparison, not Marshal, says so.
		for j := range buf {
			buf[j] = ' '
		}
		if len(buf) > 1 {
			buf[0], buf[len(buf)-1] = '"', '"'
		}
		if around != nil && around.After != nil {
			around.After()
		}
		evs = append(evs, got...)
	}
	o := dec.Finish(exit, stderr)
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("event %d (%s) no longer marshals once the decoder went on: %v", i, ev.Type, err)
		}
		if string(b) != string(at[i]) {
			t.Fatalf("event %d (%s) changed after Decode returned it: the decoder kept a hold on its data\n  then: %s\n  now:  %s",
				i, ev.Type, at[i], b)
		}
	}
	return evs, o
}

// Around holds what Decode calls about each line: Before with the line
// before it is decoded, After once it was.
type Around struct {
	Before func(line []byte)
	After  func()
}
