package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const scheduleHelp = `A schedule starts a run on a cron expression in a time zone (--cron,
--timezone) or at an interval (--every). The run is the JSON body of
POST /v1/runs in a file (--run FILE, - for stdin), or run's own flags and
a prompt, as agentgate run takes them.

--when-busy says what a fire does while the schedule's last run still
goes: skip it (the default), queue behind it, or cancel it and start
anew. --catch-up once starts one run for the fires missed while no
gateway ran; by default they are recorded as missed.`

// runSourceHelp is the help of the commands that take a run to start later.
const runSourceHelp = `The run is the JSON body of POST /v1/runs in a file (--run FILE, - reads
stdin), or run's flags (--agent, --model, --permission, …) and a prompt:
the arguments joined by spaces, or stdin with "-". Not both.`

// schedule is a schedule as the gateway answers it.
type schedule struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Cron       string          `json:"cron,omitempty"`
	Timezone   string          `json:"timezone,omitempty"`
	Every      string          `json:"every,omitempty"`
	Run        json.RawMessage `json:"run"`
	WhenBusy   string          `json:"when_busy"`
	CatchUp    string          `json:"catch_up"`
	Paused     bool            `json:"paused"`
	NextFireAt *time.Time      `json:"next_fire_at,omitempty"`
	LastRunID  string          `json:"last_run_id,omitempty"`
	LastFires  []fire          `json:"last_fires,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// fire is one time a schedule fired, and what came of it.
type fire struct {
	FireTime  time.Time     `json:"fire_time"`
	Outcome   string        `json:"outcome"`
	RunID     string        `json:"run_id,omitempty"`
	BusyRunID string        `json:"busy_run_id,omitempty"`
	Error     *outcomeError `json:"error,omitempty"`
	Manual    bool          `json:"manual,omitempty"`
}

// outcomeError is why a fire or a delivery started no run.
type outcomeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// scheduleRequest is the body of POST /v1/schedules.
type scheduleRequest struct {
	Name     string          `json:"name"`
	Cron     string          `json:"cron,omitempty"`
	Timezone string          `json:"timezone,omitempty"`
	Every    string          `json:"every,omitempty"`
	Run      json.RawMessage `json:"run"`
	WhenBusy string          `json:"when_busy,omitempty"`
	CatchUp  string          `json:"catch_up,omitempty"`
	Paused   bool            `json:"paused,omitempty"`
}

func scheduleCommands() []command {
	return []command{
		{name: "create", args: "--name NAME (--cron EXPR [--timezone TZ] | --every DUR) [flags] (--run FILE | PROMPT... | -)",
			summary: "create a schedule", help: runSourceHelp, setup: setupScheduleCreate},
		{name: "ls", args: "", summary: "list the schedules, by name", setup: setupScheduleList},
		{name: "get", args: "ID", summary: "show a schedule, its next fire and its last fires", setup: setupScheduleGet},
		{name: "fires", args: "[--limit N] ID", summary: "list a schedule's fires, newest first", setup: setupScheduleFires},
		{name: "pause", args: "ID", summary: "stop a schedule firing until it is resumed", setup: setupPause("schedule", true)},
		{name: "resume", args: "ID", summary: "let a paused schedule fire again", setup: setupPause("schedule", false)},
		{name: "fire", args: "ID", summary: "fire a schedule now, paused or not, and print the outcome", setup: setupScheduleFire},
		{name: "set", args: "ID [--name NAME] [--cron EXPR [--timezone TZ] | --every DUR] [--when-busy W] [--catch-up C]",
			summary: "change a schedule: only the fields whose flags are given", setup: setupScheduleSet},
		{name: "rm", args: "ID", summary: "delete a schedule", setup: setupRemove("schedule")},
	}
}

// scheduleFlags are the fields of a schedule that create and set take.
type scheduleFlags struct {
	name, cron, timezone, every, whenBusy, catchUp string
}

func (f *scheduleFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "the schedule's `name`, 1 to 100 characters")
	fs.StringVar(&f.cron, "cron", "", "fire on this cron `expression`: five fields (minute hour day month weekday) or @hourly, @daily, @weekly, @monthly, @yearly")
	fs.StringVar(&f.timezone, "timezone", "", "the IANA time `zone` of --cron, such as Europe/Paris (the gateway's default: UTC)")
	fs.StringVar(&f.every, "every", "", "fire at this `interval` instead of --cron: a duration from 10s to 8784h (366 days)")
	fs.StringVar(&f.whenBusy, "when-busy", "", "the `action` of a fire while the last run still goes: skip (the gateway's default), queue or cancel_previous")
	fs.StringVar(&f.catchUp, "catch-up", "", "the `mode` of fires missed while no gateway ran: none (the gateway's default: recorded as missed) or once")
}

// checkWhen reports flags of when to fire that cannot go together.
func (f *scheduleFlags) checkWhen() error {
	switch {
	case f.cron != "" && f.every != "":
		return usageErrorf("--cron and --every: give one, not both")
	case f.timezone != "" && f.every != "":
		return usageErrorf("--timezone goes with --cron, not --every")
	}
	return nil
}

// given returns the fields of the flags fs was given, by their JSON names
// (--when-busy is when_busy).
func (f *scheduleFlags) given(fs *flag.FlagSet) map[string]any {
	values := map[string]string{"name": f.name, "cron": f.cron, "timezone": f.timezone, "every": f.every,
		"when-busy": f.whenBusy, "catch-up": f.catchUp}
	fields := map[string]any{}
	fs.Visit(func(fl *flag.Flag) {
		if v, ok := values[fl.Name]; ok {
			fields[strings.ReplaceAll(fl.Name, "-", "_")] = v
		}
	})
	return fields
}

func setupScheduleCreate(fs *flag.FlagSet) func(a *app, args []string) int {
	var f scheduleFlags
	var src runSource
	var paused bool
	f.register(fs)
	fs.BoolVar(&paused, "paused", false, "create it paused: it fires only when resumed (or with schedule fire)")
	src.register(fs)
	const name = "schedule create"
	return func(a *app, args []string) int {
		if f.name == "" {
			return a.usageFail(name, "--name is needed")
		}
		if f.cron == "" && f.every == "" {
			return a.usageFail(name, "when to fire is needed: --cron EXPR or --every DUR")
		}
		if err := f.checkWhen(); err != nil {
			return a.commandFail(name, err)
		}
		run, err := src.body(a, fs, args)
		if err != nil {
			return a.commandFail(name, err)
		}
		req := scheduleRequest{Name: f.name, Cron: f.cron, Timezone: f.timezone, Every: f.every, Run: run,
			WhenBusy: f.whenBusy, CatchUp: f.catchUp, Paused: paused}
		var s schedule
		return a.callAndShow(http.MethodPost, "/v1/schedules", nil, req, &s, func(w io.Writer) error {
			return writeSchedule(w, s)
		})
	}
}

func setupScheduleList(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 0 {
			return a.usageFail("schedule ls", "unexpected argument %q", args[0])
		}
		var list struct {
			Schedules []schedule `json:"schedules"`
		}
		return a.callAndShow(http.MethodGet, "/v1/schedules", nil, nil, &list, func(w io.Writer) error {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tWHEN\tNEXT FIRE\tWHEN BUSY\tLAST RUN")
			for _, s := range list.Schedules {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, oneLine(s.Name, 40), scheduleWhen(s), nextFire(s),
					orDash(s.WhenBusy), orDash(s.LastRunID))
			}
			return tw.Flush()
		})
	}
}

func setupScheduleGet(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("schedule get", "want one schedule ID")
		}
		var s schedule
		return a.callAndShow(http.MethodGet, resourcePath("schedule", args[0]), nil, nil, &s, func(w io.Writer) error {
			return writeSchedule(w, s)
		})
	}
}

func setupScheduleFires(fs *flag.FlagSet) func(a *app, args []string) int {
	var limit int
	fs.IntVar(&limit, "limit", 0, "at most this many fires, 1 to 100 (the gateway's default: 100, all it keeps)")
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("schedule fires", "want one schedule ID")
		}
		var list struct {
			Fires []fire `json:"fires"`
		}
		return a.callAndShow(http.MethodGet, resourcePath("schedule", args[0], "fires"), limitQuery(limit), nil, &list,
			func(w io.Writer) error { return writeFires(w, list.Fires) })
	}
}

func setupScheduleFire(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("schedule fire", "want one schedule ID")
		}
		var f fire
		return a.callAndShow(http.MethodPost, resourcePath("schedule", args[0], "run"), nil, nil, &f, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, outcomeText(f.Outcome, f.RunID, f.BusyRunID, f.Error))
			return err
		})
	}
}

func setupScheduleSet(fs *flag.FlagSet) func(a *app, args []string) int {
	var f scheduleFlags
	f.register(fs)
	const name = "schedule set"
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail(name, "want one schedule ID")
		}
		// A --timezone alone is left to the gateway: it goes with the
		// cron expression the schedule already has.
		if err := f.checkWhen(); err != nil {
			return a.commandFail(name, err)
		}
		patch := f.given(fs)
		if len(patch) == 0 {
			return a.usageFail(name, "nothing to change: give --name, --cron, --timezone, --every, --when-busy or --catch-up")
		}
		var s schedule
		return a.callAndShow(http.MethodPatch, resourcePath("schedule", args[0]), nil, patch, &s, func(w io.Writer) error {
			return writeSchedule(w, s)
		})
	}
}

// writeSchedule writes a schedule as a table of one row per field, then
// its last fires.
func writeSchedule(w io.Writer, s schedule) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("schedule", s.ID)
	row("name", oneLine(s.Name, 100))
	row("when", scheduleWhen(s))
	row("run", runSummary(s.Run))
	row("when busy", orDash(s.WhenBusy))
	row("catch up", orDash(s.CatchUp))
	row("next fire", nextFire(s))
	row("last run", orDash(s.LastRunID))
	row("created", localTime(s.CreatedAt))
	row("updated", localTime(s.UpdatedAt))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.LastFires) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return writeFires(w, s.LastFires)
}

// writeFires writes fires as a table, in the order given.
func writeFires(w io.Writer, fires []fire) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIRED\tOUTCOME\tRUN\tDETAIL")
	for _, f := range fires {
		var detail []string
		if f.Manual {
			detail = append(detail, "manual")
		}
		detail = append(detail, outcomeDetail(f.BusyRunID, f.Error)...)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", localTime(f.FireTime), oneLine(f.Outcome, 40), orDash(f.RunID), orDash(strings.Join(detail, "; ")))
	}
	return tw.Flush()
}

// scheduleWhen is when a schedule fires: "every 10s", or its cron
// expression and time zone.
func scheduleWhen(s schedule) string {
	if s.Cron == "" {
		return "every " + oneLine(s.Every, 40)
	}
	when := oneLine(s.Cron, 100)
	if s.Timezone != "" {
		when += " " + oneLine(s.Timezone, 60)
	}
	return when
}

// nextFire is when a schedule fires next, or "paused".
func nextFire(s schedule) string {
	switch {
	case s.Paused:
		return "paused"
	case s.NextFireAt == nil:
		return "-"
	}
	return localTime(*s.NextFireAt)
}

// runSummary is the agent and the prompt of a run's request, on one line.
func runSummary(raw json.RawMessage) string {
	var r struct {
		Agent  string `json:"agent"`
		Prompt string `json:"prompt"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return "-"
	}
	return oneLine(r.Agent, 40) + ": " + oneLine(r.Prompt, 100)
}

