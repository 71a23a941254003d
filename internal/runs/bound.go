package runs

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Limits bound the payload of every event at the one point where events
// leave a decoder (the supervisor's emit). Identifiers are never shortened.
type Limits struct {
	// MaxText bounds every free-text field (messages, reasoning, tool
	// output, unparsed lines), in bytes.
	MaxText int
	// MaxToolInput bounds a tool call's JSON input, in bytes. A larger
	// input is replaced by a placeholder object saying what was dropped.
	MaxToolInput int
}

// DefaultLimits are generous enough for real transcripts and small enough
// that one event never dominates a stream.
var DefaultLimits = Limits{MaxText: 256 << 10, MaxToolInput: 64 << 10}

// TruncationMark ends a text that Bound shortened.
const TruncationMark = "…[truncated %d bytes]"

// Bound returns ev with its payload's text fields and tool input cut to l.
func (l Limits) Bound(ev Event) Event {
	switch d := ev.Data.(type) {
	case MessageData:
		d.Text = l.text(d.Text)
		ev.Data = d
	case ReasoningData:
		d.Text = l.text(d.Text)
		ev.Data = d
	case ToolCallCompletedData:
		d.Output = l.text(d.Output)
		ev.Data = d
	case ToolCallStartedData:
		if len(d.Input) > l.MaxToolInput {
			d.Input = toolInputPlaceholder(len(d.Input))
		}
		ev.Data = d
	case UnparsedData:
		if len(d.Line) > l.MaxText {
			d.Line, d.Truncated = l.text(d.Line), true
		}
		ev.Data = d
	case RunStartedData:
		d.Prompt = l.text(d.Prompt)
		d.SystemPrompt = l.text(d.SystemPrompt)
		ev.Data = d
	case RunCompletedData:
		d.Result = l.text(d.Result)
		if d.Error != nil {
			e := *d.Error
			e.Message = l.text(e.Message)
			d.Error = &e
		}
		ev.Data = d
	case WarningData:
		d.Message = l.text(d.Message)
		ev.Data = d
	}
	return ev
}

func toolInputPlaceholder(n int) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"_truncated": fmt.Sprintf("tool input of %d bytes dropped: larger than the gateway's limit", n),
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
