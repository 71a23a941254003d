package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// eventRenderers shows each event type the renderer knows: each writes
// its lines and sets the activity of the progress line. A type in neither
// this table nor eventsNotShown (an envelope version newer than the
// client) is skipped; the progress line is still redrawn.
var eventRenderers = map[string]func(r *renderer, env envelope){
	"run.queued":          (*renderer).runQueued,
	"run.started":         (*renderer).runStarted,
	"session.started":     (*renderer).sessionStarted,
	"message.delta":       (*renderer).messageDelta,
	"message.completed":   (*renderer).messageCompleted,
	"message.queued":      (*renderer).messageQueued,
	"run.resumed":         (*renderer).runResumed,
	"run.hibernated":      (*renderer).runHibernated,
	"reasoning.delta":     (*renderer).reasoningDelta,
	"reasoning.completed": (*renderer).reasoningCompleted,
	"tool_call.started":   (*renderer).toolStarted,
	"tool_call.progress":  (*renderer).toolProgress,
	"tool_call.completed": (*renderer).toolCompleted,
	"file.changed":        (*renderer).fileChanged,
	"plan.updated":        (*renderer).planUpdated,
	"usage.updated":       (*renderer).usageUpdated,
	"rate_limit":          (*renderer).rateLimit,
	"warning":             (*renderer).warning,
	"agent.unparsed":      (*renderer).agentUnparsed,
	"approval.requested":  (*renderer).approvalRequested,
	"approval.resolved":   (*renderer).approvalResolved,
	"turn.started":        (*renderer).turnStarted,
	"turn.completed":      (*renderer).turnCompleted,
	"run.completed":       (*renderer).runCompleted,
}

// eventsNotShown are the event types of events.schema.json the renderer
// deliberately writes nothing for, each with the reason.
var eventsNotShown = map[string]string{
	"tool_call.output_delta": "a tool's output shows once, as a summary line, at tool_call.completed; streamed as it comes it would break into the agent's text",
}

// The payloads the renderer reads.
type (
	textData struct {
		MessageID string `json:"message_id"`
		ID        string `json:"id"`
		Text      string `json:"text"`
	}
	toolStartData struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		MCPServer string          `json:"mcp_server"`
		MCPTool   string          `json:"mcp_tool"`
	}
	toolDoneData struct {
		ID      string `json:"id"`
		Output  string `json:"output"`
		IsError bool   `json:"is_error"`
	}
	toolProgressData struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		ElapsedMS int64  `json:"elapsed_ms"`
	}
	usageData struct {
		Usage   usage    `json:"usage"`
		CostUSD *float64 `json:"cost_usd"`
	}
	turnData struct {
		Turn    int       `json:"turn"`
		Text    string    `json:"text"`
		Status  string    `json:"status"`
		Usage   usage     `json:"usage"`
		CostUSD *float64  `json:"cost_usd"`
		Error   *runError `json:"error"`
	}
	completedData struct {
		Status         string        `json:"status"`
		Result         string        `json:"result"`
		Usage          usage         `json:"usage"`
		CostUSD        *float64      `json:"cost_usd"`
		NumTurns       int           `json:"num_turns"`
		DurationMS     int64         `json:"duration_ms"`
		Files          []changedFile `json:"files"`
		FilesTruncated bool          `json:"files_truncated"`
		Error          *runError     `json:"error"`
	}
)

func (r *renderer) runQueued(env envelope) {
	var d struct {
		Position int `json:"position"`
	}
	_ = json.Unmarshal(env.Data, &d)
	r.activity = "queued"
	if d.Position > 1 {
		r.activity += fmt.Sprintf(" (%d in line)", d.Position)
	}
}

// runStarted names the agent in the progress line, and with -v its
// version, model, permission and directory in a line.
func (r *renderer) runStarted(env envelope) {
	var d struct {
		Model      string `json:"model"`
		Permission string `json:"permission"`
		Cwd        string `json:"cwd"`
		CLIVersion string `json:"cli_version"`
	}
	_ = json.Unmarshal(env.Data, &d)
	r.activity = "starting " + oneLine(env.Agent, 40)
	if !r.opt.verbose {
		return
	}
	parts := []string{strings.TrimSpace(env.Agent + " " + d.CLIVersion)}
	for _, p := range []string{d.Model, d.Permission} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	r.line(paint(r.opt.color, ansiDim, "[run] "+oneLine(strings.Join(parts, ", ")+" in "+d.Cwd, 300)))
}

