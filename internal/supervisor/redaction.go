package supervisor

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
)

// scrubber removes a run's secrets from what the run stores: its events,
// its record, the stderr its decoder classifies and its log lines. It
// knows the values of the credential variables the run's agent was given,
// besides what Config.Redact finds in every run.
type scrubber struct {
	red *redact.Redactor
	// streams holds back the end of each delta stream (by event type
	// and id), so that a secret split across two deltas is whole in one
	// of them. Guarded by the task's mu: emit holds it.
	streams map[string]*deltaStream
}

// deltaStream is one stream of deltas, with the envelope fields its
// held text is released with.
type deltaStream struct {
	st              *redact.Stream
	session, parent string
}

// credentialWords are the parts of a variable's name that say its value
// is a credential.
var credentialWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"}

// credentials returns the values of the credential variables c gives its
// agent: every variable passed through from the gateway's environment
// (the adapters pass only what a CLI needs to reach and log in to its
// model), and the fixed ones whose names say they are credentials; and
// the command's other Secrets.
func (s *Supervisor) credentials(c runs.Command) []string {
	out := slices.Clone(c.Secrets)
	for _, name := range c.PassEnv {
		if v := s.cfg.Getenv(name); v != "" {
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

// newScrubber returns the scrubber of a run whose agent runs c.
func (s *Supervisor) newScrubber(c runs.Command) *scrubber {
	return &scrubber{red: s.cfg.Redact.With(s.credentials(c)...)}
}

// redactor returns t's redactor: the run's own once its command is known,
// the gateway's before (a run cancelled while queued). t.scrub is set
// before the run's process starts and never changed, so it is read
// without t.mu.
func (s *Supervisor) redactor(t *task) *redact.Redactor {
	if t != nil && t.scrub != nil {
		return t.scrub.red
	}
	return s.cfg.Redact
}

// redactLog returns log with its lines redacted by r: a run's log knows
// the run's credentials, which the gateway's own logger does not.
func redactLog(log *zap.Logger, r *redact.Redactor) *zap.Logger {
	if r == nil {
		return log
	}
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return redact.Core(c, r) }))
}

// recordOf is the record of r as it is stored: its text redacted with
// t's secrets, then bounded.
func (s *Supervisor) recordOf(t *task, r runs.Run) runs.Run {
	return s.cfg.Limits.record(redactRun(s.redactor(t), r))
}

// redactRun returns r with its free text redacted: result, diff,
// structured output, error, turns' errors and results, pending approvals'
// inputs, and the prompts kept for audit. Slices and pointers that change
// are copied, so r's own stay as they were.
func redactRun(red *redact.Redactor, r runs.Run) runs.Run {
	if red == nil {
		return r
	}
	r.Result = red.String(r.Result)
	r.Diff = red.String(r.Diff)
	r.StructuredOutput = redactJSON(red, r.StructuredOutput)
	r.Error = redactError(red, r.Error)
	r.Spec.Prompt = red.String(r.Spec.Prompt)
	r.Spec.SystemPrompt = red.String(r.Spec.SystemPrompt)
	if len(r.Turns) > 0 {
		turns := make([]runs.Turn, len(r.Turns))
		for i, tu := range r.Turns {
			tu.Error = redactError(red, tu.Error)
			turns[i] = tu
		}
		r.Turns = turns
	}
	if len(r.PendingApprovals) > 0 {
		pending := make([]runs.Approval, len(r.PendingApprovals))
		for i, a := range r.PendingApprovals {
			a.Input = redactJSON(red, a.Input)
			pending[i] = a
		}
		r.PendingApprovals = pending
	}
	return r
}

func redactError(red *redact.Redactor, e *runs.RunError) *runs.RunError {
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

func redactJSON(red *redact.Redactor, raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	return json.RawMessage(red.Bytes(raw))
}

// scrubEvents returns evs with t's secrets removed from their text, before
// they are bounded and encoded (so that a cut never leaves half a secret).
// A delta's text is passed through the delta stream it belongs to, which
// may hold its end back until the stream's next delta: any other event
// first releases what the streams hold, as deltas, so that the deltas of
// a message still add up to its text. A delta whose whole text is held is
// dropped. Called with t.mu held.
func (s *Supervisor) scrubEvents(t *task, evs []runs.Event) []runs.Event {
	red := s.redactor(t)
	if red == nil {
		return evs
	}
	sc := t.scrub
	out := evs[:0:0]
	for _, ev := range evs {
		if key, text, ok := deltaOf(ev); ok && sc != nil {
			ds := sc.streams[key]
			if ds == nil {
				if sc.streams == nil {
					sc.streams = map[string]*deltaStream{}
				}
				ds = &deltaStream{st: red.Stream()}
				sc.streams[key] = ds
			}
			ds.session, ds.parent = ev.SessionID, ev.ParentToolCallID
			shown := ds.st.Write(text)
			if shown == "" {
				continue
			}
			out = append(out, withDeltaText(ev, shown))
			continue
		}
		out = append(out, sc.flush()...)
		out = append(out, redactEvent(red, ev))
	}
	return out
}

// flush returns the held text of every stream as deltas, in a stable
// order, and forgets the streams.
func (sc *scrubber) flush() []runs.Event {
	if sc == nil || len(sc.streams) == 0 {
		return nil
	}
	var out []runs.Event
	for _, key := range slices.Sorted(maps.Keys(sc.streams)) {
		ds := sc.streams[key]
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
	clear(sc.streams)
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

// redactEvent returns ev with its payload's text redacted. The encoded
// event is redacted again as a whole (emit), which catches what this
// misses; this pass exists so that bounding a long text cannot cut a
// secret in half first.
func redactEvent(red *redact.Redactor, ev runs.Event) runs.Event {
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
		d.Input = redactJSON(red, d.Input)
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
		d.StructuredOutput = redactJSON(red, d.StructuredOutput)
		d.Error = redactError(red, d.Error)
		ev.Data = d
	case runs.TurnCompletedData:
		d.Result = red.String(d.Result)
		d.Error = redactError(red, d.Error)
		ev.Data = d
	case runs.ApprovalRequestedData:
		d.Input = redactJSON(red, d.Input)
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
