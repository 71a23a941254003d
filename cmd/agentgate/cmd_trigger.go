package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const triggerHelp = `A trigger starts a run when a sender posts to its URL. The URL takes no
API key: the sender proves itself with the trigger's secret, as --verify
says:
  token              Authorization: Bearer SECRET (dedupe by Idempotency-Key)
  github             the GitHub webhook's secret (X-Hub-Signature-256)
  standard_webhooks  the sender's signing secret, whsec_… (webhook-signature)
The secret is shown once, by create and by rotate.

The run is the JSON body of POST /v1/runs in a file (--run FILE, - for
stdin), or run's own flags and a prompt. Its prompt is a Go template of
the delivery: {{.payload.issue.title}}, {{index .headers "X-Github-Event"}}.
A prompt that renders empty starts nothing, which filters events:
{{if eq .payload.action "opened"}}…{{end}}.`

// trigger is a trigger as the gateway answers it; Secret only in the
// answers of create and rotate.
type trigger struct {
	ID                      string          `json:"id"`
	Name                    string          `json:"name"`
	Run                     json.RawMessage `json:"run"`
	WhenBusy                string          `json:"when_busy"`
	Verify                  string          `json:"verify"`
	Paused                  bool            `json:"paused"`
	URL                     string          `json:"url"`
	Secret                  string          `json:"secret,omitempty"`
	PreviousSecretExpiresAt *time.Time      `json:"previous_secret_expires_at,omitempty"`
	LastRunID               string          `json:"last_run_id,omitempty"`
	LastDeliveries          []delivery      `json:"last_deliveries,omitempty"`
	CreatedAt               time.Time       `json:"created_at"`
	UpdatedAt               time.Time       `json:"updated_at"`
}

// delivery is one request a sender made to a trigger's URL, and what
// came of it.
type delivery struct {
	ID         string        `json:"id"`
	DeliveryID string        `json:"delivery_id,omitempty"`
	Event      string        `json:"event,omitempty"`
	ReceivedAt time.Time     `json:"received_at"`
	Outcome    string        `json:"outcome"`
	RunID      string        `json:"run_id,omitempty"`
	BusyRunID  string        `json:"busy_run_id,omitempty"`
	Error      *outcomeError `json:"error,omitempty"`
	Duplicate  bool          `json:"duplicate,omitempty"`
}

// triggerRequest is the body of POST /v1/triggers.
type triggerRequest struct {
	Name     string          `json:"name"`
	Run      json.RawMessage `json:"run"`
	WhenBusy string          `json:"when_busy,omitempty"`
	Verify   string          `json:"verify"`
}

func triggerCommands() []command {
	return []command{
		{name: "create", args: "--name NAME --verify token|github|standard_webhooks [flags] (--run FILE | PROMPT... | -)",
			summary: "create a trigger and print its URL and secret", help: runSourceHelp, setup: setupTriggerCreate},
		{name: "ls", args: "", summary: "list the triggers", setup: setupTriggerList},
		{name: "get", args: "ID", summary: "show a trigger and its last deliveries", setup: setupTriggerGet},
		{name: "deliveries", args: "[--limit N] ID", summary: "list a trigger's deliveries, newest first", setup: setupTriggerDeliveries},
		{name: "pause", args: "ID", summary: "make a trigger ignore deliveries until it is resumed", setup: setupPause("trigger", true)},
		{name: "resume", args: "ID", summary: "let a paused trigger start runs again", setup: setupPause("trigger", false)},
		{name: "rotate", args: "[--keep-previous DUR] ID", summary: "give a trigger a new secret and print it", setup: setupTriggerRotate},
		{name: "rm", args: "ID", summary: "delete a trigger", setup: setupRemove("trigger")},
	}
}

func setupTriggerCreate(fs *flag.FlagSet) func(a *app, args []string) int {
	var name, verify, whenBusy string
	var src runSource
	fs.StringVar(&name, "name", "", "the trigger's `name`")
	fs.StringVar(&verify, "verify", "", "the `method` by which a sender proves itself: token, github or standard_webhooks")
	fs.StringVar(&whenBusy, "when-busy", "", "the `action` of a delivery while the last run still goes: skip (the gateway's default), queue or cancel_previous")
	src.register(fs)
	const cmd = "trigger create"
	return func(a *app, args []string) int {
		if name == "" {
			return a.usageFail(cmd, "--name is needed")
		}
		if verify == "" {
			return a.usageFail(cmd, "--verify is needed: token, github or standard_webhooks")
		}
		run, err := src.body(a, fs, args)
		if err != nil {
			return a.commandFail(cmd, err)
		}
		req := triggerRequest{Name: name, Run: run, WhenBusy: whenBusy, Verify: verify}
		var t trigger
		return a.callAndShow(http.MethodPost, "/v1/triggers", nil, req, &t, func(w io.Writer) error {
			if err := writeTrigger(w, t); err != nil {
				return err
			}
			secretShownOnce(a.stderr, t)
			return nil
		})
	}
}

