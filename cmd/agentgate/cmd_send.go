package main

import (
	"flag"
	"fmt"
	"net/http"
)

const sendHelp = `Sends a follow-up message to an interactive run. By default it is queued
for the next turn (at once when the session is idle); --steer adds it to
the running turn where the agent can (Claude, Codex, OpenCode).`

func setupSend(fs *flag.FlagSet) func(a *app, args []string) int {
	var steer bool
	fs.BoolVar(&steer, "steer", false, "add the message to the running turn instead of queueing it for the next")
	return func(a *app, args []string) int {
		if len(args) < 2 {
			return a.usageFail("send", "want a run ID and a message (or - to read it from stdin)")
		}
		text, err := a.textArg(args[1:])
		if err != nil {
			return errorExit(a.stderr, err)
		}
		body := map[string]string{"text": text}
		if steer {
			body["mode"] = "steer"
		}
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		var res struct {
			ID   string `json:"id"`
			Mode string `json:"mode"`
		}
		raw, err := c.call(a.ctx, http.MethodPost, runPath(args[0], "messages"), nil, body, &res)
		if err != nil {
			return errorExit(a.stderr, err)
		}
		if a.g.json {
			return a.printJSON(raw)
		}
		fmt.Fprintf(a.stdout, "message %s: %s\n", res.ID, res.Mode)
		return exitOK
	}
}
