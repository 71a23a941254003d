package claude

import (
	"bytes"
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
	// open holds the tool calls started and not yet completed, in order.
	open []string
	// result is the last result line, nil until one arrives.
	result *wireLine
	// apiError and apiErrorText are the last synthetic assistant error
	// line's kind ("authentication_failed", ...) and text.
	apiError     string
	apiErrorText string
	// streamed is the usage of each API message streamed since the last
	// result, by message id, in order: what the model server billed, for
	// a run that ends without the result that would report it.
	streamed    map[string]*wireUsage
	streamedIDs []string
	// interrupted is set once the CLI said the user interrupted it.
	interrupted bool
	// structuredIDs are the calls of the StructuredOutput tool (the
	// CLI's --json-schema), and schemaError the CLI's refusal of the
	// last one's input ("Output does not match required schema: …"),
	// empty once one was taken.
	structuredIDs map[string]bool
	schemaError   string
}

func newDecoder(inv runs.Invocation) *decoder { return &decoder{inv: inv} }

// Decode implements runs.Decoder.
func (d *decoder) Decode(line []byte) []runs.Event {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if ev, ok := decodeDelta(line); ok {
		return []runs.Event{ev}
	}
	return d.decodeLine(line)
}

// decodeLine is Decode for any line, through encoding/json.
func (d *decoder) decodeLine(line []byte) []runs.Event {
	var l wireLine
	if err := json.Unmarshal(line, &l); err != nil {
		return []runs.Event{runs.Unparsed(line, "invalid JSON: "+err.Error())}
	}
	var evs []runs.Event
	switch l.Type {
	case "system":
		evs = d.system(&l, line)
	case "assistant":
		evs = d.assistant(&l, line)
	case "user":
		evs = d.user(&l, line)
	case "stream_event":
		evs = d.streamEvent(&l, line)
	case "result":
		evs = d.resultLine(&l)
	case "rate_limit_event":
		evs = d.rateLimit(&l, line)
	case "tool_progress":
		// Its parent_tool_use_id is the call it reports on, not the
		// subagent's call the envelope's parent names.
		return toolProgress(&l, line)
	case "":
		return []runs.Event{runs.Unparsed(line, "no type field")}
	default:
		return []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown type %q", l.Type))}
	}
	parent := ""
	if l.ParentToolUseID != nil {
		parent = *l.ParentToolUseID
	}
	for i := range evs {
		if evs[i].Type == runs.EventAgentUnparsed {
			continue
		}
		if evs[i].SessionID == "" {
			evs[i].SessionID = l.SessionID
		}
		evs[i].ParentToolCallID = parent
	}
	return evs
}

func (d *decoder) system(l *wireLine, line []byte) []runs.Event {
	switch l.Subtype {
	case "init":
		d.sessionID, d.model = l.SessionID, l.Model
		tools := l.Tools
		if tools == nil {
			tools = []string{}
		}
		return []runs.Event{runs.NewEvent(runs.EventSessionStarted, runs.SessionStartedData{
			SessionID: l.SessionID, Model: l.Model, Tools: tools,
		})}
	case "api_retry":
		status := 0
		if l.ErrorStatus != nil {
			status = *l.ErrorStatus
		}
		if l.Error == "rate_limit" || l.Error == "overloaded" {
			return []runs.Event{runs.NewEvent(runs.EventRateLimit, runs.RateLimitData{
				Attempt: l.Attempt, MaxRetries: l.MaxRetries, RetryDelayMS: l.RetryDelayMS, Status: status, Error: l.Error,
			})}
		}
		msg := fmt.Sprintf("API request failed (%s", orUnknown(l.Error))
		if status != 0 {
			msg += fmt.Sprintf(", status %d", status)
		}
		msg += fmt.Sprintf("); retry %d of %d in %d ms", l.Attempt, l.MaxRetries, l.RetryDelayMS)
		return []runs.Event{runs.Warning("api_retry", msg)}
	case "permission_denied":
		var msg string
		_ = json.Unmarshal(l.Message, &msg) // a non-string message leaves the tool name alone
		text := l.ToolName + " was refused"
		if msg != "" {
			text += ": " + msg
		}
		return []runs.Event{runs.Warning("permission_denied", text)}
	case "thinking_tokens", "status", "task_started", "task_progress", "task_updated", "task_notification":
		// Progress the events already convey: estimated thinking
		// tokens, "requesting" before each API call, and the
		// lifecycle of a tool's process.
		return nil
	case "":
		return []runs.Event{runs.Unparsed(line, "system line without subtype")}
	}
	return []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown system subtype %q", l.Subtype))}
}

