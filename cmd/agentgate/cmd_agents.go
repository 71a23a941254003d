package main

import (
	"flag"
	"fmt"
	"net/http"
	"text/tabwriter"
)

func setupAgents(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 0 {
			return a.usageFail("agents", "unexpected argument %q", args[0])
		}
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		var list struct {
			Agents []agentInfo `json:"agents"`
		}
		raw, err := c.call(a.ctx, http.MethodGet, "/v1/agents", nil, nil, &list)
		if err != nil {
			return errorExit(a.stderr, err)
		}
		if a.g.json {
			return a.printJSON(raw)
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tINSTALLED\tVERSION\tCOMPATIBILITY\tENFORCEMENT\tINTERACTION")
		for _, ag := range list.Agents {
			installed, version := "no", ag.Version
			if ag.Installed {
				installed = "yes"
			}
			if version == "" {
				version = "-"
			}
			interaction := "-"
			if ia := ag.Interaction; ia != nil {
				interaction = "steer " + yesNo(ia.Steer) + ", deny ends turn " + yesNo(ia.DenyEndsTurn) +
					", hibernates " + yesNo(ia.Hibernate)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ag.Name, installed, version, ag.Compatibility, ag.Enforcement, interaction)
		}
		if err := tw.Flush(); err != nil {
			return errorExit(a.stderr, err)
		}
		for _, ag := range list.Agents {
			if ag.Compatibility != "verified" && ag.Advisory != "" {
				fmt.Fprintf(a.stderr, "%s: %s\n", ag.Name, oneLine(ag.Advisory, 500))
			}
		}
		return exitOK
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
