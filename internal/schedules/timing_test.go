package schedules

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestNewTimingRefuses(t *testing.T) {
	anchor := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct{ cron, tz, every, field, says string }{
		{"", "", "", "cron", `needs "cron"`},
		{"* * * * *", "", "1m", "every", "not both"},
		{"", "", "9s", "every", "outside 10s"},
		{"", "", "9000h", "every", "outside"},
		{"", "", "ten minutes", "every", "not a duration"},
		{"", "Europe/Paris", "1m", "timezone", `goes with "cron"`},
		{"* * * * *", "Mars/Olympus", "", "timezone", "not an IANA time zone"},
		{"* * * * *", "Local", "", "timezone", "not an IANA time zone"},
		{"61 * * * *", "", "", "cron", "minute"},
	} {
		_, err := NewTiming(c.cron, c.tz, c.every, anchor)
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Reason, c.says) || !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("NewTiming(%q, %q, %q) = %v, want field %q saying %q", c.cron, c.tz, c.every, err, c.field, c.says)
		}
	}
}

func TestTimingNext(t *testing.T) {
	anchor := time.Date(2026, 12, 6, 10, 0, 0, 500, time.UTC) // sub-second: fire times are whole seconds
	every, err := NewTiming("", "", "10s", anchor)
	if err != nil {
		t.Fatal(err)
	}
	base := anchor.Truncate(time.Second)
	for _, c := range []struct{ after, want time.Time }{
		{anchor.Add(-time.Hour), base.Add(10 * time.Second)},
		{base, base.Add(10 * time.Second)},
		{base.Add(9 * time.Second), base.Add(10 * time.Second)},
		{base.Add(10 * time.Second), base.Add(20 * time.Second)},
		{base.Add(24*time.Hour + 5*time.Second), base.Add(24*time.Hour + 10*time.Second)},
	} {
		if got, ok := every.Next(c.after); !ok || !got.Equal(c.want) {
			t.Errorf("every 10s: Next(%s) = %s, want %s", c.after, got, c.want)
		}
	}
	paris, err := NewTiming("0 9 * * mon-fri", "Europe/Paris", "", anchor)
	if err != nil {
		t.Fatal(err)
	}
	// Sunday 6 December 2026: next is Monday 09:00 in Paris, 08:00 UTC.
	if got, ok := paris.Next(anchor); !ok || !got.Equal(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("weekdays at 9 in Paris: Next = %s, want Monday 08:00 UTC", got)
	}
}