func (d *decoder) assistant(l *wireLine, line []byte) []runs.Event {
	var m wireMessage
	var blocks []wireBlock
	if err := json.Unmarshal(l.Message, &m); err != nil {
		return []runs.Event{runs.Unparsed(line, "assistant message: "+err.Error())}
	}
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return []runs.Event{runs.Unparsed(line, "assistant content: "+err.Error())}
	}
	if l.Error != "" || l.IsAPIErrorMessage {
		// A synthetic line standing for a failed API call: its text is
		// the CLI's error message, not the model's. Finish reports it.
		d.apiError = orUnknown(l.Error)
		d.apiErrorText = textOf(blocks)
		return nil
	}
	var evs []runs.Event
	for _, b := range blocks {
		switch b.Type {
		case "text":
			evs = append(evs, runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{MessageID: m.ID, Text: b.Text}))
		case "thinking":
			vis := runs.VisibilityFull
			if b.Thinking == "" {
				vis = runs.VisibilityRedacted
			}
			evs = append(evs, runs.NewEvent(runs.EventReasoningCompleted, runs.ReasoningData{Text: b.Thinking, Visibility: vis}))
		case "redacted_thinking":
			evs = append(evs, runs.NewEvent(runs.EventReasoningCompleted, runs.ReasoningData{Visibility: runs.VisibilityRedacted}))
		case "tool_use":
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			d.open = append(d.open, b.ID)
			if b.Name == structuredTool && len(d.structuredIDs) < maxStreamed {
				if d.structuredIDs == nil {
					d.structuredIDs = map[string]bool{}
				}
				d.structuredIDs[b.ID] = true
			}
			data := runs.ToolCallStartedData{ID: b.ID, Name: b.Name, Input: input}
			data.MCPServer, data.MCPTool, _ = mcpTool(b.Name, d.inv.Spec.MCPServers)
			evs = append(evs, runs.NewEvent(runs.EventToolCallStarted, data))
		default:
			evs = append(evs, runs.Unparsed(line, fmt.Sprintf("unknown assistant block type %q", b.Type)))
		}
	}
	return evs
}

func (d *decoder) user(l *wireLine, line []byte) []runs.Event {
	var m wireMessage
	if err := json.Unmarshal(l.Message, &m); err != nil {
		return []runs.Event{runs.Unparsed(line, "user message: "+err.Error())}
	}
	var blocks []wireBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		// A plain-string user message is a prompt (a replay or a
		// synthetic reminder), not a tool result.
		return nil
	}
	var evs []runs.Event
	for _, b := range blocks {
		if b.Type != "tool_result" {
			// Text blocks: "[Request interrupted by user for tool
			// use]", the structured-output reminder, replays.
			if strings.HasPrefix(b.Text, "[Request interrupted by user") {
				d.interrupted = true
			}
			continue
		}
		d.close(b.ToolUseID)
		out := flatten(b.Content)
		if d.structuredIDs[b.ToolUseID] {
			d.schemaError = ""
			if b.IsError {
				d.schemaError = out
			}
		}
		evs = append(evs, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
			ID: b.ToolUseID, Output: out, IsError: b.IsError,
		}))
	}
	return evs
}

func (d *decoder) streamEvent(l *wireLine, line []byte) []runs.Event {
	if l.Event == nil {
		return []runs.Event{runs.Unparsed(line, "stream_event without event")}
	}
	switch l.Event.Type {
	case "message_start":
		if l.Event.Message != nil && l.Event.Message.Usage != nil {
			return d.stream(l.APIMessageID, l.Event.Message.Usage)
		}
		return nil
	case "message_delta":
		if l.Event.Usage != nil {
			return d.stream(l.APIMessageID, l.Event.Usage)
		}
		return nil
	}
	if l.Event.Type == "content_block_delta" && l.Event.Delta != nil {
		switch l.Event.Delta.Type {
		case "text_delta":
			return []runs.Event{runs.NewEvent(runs.EventMessageDelta, runs.MessageData{MessageID: l.APIMessageID, Text: l.Event.Delta.Text})}
		case "thinking_delta":
			id := fmt.Sprintf("%s:%d", l.APIMessageID, l.Event.Index)
			return []runs.Event{runs.NewEvent(runs.EventReasoningDelta, runs.DeltaData{ID: id, Text: l.Event.Delta.Thinking})}
		}
	}
	// Every other raw API event (message_start, block starts and stops,
	// signature and tool-input deltas) is repeated by the assistant line
	// that follows it.
	return nil
}

