package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// outcome is how a run ended, for the summary.
type outcome struct {
	RunID      string
	Status     string
	Usage      usage
	CostUSD    *float64
	NumTurns   int
	DurationMS int64
	Files      int
	Error      *runError
}

// outcomeOf reads a run.completed envelope.
func outcomeOf(env *envelope) outcome {
	var d completedData
	_ = json.Unmarshal(env.Data, &d)
	return outcome{RunID: env.RunID, Status: d.Status, Usage: d.Usage, CostUSD: d.CostUSD, NumTurns: d.NumTurns,
		DurationMS: d.DurationMS, Files: len(d.Files), Error: d.Error}
}

// outcomeOfRecord reads a finished run's record.
func outcomeOfRecord(r runRecord) outcome {
	o := outcome{RunID: r.ID, Status: r.Status, Usage: r.Usage, CostUSD: r.CostUSD, NumTurns: r.NumTurns,
		Files: len(r.Files), Error: r.Error}
	if r.StartedAt != nil && r.FinishedAt != nil {
		o.DurationMS = r.FinishedAt.Sub(*r.StartedAt).Milliseconds()
	}
	return o
}

// summary writes the final line to stderr: status, time, turns, tokens,
// cost, files, and the error and its hint for a failed run.
func (r *renderer) summary(o outcome) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clearStatus()
	r.endLine()
	c := r.opt.errColor
	parts := []string{"run " + oneLine(o.RunID, 64) + " " + paintStatus(c, o.Status)}
	if o.DurationMS > 0 {
		parts = append(parts, formatDuration(time.Duration(o.DurationMS)*time.Millisecond))
	}
	if o.NumTurns > 0 {
		parts = append(parts, plural(o.NumTurns, "turn"))
	}
	tokens := groupDigits(o.Usage.total()) + " tokens"
	if o.Usage.total() > 0 {
		tokens += fmt.Sprintf(" (%s in, %s out)", groupDigits(o.Usage.InputTokens), groupDigits(o.Usage.OutputTokens))
	}
	parts = append(parts, tokens)
	if o.CostUSD != nil {
		parts = append(parts, formatCost(*o.CostUSD))
	}
	if o.Files > 0 {
		parts = append(parts, plural(o.Files, "file")+" changed")
	}
	r.err.str(strings.Join(parts, " · ") + "\n")
	if e := o.Error; e != nil {
		r.err.str(paint(c, ansiRed, "error: "+oneLine(e.Class, 40)+": "+oneLine(e.Message, 2000)) + "\n")
		if e.Hint != "" {
			r.err.str("hint: " + oneLine(e.Hint, 500) + "\n")
		}
	}
	return r.writeErr()
}

func paintStatus(on bool, status string) string {
	status = oneLine(status, 40)
	switch status {
	case "succeeded":
		return paint(on, ansiGreen, status)
	case "cancelled":
		return paint(on, ansiYellow, status)
	case "":
		return "ended"
	}
	return paint(on, ansiRed, status)
}
