package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
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

// Bounds of what the client reads from stdin and waits for.
const (
	// maxStdinBytes is more than any prompt or message the gateway takes
	// (512 KiB), so that it, not the client, says what is too long.
	maxStdinBytes = 1 << 20
	// cancelWait bounds the wait for a cancelled run's end after Ctrl-C
	// with --cancel-on-interrupt.
	cancelWait = 2 * time.Minute
	// tickInterval is the progress line's redraw.
	tickInterval = 120 * time.Millisecond
)

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

// exec parses the command's flags (anywhere among its arguments, until
// "--") and runs it.
func (a *app) exec(cmd command, args []string) int {
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

func setupRun(fs *flag.FlagSet) func(a *app, args []string) int {
	var req runRequest
	var schema, idemKey string
	var detach, cancelOnInterrupt, verbose bool
	fs.StringVar(&req.Agent, "agent", "claude", "the `agent` to run (see agentgate agents)")
	fs.StringVar(&req.Agent, "a", "claude", "short for --agent")
	fs.StringVar(&req.Model, "model", "", "the `model`, as the agent names it")
	fs.StringVar(&req.Model, "m", "", "short for --model")
	fs.StringVar(&req.Permission, "permission", "", "the permission `level`: read_only, workspace_write (the gateway's default) or full")
	fs.StringVar(&req.Cwd, "cwd", "", "the working `directory`, relative to the gateway's workspace root (default: a fresh one)")
	fs.StringVar(&req.SystemPrompt, "system-prompt", "", "`text` added to the agent's system prompt")
	fs.StringVar(&req.Effort, "effort", "", "reasoning effort `level`: low, medium or high")
	fs.IntVar(&req.MaxTurns, "max-turns", 0, "most model turns before the run stops")
	fs.Var(secondsFlag{&req.TimeoutSeconds}, "timeout", "wall-clock limit, in seconds or as a `duration` (15m)")
	fs.Float64Var(&req.MaxBudgetUSD, "max-budget-usd", 0, "spending limit in US `dollars` (agents that report cost)")
	fs.Int64Var(&req.MaxTotalTokens, "max-total-tokens", 0, "stop once input plus output `tokens` reach this")
	fs.StringVar(&schema, "output-schema", "", "a JSON Schema the answer must match: a `file`, or the JSON itself")
	fs.StringVar(&req.ResumeSessionID, "resume", "", "continue this agent `session` (the session_id of an earlier run)")
	fs.BoolVar(&req.KeepSession, "keep-session", false, "keep the agent's session for a later --resume")
	fs.Var(mapFlag{&req.Metadata}, "metadata", "a `KEY=VALUE` label of the run (repeatable)")
	fs.BoolVar(&req.Interactive, "interactive", false, "keep the session between turns, for agentgate send")
	fs.BoolVar(&req.Interactive, "i", false, "short for --interactive")
	fs.StringVar(&req.Approvals, "approvals", "", "approvals `mode`: never (the default) or ask, before every tool call that can change something")
	fs.Var(secondsFlag{&req.ApprovalTimeoutSeconds}, "approval-timeout", "deny an approval unanswered after this `duration`")
	fs.Var(secondsFlag{&req.IdleTimeoutSeconds}, "idle-timeout", "close an interactive run idle for this `duration`")
	fs.StringVar(&idemKey, "idempotency-key", "", "a `key` that makes retrying this command create one run only")
	fs.BoolVar(&detach, "detach", false, "print the run's id and exit, without following it")
	fs.BoolVar(&detach, "d", false, "short for --detach")
	fs.BoolVar(&cancelOnInterrupt, "cancel-on-interrupt", false, "Ctrl-C cancels the run, instead of only stopping watching it")
	fs.BoolVar(&verbose, "verbose", false, "also show reasoning, tool results and unparsed agent output")
	fs.BoolVar(&verbose, "v", false, "short for --verbose")
	return func(a *app, args []string) int {
		if len(args) == 0 {
			return a.usageFail("run", "a prompt is needed (or - to read it from stdin)")
		}
		prompt, err := a.textArg(args)
		if err != nil {
			return errorExit(a.stderr, err)
		}
		req.Prompt = prompt
		if schema != "" {
			if req.OutputSchema, err = readSchema(schema); err != nil {
				return errorExit(a.stderr, err)
			}
		}
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		var hdr http.Header
		if idemKey != "" {
			hdr = http.Header{"Idempotency-Key": {idemKey}}
		}
		var rec runRecord
		raw, err := c.callWith(a.ctx, http.MethodPost, "/v1/runs", nil, hdr, req, &rec)
		if err != nil {
			return errorExit(a.stderr, err)
		}
		if detach {
			if a.g.json {
				return a.printJSON(raw)
			}
			fmt.Fprintln(a.stdout, rec.ID)
			return exitOK
		}
		if !a.g.json {
			fmt.Fprintf(a.stderr, "run %s (%s)\n", rec.ID, rec.Agent)
		}
		return a.follow(c, rec.ID, 0, followOptions{cancelOnInterrupt: cancelOnInterrupt, verbose: verbose, interactive: rec.Interactive})
	}
}

// readSchema reads --output-schema: inline JSON, or a file of it.
func readSchema(v string) (json.RawMessage, error) {
	b := []byte(v)
	if t := strings.TrimSpace(v); !strings.HasPrefix(t, "{") {
		var err error
		if b, err = os.ReadFile(v); err != nil {
			return nil, usageErrorf("--output-schema: %v", err)
		}
	}
	if !json.Valid(b) {
		return nil, usageErrorf("--output-schema: not JSON")
	}
	return json.RawMessage(b), nil
}

func setupWatch(fs *flag.FlagSet) func(a *app, args []string) int {
	var after uint64
	var cancelOnInterrupt, verbose bool
	fs.Uint64Var(&after, "after", 0, "show only the events after this `seq`")
	fs.BoolVar(&cancelOnInterrupt, "cancel-on-interrupt", false, "Ctrl-C cancels the run, instead of only stopping watching it")
	fs.BoolVar(&verbose, "verbose", false, "also show reasoning, tool results and unparsed agent output")
	fs.BoolVar(&verbose, "v", false, "short for --verbose")
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("watch", "want one run ID")
		}
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		return a.follow(c, args[0], after, followOptions{cancelOnInterrupt: cancelOnInterrupt, verbose: verbose})
	}
}