// outcomeText is an outcome with what it concerns, on one line: the run
// it started, the run still going, or why it started nothing.
func outcomeText(outcome, runID, busyRunID string, e *outcomeError) string {
	s := oneLine(outcome, 40)
	if runID != "" {
		s += ": run " + runID
	}
	if d := outcomeDetail(busyRunID, e); len(d) > 0 {
		s += " (" + strings.Join(d, "; ") + ")"
	}
	return s
}

// outcomeDetail is the run still going, and why nothing started.
func outcomeDetail(busyRunID string, e *outcomeError) []string {
	var d []string
	if busyRunID != "" {
		d = append(d, "run "+busyRunID+" still going")
	}
	if e != nil {
		d = append(d, oneLine(e.Code, 100)+": "+oneLine(e.Message, 300))
	}
	return d
}

func localTime(t time.Time) string { return t.Local().Format(time.DateTime) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resourcePath is the escaped path of a schedule's or a trigger's route:
// /v1/{kind}s/{id}/rest.
func resourcePath(kind, id string, rest ...string) string {
	p := "/v1/" + kind + "s/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// limitQuery is ?limit=N, or no query for 0 (the gateway's default).
func limitQuery(limit int) url.Values {
	if limit == 0 {
		return nil
	}
	return url.Values{"limit": {strconv.Itoa(limit)}}
}

// setupPause is pause and resume of a schedule or a trigger: a PATCH of
// its paused field.
func setupPause(kind string, paused bool) func(fs *flag.FlagSet) func(a *app, args []string) int {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	return func(fs *flag.FlagSet) func(a *app, args []string) int {
		return func(a *app, args []string) int {
			if len(args) != 1 {
				return a.usageFail(kind+" "+verb, "want one %s ID", kind)
			}
			var res struct {
				ID         string     `json:"id"`
				Paused     bool       `json:"paused"`
				NextFireAt *time.Time `json:"next_fire_at,omitempty"`
			}
			body := map[string]bool{"paused": paused}
			return a.callAndShow(http.MethodPatch, resourcePath(kind, args[0]), nil, body, &res, func(w io.Writer) error {
				state := "resumed"
				if res.Paused {
					state = "paused"
				}
				if res.NextFireAt != nil && !res.Paused {
					state += ", next fire " + localTime(*res.NextFireAt)
				}
				_, err := fmt.Fprintf(w, "%s %s: %s\n", kind, res.ID, state)
				return err
			})
		}
	}
}

// setupRemove is rm of a schedule or a trigger.
func setupRemove(kind string) func(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(fs *flag.FlagSet) func(a *app, args []string) int {
		return func(a *app, args []string) int {
			if len(args) != 1 {
				return a.usageFail(kind+" rm", "want one %s ID", kind)
			}
			return a.callAndShow(http.MethodDelete, resourcePath(kind, args[0]), nil, nil, nil, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s %s: deleted\n", kind, args[0])
				return err
			})
		}
	}
}

// callAndShow makes one call and prints its answer: with --json as the
// gateway sent it, else by show, once out holds the answer decoded.
func (a *app) callAndShow(method, path string, q url.Values, body, out any, show func(w io.Writer) error) int {
	c, err := a.client()
	if err != nil {
		return errorExit(a.stderr, err)
	}
	defer c.close()
	raw, err := c.call(a.ctx, method, path, q, body, out)
	if err != nil {
		return errorExit(a.stderr, err)
	}
	if a.g.json {
		return a.printJSON(raw)
	}
	if err := show(a.stdout); err != nil {
		return errorExit(a.stderr, err)
	}
	return exitOK
}

// commandFail is errorExit, but a usage error is told as cmd's, with
// where to read its usage.
func (a *app) commandFail(cmd string, err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		return a.usageFail(cmd, "%s", ue.msg)
	}
	return errorExit(a.stderr, err)
}

