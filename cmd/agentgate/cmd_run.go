package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
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
ends on close, on cancel, at its timeout or after its idle timeout. Idle
for --hibernate-after (the gateway's default otherwise), it hibernates:
its CLI stops, its session is kept, and agentgate send wakes it. Answer
approvals (--approvals ask) from another shell with agentgate approve/deny.`

// runFlags are run's flags: the request's fields and how to follow it.
type runFlags struct {
	spec                               runSpec
	idemKey                            string
	detach, cancelOnInterrupt, verbose bool
}

// runSpec is what a run is asked to do: the flags of a POST /v1/runs
// body, which run shares with the commands that make runs start later
// (schedule create, trigger create).
type runSpec struct {
	req    runRequest
	schema string
}

func setupRun(fs *flag.FlagSet) func(a *app, args []string) int {
	f := &runFlags{}
	f.register(fs)
	return f.create
}

// register puts run's flags on fs.
func (f *runFlags) register(fs *flag.FlagSet) {
	f.spec.register(fs)
	fs.StringVar(&f.idemKey, "idempotency-key", "", "a `key` that makes retrying this command create one run only")
	fs.BoolVar(&f.detach, "detach", false, "print the run's id and exit, without following it")
	fs.BoolVar(&f.detach, "d", false, "short for --detach")
	fs.BoolVar(&f.cancelOnInterrupt, "cancel-on-interrupt", false, "Ctrl-C cancels the run, instead of only stopping watching it")
	fs.BoolVar(&f.verbose, "verbose", false, "also show reasoning, tool results and unparsed agent output")
	fs.BoolVar(&f.verbose, "v", false, "short for --verbose")
}

// register puts the request's flags on fs.
func (f *runSpec) register(fs *flag.FlagSet) {
	fs.StringVar(&f.req.Agent, "agent", "claude", "the `agent` to run (see agentgate agents)")
	fs.StringVar(&f.req.Agent, "a", "claude", "short for --agent")
	fs.StringVar(&f.req.Model, "model", "", "the `model`, as the agent names it")
	fs.StringVar(&f.req.Model, "m", "", "short for --model")
	fs.StringVar(&f.req.Permission, "permission", "", "the permission `level`: read_only, workspace_write (the gateway's default) or full")
	fs.StringVar(&f.req.Cwd, "cwd", "", "the working `directory`, relative to the gateway's workspace root (default: a fresh one)")
	fs.StringVar(&f.req.SystemPrompt, "system-prompt", "", "`text` added to the agent's system prompt")
	fs.StringVar(&f.req.Effort, "effort", "", "reasoning effort `level`: low, medium or high")
	fs.IntVar(&f.req.MaxTurns, "max-turns", 0, "most model turns before the run stops")
	fs.Var(secondsFlag{&f.req.TimeoutSeconds}, "timeout", "wall-clock limit, in seconds or as a `duration` (15m)")
	fs.Float64Var(&f.req.MaxBudgetUSD, "max-budget-usd", 0, "spending limit in US `dollars` (agents that report cost)")
	fs.Int64Var(&f.req.MaxTotalTokens, "max-total-tokens", 0, "stop once input plus output `tokens` reach this")
	fs.StringVar(&f.schema, "output-schema", "", "a JSON Schema the answer must match: a `file`, or the JSON itself")
	fs.StringVar(&f.req.ResumeSessionID, "resume", "", "continue this agent `session` (the session_id of an earlier run)")
	fs.BoolVar(&f.req.KeepSession, "keep-session", false, "keep the agent's session for a later --resume")
	fs.Var(mapFlag{&f.req.Metadata}, "metadata", "a `KEY=VALUE` label of the run (repeatable)")
	fs.BoolVar(&f.req.Interactive, "interactive", false, "keep the session between turns, for agentgate send")
	fs.BoolVar(&f.req.Interactive, "i", false, "short for --interactive")
	fs.StringVar(&f.req.Approvals, "approvals", "", "approvals `mode`: never (the default) or ask, before every tool call that can change something")
	fs.Var(secondsFlag{&f.req.ApprovalTimeoutSeconds}, "approval-timeout", "deny an approval unanswered after this `duration`")
	fs.Var(secondsFlag{&f.req.IdleTimeoutSeconds}, "idle-timeout", "close an interactive run with no turn for this `duration`, hibernated or not")
	fs.Var(secondsFlag{&f.req.HibernateAfterSeconds}, "hibernate-after", "an interactive run idle this `duration` stops its CLI, keeps its session and wakes on the next message")
}

// request is the body of POST /v1/runs: the flags, with the prompt of
// args (stdin for a lone "-") and the output schema read.
func (f *runSpec) request(a *app, args []string) (runRequest, error) {
	prompt, err := a.textArg(args)
	if err != nil {
		return runRequest{}, err
	}
	req := f.req
	req.Prompt = prompt
	if f.schema != "" {
		if req.OutputSchema, err = readSchema(f.schema); err != nil {
			return runRequest{}, err
		}
	}
	return req, nil
}

// create creates the run and follows it, unless --detach.
func (f *runFlags) create(a *app, args []string) int {
	if len(args) == 0 {
		return a.usageFail("run", "a prompt is needed (or - to read it from stdin)")
	}
	req, err := f.spec.request(a, args)
	if err != nil {
		return errorExit(a.stderr, err)
	}
	c, err := a.client()
	if err != nil {
		return errorExit(a.stderr, err)
	}
	defer c.close()
	var hdr http.Header
	if f.idemKey != "" {
		hdr = http.Header{"Idempotency-Key": {f.idemKey}}
	}
	var rec runRecord
	raw, err := c.callWith(a.ctx, http.MethodPost, "/v1/runs", nil, hdr, req, &rec)
	if err != nil {
		return errorExit(a.stderr, err)
	}
	if f.detach {
		if a.g.json {
			return a.printJSON(raw)
		}
		fmt.Fprintln(a.stdout, rec.ID)
		return exitOK
	}
	if !a.g.json {
		fmt.Fprintf(a.stderr, "run %s (%s)\n", rec.ID, rec.Agent)
	}
	return a.follow(c, rec.ID, 0, followOptions{cancelOnInterrupt: f.cancelOnInterrupt, verbose: f.verbose, interactive: rec.Interactive})
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
