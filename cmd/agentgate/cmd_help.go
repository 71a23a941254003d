package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// usage is the help of agentgate itself.
func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `agentgate is the command-line client of an agentgate gateway: it runs
coding agents there and follows them.

Usage:
  agentgate [global flags] COMMAND [flags] [arguments]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, `
Global flags (before or after the command):
  --url URL       the gateway (default $AGENTGATE_URL, else `+defaultURL+`)
  --api-key KEY   an API key, sent as a Bearer token (default $AGENTGATE_API_KEY)
  --json          print JSON: one event envelope a line (NDJSON) for run and
                  watch, the gateway's answer for the other commands
  --no-color      no colours; also when NO_COLOR is set

Colour and the progress line appear only when stdout is a terminal; in a
pipe, run and watch print plain lines and the summary goes to stderr.

`+exitCodesHelp+`
Run 'agentgate help COMMAND' (or agentgate COMMAND -h) for a command's flags.
`)
}

// commandHelp is the help of one command: its synopsis, text and flags
// (the global flags once, by name).
func commandHelp(w io.Writer, cmd command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: agentgate %s %s\n\n%s.\n", cmd.name, cmd.args, capitalize(cmd.summary))
	if cmd.help != "" {
		fmt.Fprintf(w, "\n%s\n", cmd.help)
	}
	short := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if long, ok := strings.CutPrefix(f.Usage, "short for --"); ok {
			short[long] = f.Name
		}
	})
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		if globalFlagNames[f.Name] || strings.HasPrefix(f.Usage, "short for --") {
			return
		}
		name, usage := flag.UnquoteUsage(f)
		b.WriteString("  ")
		if s, ok := short[f.Name]; ok {
			b.WriteString("-" + s + ", ")
		}
		if len(f.Name) == 1 {
			b.WriteString("-" + f.Name)
		} else {
			b.WriteString("--" + f.Name)
		}
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n      " + usage)
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			b.WriteString(" (default " + f.DefValue + ")")
		}
		b.WriteString("\n")
	})
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", b.String())
	}
	fmt.Fprint(w, "\nGlobal flags: --url URL, --api-key KEY, --json, --no-color (see agentgate help).\n")
	if cmd.name == "run" || cmd.name == "watch" {
		fmt.Fprintf(w, "\n%s", exitCodesHelp)
	}
}

// groupHelp is the help of a group of commands: its text and the
// synopsis and summary of each subcommand.
func groupHelp(w io.Writer, group command) {
	fmt.Fprintf(w, "Usage: agentgate %s %s\n\n%s.\n", group.name, group.args, capitalize(group.summary))
	if group.help != "" {
		fmt.Fprintf(w, "\n%s\n", group.help)
	}
	fmt.Fprint(w, "\nCommands:\n")
	for _, c := range group.subcommands {
		fmt.Fprintf(w, "  %s\n      %s\n", strings.TrimSpace(group.name+" "+c.name+" "+c.args), c.summary)
	}
	fmt.Fprintf(w, "\nGlobal flags: --url URL, --api-key KEY, --json, --no-color (see agentgate help).\n"+
		"Run 'agentgate help %s COMMAND' for a command's flags.\n", group.name)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func setupHelp(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) == 0 {
			a.usage(a.stdout)
			return exitOK
		}
		cmd, ok := lookupCommand(args[0])
		if !ok {
			return a.usageFail("help", "unknown command %q", args[0])
		}
		switch {
		case cmd.subcommands != nil && len(args) == 1:
			groupHelp(a.stdout, cmd)
			return exitOK
		case cmd.subcommands != nil && len(args) > 2:
			return a.usageFail("help", "want a command and at most one of its subcommands")
		case cmd.subcommands != nil && len(args) == 2:
			if cmd, ok = lookupSubcommand(cmd, args[1]); !ok {
				return a.usageFail("help", "unknown command %q", strings.Join(args, " "))
			}
		case len(args) != 1:
			return a.usageFail("help", "want at most one command")
		}
		cfs := flag.NewFlagSet("agentgate "+cmd.name, flag.ContinueOnError)
		g := a.g
		g.register(cfs)
		cmd.setup(cfs)
		commandHelp(a.stdout, cmd, cfs)
		return exitOK
	}
}
