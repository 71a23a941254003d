package gemini

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// decoder maps one run's stream-json lines to events and remembers what
// Finish needs to classify the run.
type decoder struct {
	inv runs.Invocation

	sessionID string
	model     string
	// pending is the assistant text streamed since the last message
	// boundary (a tool call, a result); last is the last message
	// completed, which is the run's result.
	pending strings.Builder
	last    string
	// open holds the tool calls started and not yet completed, in order.
	open []string
	// result is the result line, nil until one arrives.
	result *wireLine
	// lastError is the message of the last error line of severity
	// "error": a failed result may carry no error of its own.
	lastError string
	// log, when set, reads the session's chat recording for the usage
	// before the result line (see doc.go, "Usage"); reported is the
	// usage last emitted from it.
	log      *chatLog
	reported runs.Usage
}

func newDecoder(inv runs.Invocation) *decoder { return &decoder{inv: inv} }

// Decode implements runs.Decoder.
func (d *decoder) Decode(line []byte) []runs.Event {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	var l wireLine
	if err := json.Unmarshal(line, &l); err != nil {
		return []runs.Event{runs.Unparsed(line, "invalid JSON: "+err.Error())}
	}
	var evs []runs.Event
	switch l.Type {
	case "init":
		evs = d.init(&l)
	case "message":
		evs = d.message(&l, line)
	case "tool_use":
		evs = d.toolUse(&l)
	case "tool_result":
		evs = d.toolResult(&l, line)
	case "error":
		evs = d.errorLine(&l)
	case "result":
		evs = d.resultLine(&l)
	case "":
		return []runs.Event{runs.Unparsed(line, "no type field")}
	default:
		return []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown type %q", l.Type))}
	}
	for i := range evs {
		if evs[i].Type != runs.EventAgentUnparsed && evs[i].SessionID == "" {
			evs[i].SessionID = d.sessionID
		}
	}
	return evs
}

func (d *decoder) init(l *wireLine) []runs.Event {
	d.sessionID, d.model = l.SessionID, l.Model
	evs := []runs.Event{runs.NewEvent(runs.EventSessionStarted, runs.SessionStartedData{
		// The CLI does not list its tools on stdout.
		SessionID: l.SessionID, Model: l.Model, Tools: []string{},
	})}
	if l.Model == "auto" || strings.HasPrefix(l.Model, "auto-") {
		evs = append(evs, runs.Warning("model_routing", fmt.Sprintf(
			"gemini runs with model %q: every prompt first goes to a routing model, whose retries maxAttempts does not bound; "+
				"name a model in the run, in GEMINI_MODEL or as model.name in the home's settings.json", l.Model)))
	}
	return evs
}

func (d *decoder) message(l *wireLine, line []byte) []runs.Event {
	var text string
	if err := json.Unmarshal(l.Content, &text); err != nil {
		return []runs.Event{runs.Unparsed(line, "message content is not a string")}
	}
	switch l.Role {
	case "user":
		// The CLI echoes the prompt; the run already has it.
		return nil
	case "assistant":
		if l.Delta {
			d.pending.WriteString(text)
			return []runs.Event{runs.NewEvent(runs.EventMessageDelta, runs.MessageData{Text: text})}
		}
		// A whole message, never seen in 0.61.0: it ends whatever was
		// streamed before it.
		evs := d.flush()
		d.last = text
		return append(evs, runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: text}))
	}
	return []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown message role %q", l.Role))}
}

// flush completes the message streamed so far, if any.
func (d *decoder) flush() []runs.Event {
	if d.pending.Len() == 0 {
		return nil
	}
	text := d.pending.String()
	d.pending.Reset()
	d.last = text
	return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: text})}
}

func (d *decoder) toolUse(l *wireLine) []runs.Event {
	evs := d.flush()
	input := l.Parameters
	if len(bytes.TrimSpace(input)) == 0 || string(bytes.TrimSpace(input)) == "null" {
		input = json.RawMessage("{}")
	}
	d.open = append(d.open, l.ToolID)
	if u, ok := d.usageSoFar(); ok && u != d.reported {
		d.reported = u
		evs = append(evs, runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: u}))
	}
	return append(evs, runs.NewEvent(runs.EventToolCallStarted, runs.ToolCallStartedData{
		ID: l.ToolID, Name: l.ToolName, Input: append(json.RawMessage(nil), input...),
	}))
}

