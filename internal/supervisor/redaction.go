package supervisor

import (
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
)

// A run's redaction (internal/redact/runs.go) removes its secrets from what
// it stores: its events, its record, the stderr its decoder classifies
// and its log lines. It knows the values of the credential variables the
// run's agent was given, besides what Config.Redact finds in every run.

// newScrubber returns the redaction of the events of a run whose agent
// runs c.
func (s *Supervisor) newScrubber(c runs.Command) *redact.Events {
	return s.cfg.Redact.With(redact.CommandSecrets(c, s.cfg.Getenv)...).Events()
}

// redactor returns t's redactor: the run's own once its command is known,
// the gateway's before (a run cancelled while queued). t.scrub is set
// before the run's process starts and never changed, so it is read
// without t.mu.
func (s *Supervisor) redactor(t *task) *redact.Redactor {
	if t != nil && t.scrub != nil {
		return t.scrub.Redactor()
	}
	return s.cfg.Redact
}

// recordOf is the record of r as it is stored: its text redacted with
// t's secrets, then bounded.
func (s *Supervisor) recordOf(t *task, r runs.Run) runs.Run {
	return s.cfg.Limits.record(s.redactor(t).Run(r))
}

// scrubEvents returns evs with t's secrets removed from their text, before
// they are bounded and encoded. A run without a scrubber yet (cancelled
// while queued) has no delta streams to hold back: each event is redacted
// on its own. Called with t.mu held.
func (s *Supervisor) scrubEvents(t *task, evs []runs.Event) []runs.Event {
	if t != nil && t.scrub != nil {
		return t.scrub.Scrub(evs)
	}
	red := s.cfg.Redact
	if red == nil {
		return evs
	}
	out := make([]runs.Event, len(evs))
	for i, ev := range evs {
		out[i] = red.Event(ev)
	}
	return out
}
