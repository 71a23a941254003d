// Package schedules is for runs that start themselves on a clock. It
// holds a schedule's timing (Timing): a cron expression in a zone, or an
// interval, read with errors that name the request field at fault.
package schedules

import (
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/cron"
	"github.com/agentgate/agentgate/internal/runs"
)

// MinEvery is the shortest interval a schedule may have: shorter, and
// its runs would be a load test rather than a schedule.
const MinEvery = 10 * time.Second

// MaxEvery bounds an interval to a year, past which a cron expression says
// what is meant.
const MaxEvery = 366 * 24 * time.Hour

// Timing is when a schedule fires: a cron expression in a zone, or a
// fixed interval counted from an anchor (the schedule's creation), so
// that every replica computes the same fire times.
type Timing struct {
	cron   *cron.Schedule
	every  time.Duration
	anchor time.Time
}

// NewTiming reads a schedule's cron (with timezone, an IANA name, UTC when
// empty) or every (a Go duration such as "10m"): exactly one of the two.
// An error names the request field at fault (runs.Invalid).
func NewTiming(expr, timezone, every string, anchor time.Time) (Timing, error) {
	switch {
	case expr != "" && every != "":
		return Timing{}, runs.Invalid("every", `give either "cron" or "every", not both`)
	case expr == "" && every == "":
		return Timing{}, runs.Invalid("cron", `a schedule needs "cron" (with "timezone") or "every"`)
	case every != "":
		if timezone != "" {
			return Timing{}, runs.Invalid("timezone", `"timezone" goes with "cron"; an interval ("every") has none`)
		}
		d, err := time.ParseDuration(every)
		if err != nil {
			return Timing{}, runs.Invalid("every", fmt.Sprintf("%q is not a duration such as \"90s\", \"15m\" or \"2h\"", every))
		}
		if d < MinEvery || d > MaxEvery {
			return Timing{}, runs.Invalid("every", fmt.Sprintf("%s is outside %s to %s", d, MinEvery, MaxEvery))
		}
		return Timing{every: d, anchor: anchor.Truncate(time.Second)}, nil
	}
	loc, err := location(timezone)
	if err != nil {
		return Timing{}, err
	}
	s, err := cron.Parse(expr, loc)
	if err != nil {
		return Timing{}, runs.Invalid("cron", err.Error())
	}
	return Timing{cron: s}, nil
}

// location reads an IANA zone name; "" is UTC. Local, which differs from
// replica to replica, is refused.
func location(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if name == "Local" || len(name) > 64 {
		return nil, runs.Invalid("timezone", fmt.Sprintf("%q is not an IANA time zone name such as \"Europe/Paris\"", name))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, runs.Invalid("timezone", fmt.Sprintf("%q is not an IANA time zone name such as \"Europe/Paris\"", name))
	}
	return loc, nil
}

// Next is the first fire time after t. ok is false only for a cron
// expression with no fire in the years ahead.
func (tm Timing) Next(t time.Time) (time.Time, bool) {
	if tm.cron != nil {
		return tm.cron.Next(t)
	}
	if t.Before(tm.anchor) {
		return tm.anchor.Add(tm.every), true
	}
	k := t.Sub(tm.anchor)/tm.every + 1
	return tm.anchor.Add(k * tm.every), true
}