// followOptions are those of run and watch.
type followOptions struct {
	cancelOnInterrupt bool
	verbose           bool
	interactive       bool
}

// follow streams the run until it ends and returns the exit code of its
// final status; see run's help for Ctrl-C.
func (a *app) follow(c *client, id string, after uint64, o followOptions) int {
	var r *renderer
	if !a.g.json {
		tty := isTerminal(a.stdout) && a.getenv("TERM") != "dumb"
		r = newRenderer(a.stdout, a.stderr, renderOptions{
			tty:         tty,
			color:       tty && a.colorAllowed(),
			errColor:    isTerminal(a.stderr) && a.colorAllowed(),
			width:       func() int { return terminalWidth(a.stdout) },
			verbose:     o.verbose,
			runID:       id,
			interactive: o.interactive,
		}, nil)
	}
	deliver := func(ev streamEvent) error {
		if r != nil {
			return r.event(ev)
		}
		line := make([]byte, 0, len(ev.Raw)+1)
		_, err := a.stdout.Write(append(append(line, ev.Raw...), '\n'))
		return err
	}
	f := newFollower(c, id, after, deliver)
	f.retrying = func(err error, wait time.Duration) {
		if r != nil {
			r.reconnecting(err, wait)
			return
		}
		fmt.Fprintf(a.stderr, "agentgate: %s; reconnecting in %s\n", oneLine(err.Error(), 500), formatDuration(wait))
	}
	stopTicker := func() {}
	if r != nil {
		stopTicker = r.startTicker(tickInterval)
	}
	completed, err := f.follow(a.ctx)
	stopTicker()
	if r != nil {
		r.stop()
	}
	if err != nil && a.ctx.Err() != nil {
		if !o.cancelOnInterrupt {
			fmt.Fprintf(a.stderr, "agentgate: stopped watching run %s; it goes on.\n  resume: agentgate watch %s\n  cancel: agentgate cancel %s\n", id, id, id)
			return exitInterrupted
		}
		return a.cancelAndFinish(c, f, r, id)
	}
	if err != nil {
		return errorExit(a.stderr, err)
	}
	return a.finish(a.ctx, c, r, id, completed)
}

