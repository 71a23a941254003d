package cron

import "time"

// Next returns the first time after t at which the schedule fires, and
// false when it fires at none within the next eight years (a schedule
// Parse accepts always does).
func (s *Schedule) Next(t time.Time) (time.Time, bool) {
	// Walk the wall clock from the minute after t's, skipping whole
	// months, days and hours that cannot match.
	w := t.In(s.loc)
	y, mo, d := w.Date()
	h, mi := w.Hour(), w.Minute()+1
	for days := 0; days <= horizon; {
		// Normalise what the steps below ran past (minute 60, day 32).
		n := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
		y, mo, d, h, mi = n.Year(), n.Month(), n.Day(), n.Hour(), n.Minute()
		switch {
		case s.mon&(1<<uint(mo)) == 0:
			mo, d, h, mi = mo+1, 1, 0, 0
			days += 28
		case !s.dayMatches(y, mo, d):
			d, h, mi = d+1, 0, 0
			days++
		case s.hour&(1<<uint(h)) == 0:
			h, mi = h+1, 0
		case s.minute&(1<<uint(mi)) == 0:
			mi++
		default:
			if at, ok := s.instant(y, mo, d, h, mi); ok && at.After(t) {
				return at, true
			}
			mi++
		}
	}
	return time.Time{}, false
}

// dayMatches says whether the date fires: both day fields must match when
// either begins with *, else either, as in cron(8).
func (s *Schedule) dayMatches(y int, mo time.Month, d int) bool {
	dom := s.dom&(1<<uint(d)) != 0
	dow := s.dow&(1<<uint(time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Weekday())) != 0
	if s.domStar || s.dowStar {
		return dom && dow
	}
	return dom || dow
}

// instant is the first moment the clock in the schedule's zone reads the
// wall time: when a change of offset skips it, the moment of the change;
// when one repeats it, its first occurrence.
func (s *Schedule) instant(y int, mo time.Month, d, h, mi int) (time.Time, bool) {
	at := time.Date(y, mo, d, h, mi, 0, 0, s.loc)
	want := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
	if got := wallClock(at); !got.Equal(want) {
		// Skipped: time.Date gave the wall time read in the zone before
		// the change or the one after it, and so a moment in one of
		// those zones; the change is where that zone ends or begins.
		start, end := at.ZoneBounds()
		if got.Before(want) {
			return end, !end.IsZero()
		}
		return start, !start.IsZero()
	}
	start, _ := at.ZoneBounds()
	if start.IsZero() {
		return at, true
	}
	_, now := at.Zone()
	_, before := start.Add(-time.Second).Zone()
	if before > now { // the clock went back at start: the wall time may have come before
		if first := at.Add(-time.Duration(before-now) * time.Second); first.Before(start) && wallClock(first.In(s.loc)).Equal(want) {
			return first, true
		}
	}
	return at, true
}

// wallClock is t's wall clock in its own zone, as a time in UTC.
func wallClock(t time.Time) time.Time {
	y, mo, d := t.Date()
	return time.Date(y, mo, d, t.Hour(), t.Minute(), 0, 0, time.UTC)
}