// runSource is the run a schedule or a trigger starts: the JSON body of
// POST /v1/runs from a file (--run), or run's flags and a prompt.
type runSource struct {
	file string
	spec runSpec
}

func (s *runSource) register(fs *flag.FlagSet) {
	fs.StringVar(&s.file, "run", "", "a `file` holding the JSON body of POST /v1/runs of each run (- for stdin), instead of run's flags and a prompt")
	s.spec.register(fs)
}

// body is the run's request as JSON. Exactly one of --run and a prompt
// must be given, and run's flags go with the prompt only.
func (s *runSource) body(a *app, fs *flag.FlagSet, args []string) (json.RawMessage, error) {
	switch {
	case s.file != "" && (len(args) > 0 || runSpecGiven(fs)):
		return nil, usageErrorf("give the run either as --run FILE or as a prompt with run's flags, not both")
	case s.file == "" && len(args) == 0:
		return nil, usageErrorf("a run is needed: --run FILE (- for stdin), or a prompt (- for stdin) with run's flags such as --agent")
	case s.file != "":
		return readRunFile(a, s.file)
	}
	req, err := s.spec.request(a, args)
	if err != nil {
		return nil, err
	}
	return json.Marshal(req)
}

// runSpecGiven reports whether fs was given one of run's flags.
func runSpecGiven(fs *flag.FlagSet) bool {
	var spec runSpec
	own := flag.NewFlagSet("", flag.ContinueOnError)
	spec.register(own)
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || own.Lookup(f.Name) != nil })
	return given
}

// readRunFile reads --run: a JSON object, from a file or from stdin for
// "-", bounded as stdin is.
func readRunFile(a *app, name string) (json.RawMessage, error) {
	var b []byte
	if name == "-" {
		text, err := a.textArg([]string{"-"})
		if err != nil {
			return nil, err
		}
		b = []byte(text)
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, usageErrorf("--run: %v", err)
		}
		defer f.Close()
		if b, err = io.ReadAll(io.LimitReader(f, maxStdinBytes+1)); err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if len(b) > maxStdinBytes {
			return nil, usageErrorf("--run: %s holds more than %d bytes", name, maxStdinBytes)
		}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return nil, usageErrorf("--run %s: not a JSON object (the body of POST /v1/runs)", name)
	}
	return json.RawMessage(b), nil
}
