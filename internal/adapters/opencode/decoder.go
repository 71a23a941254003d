package opencode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// decoder maps one run's `opencode run --format json` lines to events and
// remembers what Finish needs to classify the run.
type decoder struct {
	inv runs.Invocation

	sessionID string
	usage     runs.Usage
	cost      float64
	steps     int
	// reason is the last step's finish reason.
	reason string
	// resultMsg is the message of the last text part, and result its
	// texts: the run's answer is the last message that said something.
	resultMsg string
	result    []string
	// errs holds the session errors printed, in order.
	errs []*wireError
	// mcp names the run's MCP servers' tools.
	mcp mcpNamer
}

func newDecoder(inv runs.Invocation) *decoder {
	return &decoder{inv: inv, mcp: newMCPNamer(inv.Spec.MCPServers)}
}

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
	if d.sessionID == "" && l.SessionID != "" {
		// Every line names the session; the first one starts it.
		d.sessionID = l.SessionID
		evs = append(evs, runs.NewEvent(runs.EventSessionStarted, runs.SessionStartedData{
			SessionID: l.SessionID, Model: d.inv.Spec.Model, Tools: []string{},
		}))
	}
	switch l.Type {
	case "step_start":
		if l.Part == nil {
			evs = append(evs, runs.Unparsed(line, "step_start without part"))
		}
	case "text":
		evs = append(evs, d.text(&l, line)...)
	case "reasoning":
		if l.Part == nil {
			evs = append(evs, runs.Unparsed(line, "reasoning without part"))
			break
		}
		vis := runs.VisibilityFull
		if l.Part.Text == "" {
			vis = runs.VisibilityRedacted
		}
		evs = append(evs, runs.NewEvent(runs.EventReasoningCompleted, runs.ReasoningData{Text: l.Part.Text, Visibility: vis}))
	case "tool_use":
		evs = append(evs, d.tool(&l, line)...)
	case "step_finish":
		evs = append(evs, d.stepFinish(&l, line)...)
	case "error":
		if l.Error == nil {
			evs = append(evs, runs.Unparsed(line, "error without error"))
			break
		}
		// The outcome reports it; OpenCode prints nothing after it.
		d.errs = append(d.errs, l.Error)
	case "":
		evs = append(evs, runs.Unparsed(line, "no type field"))
	default:
		evs = append(evs, runs.Unparsed(line, fmt.Sprintf("unknown type %q", l.Type)))
	}
	for i := range evs {
		if evs[i].Type != runs.EventAgentUnparsed && evs[i].SessionID == "" {
			evs[i].SessionID = l.SessionID
		}
	}
	return evs
}

func (d *decoder) text(l *wireLine, line []byte) []runs.Event {
	p := l.Part
	if p == nil {
		return []runs.Event{runs.Unparsed(line, "text without part")}
	}
	if p.MessageID != d.resultMsg || d.resultMsg == "" {
		d.resultMsg, d.result = p.MessageID, nil
	}
	d.result = append(d.result, p.Text)
	return []runs.Event{runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{MessageID: p.MessageID, Text: p.Text})}
}

// Prefixes of the errors OpenCode gives a tool call the permission
// table refused: an explicit deny, and an "ask" that run rejects because
// nobody can answer it.
var refusals = []string{
	"The user has specified a rule which prevents",
	"The user rejected permission",
}

func (d *decoder) tool(l *wireLine, line []byte) []runs.Event {
	p := l.Part
	if p == nil || p.State == nil {
		return []runs.Event{runs.Unparsed(line, "tool_use without part or state")}
	}
	st := p.State
	if st.Status != "completed" && st.Status != "error" {
		return []runs.Event{runs.Unparsed(line, fmt.Sprintf("tool_use in state %q", st.Status))}
	}
	id := p.CallID
	if id == "" {
		id = p.ID
	}
	input := json.RawMessage("{}")
	if len(bytes.TrimSpace(st.Input)) > 0 && string(st.Input) != "null" {
		input = compactJSON(st.Input)
	}
	var meta wireToolMeta
	_ = json.Unmarshal(st.Metadata, &meta) // metadata varies by tool; what does not fit stays zero

	// run prints a tool only once it has finished, so its start and end
	// arrive together.
	started := runs.ToolCallStartedData{ID: id, Name: p.Tool, Input: input}
	started.MCPServer, started.MCPTool, _ = d.mcp.split(p.Tool)
	evs := []runs.Event{runs.NewEvent(runs.EventToolCallStarted, started)}
	done := runs.ToolCallCompletedData{ID: id, Output: st.Output}
	if st.Status == "error" {
		done.Output, done.IsError = st.Error, true
		for _, r := range refusals {
			if strings.HasPrefix(st.Error, r) {
				evs = append(evs, runs.Warning("permission_denied", fmt.Sprintf("%s was refused: %s", p.Tool, clip.Text(st.Error, 300))))
				break
			}
		}
	} else {
		// A command that failed, as bash reports it, and a call of a
		// tool OpenCode does not offer (it answers it through its own
		// "invalid" tool, e.g. bash under read_only) are failures.
		if (meta.Exit != nil && *meta.Exit != 0) || p.Tool == "invalid" {
			done.IsError = true
		}
		if fc, ok := d.fileChange(p.Tool, id, input, meta); ok {
			evs = append(evs, runs.NewEvent(runs.EventFileChanged, fc))
		}
	}
	evs = append(evs, runs.NewEvent(runs.EventToolCallCompleted, done))
	if p.Tool == "todowrite" && st.Status == "completed" {
		evs = append(evs, plan(meta.Todos))
	}
	return evs
}

