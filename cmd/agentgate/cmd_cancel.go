package main

import (
	"flag"
	"fmt"
	"net/http"
)

func setupCancel(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("cancel", "want one run ID")
		}
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		var rec runRecord
		raw, err := c.call(a.ctx, http.MethodPost, runPath(args[0], "cancel"), nil, nil, &rec)
		if err != nil {
			return errorExit(a.stderr, err)
		}
		if a.g.json {
			return a.printJSON(raw)
		}
		switch rec.Status {
		case "queued", "running":
			fmt.Fprintf(a.stdout, "run %s: cancelling (%s)\n", rec.ID, rec.Status)
		default:
			fmt.Fprintf(a.stdout, "run %s: %s\n", rec.ID, rec.Status)
		}
		return exitOK
	}
}
