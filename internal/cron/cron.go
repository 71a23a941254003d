// Package cron reads the five-field schedules of cron(8) and finds when
// one fires next in a time zone.
//
// A schedule is "minute hour day-of-month month day-of-week": each field a
// comma-separated list of *, a value, a range a-b, and any of those with a
// step /n; months and weekdays also by their English names' first three
// letters, Sunday as 0 or 7. When both day fields are restricted, a day
// matching either fires, as in cron(8). @hourly, @daily (@midnight),
// @weekly, @monthly and @yearly (@annually) stand for their usual
// schedules.
//
// Times are wall-clock times in the schedule's zone, and daylight saving
// changes resolve the way cron(8) does: a wall time the clock skips fires
// when the clock skips it, and a wall time the clock repeats fires once,
// the first time.
package cron

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/clip"
)

// MaxLen bounds an expression: the longest sensible one lists every
// minute, and anything longer is an error before it is read.
const MaxLen = 256

// horizon bounds how far Next looks: a schedule that can fire at all does
// within 8 years (29 February comes at least every 8 years).
const horizon = 8 * 366

// Schedule is a parsed expression in a time zone.
type Schedule struct {
	expr                   string
	loc                    *time.Location
	minute, hour, dom, mon uint64 // bit n set: value n fires
	dow                    uint64 // 0 to 6, Sunday 0
	// domStar and dowStar: the day field begins with *, as cron(8)
	// tells whether a day must match both fields or either.
	domStar, dowStar bool
}

// Error says which field of an expression is wrong and why, in a sentence
// a user can act on.
type Error struct {
	Field  string // "minute", "hour", "day of month", "month", "day of week", or "" for the whole
	Value  string // the field's text (or the expression's)
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("cron expression %q: %s", e.Value, e.Reason)
	}
	return fmt.Sprintf("cron %s field %q: %s", e.Field, e.Value, e.Reason)
}

// field is one of the five: its name, bounds and value names.
type field struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i's name, if any
}

var (
	minuteField = field{name: "minute", min: 0, max: 59}
	hourField   = field{name: "hour", min: 0, max: 23}
	domField    = field{name: "day of month", min: 1, max: 31}
	monthField  = field{name: "month", min: 1, max: 12,
		names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}}
	dowField = field{name: "day of week", min: 0, max: 7,
		names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}}
)

var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// Parse reads expr, to be read in loc (time.UTC when nil). It refuses an
// expression that can never fire, such as 30 February.
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	if len(expr) > MaxLen {
		return nil, &Error{Value: clip.Text(expr, 32), Reason: fmt.Sprintf("longer than %d bytes", MaxLen)}
	}
	text := strings.TrimSpace(expr)
	if strings.HasPrefix(text, "@") {
		d, ok := descriptors[strings.ToLower(text)]
		if !ok {
			return nil, &Error{Value: expr, Reason: "unknown descriptor; use @hourly, @daily, @weekly, @monthly or @yearly"}
		}
		text = d
	}
	parts := strings.Fields(text)
	if len(parts) != 5 {
		return nil, &Error{Value: expr, Reason: fmt.Sprintf("has %d fields, want 5: minute hour day-of-month month day-of-week", len(parts))}
	}
	s := &Schedule{expr: expr, loc: loc}
	var err error
	for i, dst := range []*uint64{&s.minute, &s.hour, &s.dom, &s.mon, &s.dow} {
		f := []field{minuteField, hourField, domField, monthField, dowField}[i]
		if *dst, err = f.parse(parts[i]); err != nil {
			return nil, err
		}
	}
	if s.dow&(1<<7) != 0 { // Sunday as 7
		s.dow = s.dow&^(1<<7) | 1
	}
	s.domStar, s.dowStar = strings.HasPrefix(parts[2], "*"), strings.HasPrefix(parts[4], "*")
	if err := s.checkFires(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkFires refuses a schedule whose days of the month exist in none of
// its months. Only the day of the month can rule out every day: each
// weekday falls on each date of each month in some year.
func (s *Schedule) checkFires() error {
	if s.domStar || !s.dowStar {
		return nil
	}
	first := bits.TrailingZeros64(s.dom)
	for m := 1; m <= 12; m++ {
		if s.mon&(1<<m) != 0 && first <= longestMonth(time.Month(m)) {
			return nil
		}
	}
	return &Error{Value: s.expr, Reason: "never fires: none of its months has any of its days"}
}

// longestMonth is the most days month m has, 29 for February.
func longestMonth(m time.Month) int {
	return time.Date(2000, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// parse reads one field into a bit set.
func (f field) parse(text string) (uint64, error) {
	if text == "" {
		return 0, &Error{Field: f.name, Value: text, Reason: "is empty"}
	}
	var set uint64
	for _, item := range strings.Split(text, ",") {
		bits, err := f.parseItem(item)
		if err != nil {
			return 0, &Error{Field: f.name, Value: text, Reason: err.Error()}
		}
		set |= bits
	}
	return set, nil
}

// parseItem reads *, v, a-b, each with an optional /step.
func (f field) parseItem(item string) (uint64, error) {
	rng, stepText, stepped := strings.Cut(item, "/")
	step := 1
	if stepped {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 || n > f.max-f.min+1 {
			return 0, fmt.Errorf("the step %q is not a whole number from 1 to %d", stepText, f.max-f.min+1)
		}
		step = n
	}
	lo, hi := f.min, f.max
	switch {
	case rng == "*":
	case rng == "":
		return 0, fmt.Errorf("an empty item in %q", item)
	default:
		a, b, isRange := strings.Cut(rng, "-")
		var err error
		if lo, err = f.value(a); err != nil {
			return 0, err
		}
		hi = f.max // a/step runs to the field's end, as in cron(8)
		if isRange {
			if hi, err = f.value(b); err != nil {
				return 0, err
			}
			if hi < lo {
				return 0, fmt.Errorf("the range %s runs backwards", rng)
			}
		} else if !stepped {
			hi = lo
		}
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << v
	}
	return set, nil
}

// value reads a number or a name of the field.
func (f field) value(text string) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(text, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(text)
	if err != nil || len(text) > 2 || strings.Trim(text, "0123456789") != "" {
		if f.names != nil {
			return 0, fmt.Errorf("%q is not a number from %d to %d or a name such as %s", text, f.min, f.max, f.names[0])
		}
		return 0, fmt.Errorf("%q is not a number from %d to %d", text, f.min, f.max)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%d is outside %d to %d", v, f.min, f.max)
	}
	return v, nil
}

// String is the expression as it was given.
func (s *Schedule) String() string { return s.expr }