func (r *renderer) sessionStarted(envelope) { r.activity = "started" }

// messageDelta writes the agent's text as it streams, and remembers that
// the message was streamed so its completion does not repeat it.
func (r *renderer) messageDelta(env envelope) {
	var d textData
	_ = json.Unmarshal(env.Data, &d)
	r.streamed[d.MessageID] = true
	r.text(d.Text)
	r.activity = "writing"
}

// messageCompleted writes a message that came without deltas, and ends
// its line.
func (r *renderer) messageCompleted(env envelope) {
	var d textData
	_ = json.Unmarshal(env.Data, &d)
	if !r.streamed[d.MessageID] {
		r.text(d.Text)
	}
	delete(r.streamed, d.MessageID)
	r.endLine()
	r.activity = "thinking"
}

// messageQueued shows a follow-up message of an interactive run.
func (r *renderer) messageQueued(env envelope) {
	var d struct {
		Text string `json:"text"`
		Mode string `json:"mode"`
	}
	_ = json.Unmarshal(env.Data, &d)
	tag := "[queued]"
	if d.Mode == "steer" {
		tag = "[steer]"
	}
	r.line(paint(r.opt.color, ansiMagenta, tag) + " " + oneLine(d.Text, 200))
}

// runResumed says that a message woke the hibernated run, or that another
// replica took the run over, and from which turn it goes on.
func (r *renderer) runResumed(env envelope) {
	var d struct {
		Replica  string `json:"replica"`
		Previous string `json:"previous_replica"`
		Turn     int    `json:"turn"`
		Reason   string `json:"reason"`
	}
	_ = json.Unmarshal(env.Data, &d)
	if d.Reason == "woken" {
		r.errLine(paint(r.opt.errColor, ansiDim, fmt.Sprintf("woken on %s; the session goes on from turn %d",
			oneLine(d.Replica, 80), d.Turn)))
		r.activity = "waking"
		return
	}
	r.errLine(paint(r.opt.errColor, ansiYellow, fmt.Sprintf("taken over by %s after %s stopped answering; goes on from turn %d",
		oneLine(d.Replica, 80), oneLine(d.Previous, 80), d.Turn)))
	r.activity = "idle"
}

// hibernatedWhy says, after "hibernated", why a run did, by the reason of
// run.hibernated.
var hibernatedWhy = map[string]string{
	"idle":         "idle",
	"shutdown":     "its replica shut down",
	"replica_lost": "taken over",
}

// runHibernated says that the run's CLI stopped with its session kept:
// after which turn, why, and when the run closes unless a message wakes
// it.
func (r *renderer) runHibernated(env envelope) {
	var d struct {
		Turn     int       `json:"turn"`
		Reason   string    `json:"reason"`
		ClosesAt time.Time `json:"closes_at"`
	}
	_ = json.Unmarshal(env.Data, &d)
	why := cmp.Or(hibernatedWhy[d.Reason], oneLine(d.Reason, 40))
	s := fmt.Sprintf("hibernated after turn %d (%s); the next message wakes it", d.Turn, why)
	if !d.ClosesAt.IsZero() {
		s += "; closes at " + localTime(d.ClosesAt)
	}
	r.errLine(paint(r.opt.errColor, ansiDim, s))
	r.activity = "hibernated"
}

func (r *renderer) reasoningDelta(envelope) { r.activity = "thinking" }

// reasoningCompleted shows the reasoning with -v, on one line.
func (r *renderer) reasoningCompleted(env envelope) {
	r.activity = "thinking"
	var d textData
	_ = json.Unmarshal(env.Data, &d)
	if r.opt.verbose && d.Text != "" {
		r.line(paint(r.opt.color, ansiDim, "[thinking] "+oneLine(d.Text, 300)))
	}
}

// toolStarted writes a line with the tool's name and a short form of its
// input, and keeps the name for the call's later events.
func (r *renderer) toolStarted(env envelope) {
	var d toolStartData
	_ = json.Unmarshal(env.Data, &d)
	c := r.opt.color
	name := oneLine(d.Name, 80)
	r.tools[d.ID] = name
	s := nested(env) + paint(c, ansiCyan, "[tool]") + " " + paint(c, ansiBold, name)
	if in := toolSummary(d.Input); in != "" {
		s += ": " + in
	}
	r.line(s)
	r.activity = "running " + name
}