// fileChange returns the file.changed of a completed write or edit call:
// write reports whether the file existed, edit the diff it applied.
func (d *decoder) fileChange(tool, callID string, input json.RawMessage, meta wireToolMeta) (runs.FileChangedData, bool) {
	var in wireInput
	_ = json.Unmarshal(input, &in)
	path := meta.Filepath
	if meta.Filediff != nil && meta.Filediff.File != "" {
		path = meta.Filediff.File
	}
	if path == "" {
		path = in.FilePath
	}
	if path == "" {
		return runs.FileChangedData{}, false
	}
	fc := runs.FileChangedData{Path: d.relative(path), Kind: runs.ChangeUpdate, Status: "completed", ToolCallID: callID}
	switch tool {
	case "write":
		if meta.Exists != nil && !*meta.Exists {
			fc.Kind = runs.ChangeAdd
		}
	case "edit":
		fc.Diff = meta.Diff
	default:
		return runs.FileChangedData{}, false
	}
	return fc, true
}

// relative makes an absolute path inside the run's directory relative to
// it; anything else stays as OpenCode gave it.
func (d *decoder) relative(path string) string {
	if d.inv.Dir == "" || !filepath.IsAbs(path) {
		return path
	}
	if rel, err := filepath.Rel(d.inv.Dir, path); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return path
}

// plan turns todowrite's list into plan.updated. A cancelled entry has
// nothing left to do and counts as completed.
func plan(todos []wireTodo) runs.Event {
	steps := make([]runs.PlanStep, 0, len(todos))
	for _, t := range todos {
		status := runs.StepPending
		switch t.Status {
		case "in_progress":
			status = runs.StepInProgress
		case "completed", "cancelled":
			status = runs.StepCompleted
		}
		steps = append(steps, runs.PlanStep{Step: t.Content, Status: status})
	}
	return runs.NewEvent(runs.EventPlanUpdated, runs.PlanUpdatedData{Steps: steps})
}

func (d *decoder) stepFinish(l *wireLine, line []byte) []runs.Event {
	p := l.Part
	if p == nil {
		return []runs.Event{runs.Unparsed(line, "step_finish without part")}
	}
	d.steps++
	d.reason = p.Reason
	if p.Tokens != nil {
		d.usage = d.usage.Add(normalize(p.Tokens))
	}
	if p.Cost != nil && *p.Cost > 0 {
		d.cost += *p.Cost
	}
	return []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: d.usage, CostUSD: d.costUSD()})}
}

// normalize turns a step's tokens into runs.Usage: OpenCode's input
// excludes both cache counts and its output excludes reasoning, the
// gateway's include them.
func normalize(t *wireTokens) runs.Usage {
	read, write, reasoning := nonNeg(t.Cache.Read), nonNeg(t.Cache.Write), nonNeg(t.Reasoning)
	return runs.Usage{
		InputTokens:      nonNeg(t.Input) + read + write,
		CacheReadTokens:  read,
		CacheWriteTokens: write,
		OutputTokens:     nonNeg(t.Output) + reasoning,
		ReasoningTokens:  reasoning,
	}
}

// costUSD is the run's cost so far, nil while OpenCode has reported none
// above zero: it prices a step from its model catalogue or the model's
// cost in the configuration, and reports 0 for a model without a price.
func (d *decoder) costUSD() *float64 {
	if d.cost <= 0 {
		return nil
	}
	c := d.cost
	return &c
}

// maxTokens bounds one count of one step, so that sums of absurd counts
// cannot overflow.
const maxTokens = 1 << 40

func nonNeg(n int64) int64 { return min(max(n, 0), maxTokens) }

// compactJSON returns raw without insignificant space, or raw as is when
// it is not JSON.
func compactJSON(raw []byte) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return json.RawMessage(raw)
	}
	return buf.Bytes()
}
