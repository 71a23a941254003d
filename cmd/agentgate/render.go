package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
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

// render shows one event by its type's function in eventRenderers.
func (r *renderer) render(env envelope) {
	if show, ok := eventRenderers[env.Type]; ok {
		show(r, env)
	}
}

func (r *renderer) writeErr() error {
	if r.out.err != nil {
		return r.out.err
	}
	return r.err.err
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
