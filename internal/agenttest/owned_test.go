package agenttest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// aliasing returns events that point into the line it was given.
type aliasing struct{}

func (aliasing) Decode(line []byte) []runs.Event {
	return []runs.Event{runs.NewEvent(runs.EventAgentUnparsed, json.RawMessage(line))}
}
func (aliasing) Finish(runs.Exit, []byte) runs.Outcome { return runs.Outcome{Status: runs.Succeeded} }

// mutating changes the data of the events it returned earlier.
type mutating struct{ last *runs.MessageData }

func (m *mutating) Decode(line []byte) []runs.Event {
	if m.last != nil {
		m.last.Text += "!"
	}
	m.last = &runs.MessageData{Text: string(line)}
	return []runs.Event{runs.NewEvent(runs.EventMessageDelta, m.last)}
}
func (*mutating) Finish(runs.Exit, []byte) runs.Outcome { return runs.Outcome{Status: runs.Succeeded} }

// owning copies what it keeps.
type owning struct{}

func (owning) Decode(line []byte) []runs.Event {
	return []runs.Event{runs.NewEvent(runs.EventMessageDelta, runs.MessageData{Text: string(line)})}
}
func (owning) Finish(runs.Exit, []byte) runs.Outcome { return runs.Outcome{Status: runs.Succeeded} }

func TestDecodeChecksOwnership(t *testing.T) {
	lines := [][]byte{[]byte(`{"a":1}`), []byte(`{"b":2}`)}
	for _, c := range []struct {
		name string
		dec  runs.Decoder
		want string
	}{
		{"aliasing", aliasing{}, "changed after Decode returned it"},
		{"mutating", &mutating{}, "changed after Decode returned it"},
		{"owning", owning{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fatalTB{TB: t}
			evs, o := Decode(f, c.dec, lines, runs.Exit{}, nil, nil)
			if c.want == "" {
				if f.msg != "" || len(evs) != 2 || o.Status != runs.Succeeded {
					t.Fatalf("a decoder that owns its events: %q, %d events, %s", f.msg, len(evs), o.Status)
				}
				return
			}
			if !strings.Contains(f.msg, c.want) {
				t.Fatalf("Decode said %q, want it to say %q", f.msg, c.want)
			}
		})
	}
}