// cancelAndFinish cancels the run after Ctrl-C and follows it to its end.
func (a *app) cancelAndFinish(c *client, f *follower, r *renderer, id string) int {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), cancelWait)
	defer cancel()
	fmt.Fprintf(a.stderr, "agentgate: cancelling run %s\n", id)
	if _, err := c.call(ctx, http.MethodPost, runPath(id, "cancel"), nil, nil, nil); err != nil {
		return errorExit(a.stderr, err)
	}
	stopTicker := func() {}
	if r != nil {
		stopTicker = r.startTicker(tickInterval)
	}
	completed, err := f.follow(ctx)
	stopTicker()
	if r != nil {
		r.stop()
	}
	if err != nil {
		return errorExit(a.stderr, err)
	}
	return a.finish(ctx, c, r, id, completed)
}

// finish prints the summary (not with --json) and returns the exit code
// of the run's final status. Without run.completed (the gateway answered
// 204: the run ended at or before the resume point) the record has it.
func (a *app) finish(ctx context.Context, c *client, r *renderer, id string, completed *envelope) int {
	var o outcome
	if completed != nil {
		o = outcomeOf(completed)
	} else {
		var rec runRecord
		if _, err := c.call(ctx, http.MethodGet, runPath(id), nil, nil, &rec); err != nil {
			return errorExit(a.stderr, err)
		}
		o = outcomeOfRecord(rec)
	}
	if o.RunID == "" {
		o.RunID = id
	}
	if r != nil {
		if err := r.summary(o); err != nil {
			return errorExit(a.stderr, err)
		}
	}
	return statusExit(o.Status)
}

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
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
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
		if err := tw.Flush(); err != nil {
			return errorExit(a.stderr, err)
		}
		return exitOK
	}
}

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
				interaction = "steer " + yesNo(ia.Steer) + ", deny ends turn " + yesNo(ia.DenyEndsTurn)
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

