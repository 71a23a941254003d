package redact

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/agentgate/agentgate/internal/runs"
)

// This file applies a Redactor to what a run is made of: its record, its
// events and its log, and finds which values of a run's command are
// secrets. The supervisor gives each run a Redactor of its own (With the
// run's secrets) and an Events for its stream of events.

// credentialWords are the parts of a variable's name that say its value
// is a credential.
var credentialWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"}

// CommandSecrets returns the values of the credential variables c gives
// its agent, getenv reading the gateway's environment: every variable passed through from the gateway's environment
// (the adapters pass only what a CLI needs to reach and log in to its
// model), and the fixed ones whose names say they are credentials; and
// the command's other Secrets.
func CommandSecrets(c runs.Command, getenv func(string) string) []string {
	out := slices.Clone(c.Secrets)
	for _, name := range c.PassEnv {
		if v := getenv(name); v != "" {
			out = append(out, v)
		}
	}
	for _, kv := range c.Env {
		name, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			continue
		}
		upper := strings.ToUpper(name)
		for _, w := range credentialWords {
			if strings.Contains(upper, w) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// Log returns log with its lines redacted by r: a run's log knows the
// run's credentials, which the gateway's own logger does not.
func Log(log *zap.Logger, r *Redactor) *zap.Logger {
	if r == nil {
		return log
	}
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return Core(c, r) }))
}

// Run returns run with its free text redacted: result, diff,
// structured output, error, turns' errors and results, pending approvals'
// inputs, and the prompts kept for audit. Slices and pointers that change
// are copied, so run's own stay as they were. The nil Redactor returns
// run as it is.
func (red *Redactor) Run(r runs.Run) runs.Run {
	if red == nil {
		return r
	}
	r.Result = red.String(r.Result)
	r.Diff = red.String(r.Diff)
	r.StructuredOutput = red.JSON(r.StructuredOutput)
	r.Error = red.RunError(r.Error)
	r.Spec.Prompt = red.String(r.Spec.Prompt)
	r.Spec.SystemPrompt = red.String(r.Spec.SystemPrompt)
	if len(r.Turns) > 0 {
		turns := make([]runs.Turn, len(r.Turns))
		for i, tu := range r.Turns {
			tu.Error = red.RunError(tu.Error)
			turns[i] = tu
		}
		r.Turns = turns
	}
	if len(r.PendingApprovals) > 0 {
		pending := make([]runs.Approval, len(r.PendingApprovals))
		for i, a := range r.PendingApprovals {
			a.Input = red.JSON(a.Input)
			pending[i] = a
		}
		r.PendingApprovals = pending
	}
	return r
}

// RunError returns e with its message and hint redacted; e itself when
// they hold no secret.
func (red *Redactor) RunError(e *runs.RunError) *runs.RunError {
	if e == nil {
		return nil
	}
	msg, hint := red.String(e.Message), red.String(e.Hint)
	if msg == e.Message && hint == e.Hint {
		return e
	}
	c := *e
	c.Message, c.Hint = msg, hint
	return &c
}

// JSON returns raw redacted, still valid JSON when raw is.
func (red *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	return json.RawMessage(red.Bytes(raw))
}

// Event returns ev with its payload's text redacted. The encoded
// event is redacted again as a whole (emit), which catches what this
// misses; this pass exists so that bounding a long text cannot cut a
// secret in half first.
func (red *Redactor) Event(ev runs.Event) runs.Event {
	switch d := ev.Data.(type) {
	case runs.MessageData:
		d.Text = red.String(d.Text)
		ev.Data = d
	case runs.ReasoningData:
		d.Text = red.String(d.Text)
		ev.Data = d
	case runs.DeltaData:
		d.Text = red.String(d.Text)
		ev.Data = d
	case runs.ToolCallStartedData:
		d.Input = red.JSON(d.Input)
		ev.Data = d
	case runs.ToolCallCompletedData:
		d.Output = red.String(d.Output)
		ev.Data = d
	case runs.UnparsedData:
		d.Line = red.String(d.Line)
		ev.Data = d
	case runs.RunStartedData:
		d.Prompt, d.SystemPrompt = red.String(d.Prompt), red.String(d.SystemPrompt)
		ev.Data = d
	case runs.FileChangedData:
		d.Diff = red.String(d.Diff)
		ev.Data = d
	case runs.RunCompletedData:
		d.Result, d.Diff = red.String(d.Result), red.String(d.Diff)
		d.StructuredOutput = red.JSON(d.StructuredOutput)
		d.Error = red.RunError(d.Error)
		ev.Data = d
	case runs.TurnCompletedData:
		d.Result = red.String(d.Result)
		d.Error = red.RunError(d.Error)
		ev.Data = d
	case runs.ApprovalRequestedData:
		d.Input = red.JSON(d.Input)
		ev.Data = d
	case runs.WarningData:
		d.Message = red.String(d.Message)
		ev.Data = d
	case runs.RateLimitData:
		d.Error = red.String(d.Error)
		ev.Data = d
	}
	return ev
}

