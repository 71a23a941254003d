package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"
)

func setupGet(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("get", "want one run ID")
		}
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		var rec runRecord
		raw, err := c.call(a.ctx, http.MethodGet, runPath(args[0]), nil, nil, &rec)
		if err != nil {
			return errorExit(a.stderr, err)
		}
		if a.g.json {
			return a.printJSON(raw)
		}
		if err := writeRecord(a.stdout, rec); err != nil {
			return errorExit(a.stderr, err)
		}
		return exitOK
	}
}

// writeRecord writes a run's record as a table of one row per field.
func writeRecord(w io.Writer, rec runRecord) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("run", rec.ID)
	agent := rec.Agent
	if rec.Model != "" {
		agent += " (" + rec.Model + ")"
	}
	row("agent", agent)
	status := rec.Status
	if rec.Activity != "" {
		status += " (" + rec.Activity + ")"
	}
	if rec.QueuePosition > 0 {
		status += fmt.Sprintf(" (%d in line)", rec.QueuePosition)
	}
	row("status", status)
	if rec.ClosesAt != nil {
		row("closes", rec.ClosesAt.Local().Format(time.DateTime)+" unless a message wakes it")
	}
	row("created", rec.CreatedAt.Local().Format(time.DateTime))
	if rec.StartedAt != nil && rec.FinishedAt != nil {
		row("took", formatDuration(rec.FinishedAt.Sub(*rec.StartedAt)))
	}
	row("tokens", fmt.Sprintf("%s (%s in, %s out)", groupDigits(rec.Usage.total()), groupDigits(rec.Usage.InputTokens), groupDigits(rec.Usage.OutputTokens)))
	if rec.CostUSD != nil {
		row("cost", formatCost(*rec.CostUSD))
	}
	if rec.SessionID != "" {
		row("session", rec.SessionID)
	}
	for _, p := range rec.PendingApprovals {
		row("approval", p.ID+": "+oneLine(p.Tool, 80)+" "+toolSummary(p.Input))
	}
	if len(rec.Files) > 0 {
		row("files", plural(len(rec.Files), "file")+" changed (agentgate files "+rec.ID+")")
	}
	if e := rec.Error; e != nil {
		row("error", e.Class+": "+oneLine(e.Message, 500))
		if e.Hint != "" {
			row("hint", oneLine(e.Hint, 500))
		}
	}
	if rec.Result != "" {
		row("result", oneLine(rec.Result, 500))
	}
	return tw.Flush()
}