// stream records an API message's usage as its stream reports it:
// message_start has the input and cache counts, each message_delta the
// running totals, whose non-zero counts replace the earlier ones. It
// returns a usage.updated with what was streamed since the last result
// when that changed: the usage as soon as the CLI reports it, for the
// gateway's budgets, where the result comes only at the end of a turn.
func (d *decoder) stream(id string, u *wireUsage) []runs.Event {
	if d.streamed == nil {
		d.streamed = map[string]*wireUsage{}
	}
	cur, ok := d.streamed[id]
	if !ok {
		if len(d.streamedIDs) >= maxStreamed {
			return nil
		}
		cur = &wireUsage{}
		d.streamed[id] = cur
		d.streamedIDs = append(d.streamedIDs, id)
	}
	changed := false
	for _, f := range [][2]*int64{
		{&cur.InputTokens, &u.InputTokens}, {&cur.CacheCreationInputTokens, &u.CacheCreationInputTokens},
		{&cur.CacheReadInputTokens, &u.CacheReadInputTokens}, {&cur.OutputTokens, &u.OutputTokens},
	} {
		if *f[1] > 0 && *f[1] != *f[0] {
			*f[0] = *f[1]
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: d.streamedUsage()})}
}

// maxStreamed bounds the API messages remembered between two results,
// and the StructuredOutput calls remembered.
const maxStreamed = 10000

// structuredTool is the tool --json-schema adds; its input, once it
// matches the schema, is result.structured_output.
const structuredTool = "StructuredOutput"

// streamedUsage is the usage of the API messages streamed since the last
// result.
func (d *decoder) streamedUsage() runs.Usage {
	var u runs.Usage
	for _, id := range d.streamedIDs {
		u = u.Add(resultUsage(&wireLine{Usage: d.streamed[id]}))
	}
	return u
}

func (d *decoder) resultLine(l *wireLine) []runs.Event {
	d.result = l
	// The result reports what was streamed since the last one.
	d.streamed, d.streamedIDs = nil, nil
	if l.SessionID != "" {
		d.sessionID = l.SessionID
	}
	// total_cost_usd is the whole session's: on a resumed session it
	// includes the earlier runs, so only a new session's is this run's.
	cost := l.TotalCostUSD
	if d.inv.Spec.ResumeSessionID != "" {
		cost = nil
	}
	evs := []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: normalize(l), CostUSD: cost})}
	if len(l.PermissionDenials) > 0 {
		names := make([]string, 0, len(l.PermissionDenials))
		for _, p := range l.PermissionDenials {
			names = append(names, p.ToolName)
		}
		evs = append(evs, runs.Warning("permission_denials", fmt.Sprintf(
			"%d tool call(s) were refused by the permission level: %s", len(names), strings.Join(names, ", "))))
	}
	return evs
}

func (d *decoder) rateLimit(l *wireLine, line []byte) []runs.Event {
	if l.RateLimitInfo == nil {
		return []runs.Event{runs.Unparsed(line, "rate_limit_event without rate_limit_info")}
	}
	info := l.RateLimitInfo
	switch info.Status {
	case "allowed":
		// The subscription's limits are not near: nothing to report.
		return nil
	case "allowed_warning":
		return []runs.Event{runs.Warning("rate_limit_warning", fmt.Sprintf(
			"the account is close to its %s usage limit (resets at unix time %d)", orUnknown(info.RateLimitType), info.ResetsAt))}
	case "rejected":
		return []runs.Event{runs.NewEvent(runs.EventRateLimit, runs.RateLimitData{
			Error: "rejected: " + orUnknown(info.RateLimitType) + " limit reached"})}
	}
	return []runs.Event{runs.Unparsed(line, fmt.Sprintf("unknown rate limit status %q", info.Status))}
}