// Events redacts one run's stream of events. A delta's text passes through
// the delta stream it belongs to, which may hold its end back until the
// stream's next delta, so that a secret split across two deltas is whole
// in one of them: any other event first releases what the streams hold,
// as deltas, so that the deltas of a message still add up to its text. It
// is not safe for concurrent use: the supervisor calls it under the run's
// lock.
type Events struct {
	red *Redactor
	// streams holds back the end of each delta stream, by event type
	// and id.
	streams map[string]*deltaStream
}

// deltaStream is one stream of deltas, with the envelope fields its
// held text is released with.
type deltaStream struct {
	st              *Stream
	session, parent string
}

// Events returns the redaction of one run's stream of events by r.
func (r *Redactor) Events() *Events { return &Events{red: r} }

// Redactor is the Redactor e applies.
func (e *Events) Redactor() *Redactor { return e.red }

// Scrub returns evs with their secrets removed, before they are bounded
// and encoded (so that a cut never leaves half a secret). A delta whose
// whole text is held back is dropped.
func (e *Events) Scrub(evs []runs.Event) []runs.Event {
	if e.red == nil {
		return evs
	}
	out := evs[:0:0]
	for _, ev := range evs {
		if key, text, ok := deltaOf(ev); ok {
			ds := e.streams[key]
			if ds == nil {
				if e.streams == nil {
					e.streams = map[string]*deltaStream{}
				}
				ds = &deltaStream{st: e.red.Stream()}
				e.streams[key] = ds
			}
			ds.session, ds.parent = ev.SessionID, ev.ParentToolCallID
			if shown := ds.st.Write(text); shown != "" {
				out = append(out, withDeltaText(ev, shown))
			}
			continue
		}
		out = append(out, e.flush()...)
		out = append(out, e.red.Event(ev))
	}
	return out
}

// flush returns the held text of every stream as deltas, in a stable
// order, and forgets the streams.
func (e *Events) flush() []runs.Event {
	if len(e.streams) == 0 {
		return nil
	}
	var out []runs.Event
	for _, key := range slices.Sorted(maps.Keys(e.streams)) {
		ds := e.streams[key]
		if text := ds.st.Flush(); text != "" {
			typ, id, _ := strings.Cut(key, "\x00")
			ev := runs.Event{Type: runs.EventType(typ), SessionID: ds.session, ParentToolCallID: ds.parent}
			if ev.Type == runs.EventMessageDelta {
				ev.Data = runs.MessageData{MessageID: id, Text: text}
			} else {
				ev.Data = runs.DeltaData{ID: id, Text: text}
			}
			out = append(out, ev)
		}
	}
	clear(e.streams)
	return out
}

// deltaOf returns the stream key and text of a delta event.
func deltaOf(ev runs.Event) (key, text string, ok bool) {
	switch d := ev.Data.(type) {
	case runs.MessageData:
		if ev.Type == runs.EventMessageDelta {
			return string(ev.Type) + "\x00" + d.MessageID, d.Text, true
		}
	case runs.DeltaData:
		return string(ev.Type) + "\x00" + d.ID, d.Text, true
	}
	return "", "", false
}

func withDeltaText(ev runs.Event, text string) runs.Event {
	switch d := ev.Data.(type) {
	case runs.MessageData:
		d.Text = text
		ev.Data = d
	case runs.DeltaData:
		d.Text = text
		ev.Data = d
	}
	return ev
}
