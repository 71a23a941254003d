package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

func setupList(fs *flag.FlagSet) func(a *app, args []string) int {
	var status, agent, cursor string
	var limit int
	fs.StringVar(&status, "status", "", "only runs in this `status`: queued, running, succeeded, failed, cancelled, timed_out")
	fs.StringVar(&agent, "agent", "", "only runs of this `agent`")
	fs.IntVar(&limit, "limit", 0, "page size, 1 to 500 (the gateway's default: 50)")
	fs.StringVar(&cursor, "cursor", "", "the page after this `cursor` (printed after a full page)")
	return func(a *app, args []string) int {
		if len(args) != 0 {
			return a.usageFail("ls", "unexpected argument %q", args[0])
		}
		q := url.Values{}
		for k, v := range map[string]string{"status": status, "agent": agent, "cursor": cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if limit != 0 {
			q.Set("limit", strconv.Itoa(limit))
		}
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		var page runList
		raw, err := c.call(a.ctx, http.MethodGet, "/v1/runs", q, nil, &page)
		if err != nil {
			return errorExit(a.stderr, err)
		}
		if a.g.json {
			return a.printJSON(raw)
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tAGENT\tCREATED\tTOKENS\tCOST")
		for _, r := range page.Runs {
			cost := "-"
			if r.CostUSD != nil {
				cost = formatCost(*r.CostUSD)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Agent,
				r.CreatedAt.Local().Format(time.DateTime), formatTokens(r.Usage.total()), cost)
		}
		if err := tw.Flush(); err != nil {
			return errorExit(a.stderr, err)
		}
		if page.NextCursor != "" {
			fmt.Fprintf(a.stderr, "more: agentgate ls --cursor %s\n", page.NextCursor)
		}
		return exitOK
	}
}
