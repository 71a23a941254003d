package supervisor

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

// Limits bound the payload of every event at the one point where events
// leave a decoder (the supervisor's emit). Identifiers are never shortened.
type Limits struct {
	// MaxText bounds every free-text field (messages, reasoning, tool
	// output, unparsed lines), in bytes.
	MaxText int
	// MaxToolInput bounds a tool call's JSON input, and a run's structured
	// output, in bytes. A larger one is replaced by a placeholder object
	// saying what was dropped.
	MaxToolInput int
	// MaxEncoded bounds one encoded event and one encoded run record, so
	// that each fits in a message of the store (NATS allows 1 MiB by
	// default). JSON escaping can make text six times longer, so an
	// encoding over it is bounded again, more tightly.
	MaxEncoded int
}

// DefaultLimits are generous enough for real transcripts and small enough
// that one event never dominates a stream.
var DefaultLimits = Limits{MaxText: 256 << 10, MaxToolInput: 64 << 10, MaxEncoded: 900 << 10}

// tighter returns l with every bound divided by 8.
func (l Limits) tighter() Limits {
	return Limits{MaxText: l.MaxText / 8, MaxToolInput: l.MaxToolInput / 8, MaxEncoded: l.MaxEncoded}
}

// record returns r with the free text it stores bounded, so that the
// encoded record stays under MaxEncoded: the prompts (kept for audit; the
// agent got them whole), the result, the diff, the structured output and
// the error message.
func (l Limits) record(r runs.Run) runs.Run {
	r.PromptPreview = promptPreview(r.Spec.Prompt)
	for range 4 {
		r.Spec.Prompt = l.text(r.Spec.Prompt)
		r.Spec.SystemPrompt = l.text(r.Spec.SystemPrompt)
		r.Result = l.text(r.Result)
		r.Diff = l.text(r.Diff)
		r.StructuredOutput = l.json(r.StructuredOutput)
		if r.Error != nil {
			e := *r.Error
			e.Message = l.text(e.Message)
			r.Error = &e
		}
		b, err := json.Marshal(struct {
			Run  runs.Run
			Spec runs.Spec
		}{r, r.Spec})
		if err != nil || l.MaxEncoded <= 0 || len(b) <= l.MaxEncoded {
			return r
		}
		l = l.tighter()
	}
	return r
}

// json returns raw, or a placeholder when it is longer than MaxToolInput.
func (l Limits) json(raw json.RawMessage) json.RawMessage {
	if l.MaxToolInput <= 0 || len(raw) <= l.MaxToolInput {
		return raw
	}
	return toolInputPlaceholder(len(raw))
}

// TruncationMark ends a text that Bound shortened.
const TruncationMark = "…[truncated %d bytes]"

// Bound returns ev with its payload's text fields and tool input cut to l.
func (l Limits) Bound(ev runs.Event) runs.Event {
	switch d := ev.Data.(type) {
	case runs.MessageData:
		d.Text = l.text(d.Text)
		ev.Data = d
	case runs.ReasoningData:
		d.Text = l.text(d.Text)
		ev.Data = d
	case runs.ToolCallCompletedData:
		d.Output = l.text(d.Output)
		ev.Data = d
	case runs.ToolCallStartedData:
		d.Input = l.json(d.Input)
		ev.Data = d
	case runs.UnparsedData:
		if len(d.Line) > l.MaxText {
			d.Line, d.Truncated = l.text(d.Line), true
		}
		ev.Data = d
	case runs.RunStartedData:
		d.Prompt = l.text(d.Prompt)
		d.SystemPrompt = l.text(d.SystemPrompt)
		ev.Data = d
	case runs.DeltaData:
		d.Text = l.text(d.Text)
		ev.Data = d
	case runs.FileChangedData:
		d.Diff = l.text(d.Diff)
		ev.Data = d
	case runs.PlanUpdatedData:
		steps := make([]runs.PlanStep, len(d.Steps))
		for i, st := range d.Steps {
			steps[i] = runs.PlanStep{Step: l.text(st.Step), Status: st.Status}
		}
		d.Explanation, d.Steps = l.text(d.Explanation), steps
		ev.Data = d
	case runs.RunCompletedData:
		d.Result = l.text(d.Result)
		d.Diff = l.text(d.Diff)
		d.StructuredOutput = l.json(d.StructuredOutput)
		if d.Error != nil {
			e := *d.Error
			e.Message = l.text(e.Message)
			d.Error = &e
		}
		ev.Data = d
	case runs.WarningData:
		d.Message = l.text(d.Message)
		ev.Data = d
	}
	return ev
}

func toolInputPlaceholder(n int) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"_truncated": fmt.Sprintf("%d bytes of JSON dropped: larger than the gateway's limit", n),
		"bytes":      n,
	})
	return b
}

// text cuts s to at most MaxText bytes plus a visible mark, on a rune
// boundary.
func (l Limits) text(s string) string {
	if l.MaxText <= 0 || len(s) <= l.MaxText {
		return s
	}
	cut := l.MaxText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(TruncationMark, len(s)-cut)
}

// MaxPromptPreview bounds Run.PromptPreview, in characters.
const MaxPromptPreview = 200

// promptPreview is the start of prompt on one line, at most
// MaxPromptPreview characters, "…" marking a cut. Only the prompt's start
// is read, however long the prompt.
func promptPreview(prompt string) string {
	const readBytes = 8 * MaxPromptPreview // enough for the runes kept, and spaces
	head := prompt
	if len(head) > readBytes {
		head = strings.ToValidUTF8(head[:readBytes], "")
	}
	line := strings.Join(strings.Fields(head), " ")
	if runes := []rune(line); len(runes) > MaxPromptPreview {
		return string(runes[:MaxPromptPreview-1]) + "…"
	}
	if len(head) < len(prompt) {
		return line + "…"
	}
	return line
}
