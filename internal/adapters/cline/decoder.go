package cline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// decoder maps one run's `cline --json` lines to events and remembers
// what Finish needs to classify the run.
type decoder struct {
	inv runs.Invocation

	sessionID string
	usage     runs.Usage
	usageSeen bool
	// text is the answer being streamed; result the run's answer.
	text, result string
	iterations   int
	finish       string
	// errs are the error events, in order; refused the message of a
	// refused invocation.
	errs    []wireEventError
	refused string
	// open are the tool calls started and not completed.
	open map[string]bool
}

// wireEventError is what the decoder keeps of an error event.
type wireEventError struct {
	message, class string
}

func newDecoder(inv runs.Invocation) *decoder {
	return &decoder{inv: inv, open: map[string]bool{}}
}

// maxOpenCalls bounds the calls the decoder tracks, so that hostile input
// cannot grow it for ever.
const maxOpenCalls = 1 << 12

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
	switch l.Type {
	case "hook_event":
		if l.HookEventName == "agent_start" && d.sessionID == "" && l.TaskID != "" {
			d.sessionID = l.TaskID
			return []runs.Event{runs.NewEvent(runs.EventSessionStarted, runs.SessionStartedData{
				SessionID: l.TaskID, Model: d.inv.Spec.Model, Tools: []string{},
			})}
		}
		return nil
	case "agent_event":
		if l.Event == nil {
			return []runs.Event{runs.Unparsed(line, "agent_event without event")}
		}
		return d.event(l.Event, line)
	case "run_result":
		return d.runResult(&l)
	case "error":
		d.refused = l.Message
		return nil
	case "run_aborted":
		// After run_result "aborted", at SIGINT: {"reason","message"}.
		return nil
	case "":
		return []runs.Event{runs.Unparsed(line, "no type field")}
	}
	return []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown type %q", l.Type))}
}

// event maps one agent_event.
func (d *decoder) event(e *wireEvent, line []byte) []runs.Event {
	switch e.Type {
	case "iteration_start":
		d.iterations++
		return nil
	case "iteration_end", "done", "content_update":
		return nil
	case "content_start":
		return d.contentStart(e, line)
	case "content_end":
		return d.contentEnd(e, line)
	case "usage":
		d.usage, d.usageSeen = normalize(wireUsage{
			InputTokens: e.TotalInputTokens, OutputTokens: e.TotalOutputTokens,
			CacheReadTokens: e.TotalCacheReadTokens, CacheWriteTokens: e.TotalCacheWrite,
		}), true
		return []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: d.usage})}
	case "error":
		var we wireError
		_ = json.Unmarshal(e.Error, &we)
		if we.Message == "" {
			we.Message = strings.Trim(string(e.Error), `"`)
		}
		d.errs = append(d.errs, wireEventError{message: we.Message, class: e.ErrorClass})
		return nil
	}
	return []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown agent_event %q", e.Type))}
}

func (d *decoder) contentStart(e *wireEvent, line []byte) []runs.Event {
	switch e.ContentType {
	case "text":
		if e.Text == "" {
			return nil
		}
		d.text += e.Text
		return []runs.Event{runs.NewEvent(runs.EventMessageDelta, runs.MessageData{Text: e.Text})}
	case "reasoning", "thinking":
		if e.Text == "" {
			return nil
		}
		return []runs.Event{runs.NewEvent(runs.EventReasoningDelta, runs.DeltaData{Text: e.Text})}
	case "tool":
		if e.ToolCallID == "" {
			return []runs.Event{runs.Unparsed(line, "tool content_start without toolCallId")}
		}
		if len(d.open) < maxOpenCalls {
			d.open[e.ToolCallID] = true
		}
		server, tool, _ := mcpToolName(e.ToolName, d.inv.Spec.MCPServers)
		return []runs.Event{runs.NewEvent(runs.EventToolCallStarted, runs.ToolCallStartedData{
			ID: e.ToolCallID, Name: e.ToolName, Input: jsonOrEmpty(e.Input), MCPServer: server, MCPTool: tool,
		})}
	}
	return []runs.Event{runs.Unparsed(line, fmt.Sprintf("content_start of %q", e.ContentType))}
}

func (d *decoder) contentEnd(e *wireEvent, line []byte) []runs.Event {
	switch e.ContentType {
	case "text":
		text := d.text
		d.text = ""
		if text == "" {
			text = e.Text
		}
		if text == "" {
			return nil
		}
		d.result = text
		return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{Text: text})}
	case "reasoning", "thinking":
		return nil
	case "tool":
		if e.ToolCallID == "" {
			return []runs.Event{runs.Unparsed(line, "tool content_end without toolCallId")}
		}
		delete(d.open, e.ToolCallID)
		out, failed := toolOutput(e)
		return []runs.Event{runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
			ID: e.ToolCallID, Output: out, IsError: failed,
		})}
	}
	return []runs.Event{runs.Unparsed(line, fmt.Sprintf("content_end of %q", e.ContentType))}
}

// toolOutput is a finished call's output as text, and whether it failed:
// an error, or a run_commands entry with success false.
func toolOutput(e *wireEvent) (string, bool) {
	if len(e.Error) > 0 && string(e.Error) != "null" {
		var we wireError
		if json.Unmarshal(e.Error, &we) == nil && we.Message != "" {
			return we.Message, true
		}
		return strings.Trim(string(e.Error), `"`), true
	}
	var cmds []wireCommandResult
	if json.Unmarshal(e.Output, &cmds) == nil && len(cmds) > 0 {
		var parts []string
		failed := false
		for _, c := range cmds {
			parts = append(parts, c.Result+c.Error)
			if c.Success != nil && !*c.Success {
				failed = true
			}
		}
		return strings.Join(parts, "\n"), failed
	}
	var s string
	if json.Unmarshal(e.Output, &s) == nil {
		return s, false
	}
	if len(e.Output) == 0 || string(e.Output) == "null" {
		return "", false
	}
	return string(compactJSON(e.Output)), false
}

// runResult takes the run's summary: its whole usage and answer.
func (d *decoder) runResult(l *wireLine) []runs.Event {
	d.finish = l.FinishReason
	if l.Text != "" {
		d.result = l.Text
	}
	if l.Iterations > d.iterations {
		d.iterations = l.Iterations
	}
	if l.Usage == nil {
		return nil
	}
	u := normalize(*l.Usage)
	if u == d.usage && d.usageSeen {
		return nil
	}
	d.usage, d.usageSeen = u, true
	return []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: d.usage})}
}

// normalize turns Cline's usage into runs.Usage: its inputTokens already
// include the cached tokens (the API's prompt_tokens), as the gateway's
// do; reasoning tokens are not reported apart.
func normalize(u wireUsage) runs.Usage {
	return runs.Usage{
		InputTokens:      nonNeg(u.InputTokens),
		CacheReadTokens:  nonNeg(u.CacheReadTokens),
		CacheWriteTokens: nonNeg(u.CacheWriteTokens),
		OutputTokens:     nonNeg(u.OutputTokens),
	}
}

// maxTokens bounds one count, so that sums of absurd counts cannot
// overflow.
const maxTokens = 1 << 40

func nonNeg(n int64) int64 { return min(max(n, 0), maxTokens) }

// jsonOrEmpty is raw compacted, or {} when it is empty or null.
func jsonOrEmpty(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return compactJSON(raw)
}

// compactJSON returns raw without insignificant space, or raw as is when
// it is not JSON.
func compactJSON(raw []byte) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return json.RawMessage(bytes.Clone(raw))
	}
	return buf.Bytes()
}