// toolProgress maps a tool_progress line. The CLI prints one every 30 s
// while a main-thread tool runs (heartbeat:true; the interval is a
// constant of the CLI), and one when a subagent's API call is retried.
// Its tool_use_id names the report itself ("<call>-heartbeat-<n>",
// "hook-<event>-<call>-heartbeat-<n>") and parent_tool_use_id the running
// call; a line without a parent reports on tool_use_id's call.
func toolProgress(l *wireLine, line []byte) []runs.Event {
	call := l.ToolUseID
	if l.ParentToolUseID != nil && *l.ParentToolUseID != "" {
		call = *l.ParentToolUseID
	}
	if call == "" {
		return []runs.Event{runs.Unparsed(line, "tool_progress without tool_use_id")}
	}
	if l.SubagentRetry != nil {
		return []runs.Event{subagentRetry(l, call)}
	}
	if l.ElapsedTimeSeconds == nil {
		return []runs.Event{runs.Unparsed(line, "tool_progress without elapsed_time_seconds")}
	}
	if *l.ElapsedTimeSeconds <= 0 {
		// A resolved subagent retry, a script's status: no time to tell.
		return nil
	}
	name := l.ToolName
	if strings.HasPrefix(l.ToolUseID, "hook-") {
		// A hook running for the call: tool_name is the hook's event.
		name = ""
	}
	ev := runs.NewEvent(runs.EventToolCallProgress, runs.ToolCallProgressData{
		ID: call, Name: name, ElapsedMS: *l.ElapsedTimeSeconds * 1000,
	})
	ev.SessionID = l.SessionID
	return []runs.Event{ev}
}

// subagentRetry maps a subagent's API retry to a rate_limit (or, for
// another failure, a warning) inside the subagent's tool call.
func subagentRetry(l *wireLine, call string) runs.Event {
	r := l.SubagentRetry
	status := 0
	if r.ErrorStatus != nil {
		status = *r.ErrorStatus
	}
	var ev runs.Event
	if r.ErrorCategory == "rate_limit" || r.ErrorCategory == "overloaded" || status == 429 || status == 529 {
		ev = runs.NewEvent(runs.EventRateLimit, runs.RateLimitData{
			Attempt: r.Attempt, MaxRetries: r.MaxRetries, RetryDelayMS: r.RetryDelayMS, Status: status, Error: orUnknown(r.ErrorCategory)})
	} else {
		ev = runs.Warning("subagent_api_retry", fmt.Sprintf("subagent %s: API request failed (%s, status %d); retry %d of %d in %d ms",
			orUnknown(l.SubagentType), orUnknown(r.ErrorCategory), status, r.Attempt, r.MaxRetries, r.RetryDelayMS))
	}
	ev.SessionID, ev.ParentToolCallID = l.SessionID, call
	return ev
}

// close marks a tool call completed.
func (d *decoder) close(id string) {
	for i, o := range d.open {
		if o == id {
			d.open = append(d.open[:i], d.open[i+1:]...)
			return
		}
	}
}

// normalize turns result.usage (Anthropic semantics: input excludes the
// cache) into runs.Usage (input includes both cache counts). When usage is
// all zeros, as on error_max_budget_usd, it sums modelUsage instead.
func normalize(l *wireLine) runs.Usage {
	if u := resultUsage(l); !u.IsZero() {
		return u
	}
	return sumModelUsage(l.ModelUsage)
}

// resultUsage is result.usage in runs.Usage terms.
func resultUsage(l *wireLine) runs.Usage {
	var u runs.Usage
	if l.Usage != nil {
		w := l.Usage
		u = runs.Usage{
			InputTokens:      w.InputTokens + w.CacheCreationInputTokens + w.CacheReadInputTokens,
			CacheReadTokens:  w.CacheReadInputTokens,
			CacheWriteTokens: w.CacheCreationInputTokens,
			OutputTokens:     w.OutputTokens,
		}
		if w.OutputTokensDetails != nil {
			u.ReasoningTokens = w.OutputTokensDetails.ThinkingTokens
		}
	}
	return u
}

// sumModelUsage adds up a modelUsage map in runs.Usage terms.
func sumModelUsage(mu map[string]wireMU) runs.Usage {
	var u runs.Usage
	for _, m := range mu {
		u = u.Add(runs.Usage{
			InputTokens:      m.InputTokens + m.CacheCreationInputTokens + m.CacheReadInputTokens,
			CacheReadTokens:  m.CacheReadInputTokens,
			CacheWriteTokens: m.CacheCreationInputTokens,
			OutputTokens:     m.OutputTokens,
			ReasoningTokens:  m.ThinkingTokens,
		})
	}
	return u
}

// flatten returns a tool_result's content as text: a string as is, a
// block array as its text blocks joined by newlines (an image block
// becomes "[image]").
func flatten(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []wireBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "image":
			parts = append(parts, "[image]")
		default:
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// textOf joins the text blocks of a message.
func textOf(blocks []wireBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