func setupTriggerList(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 0 {
			return a.usageFail("trigger ls", "unexpected argument %q", args[0])
		}
		var list struct {
			Triggers []trigger `json:"triggers"`
		}
		return a.callAndShow(http.MethodGet, "/v1/triggers", nil, nil, &list, func(w io.Writer) error {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tVERIFY\tSTATE\tWHEN BUSY\tLAST RUN")
			for _, t := range list.Triggers {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, oneLine(t.Name, 40), oneLine(t.Verify, 40), pausedState(t.Paused),
					orDash(t.WhenBusy), orDash(t.LastRunID))
			}
			return tw.Flush()
		})
	}
}

func setupTriggerGet(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("trigger get", "want one trigger ID")
		}
		var t trigger
		return a.callAndShow(http.MethodGet, resourcePath("trigger", args[0]), nil, nil, &t, func(w io.Writer) error {
			return writeTrigger(w, t)
		})
	}
}

func setupTriggerDeliveries(fs *flag.FlagSet) func(a *app, args []string) int {
	var limit int
	fs.IntVar(&limit, "limit", 0, "at most this many deliveries, 1 to 100 (the gateway's default: 100, all it keeps)")
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("trigger deliveries", "want one trigger ID")
		}
		var list struct {
			Deliveries []delivery `json:"deliveries"`
		}
		return a.callAndShow(http.MethodGet, resourcePath("trigger", args[0], "deliveries"), limitQuery(limit), nil, &list,
			func(w io.Writer) error { return writeDeliveries(w, list.Deliveries) })
	}
}

func setupTriggerRotate(fs *flag.FlagSet) func(a *app, args []string) int {
	var keep keepFlag
	fs.Var(&keep, "keep-previous", "keep the old secret valid for this `duration`, up to 168h; 0 ends it at once (the gateway's default: 24h)")
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("trigger rotate", "want one trigger ID")
		}
		// Without the flag there is no body: the gateway's default holds.
		var body any
		if keep.given {
			body = map[string]int{"keep_previous_seconds": keep.seconds}
		}
		var t trigger
		return a.callAndShow(http.MethodPost, resourcePath("trigger", args[0], "rotate"), nil, body, &t, func(w io.Writer) error {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "trigger\t%s\nsecret\t%s\n", t.ID, t.Secret)
			previous := "no longer accepted"
			if t.PreviousSecretExpiresAt != nil {
				previous = "accepted until " + localTime(*t.PreviousSecretExpiresAt)
			}
			fmt.Fprintf(tw, "previous secret\t%s\n", previous)
			if err := tw.Flush(); err != nil {
				return err
			}
			secretShownOnce(a.stderr, t)
			return nil
		})
	}
}

// writeTrigger writes a trigger as a table of one row per field (its
// secret when the answer has it), then its last deliveries.
func writeTrigger(w io.Writer, t trigger) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("trigger", t.ID)
	row("name", oneLine(t.Name, 100))
	row("url", oneLine(t.URL, 500))
	if t.Secret != "" {
		row("secret", t.Secret)
	}
	row("verify", oneLine(t.Verify, 40))
	row("run", runSummary(t.Run))
	row("when busy", orDash(t.WhenBusy))
	row("state", pausedState(t.Paused))
	if t.PreviousSecretExpiresAt != nil {
		row("previous secret", "accepted until "+localTime(*t.PreviousSecretExpiresAt))
	}
	row("last run", orDash(t.LastRunID))
	row("created", localTime(t.CreatedAt))
	row("updated", localTime(t.UpdatedAt))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.LastDeliveries) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return writeDeliveries(w, t.LastDeliveries)
}

// writeDeliveries writes deliveries as a table, in the order given.
func writeDeliveries(w io.Writer, ds []delivery) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIVED\tOUTCOME\tEVENT\tRUN\tDETAIL")
	for _, d := range ds {
		var detail []string
		if d.DeliveryID != "" {
			detail = append(detail, "delivery "+oneLine(d.DeliveryID, 100))
		}
		if d.Duplicate {
			detail = append(detail, "duplicate")
		}
		detail = append(detail, outcomeDetail(d.BusyRunID, d.Error)...)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", localTime(d.ReceivedAt), oneLine(d.Outcome, 40), orDash(oneLine(d.Event, 40)),
			orDash(d.RunID), orDash(strings.Join(detail, "; ")))
	}
	return tw.Flush()
}

// secretShownOnce tells, on stderr, that the secret just printed cannot
// be read again, and where the sender puts it.
func secretShownOnce(stderr io.Writer, t trigger) {
	where := map[string]string{
		"token":             "the sender sends it as Authorization: Bearer SECRET",
		"github":            "set it as the GitHub webhook's secret, with content type application/json",
		"standard_webhooks": "set it as the sender's signing secret",
	}[t.Verify]
	if where != "" {
		where = "; " + where
	}
	fmt.Fprintf(stderr, "The secret is shown only this once: keep it now (agentgate trigger rotate %s makes a new one)%s.\n", t.ID, where)
}

func pausedState(paused bool) string {
	if paused {
		return "paused"
	}
	return "active"
}

// keepFlag is --keep-previous: a duration, zero included, rounded up to
// the second, and whether it was given at all.
type keepFlag struct {
	seconds int
	given   bool
}

func (k *keepFlag) String() string {
	if k == nil || !k.given {
		return ""
	}
	return strconv.Itoa(k.seconds) + "s"
}

func (k *keepFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return errors.New("want a duration such as 1h or 0")
	}
	k.seconds, k.given = int((d+time.Second-1)/time.Second), true
	return nil
}