// toolProgress shows how long a call has run: in the progress line, and
// with -v as a line of its own.
func (r *renderer) toolProgress(env envelope) {
	var d toolProgressData
	_ = json.Unmarshal(env.Data, &d)
	name := cmp.Or(r.tools[d.ID], oneLine(d.Name, 80), "tool")
	ms := min(max(d.ElapsedMS, 0), math.MaxInt64/int64(time.Millisecond))
	elapsed := formatElapsed(time.Duration(ms) * time.Millisecond)
	r.activity = "running " + name + " (" + elapsed + ")"
	if r.opt.verbose {
		c := r.opt.color
		r.line(nested(env) + paint(c, ansiCyan, "[tool]") + " " + paint(c, ansiDim, name+" still running after "+elapsed))
	}
}

// nested indents what a sub-agent does (an event with a parent tool call).
func nested(env envelope) string {
	if env.ParentToolCallID != "" {
		return "  "
	}
	return ""
}

// toolCompleted writes a failed call's output, and with -v a successful
// one's.
func (r *renderer) toolCompleted(env envelope) {
	var d toolDoneData
	_ = json.Unmarshal(env.Data, &d)
	c := r.opt.color
	name := r.tools[d.ID]
	if name == "" {
		name = "tool"
	}
	switch {
	case d.IsError:
		r.line(nested(env) + paint(c, ansiCyan, "[tool]") + " " + paint(c, ansiRed, name+" failed") + outputSummary(d.Output))
	case r.opt.verbose:
		r.line(nested(env) + paint(c, ansiCyan, "[tool]") + " " + paint(c, ansiDim, name+" done"+outputSummary(d.Output)))
	}
	delete(r.tools, d.ID)
	r.activity = "thinking"
}

func (r *renderer) fileChanged(env envelope) {
	var d struct {
		Path     string `json:"path"`
		Kind     string `json:"kind"`
		MovePath string `json:"move_path"`
	}
	_ = json.Unmarshal(env.Data, &d)
	s := paint(r.opt.color, ansiMagenta, "[file]") + " " + oneLine(d.Kind, 20) + " " + oneLine(d.Path, 200)
	if d.MovePath != "" {
		s += " -> " + oneLine(d.MovePath, 200)
	}
	r.line(s)
}

// planUpdated writes the plan: its explanation, then a line per step
// marked done, in progress or to do.
func (r *renderer) planUpdated(env envelope) {
	var d struct {
		Explanation string `json:"explanation"`
		Steps       []struct {
			Step   string `json:"step"`
			Status string `json:"status"`
		} `json:"steps"`
	}
	_ = json.Unmarshal(env.Data, &d)
	head := paint(r.opt.color, ansiMagenta, "[plan]")
	if d.Explanation != "" {
		head += " " + oneLine(d.Explanation, 200)
	}
	r.line(head)
	for _, st := range d.Steps {
		r.line("  " + planMark(st.Status) + " " + oneLine(st.Step, 200))
	}
}

func planMark(status string) string {
	switch status {
	case "completed":
		return "[x]"
	case "in_progress":
		return "[>]"
	}
	return "[ ]"
}

// usageUpdated keeps the tokens and cost for the progress line.
func (r *renderer) usageUpdated(env envelope) {
	var d usageData
	if json.Unmarshal(env.Data, &d) != nil {
		return
	}
	r.usage = d.Usage
	if d.CostUSD != nil {
		r.cost = d.CostUSD
	}
}

// rateLimit warns on stderr of a rate limit and the agent's retry.
func (r *renderer) rateLimit(env envelope) {
	var d struct {
		Attempt      int    `json:"attempt"`
		MaxRetries   int    `json:"max_retries"`
		RetryDelayMS int64  `json:"retry_delay_ms"`
		Status       int    `json:"status"`
		Error        string `json:"error"`
	}
	_ = json.Unmarshal(env.Data, &d)
	s := "rate limited"
	if d.Status != 0 {
		s += fmt.Sprintf(" (%d)", d.Status)
	}
	if d.RetryDelayMS > 0 {
		s += ", retrying in " + formatDuration(time.Duration(d.RetryDelayMS)*time.Millisecond)
	}
	if d.Attempt > 0 && d.MaxRetries > 0 {
		s += fmt.Sprintf(" (attempt %d of %d)", d.Attempt, d.MaxRetries)
	}
	if d.Error != "" {
		s += ": " + oneLine(d.Error, 200)
	}
	r.errLine(paint(r.opt.errColor, ansiYellow, s))
	r.activity = "rate limited"
}

