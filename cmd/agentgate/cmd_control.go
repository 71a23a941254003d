package main

import (
	"flag"
	"fmt"
	"net/http"
)

// setupControl is interrupt and close: a POST without a body.
func setupControl(route, want string) func(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(fs *flag.FlagSet) func(a *app, args []string) int {
		return func(a *app, args []string) int {
			if len(args) != 1 {
				return a.usageFail(route, "want one run ID")
			}
			c, err := a.client()
			if err != nil {
				return errorExit(a.stderr, err)
			}
			defer c.close()
			var res struct {
				Status string `json:"status"`
			}
			raw, err := c.call(a.ctx, http.MethodPost, runPath(args[0], route), nil, nil, &res)
			if err != nil {
				return errorExit(a.stderr, err)
			}
			if a.g.json {
				return a.printJSON(raw)
			}
			if res.Status == "" {
				res.Status = want
			}
			fmt.Fprintf(a.stdout, "run %s: %s\n", args[0], res.Status)
			return exitOK
		}
	}
}
