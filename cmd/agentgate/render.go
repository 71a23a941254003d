package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// renderOptions are what the renderer knows of where it writes.
type renderOptions struct {
	// tty: stdout is a terminal, where a progress line is redrawn with
	// \r; the agent's text is stripped of control characters there.
	tty bool
	// color and errColor: stdout and stderr get ANSI colours.
	color, errColor bool
	// width returns the terminal's columns (0: unknown); nil is 80.
	width func() int
	// verbose adds reasoning, tool results and unparsed lines.
	verbose bool
	// runID names the run in hints and the summary.
	runID string
	// interactive: the run takes follow-up messages; turn ends say how.
	interactive bool
}

// renderer turns a run's events into what a person reads: the agent's
// text as it streams, a line per tool call, approval and turn, warnings
// on stderr, and on a terminal a progress line (spinner, activity, tokens,
// cost, time) redrawn in place under the text. Its methods may be called
// from several goroutines (the ticker redraws the spinner).
type renderer struct {
	mu  sync.Mutex
	out *errWriter
	err *errWriter
	opt renderOptions
	now func() time.Time

	start    time.Time
	midLine  bool // the last write to out left a line open
	statusOn bool // the progress line is on the screen
	activity string
	frame    int

	usage     usage
	cost      *float64
	streamed  map[string]bool   // messages whose deltas were written
	wroteText bool              // some of the agent's text was written
	tools     map[string]string // tool call id → name
	hinted    bool              // the follow-up hint of an interactive run was given
}

func newRenderer(out, errOut io.Writer, opt renderOptions, now func() time.Time) *renderer {
	if now == nil {
		now = time.Now
	}
	return &renderer{
		out: &errWriter{w: out}, err: &errWriter{w: errOut}, opt: opt, now: now,
		start: now(), activity: "connecting",
		streamed: map[string]bool{}, tools: map[string]string{},
	}
}

// errWriter keeps the first write error; later writes do nothing.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) str(s string) { _, _ = io.WriteString(e, s) }

// ANSI sequences.
const (
	ansiReset     = "\x1b[0m"
	ansiBold      = "\x1b[1m"
	ansiDim       = "\x1b[2m"
	ansiRed       = "\x1b[31m"
	ansiGreen     = "\x1b[32m"
	ansiYellow    = "\x1b[33m"
	ansiMagenta   = "\x1b[35m"
	ansiCyan      = "\x1b[36m"
	ansiClearLine = "\r\x1b[2K"
)

var spinnerFrames = []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

func paint(on bool, code, s string) string {
	if !on || s == "" {
		return s
	}
	return code + s + ansiReset
}

// event renders one event. It returns the first write error.
func (r *renderer) event(ev streamEvent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.render(ev.Env)
	if ev.Env.Type != "run.completed" {
		r.drawStatus()
	}
	return r.writeErr()
}