func (r *renderer) warning(env envelope) {
	var d struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(env.Data, &d)
	r.errLine(paint(r.opt.errColor, ansiYellow, "warning: "+oneLine(d.Code, 80)+": "+oneLine(d.Message, 500)))
}

// agentUnparsed shows, with -v, a line of the agent's the gateway did not
// understand.
func (r *renderer) agentUnparsed(env envelope) {
	if !r.opt.verbose {
		return
	}
	var d struct {
		Reason string `json:"reason"`
		Line   string `json:"line"`
	}
	_ = json.Unmarshal(env.Data, &d)
	r.errLine(paint(r.opt.errColor, ansiDim, "unparsed agent output ("+oneLine(d.Reason, 80)+"): "+oneLine(d.Line, 200)))
}

// approvalRequested writes the tool call that waits, and on stderr how to
// answer it.
func (r *renderer) approvalRequested(env envelope) {
	var d approval
	_ = json.Unmarshal(env.Data, &d)
	c := r.opt.color
	s := paint(c, ansiYellow, "[approval]") + " " + paint(c, ansiBold, oneLine(d.Tool, 80))
	if in := toolSummary(d.Input); in != "" {
		s += ": " + in
	}
	apID := oneLine(d.ID, 256)
	r.line(s + paint(c, ansiDim, " (id "+apID+")"))
	id := r.opt.runID
	if id == "" {
		id = oneLine(env.RunID, 64)
	}
	r.errLine(paint(r.opt.errColor, ansiDim, fmt.Sprintf("  answer: agentgate approve %s %s  |  agentgate deny %s %s", id, apID, id, apID)))
	r.activity = "awaiting approval"
}

// approvalResolved writes the decision, and why where it was not the
// client's.
func (r *renderer) approvalResolved(env envelope) {
	var d approval
	_ = json.Unmarshal(env.Data, &d)
	s := paint(r.opt.color, ansiYellow, "[approval]") + " " + oneLine(d.ID, 256) + ": " + oneLine(d.Decision, 40)
	if d.Reason != "" && d.Reason != "client" {
		s += " (" + oneLine(d.Reason, 40) + ")"
	}
	if d.Message != "" {
		s += ": " + oneLine(d.Message, 200)
	}
	r.line(s)
	r.activity = "running"
}

// turnStarted writes the message that starts a turn after the first.
func (r *renderer) turnStarted(env envelope) {
	var d turnData
	_ = json.Unmarshal(env.Data, &d)
	if d.Turn > 1 {
		r.line(paint(r.opt.color, ansiMagenta, fmt.Sprintf("[turn %d]", d.Turn)) + " " + oneLine(d.Text, 200))
	}
	r.activity = fmt.Sprintf("turn %d", d.Turn)
}

// turnCompleted writes the turn's status, tokens, cost and error, and
// after an interactive run's first turn how to go on.
func (r *renderer) turnCompleted(env envelope) {
	var d turnData
	_ = json.Unmarshal(env.Data, &d)
	c := r.opt.color
	r.endLine()
	s := paint(c, ansiMagenta, fmt.Sprintf("[turn %d]", d.Turn)) + " " + paintStatus(c, d.Status) +
		" · " + formatTokens(d.Usage.total()) + " tokens"
	if d.CostUSD != nil {
		s += " · " + formatCost(*d.CostUSD)
	}
	if d.Error != nil {
		s += " · " + oneLine(d.Error.Class, 40) + ": " + oneLine(d.Error.Message, 200)
	}
	r.line(s)
	r.activity = "idle"
	if r.opt.interactive && !r.hinted {
		r.hinted = true
		id := r.opt.runID
		r.errLine(paint(r.opt.errColor, ansiDim, fmt.Sprintf("  next turn: agentgate send %s MESSAGE  |  end: agentgate close %s", id, id)))
	}
}

// runCompleted keeps the final tokens and cost, and writes the result of
// a run that streamed no text.
func (r *renderer) runCompleted(env envelope) {
	var d completedData
	if json.Unmarshal(env.Data, &d) == nil {
		r.usage = d.Usage
		if d.CostUSD != nil {
			r.cost = d.CostUSD
		}
		if !r.wroteText && d.Result != "" {
			// An agent that streams no text (or a resumed watch past
			// it) still shows its answer.
			r.text(d.Result)
		}
	}
	r.endLine()
	r.activity = ""
}
