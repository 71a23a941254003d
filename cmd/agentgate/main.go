package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel() // the first: stop watching (or cancel the run), and say how to go on
		<-sigs
		os.Exit(exitInterrupted) // the second: at once
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	cancel()
	os.Exit(code)
}

// defaultURL is the gateway's own default address.
const defaultURL = "http://127.0.0.1:8080"

// maxStdinBytes bounds what the client reads from stdin: more than any
// prompt or message the gateway takes (512 KiB), so that it, not the
// client, says what is too long.
const maxStdinBytes = 1 << 20

// app is one invocation: its streams, environment and global flags.
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	g      globalFlags
}

// globalFlags are accepted before the command and after it.
type globalFlags struct {
	url     string
	apiKey  string
	json    bool
	noColor bool
}

func (g *globalFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "url", g.url, "the gateway's `URL` (default $AGENTGATE_URL, else "+defaultURL+")")
	fs.StringVar(&g.apiKey, "api-key", g.apiKey, "an API `key`, sent as a Bearer token (default $AGENTGATE_API_KEY)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON: for run and watch one event envelope a line (NDJSON), else the gateway's answer")
	fs.BoolVar(&g.noColor, "no-color", g.noColor, "no colours (also when NO_COLOR is set)")
}

var globalFlagNames = map[string]bool{"url": true, "api-key": true, "json": true, "no-color": true}

// run is the whole command line: it parses args, runs the command and
// returns the process's exit code. ctx ending is an interrupt (Ctrl-C).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	a.g.url = getenv("AGENTGATE_URL")
	if a.g.url == "" {
		a.g.url = defaultURL
	}
	a.g.apiKey = getenv("AGENTGATE_API_KEY")

	fs := flag.NewFlagSet("agentgate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.usage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "agentgate: %v\nRun 'agentgate help' for usage.\n", err)
		return exitUsage
	}
	if fs.NArg() == 0 {
		a.usage(stderr)
		return exitUsage
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	cmd, ok := lookupCommand(name)
	if !ok {
		fmt.Fprintf(stderr, "agentgate: unknown command %q\nRun 'agentgate help' for usage.\n", name)
		return exitUsage
	}
	return a.exec(cmd, rest)
}

// command is one subcommand. setup registers its flags on fs and
// returns the function that runs it with the positional arguments.
type command struct {
	name    string
	args    string // the synopsis after the name
	summary string
	help    string
	setup   func(fs *flag.FlagSet) func(a *app, args []string) int
	// subcommands, when not nil, make this a group (schedule, trigger):
	// its first argument names one of them, and setup is nil.
	subcommands []command
}

