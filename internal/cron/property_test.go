package cron

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// bruteNext is Next by definition, minute by real minute from t: a moment
// fires when its wall clock matches and has not been read before (a
// repeated wall time fires once), or when the clock jumps forward over a
// wall time that matches. It looks no further than limit.
func bruteNext(s *Schedule, t, limit time.Time) (time.Time, bool) {
	matches := func(w time.Time) bool {
		return s.mon&(1<<uint(w.Month())) != 0 && s.dayMatches(w.Year(), w.Month(), w.Day()) &&
			s.hour&(1<<uint(w.Hour())) != 0 && s.minute&(1<<uint(w.Minute())) != 0
	}
	for u := t.Truncate(time.Minute).Add(time.Minute); !u.After(limit); u = u.Add(time.Minute) {
		wall := wallClock(u.In(s.loc))
		repeated := false
		for back := 15 * time.Minute; back <= 3*time.Hour; back += 15 * time.Minute {
			repeated = repeated || wallClock(u.Add(-back).In(s.loc)).Equal(wall)
		}
		if matches(wall) && !repeated {
			return u, true
		}
		prev := wallClock(u.Add(-time.Minute).In(s.loc))
		for w := prev.Add(time.Minute); w.Before(wall) && wall.Sub(prev) <= 48*time.Hour; w = w.Add(time.Minute) {
			if matches(w) {
				return u, true
			}
		}
	}
	return time.Time{}, false
}

// randomExpr makes a schedule that fires often enough to check within
// days: a few minutes and hours, and mostly any day.
func randomExpr(r *rand.Rand) string {
	list := func(min, max, n int) string {
		var items []string
		for range n {
			switch r.IntN(3) {
			case 0:
				items = append(items, fmt.Sprint(min+r.IntN(max+1-min)))
			case 1:
				a := min + r.IntN(max+1-min)
				items = append(items, fmt.Sprintf("%d-%d", a, a+r.IntN(max+1-a)))
			default:
				items = append(items, fmt.Sprintf("*/%d", 1+r.IntN(max/2+1)))
			}
		}
		return strings.Join(items, ",")
	}
	day := func(f string) string {
		if r.IntN(3) == 0 {
			return f
		}
		return "*"
	}
	return strings.Join([]string{list(0, 59, 1+r.IntN(3)), list(0, 23, 1+r.IntN(3)),
		day(list(1, 31, 2) + ",1-31/" + fmt.Sprint(1+r.IntN(4))), "*", day(list(0, 6, 2))}, " ")
}

// TestNextAgreesWithTheDefinition checks Next against bruteNext for
// random schedules, in zones whose clocks change by an hour, by half an
// hour, by a whole day (Apia, 2011), and never, from moments around
// their changes.
func TestNextAgreesWithTheDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	zones := map[string][]string{
		"America/New_York":    {"2026-03-08 07:00", "2026-11-01 06:00"},
		"Europe/London":       {"2026-03-29 01:00", "2026-10-25 01:00"},
		"Australia/Lord_Howe": {"2026-04-04 15:00", "2026-10-03 15:30"},
		"Pacific/Apia":        {"2011-12-30 10:00"},
		"Asia/Kathmandu":      {"2026-06-01 00:00"},
	}
	cases := 0
	for name, changes := range zones {
		loc := mustLoad(t, name)
		for range 30 {
			expr := randomExpr(r)
			s, err := Parse(expr, loc)
			if err != nil {
				t.Fatalf("Parse(%q): %v", expr, err)
			}
			from := at(t, time.UTC, changes[r.IntN(len(changes))]).Add(time.Duration(r.IntN(4*24*60)-2*24*60) * time.Minute)
			limit := from.Add(5 * 24 * time.Hour)
			for range 4 {
				want, wok := bruteNext(s, from, limit)
				got, ok := s.Next(from)
				cases++
				if !ok || (wok && !got.Equal(want)) || (!wok && !got.After(limit)) {
					t.Fatalf("%q in %s: Next(%s) = %s %v, by definition %s %v", expr, name,
						from.In(loc).Format(time.RFC3339), got.In(loc).Format(time.RFC3339), ok, want.In(loc).Format(time.RFC3339), wok)
				}
				if !wok {
					break
				}
				from = got
			}
		}
	}
	t.Logf("%d fires checked", cases)
}

// FuzzParse: no expression makes Parse or Next panic or loop; an accepted
// one fires, later than asked, and reads the same from its String.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"a" + strings.Repeat("é", 200), "* * * * *", "*/5 1-3,7 */2 jan-mar mon,fri", "0 0 29 2 *", "@daily", "0 0 31 4 *", "5/7 * 1-31/3 * 0-7/2", "60 * * * *"} {
		f.Add(seed)
	}
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		f.Fatal(err)
	}
	from := time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := Parse(expr, loc)
		if err != nil {
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("Parse(%q) = %T %v, want an *Error", expr, err, err)
			}
			if utf8.ValidString(expr) && !utf8.ValidString(e.Value) {
				t.Fatalf("Parse(%q): the error's value %q is not valid UTF-8", expr, e.Value)
			}
			return
		}
		got, ok := s.Next(from)
		if !ok || !got.After(from) {
			t.Fatalf("%q: Next = %s %v, want a fire after %s", expr, got, ok, from)
		}
		again, err := Parse(s.String(), loc)
		if err != nil {
			t.Fatalf("%q reparsed: %v", expr, err)
		}
		if g2, _ := again.Next(from); !g2.Equal(got) {
			t.Fatalf("%q reparsed fires at %s, not %s", expr, g2, got)
		}
	})
}