func (r *renderer) writeErr() error {
	if r.out.err != nil {
		return r.out.err
	}
	return r.err.err
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

func (r *renderer) render(env envelope) {
	c := r.opt.color
	switch env.Type {
	case "run.queued":
		var d struct {
			Position int `json:"position"`
		}
		_ = json.Unmarshal(env.Data, &d)
		r.activity = "queued"
		if d.Position > 1 {
			r.activity += fmt.Sprintf(" (%d in line)", d.Position)
		}
	case "run.started":
		var d struct {
			Model      string `json:"model"`
			Permission string `json:"permission"`
			Cwd        string `json:"cwd"`
			CLIVersion string `json:"cli_version"`
		}
		_ = json.Unmarshal(env.Data, &d)
		r.activity = "starting " + oneLine(env.Agent, 40)
		if r.opt.verbose {
			parts := []string{strings.TrimSpace(env.Agent + " " + d.CLIVersion)}
			for _, p := range []string{d.Model, d.Permission} {
				if p != "" {
					parts = append(parts, p)
				}
			}
			r.line(paint(c, ansiDim, "[run] "+oneLine(strings.Join(parts, ", ")+" in "+d.Cwd, 300)))
		}
	case "session.started":
		r.activity = "started"
	case "message.delta":
		var d textData
		_ = json.Unmarshal(env.Data, &d)
		r.streamed[d.MessageID] = true
		r.text(d.Text)
		r.activity = "writing"
	case "message.completed":
		var d textData
		_ = json.Unmarshal(env.Data, &d)
		if !r.streamed[d.MessageID] {
			r.text(d.Text)
		}
		delete(r.streamed, d.MessageID)
		r.endLine()
		r.activity = "thinking"
	case "reasoning.delta":
		r.activity = "thinking"
	case "reasoning.completed":
		r.activity = "thinking"
		var d textData
		_ = json.Unmarshal(env.Data, &d)
		if r.opt.verbose && d.Text != "" {
			r.line(paint(c, ansiDim, "[thinking] "+oneLine(d.Text, 300)))
		}
	case "tool_call.started":
		var d toolStartData
		_ = json.Unmarshal(env.Data, &d)
		name := oneLine(d.Name, 80)
		r.tools[d.ID] = name
		s := nested(env) + paint(c, ansiCyan, "[tool]") + " " + paint(c, ansiBold, name)
		if in := toolSummary(d.Input); in != "" {
			s += ": " + in
		}
		r.line(s)
		r.activity = "running " + name
	case "tool_call.output_delta":
	case "tool_call.progress":
		r.toolProgress(env)
	case "tool_call.completed":
		var d toolDoneData
		_ = json.Unmarshal(env.Data, &d)
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
	case "file.changed":
		var d struct {
			Path     string `json:"path"`
			Kind     string `json:"kind"`
			MovePath string `json:"move_path"`
		}
		_ = json.Unmarshal(env.Data, &d)
		s := paint(c, ansiMagenta, "[file]") + " " + oneLine(d.Kind, 20) + " " + oneLine(d.Path, 200)
		if d.MovePath != "" {
			s += " -> " + oneLine(d.MovePath, 200)
		}
		r.line(s)
	case "plan.updated":
		var d struct {
			Explanation string `json:"explanation"`
			Steps       []struct {
				Step   string `json:"step"`
				Status string `json:"status"`
			} `json:"steps"`
		}
		_ = json.Unmarshal(env.Data, &d)
		head := paint(c, ansiMagenta, "[plan]")
		if d.Explanation != "" {
			head += " " + oneLine(d.Explanation, 200)
		}
		r.line(head)
		for _, st := range d.Steps {
			mark := "[ ]"
			switch st.Status {
			case "completed":
				mark = "[x]"
			case "in_progress":
				mark = "[>]"
			}
			r.line("  " + mark + " " + oneLine(st.Step, 200))
		}
	case "usage.updated":
		var d usageData
		if json.Unmarshal(env.Data, &d) == nil {
			r.usage = d.Usage
			if d.CostUSD != nil {
				r.cost = d.CostUSD
			}
		}
	case "rate_limit":
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
	case "warning":
		var d struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(env.Data, &d)
		r.errLine(paint(r.opt.errColor, ansiYellow, "warning: "+oneLine(d.Code, 80)+": "+oneLine(d.Message, 500)))
	case "agent.unparsed":
		if r.opt.verbose {
			var d struct {
				Reason string `json:"reason"`
				Line   string `json:"line"`
			}
			_ = json.Unmarshal(env.Data, &d)
			r.errLine(paint(r.opt.errColor, ansiDim, "unparsed agent output ("+oneLine(d.Reason, 80)+"): "+oneLine(d.Line, 200)))
		}
	case "approval.requested":
		var d approval
		_ = json.Unmarshal(env.Data, &d)
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
	case "approval.resolved":
		var d approval
		_ = json.Unmarshal(env.Data, &d)
		s := paint(c, ansiYellow, "[approval]") + " " + oneLine(d.ID, 256) + ": " + oneLine(d.Decision, 40)
		if d.Reason != "" && d.Reason != "client" {
			s += " (" + oneLine(d.Reason, 40) + ")"
		}
		if d.Message != "" {
			s += ": " + oneLine(d.Message, 200)
		}
		r.line(s)
		r.activity = "running"
	case "turn.started":
		var d turnData
		_ = json.Unmarshal(env.Data, &d)
		if d.Turn > 1 {
			r.line(paint(c, ansiMagenta, fmt.Sprintf("[turn %d]", d.Turn)) + " " + oneLine(d.Text, 200))
		}
		r.activity = fmt.Sprintf("turn %d", d.Turn)
	case "turn.completed":
		var d turnData
		_ = json.Unmarshal(env.Data, &d)
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
	case "message.queued":
		var d struct {
			Text string `json:"text"`
			Mode string `json:"mode"`
		}
		_ = json.Unmarshal(env.Data, &d)
		tag := "[queued]"
		if d.Mode == "steer" {
			tag = "[steer]"
		}
		r.line(paint(c, ansiMagenta, tag) + " " + oneLine(d.Text, 200))
	case "run.completed":
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

// text writes the agent's text as it streams.
func (r *renderer) text(s string) {
	if r.opt.tty {
		s = stripControls(s)
	}
	if s == "" {
		return
	}
	r.clearStatus()
	r.out.str(s)
	r.midLine = !strings.HasSuffix(s, "\n")
	r.wroteText = true
}

// endLine ends an open line of text.
func (r *renderer) endLine() {
	if r.midLine {
		r.clearStatus()
		r.out.str("\n")
		r.midLine = false
	}
}

// line writes one line to stdout, on a line of its own.
func (r *renderer) line(s string) {
	r.clearStatus()
	r.endLine()
	r.out.str(s + "\n")
}

// errLine writes one line to stderr. On a terminal, which stdout and
// stderr share, an open line of text is ended first.
func (r *renderer) errLine(s string) {
	r.clearStatus()
	if r.opt.tty {
		r.endLine()
	}
	r.err.str(s + "\n")
}

// notice writes a line of the client's own to stderr (a reconnection).
func (r *renderer) notice(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errLine(paint(r.opt.errColor, ansiDim, s))
	r.drawStatus()
}

// reconnecting tells that the stream is being opened again.
func (r *renderer) reconnecting(err error, wait time.Duration) {
	r.mu.Lock()
	r.activity = "reconnecting"
	r.mu.Unlock()
	r.notice(fmt.Sprintf("agentgate: %v; reconnecting in %s", err, formatDuration(wait)))
}

// tick advances the spinner.
func (r *renderer) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frame++
	if r.statusOn {
		r.drawStatus()
	}
}

// startTicker redraws the progress line every interval until stop is
// called; without a terminal it does nothing.
func (r *renderer) startTicker(interval time.Duration) (stop func()) {
	if !r.opt.tty {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				r.tick()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// drawStatus draws the progress line, on a terminal and where no line of
// text is open (drawing there would break the text).
func (r *renderer) drawStatus() {
	if !r.opt.tty || r.midLine || r.activity == "" {
		return
	}
	s := string(spinnerFrames[r.frame%len(spinnerFrames)]) + " " + r.activity + " · " + formatTokens(r.usage.total()) + " tokens"
	if r.cost != nil {
		s += " · " + formatCost(*r.cost)
	}
	s += " · " + formatElapsed(r.now().Sub(r.start))
	width := 80
	if r.opt.width != nil {
		if w := r.opt.width(); w > 0 {
			width = w
		}
	}
	// One column less than the terminal's: a line that fills it wraps on
	// some terminals, and \r would then return to the wrong row.
	s = truncateRunes(s, width-1)
	r.out.str(ansiClearLine + paint(r.opt.color, ansiDim, s))
	r.statusOn = true
}

// clearStatus removes the progress line, if it is drawn.
func (r *renderer) clearStatus() {
	if r.statusOn {
		r.out.str(ansiClearLine)
		r.statusOn = false
	}
}

// stop removes the progress line and ends any open line, for the end of
// the command.
func (r *renderer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clearStatus()
	r.endLine()
}

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

// toolSummary is a short form of a tool call's input: its command, path,
// pattern, URL or query when it has one, else its JSON, on one line.
func toolSummary(input json.RawMessage) string {
	if len(input) == 0 || string(input) == "null" {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) == nil {
		for _, k := range []string{"command", "cmd", "file_path", "filePath", "notebook_path", "pattern", "path", "url", "query", "description", "prompt"} {
			raw, ok := m[k]
			if !ok {
				continue
			}
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				return oneLine(s, 120)
			}
			var argv []string
			if json.Unmarshal(raw, &argv) == nil && len(argv) > 0 {
				return oneLine(strings.Join(argv, " "), 120)
			}
		}
	}
	return oneLine(string(input), 120)
}

// outputSummary is ": " and the first line of a tool's output, with how
// many lines follow.
func outputSummary(out string) string {
	out = strings.TrimSpace(out)
	if out == "" {
		return ""
	}
	first, rest, _ := strings.Cut(out, "\n")
	s := ": " + oneLine(first, 160)
	if n := strings.Count(rest, "\n") + 1; rest != "" {
		s += fmt.Sprintf(" (+%d more %s)", n, pluralWord(n, "line"))
	}
	return s
}

// oneLine makes s one line of at most max runes: every run of white
// space (line breaks included) becomes one space and control characters
// go, so that nothing the agent wrote can move the cursor.
func oneLine(s string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case isControl(r):
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return truncateRunes(b.String(), max)
}

// firstLine is the first non-empty line of s, made one line of at most
// max runes.
func firstLine(s string, max int) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return oneLine(l, max)
		}
	}
	return ""
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// escapeSequence matches the terminal sequences text could carry: CSI
// (colours, cursor moves), OSC (titles, links) and two-byte escapes.
var escapeSequence = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)?|\x1b[@-Z\\-_]`)

// stripControls removes terminal sequences and the control characters of
// s but line feeds and tabs, for the agent's text written to a terminal:
// nothing it prints can move the cursor or recolour the screen.
func stripControls(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return isControl(r) && r != '\n' && r != '\t' }) {
		return s
	}
	s = escapeSequence.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		if isControl(r) && r != '\n' && r != '\t' {
			return -1
		}
		return r
	}, s)
}

// truncateRunes cuts s to max runes, the last of them an ellipsis.
func truncateRunes(s string, max int) string {
	if max <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	rs := []rune(s)
	return string(rs[:max-1]) + "…"
}

// formatTokens is a compact count: 999, 24.5k, 1.2M.
func formatTokens(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
}

// groupDigits writes n with thousands separators: 24,535.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatCost is US dollars, with four decimals below one dollar.
func formatCost(usd float64) string {
	if usd < 1 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// formatDuration is 850ms, 4.2s, 3m05s or 1h02m.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// formatElapsed is whole seconds: 7s, 3m05s, 1h02m.
func formatElapsed(d time.Duration) string {
	d = d.Truncate(time.Second)
	if d < time.Minute {
		return strconv.Itoa(int(d.Seconds())) + "s"
	}
	return formatDuration(d)
}

func plural(n int, word string) string { return strconv.Itoa(n) + " " + pluralWord(n, word) }

func pluralWord(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
