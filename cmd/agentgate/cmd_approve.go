package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
)

func setupApprove(fs *flag.FlagSet) func(a *app, args []string) int {
	var session bool
	fs.BoolVar(&session, "session", false, "allow this call and every identical one later in the session (allow_session)")
	return func(a *app, args []string) int {
		decision := "allow"
		if session {
			decision = "allow_session"
		}
		return a.answer("approve", args, decision, "")
	}
}

func setupDeny(fs *flag.FlagSet) func(a *app, args []string) int {
	var reason string
	var stop bool
	fs.StringVar(&reason, "reason", "", "a `message` for the model, where the agent passes one on")
	fs.BoolVar(&stop, "stop", false, "refuse the call and end the turn, on every agent (deny_and_stop)")
	return func(a *app, args []string) int {
		decision := "deny"
		if stop {
			decision = "deny_and_stop"
		}
		return a.answer("deny", args, decision, reason)
	}
}

// answer posts a decision on an approval request.
func (a *app) answer(cmd string, args []string, decision, message string) int {
	if len(args) != 2 {
		return a.usageFail(cmd, "want a run ID and an approval ID")
	}
	body := map[string]string{"decision": decision}
	if message != "" {
		body["message"] = message
	}
	c, err := a.client()
	if err != nil {
		return errorExit(a.stderr, err)
	}
	defer c.close()
	var res approval
	raw, err := c.call(a.ctx, http.MethodPost, runPath(args[0], "approvals", url.PathEscape(args[1])), nil, body, &res)
	if err != nil {
		return errorExit(a.stderr, err)
	}
	if a.g.json {
		return a.printJSON(raw)
	}
	fmt.Fprintf(a.stdout, "approval %s: %s\n", res.ID, res.Decision)
	return exitOK
}