func setupFiles(fs *flag.FlagSet) func(a *app, args []string) int {
	var diff, archive bool
	var out string
	fs.BoolVar(&diff, "diff", false, "print the run's unified diff")
	fs.BoolVar(&archive, "archive", false, "download the run's directory as a tar.gz")
	fs.StringVar(&out, "o", "", "write to `FILE` instead of stdout")
	return func(a *app, args []string) int {
		switch {
		case len(args) == 0 || len(args) > 2:
			return a.usageFail("files", "want a run ID and at most one path")
		case diff && archive:
			return a.usageFail("files", "--diff or --archive, not both")
		case (diff || archive) && len(args) == 2:
			return a.usageFail("files", "a path with --diff or --archive")
		case out != "" && !diff && !archive && len(args) == 1:
			return a.usageFail("files", "-o needs a PATH, --diff or --archive")
		}
		id := args[0]
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		switch {
		case diff:
			return a.download(c, runPath(id, "diff"), out, false)
		case archive:
			return a.download(c, runPath(id, "archive"), out, true)
		case len(args) == 2:
			return a.download(c, runPath(id, "files", filePath(args[1])), out, false)
		}
		var list struct {
			Files     []changedFile `json:"files"`
			Truncated bool          `json:"truncated"`
		}
		raw, err := c.call(a.ctx, http.MethodGet, runPath(id, "files"), nil, nil, &list)
		if err != nil {
			return errorExit(a.stderr, err)
		}
		if a.g.json {
			return a.printJSON(raw)
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		for _, f := range list.Files {
			p := oneLine(f.Path, 4096)
			if f.Binary {
				p += " (binary)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", f.Kind, f.Size, p)
		}
		if err := tw.Flush(); err != nil {
			return errorExit(a.stderr, err)
		}
		if list.Truncated {
			fmt.Fprintln(a.stderr, "agentgate: the list is cut at the run record's bound; the replica that ran the run has it whole")
		}
		return exitOK
	}
}

// download writes what GET path answers to out ("" or "-": stdout),
// replacing out only once all of it has arrived. A binary download is not
// written to a terminal.
func (a *app) download(c *client, path, out string, binary bool) int {
	toStdout := out == "" || out == "-"
	if toStdout && binary && isTerminal(a.stdout) {
		return a.usageFail("files", "an archive is not written to a terminal: use -o FILE or a pipe")
	}
	req, err := c.request(a.ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return errorExit(a.stderr, err)
	}
	resp, err := c.send(req)
	if err != nil {
		return errorExit(a.stderr, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Diff-Truncated") == "true" {
		fmt.Fprintln(a.stderr, "agentgate: the diff is cut at the gateway's bound")
	}
	broke := func(err error) int {
		if a.ctx.Err() != nil {
			return errorExit(a.stderr, a.ctx.Err())
		}
		return errorExit(a.stderr, &connectError{url: c.base.String(), err: fmt.Errorf("the download broke off: %w", err)})
	}
	if toStdout {
		if _, err := io.Copy(a.stdout, resp.Body); err != nil {
			return broke(err)
		}
		return exitOK
	}
	dir, base := filepath.Split(out)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.part")
	if err != nil {
		return errorExit(a.stderr, err)
	}
	defer os.Remove(tmp.Name()) // after a rename, nothing is there
	if _, err := io.Copy(tmp, resp.Body); err != nil {
		tmp.Close()
		return broke(err)
	}
	if err := tmp.Close(); err != nil {
		return errorExit(a.stderr, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return errorExit(a.stderr, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return errorExit(a.stderr, err)
	}
	return exitOK
}

func setupVersion(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 0 {
			return a.usageFail("version", "unexpected argument %q", args[0])
		}
		fmt.Fprintln(a.stdout, versionLine())
		return exitOK
	}
}

// moduleVersion is the version the binary was built from: the module's
// version for `go install …@v1.2.3`, "(devel)" for a build in the tree.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// versionLine is the module version, the VCS revision when the build
// recorded one, and the Go version.
func versionLine() string {
	s := "agentgate " + moduleVersion()
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				if kv.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			s += " (" + rev + modified + ")"
		}
	}
	return s + " " + goVersion
}

func setupHelp(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		switch len(args) {
		case 0:
			a.usage(a.stdout)
			return exitOK
		case 1:
			cmd, ok := lookupCommand(args[0])
			if !ok {
				return a.usageFail("help", "unknown command %q", args[0])
			}
			cfs := flag.NewFlagSet("agentgate "+cmd.name, flag.ContinueOnError)
			g := a.g
			g.register(cfs)
			cmd.setup(cfs)
			commandHelp(a.stdout, cmd, cfs)
			return exitOK
		}
		return a.usageFail("help", "want at most one command")
	}
}

// secondsFlag is a whole number of seconds, given as such (900) or as a
// duration (15m, rounded up to the second).
type secondsFlag struct{ n *int }

func (s secondsFlag) String() string {
	if s.n == nil || *s.n == 0 {
		return ""
	}
	return strconv.Itoa(*s.n) + "s"
}

func (s secondsFlag) Set(v string) error {
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return errors.New("must be positive")
		}
		*s.n = n
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return errors.New("want seconds or a duration such as 90s or 15m")
	}
	*s.n = int((d + time.Second - 1) / time.Second)
	return nil
}

// mapFlag collects KEY=VALUE pairs.
type mapFlag struct{ m *map[string]string }

func (f mapFlag) String() string { return "" }

func (f mapFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want KEY=VALUE")
	}
	if *f.m == nil {
		*f.m = map[string]string{}
	}
	(*f.m)[k] = val
	return nil
}
