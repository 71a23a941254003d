package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

const runHelp = `Creates a run of an agent and follows it: the agent's text as it streams,
a line per tool call (its name and a short form of its input), approvals
and turns; warnings and the final summary (status, tokens, cost) go to
stderr. On a terminal a progress line shows what the agent does, the
tokens and cost so far. The exit code is the run's final status (below).

The prompt is the arguments joined by spaces, or stdin with "-".

Ctrl-C stops watching and prints how to resume (agentgate watch ID): the
run goes on. With --cancel-on-interrupt, Ctrl-C cancels the run instead
and waits for its end. A second Ctrl-C exits at once.

An interactive run (--interactive) keeps its session between turns: it
ends on close, on cancel, at its timeout or after its idle timeout. Answer
approvals (--approvals ask) from another shell with agentgate approve/deny.`

const watchHelp = `Follows an existing run's events from the start (or after --after SEQ)
until it ends, rendered as by run; with --json one envelope a line. A
dropped connection is resumed with Last-Event-ID, so no event is shown
twice or skipped. The exit code is the run's final status.`

const sendHelp = `Sends a follow-up message to an interactive run. By default it is queued
for the next turn (at once when the session is idle); --steer adds it to
the running turn where the agent can (Claude, Codex, OpenCode).`

const filesHelp = `Without PATH, lists the files the finished run changed. With PATH,
downloads that file of the run's directory (as it is now). --diff prints
the run's unified diff, --archive its directory as a tar.gz. -o FILE
writes to FILE (replaced whole once the download is complete) instead of
stdout; an archive is never written to a terminal.`

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

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