func (d *decoder) toolResult(l *wireLine, line []byte) []runs.Event {
	evs := d.flush()
	var output string
	if len(l.Output) > 0 && string(l.Output) != "null" {
		if err := json.Unmarshal(l.Output, &output); err != nil {
			// Keep the output as JSON text rather than lose it.
			output = string(l.Output)
		}
	}
	isError := l.Status != "success"
	if isError && output == "" && l.Error != nil {
		output = l.Error.Message
	}
	d.close(l.ToolID)
	evs = append(evs, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
		ID: l.ToolID, Output: output, IsError: isError,
	}))
	if l.Error != nil && l.Error.Type == "tool_not_registered" {
		// The permission level left the tool out: headless, the CLI
		// does not offer a tool that would need approval.
		evs = append(evs, runs.Warning("tool_not_registered", cmp.Or(l.Error.Message, "the tool is not available at this permission level")))
	}
	if l.Status != "success" && l.Status != "error" {
		evs = append(evs, runs.Unparsed(line, fmt.Sprintf("unknown tool_result status %q", l.Status)))
	}
	return evs
}

// usageSoFar is the run's usage as the chat recording has it before the
// result line: the responses recorded so far. ok is false without a
// recording to read, or with nothing in it yet.
func (d *decoder) usageSoFar() (runs.Usage, bool) {
	if d.log == nil || d.sessionID == "" {
		return runs.Usage{}, false
	}
	u, ok := d.log.soFar(d.sessionID)
	return u, ok && !u.IsZero()
}

// close removes id from the open tool calls.
func (d *decoder) close(id string) {
	for i, o := range d.open {
		if o == id {
			d.open = append(d.open[:i], d.open[i+1:]...)
			return
		}
	}
}

func (d *decoder) errorLine(l *wireLine) []runs.Event {
	if l.Severity == "error" {
		d.lastError = l.Message
	}
	return []runs.Event{runs.Warning("agent_"+cmp.Or(l.Severity, "error"), cmp.Or(l.Message, "the agent reported an error"))}
}

func (d *decoder) resultLine(l *wireLine) []runs.Event {
	evs := d.flush()
	d.result = l
	u := normalize(l.Stats)
	if u.ReasoningTokens > 0 {
		// Gemini CLI bills thoughts but never prints them.
		evs = append(evs, runs.NewEvent(runs.EventReasoningCompleted, runs.ReasoningData{Visibility: runs.VisibilityRedacted}))
	}
	return append(evs, runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: u}))
}

// normalize maps result.stats to the gateway's usage convention. Gemini's
// prompt count includes cached tokens, as the convention's input does, and
// the CLI reports no cache writes (implicit caching has none). Thoughts
// are not in output_tokens, and stream-json has no count of their own:
// they are total − input − output, which is thoughtsTokenCount (plus
// toolUsePromptTokenCount, which Gemini bills only for its built-in tools,
// never for function calls). The convention's output includes them.
func normalize(s *wireStats) runs.Usage {
	if s == nil {
		return runs.Usage{}
	}
	total, in, out, cached := bound(s.TotalTokens), bound(s.InputTokens), bound(s.OutputTokens), bound(s.Cached)
	if total == 0 && in == 0 && out == 0 && cached == 0 {
		// An older or newer CLI that fills only the per-model entries.
		for _, m := range s.Models {
			total, in = bound(total+bound(m.TotalTokens)), bound(in+bound(m.InputTokens))
			out, cached = bound(out+bound(m.OutputTokens)), bound(cached+bound(m.Cached))
		}
	}
	reasoning := max(total-in-out, 0)
	return runs.Usage{
		InputTokens:     in,
		CacheReadTokens: min(cached, in),
		OutputTokens:    bound(out + reasoning),
		ReasoningTokens: reasoning,
	}
}

// maxTokens bounds every count read from the CLI, far above any real
// one, so that no arithmetic on counts can overflow.
const maxTokens = 1 << 50

// bound clamps n to [0, maxTokens].
func bound(n int64) int64 { return min(max(n, 0), maxTokens) }
