package schedules

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/runs"
)

// Kind names schedules among the owners of internal/autorun.
const Kind = "schedule"

// CatchUp is what a schedule does with the fires missed while no replica
// ran.
type CatchUp string

// The values of CatchUp.
const (
	// CatchUpNone records each missed fire as missed and runs none.
	CatchUpNone CatchUp = "none"
	// CatchUpOnce runs the latest missed fire, late, and records the
	// others as missed.
	CatchUpOnce CatchUp = "once"
)

// Schedule is a schedule as the store keeps it.
type Schedule struct {
	ID       string           `json:"id"`
	Tenant   string           `json:"tenant"`
	Name     string           `json:"name"`
	Cron     string           `json:"cron,omitempty"`
	Timezone string           `json:"timezone,omitempty"`
	Every    string           `json:"every,omitempty"`
	WhenBusy autorun.WhenBusy `json:"when_busy"`
	CatchUp  CatchUp          `json:"catch_up"`
	Paused   bool             `json:"paused"`
	// Run is the run request of each fire, sealed (autorun.SealSpec).
	Run []byte `json:"run"`
	// Anchor is where an interval's fires are counted from: when the
	// timing was last set.
	Anchor time.Time `json:"anchor"`
	// Since is when the schedule last began to fire (created, resumed
	// or retimed): earlier fire times are none of its.
	Since     time.Time `json:"since"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (s Schedule) owner() autorun.Owner {
	return autorun.Owner{Kind: Kind, ID: s.ID, Tenant: s.Tenant, WhenBusy: s.WhenBusy}
}

func (s Schedule) timing() (Timing, error) { return NewTiming(s.Cron, s.Timezone, s.Every, s.Anchor) }

func scheduleKey(tenant, id string) string {
	return "schedule." + autorun.TenantKey(tenant) + "." + id
}

// Request is a new schedule, as the API decoded it.
type Request struct {
	Name     string
	Cron     string
	Timezone string
	Every    string
	Run      runs.Spec
	WhenBusy autorun.WhenBusy
	CatchUp  CatchUp
	Paused   bool
}

// Patch is a change to a schedule: the fields given, nil for the others.
// Giving Cron clears Every and the other way round.
type Patch struct {
	Name     *string
	Cron     *string
	Timezone *string
	Every    *string
	Run      *runs.Spec
	WhenBusy *autorun.WhenBusy
	CatchUp  *CatchUp
	Paused   *bool
}

// MaxName bounds a schedule's name, in characters.
const MaxName = 100

// CheckName refuses an empty name, a long one, or one with control
// characters.
func CheckName(name string) error {
	switch n := utf8.RuneCountInString(name); {
	case strings.TrimSpace(name) == "":
		return runs.Invalid("name", "is required: a few words that say what runs")
	case n > MaxName || !utf8.ValidString(name):
		return runs.Invalid("name", fmt.Sprintf("must be at most %d characters of UTF-8", MaxName))
	case strings.ContainsFunc(name, unicode.IsControl):
		return runs.Invalid("name", "must not hold control characters")
	}
	return nil
}

func checkRules(w autorun.WhenBusy, c CatchUp) error {
	if err := autorun.CheckWhenBusy(w); err != nil {
		return err
	}
	if c != CatchUpNone && c != CatchUpOnce {
		return runs.Invalid("catch_up", `must be "none" or "once"`)
	}
	return nil
}

// Fire is one fire time of a schedule and what became of it, as the API
// shows it.
type Fire struct {
	FireTime  time.Time          `json:"fire_time"`
	Outcome   autorun.Outcome    `json:"outcome"`
	RunID     string             `json:"run_id,omitempty"`
	BusyRunID string             `json:"busy_run_id,omitempty"`
	Error     *autorun.ErrorInfo `json:"error,omitempty"`
	Manual    bool               `json:"manual,omitempty"`
}

func fireOf(r autorun.Record) Fire {
	return Fire{FireTime: r.Time.UTC(), Outcome: r.Outcome, RunID: r.RunID, BusyRunID: r.BusyRunID, Error: r.Error, Manual: r.Manual}
}

// View is a schedule as the API shows it.
type View struct {
	ID         string           `json:"id"`
	Name       string           `json:"name"`
	Cron       string           `json:"cron,omitempty"`
	Timezone   string           `json:"timezone,omitempty"`
	Every      string           `json:"every,omitempty"`
	Run        runs.Spec        `json:"run"`
	WhenBusy   autorun.WhenBusy `json:"when_busy"`
	CatchUp    CatchUp          `json:"catch_up"`
	Paused     bool             `json:"paused"`
	NextFireAt *time.Time       `json:"next_fire_at,omitempty"`
	LastRunID  string           `json:"last_run_id,omitempty"`
	LastFires  []Fire           `json:"last_fires"`
	CreatedAt  time.Time        `json:"created_at"`
	UpdatedAt  time.Time        `json:"updated_at"`
}

// lastFiresShown is how many fires a schedule's View holds.
const lastFiresShown = 5
