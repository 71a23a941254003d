package cron

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func at(t testing.TB, loc *time.Location, s string) time.Time {
	t.Helper()
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseRefuses(t *testing.T) {
	for expr, want := range map[string]string{
		"":                        "has 0 fields, want 5",
		"* * * *":                 "has 4 fields, want 5",
		"* * * * * *":             "has 6 fields, want 5",
		"60 * * * *":              `cron minute field "60": 60 is outside 0 to 59`,
		"* 24 * * *":              `cron hour field "24": 24 is outside 0 to 23`,
		"* * 0 * *":               `cron day of month field "0": 0 is outside 1 to 31`,
		"* * 32 * *":              `cron day of month field "32"`,
		"* * * 13 *":              `cron month field "13"`,
		"* * * * 8":               `cron day of week field "8"`,
		"* * * foo *":             `"foo" is not a number from 1 to 12 or a name such as jan`,
		"* * * * funday":          `"funday" is not a number from 0 to 7 or a name such as sun`,
		"5-3 * * * *":             "the range 5-3 runs backwards",
		"*/0 * * * *":             `the step "0" is not a whole number from 1 to 60`,
		"*/61 * * * *":            `the step "61"`,
		"*/x * * * *":             `the step "x"`,
		"1,,2 * * * *":            "an empty item",
		"+5 * * * *":              `"+5" is not a number`,
		"-5 * * * *":              `"" is not a number`,
		"007 * * * *":             `"007" is not a number`,
		"0 0 30 2 *":              "never fires",
		"0 0 31 2,4,6,9,11 *":     "never fires",
		"@fortnightly":            "unknown descriptor",
		strings.Repeat("1,", 200): "longer than 256 bytes",
	} {
		_, err := Parse(expr, nil)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an *Error saying %q", expr, err, want)
		}
	}
}

func TestNext(t *testing.T) {
	for _, c := range []struct {
		expr, from string
		want       []string
	}{
		{"* * * * *", "2026-01-01 10:00", []string{"2026-01-01 10:01", "2026-01-01 10:02"}},
		{"*/15 * * * *", "2026-01-01 10:07", []string{"2026-01-01 10:15", "2026-01-01 10:30", "2026-01-01 10:45", "2026-01-01 11:00"}},
		{"5/20 * * * *", "2026-01-01 10:00", []string{"2026-01-01 10:05", "2026-01-01 10:25", "2026-01-01 10:45", "2026-01-01 11:05"}},
		{"0 9-17/4 * * *", "2026-01-01 10:00", []string{"2026-01-01 13:00", "2026-01-01 17:00", "2026-01-02 09:00"}},
		{"30 2 * * mon-fri", "2026-01-02 03:00", []string{"2026-01-05 02:30", "2026-01-06 02:30"}}, // 2 Jan 2026 is a Friday
		{"0 0 * * 7", "2026-01-01 00:00", []string{"2026-01-04 00:00", "2026-01-11 00:00"}},        // Sunday as 7
		{"0 0 13 * fri", "2026-02-01 00:00", []string{"2026-02-06 00:00", "2026-02-13 00:00", "2026-02-20 00:00"}},
		// */10 begins with *, so both day fields must match: the 1st,
		// 11th, 21st and 31st that are Fridays.
		{"0 0 */10 * fri", "2026-02-01 00:00", []string{"2026-05-01 00:00", "2026-07-31 00:00", "2026-08-21 00:00"}},
		{"0 0 29 2 *", "2026-01-01 00:00", []string{"2028-02-29 00:00", "2032-02-29 00:00"}},
		{"0 0 31 * *", "2026-01-31 00:00", []string{"2026-03-31 00:00", "2026-05-31 00:00"}},
		{"@yearly", "2026-06-01 00:00", []string{"2027-01-01 00:00", "2028-01-01 00:00"}},
		{"@hourly", "2026-12-31 23:00", []string{"2027-01-01 00:00"}},
		{"@weekly", "2026-01-01 00:00", []string{"2026-01-04 00:00"}},
		{"0 12 * JAN,Dec *", "2026-02-01 00:00", []string{"2026-12-01 12:00"}},
	} {
		s, err := Parse(c.expr, nil)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.expr, err)
			continue
		}
		from := at(t, time.UTC, c.from)
		for _, w := range c.want {
			got, ok := s.Next(from)
			if !ok || !got.Equal(at(t, time.UTC, w)) {
				t.Errorf("%q: Next(%s) = %s %v, want %s", c.expr, from.Format(time.DateTime), got.Format(time.DateTime), ok, w)
				break
			}
			from = got
		}
	}
}

// TestNextAcrossDaylightSaving: in New York the clock skips 02:00 to
// 02:59 on 8 March 2026 and repeats 01:00 to 01:59 on 1 November 2026. A
// skipped time fires when the clock skips it; a repeated one fires once.
func TestNextAcrossDaylightSaving(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	utc := func(s string) time.Time { return at(t, time.UTC, s) }
	for _, c := range []struct {
		expr string
		from time.Time
		want []time.Time
	}{
		// 02:30 does not exist on 8 March: it fires at 03:00 EDT (07:00Z).
		{"30 2 * * *", utc("2026-03-07 08:00"), []time.Time{utc("2026-03-08 07:00"), utc("2026-03-09 06:30")}},
		// Every minute: 01:59 EST, then the change, then 03:01 EDT.
		{"* * * * *", utc("2026-03-08 06:58"), []time.Time{utc("2026-03-08 06:59"), utc("2026-03-08 07:00"), utc("2026-03-08 07:01")}},
		// 01:30 happens twice on 1 November: it fires the first time (EDT).
		{"30 1 * * *", utc("2026-10-31 12:00"), []time.Time{utc("2026-11-01 05:30"), utc("2026-11-02 06:30")}},
		// From inside the repeated hour, the first 01:30 is past.
		{"30 1 * * *", utc("2026-11-01 06:10"), []time.Time{utc("2026-11-02 06:30")}},
		// Hourly across the repeated hour: 01:00 EDT, then 02:00 EST.
		{"0 * * * *", utc("2026-11-01 04:30"), []time.Time{utc("2026-11-01 05:00"), utc("2026-11-01 07:00")}},
	} {
		s, err := Parse(c.expr, ny)
		if err != nil {
			t.Fatal(err)
		}
		from := c.from
		for _, w := range c.want {
			got, ok := s.Next(from)
			if !ok || !got.Equal(w) {
				t.Errorf("%q in New York: Next(%s) = %s %v, want %s", c.expr, from.UTC().Format(time.DateTime), got.UTC().Format(time.DateTime), ok, w.Format(time.DateTime))
				break
			}
			from = got
		}
	}
}
