package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Bounds of following a run.
const (
	// cancelWait bounds the wait for a cancelled run's end after Ctrl-C
	// with --cancel-on-interrupt.
	cancelWait = 2 * time.Minute
	// tickInterval is the progress line's redraw.
	tickInterval = 120 * time.Millisecond
)

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