func commands() []command {
	return []command{
		{name: "run", args: "[flags] PROMPT... | -", summary: "create a run and follow its progress", help: runHelp, setup: setupRun},
		{name: "watch", args: "[flags] ID", summary: "follow an existing run", help: watchHelp, setup: setupWatch},
		{name: "get", args: "ID", summary: "show a run", setup: setupGet},
		{name: "ls", args: "[--status S] [--agent A] [--limit N] [--cursor C]", summary: "list runs, newest first", setup: setupList},
		{name: "approve", args: "[--session] ID APPROVAL_ID", summary: "allow a tool call the run waits on", setup: setupApprove},
		{name: "deny", args: "[--reason TEXT] [--stop] ID APPROVAL_ID", summary: "refuse a tool call the run waits on", setup: setupDeny},
		{name: "send", args: "[--steer] ID MESSAGE... | -", summary: "send a follow-up message to an interactive run", help: sendHelp, setup: setupSend},
		{name: "interrupt", args: "ID", summary: "end the running turn of an interactive run; the session stays", setup: setupControl("interrupt", "interrupting")},
		{name: "close", args: "ID", summary: "end an interactive run's session after its running turn", setup: setupControl("close", "closing")},
		{name: "cancel", args: "ID", summary: "cancel a run", setup: setupCancel},
		{name: "agents", args: "", summary: "list the agents the gateway runs", setup: setupAgents},
		{name: "files", args: "[flags] ID [PATH]", summary: "list the files a run changed, or download one, its diff or its archive", help: filesHelp, setup: setupFiles},
		{name: "acp", args: "[--agent A] [--model M] [--permission P] [--approvals ask|never] [--workspace W] [--timeout S]", summary: "run agents from an editor: speak ACP on stdin and stdout", help: acpHelp, setup: setupACP},
		{name: "schedule", args: "COMMAND [flags] [arguments]", summary: "make runs start on a cron expression or an interval", help: scheduleHelp, subcommands: scheduleCommands()},
		{name: "trigger", args: "COMMAND [flags] [arguments]", summary: "make runs start when a webhook is delivered", help: triggerHelp, subcommands: triggerCommands()},
		{name: "version", args: "", summary: "print the client's version", setup: setupVersion},
		{name: "help", args: "[COMMAND]", summary: "show help", setup: setupHelp},
	}
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// lookupSubcommand returns the subcommand of group called name, named
// in full ("schedule create") for its messages and help.
func lookupSubcommand(group command, name string) (command, bool) {
	for _, c := range group.subcommands {
		if c.name == name {
			c.name = group.name + " " + c.name
			return c, true
		}
	}
	return command{}, false
}

// execGroup runs a group's subcommand: global flags may come before its
// name, the subcommand's own flags only after it.
func (a *app) execGroup(group command, args []string) int {
	fs := flag.NewFlagSet("agentgate "+group.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.g.register(fs)
	err := fs.Parse(args) // stops at the subcommand's name
	if errors.Is(err, flag.ErrHelp) {
		groupHelp(a.stdout, group)
		return exitOK
	}
	if err != nil {
		return a.usageFail(group.name, "%v", err)
	}
	if fs.NArg() == 0 {
		groupHelp(a.stderr, group)
		return exitUsage
	}
	sub, ok := lookupSubcommand(group, fs.Arg(0))
	if !ok {
		return a.usageFail(group.name, "unknown command %q", fs.Arg(0))
	}
	return a.exec(sub, fs.Args()[1:])
}

// exec parses the command's flags (anywhere among its arguments, until
// "--") and runs it.
func (a *app) exec(cmd command, args []string) int {
	if cmd.subcommands != nil {
		return a.execGroup(cmd, args)
	}
	fs := flag.NewFlagSet("agentgate "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.g.register(fs)
	runFn := cmd.setup(fs)
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		commandHelp(a.stdout, cmd, fs)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "agentgate %s: %v\nRun 'agentgate help %s' for usage.\n", cmd.name, err, cmd.name)
		return exitUsage
	}
	return runFn(a, pos)
}

// parseInterleaved parses flags wherever they are among the positional
// arguments, which it returns; everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageFail reports a bad command line of cmd.
func (a *app) usageFail(cmd, format string, args ...any) int {
	fmt.Fprintf(a.stderr, "agentgate %s: %s\nRun 'agentgate help %s' for usage.\n", cmd, fmt.Sprintf(format, args...), cmd)
	return exitUsage
}

// client returns the client of the gateway the flags and environment name.
func (a *app) client() (*client, error) {
	return newClient(a.g.url, a.g.apiKey, "agentgate-cli/"+moduleVersion())
}

// colorAllowed: no --no-color, no NO_COLOR (any value, as no-color.org
// has it), and not a dumb terminal.
func (a *app) colorAllowed() bool {
	return !a.g.noColor && a.getenv("NO_COLOR") == "" && a.getenv("TERM") != "dumb"
}

// printJSON writes a JSON answer as the gateway sent it, on its own line.
func (a *app) printJSON(raw []byte) int {
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		raw = append(raw, '\n')
	}
	if _, err := a.stdout.Write(raw); err != nil {
		return errorExit(a.stderr, err)
	}
	return exitOK
}

// textArg is the text of positional arguments joined by spaces, or stdin
// for a lone "-".
func (a *app) textArg(args []string) (string, error) {
	if len(args) == 1 && args[0] == "-" {
		b, err := io.ReadAll(io.LimitReader(a.stdin, maxStdinBytes+1))
		if err != nil {
			return "", fmt.Errorf("read stdin: %w", err)
		}
		if len(b) > maxStdinBytes {
			return "", usageErrorf("stdin holds more than %d bytes", maxStdinBytes)
		}
		return string(b), nil
	}
	return strings.Join(args, " "), nil
}
