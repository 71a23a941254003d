// Package aguitest checks AG-UI event streams, for tests: a Checker reads
// a stream as a strict client would and says where it breaks AG-UI's
// rules or package agui's promises. It is to agui what httptest is to
// net/http, and is linked only into test binaries.
package aguitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/agentgate/agentgate/internal/agui"
)

// Checker checks a stream of AG-UI events as a strict client reads it: each
// event's required fields and their types, and the order rules of AG-UI's
// reference client (a run starts before anything else, nothing but a new
// run follows its end, a message, tool call, reasoning span or step is
// used only while open and is closed before RUN_FINISHED). It also holds
// the stream to what this package promises beyond that: ids are never
// reused, deltas are never empty, and every STATE_DELTA applies to the
// state the events before it built. The zero Checker is ready for the first
// event.
type Checker struct {
	n        int
	started  bool   // a run was started and has not ended
	ended    string // how the last run ended: "" (none), RUN_FINISHED or RUN_ERROR
	thread   string // of the open run
	runID    string
	texts    map[string]bool // open text messages
	tools    map[string]bool // open tool calls
	spans    map[string]bool // open reasoning spans
	thoughts map[string]bool // open reasoning messages
	steps    map[string]bool
	used     map[string]bool // every message, tool call and span id seen
	state    any
	hasState bool
}

// State returns the state that the snapshots and deltas so far built, and
// whether there was a snapshot.
func (c *Checker) State() (any, bool) { return c.state, c.hasState }

// Check checks the next event of the stream, the JSON of one SSE data
// field. The error names the event by its place in the stream.
func (c *Checker) Check(event []byte) error {
	c.n++
	typ, err := c.check(event)
	if err != nil {
		if typ == "" {
			return fmt.Errorf("event %d: %w", c.n, err)
		}
		return fmt.Errorf("event %d (%s): %w", c.n, typ, err)
	}
	return nil
}

func (c *Checker) check(event []byte) (agui.EventType, error) {
	if c.texts == nil {
		c.texts, c.tools, c.spans = map[string]bool{}, map[string]bool{}, map[string]bool{}
		c.thoughts, c.steps, c.used = map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	if bytes.ContainsAny(event, "\r\n") {
		return "", errors.New("is not on one line")
	}
	var f fieldSet
	if err := json.Unmarshal(event, &f); err != nil {
		return "", fmt.Errorf("is not a JSON object: %v", err)
	}
	ts, err := f.str("type", true)
	if err != nil {
		return "", err
	}
	typ := agui.EventType(ts)
	if raw, ok := f["timestamp"]; ok {
		var n float64
		if json.Unmarshal(raw, &n) != nil || n != math.Trunc(n) || math.Abs(n) > 1<<53-1 {
			return typ, errors.New("timestamp is not an integer")
		}
	}
	if raw, ok := f["metadata"]; ok && (len(raw) == 0 || raw[0] != '{') {
		return typ, errors.New("metadata is not an object")
	}
	if err := c.order(typ); err != nil {
		return typ, err
	}
	return typ, c.fields(typ, f)
}

// order applies the rules of where an event may come.
func (c *Checker) order(typ agui.EventType) error {
	switch {
	case c.n == 1 && typ != agui.RunStarted && typ != agui.RunError:
		return errors.New("the first event must be RUN_STARTED")
	case c.ended == string(agui.RunError) && typ != agui.RunStarted:
		return errors.New("follows RUN_ERROR; only RUN_STARTED may")
	case c.ended == string(agui.RunFinished) && typ != agui.RunStarted && typ != agui.RunError:
		return errors.New("follows RUN_FINISHED; only RUN_STARTED may")
	case typ == agui.RunStarted && c.started:
		return errors.New("a run is already open")
	}
	return nil
}

func (c *Checker) fields(typ agui.EventType, f fieldSet) error {
	switch typ {
	case agui.RunStarted:
		thread, run, err := f.runIDs()
		if err != nil {
			return err
		}
		if raw, ok := f["input"]; ok {
			if err := checkInputEcho(raw); err != nil {
				return fmt.Errorf("input: %w", err)
			}
		}
		c.started, c.ended, c.thread, c.runID = true, "", thread, run
		clear(c.texts)
		clear(c.tools)
		clear(c.spans)
		clear(c.thoughts)
		clear(c.steps)
	case agui.RunFinished:
		thread, run, err := f.runIDs()
		if err != nil {
			return err
		}
		if thread != c.thread || run != c.runID {
			return fmt.Errorf("ends thread %q run %q, but %q %q is open", thread, run, c.thread, c.runID)
		}
		if raw, ok := f["result"]; ok && string(raw) == "null" {
			return errors.New("result is null; leave it out")
		}
		if err := checkOutcome(f["outcome"]); err != nil {
			return err
		}
		if err := checkUsage(f["usage"]); err != nil {
			return err
		}
		for what, open := range map[string]map[string]bool{"text messages": c.texts, "tool calls": c.tools,
			"reasoning spans": c.spans, "reasoning messages": c.thoughts, "steps": c.steps} {
			if len(open) > 0 {
				return fmt.Errorf("%s are still open: %v", what, keysOf(open))
			}
		}
		c.started, c.ended = false, string(agui.RunFinished)
	case agui.RunError:
		if _, err := f.str("message", true); err != nil {
			return err
		}
		if _, err := f.str("code", false); err != nil {
			return err
		}
		if err := checkUsage(f["usage"]); err != nil {
			return err
		}
		c.started, c.ended = false, string(agui.RunError)
	case agui.StepStarted, agui.StepFinished:
		return f.toggleID("stepName", c.steps, nil, typ == agui.StepStarted, "step")
	case agui.TextMessageStart:
		id, err := f.str("messageId", true)
		if err != nil {
			return err
		}
		role, err := f.str("role", false)
		if err != nil {
			return err
		}
		switch role {
		case "", "assistant", "user", "system", "developer":
		default:
			return fmt.Errorf("role %q is not a text message's", role)
		}
		return toggle(c.texts, c.used, id, true, "text message")
	case agui.TextMessageContent, agui.ReasoningMessageContent:
		open, what := c.texts, "text message"
		if typ == agui.ReasoningMessageContent {
			open, what = c.thoughts, "reasoning message"
		}
		return f.delta("messageId", open, what)
	case agui.TextMessageEnd:
		return f.toggleID("messageId", c.texts, nil, false, "text message")
	case agui.ToolCallStart:
		id, err := f.str("toolCallId", true)
		if err != nil {
			return err
		}
		if _, err := f.str("toolCallName", true); err != nil {
			return err
		}
		return toggle(c.tools, c.used, id, true, "tool call")
	case agui.ToolCallArgs:
		return f.delta("toolCallId", c.tools, "tool call")
	case agui.ToolCallEnd:
		return f.toggleID("toolCallId", c.tools, nil, false, "tool call")
	case agui.ToolCallResult:
		id, err := f.str("messageId", true)
		if err != nil {
			return err
		}
		if _, err := f.str("toolCallId", true); err != nil {
			return err
		}
		if _, err := f.str("content", true); err != nil {
			return err
		}
		if role, err := f.str("role", false); err != nil || (role != "" && role != "tool") {
			return fmt.Errorf("role must be tool (%v)", err)
		}
		if c.used[id] {
			return fmt.Errorf("message id %q is used again", id)
		}
		c.used[id] = true
	case agui.ReasoningStart, agui.ReasoningEnd:
		used := c.used
		if typ == agui.ReasoningEnd {
			used = nil
		}
		return f.toggleID("messageId", c.spans, used, typ == agui.ReasoningStart, "reasoning span")
	case agui.ReasoningMessageStart:
		id, err := f.str("messageId", true)
		if err != nil {
			return err
		}
		if role, err := f.str("role", true); err != nil || role != "reasoning" {
			return fmt.Errorf("role must be reasoning (%v)", err)
		}
		return toggle(c.thoughts, c.used, id, true, "reasoning message")
	case agui.ReasoningMessageEnd:
		return f.toggleID("messageId", c.thoughts, nil, false, "reasoning message")
	case agui.StateSnapshot:
		raw, ok := f["snapshot"]
		if !ok {
			return errors.New("snapshot is missing")
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		c.state, c.hasState = v, true
	case agui.StateDelta:
		var ops []map[string]json.RawMessage
		if err := json.Unmarshal(f["delta"], &ops); err != nil || f["delta"] == nil {
			return errors.New("delta is not an array of operations")
		}
		if !c.hasState {
			return errors.New("no STATE_SNAPSHOT came before it")
		}
		for i, op := range ops {
			next, err := applyOp(c.state, op)
			if err != nil {
				return fmt.Errorf("delta[%d]: %w", i, err)
			}
			c.state = next
		}
	case agui.Custom:
		if _, err := f.str("name", true); err != nil {
			return err
		}
		if _, ok := f["value"]; !ok {
			return errors.New("value is missing")
		}
	case agui.Raw:
		if _, ok := f["event"]; !ok {
			return errors.New("event is missing")
		}
		if _, err := f.str("source", false); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown event type %q", typ)
	}
	return nil
}

// toggle opens (or closes) id in open, failing when it already is (or is
// not) open; an id in used, when given, may not be opened again.
func toggle(open, used map[string]bool, id string, opening bool, what string) error {
	switch {
	case opening && open[id]:
		return fmt.Errorf("%s %q is already open", what, id)
	case opening && used != nil && used[id]:
		return fmt.Errorf("%s id %q is used again", what, id)
	case !opening && !open[id]:
		return fmt.Errorf("no open %s %q", what, id)
	}
	if opening {
		open[id] = true
		if used != nil {
			used[id] = true
		}
	} else {
		delete(open, id)
	}
	return nil
}

// fieldSet is an event's members.
type fieldSet map[string]json.RawMessage

// str returns the string member name; required says it must be there.
func (f fieldSet) str(name string, required bool) (string, error) {
	raw, ok := f[name]
	if !ok {
		if required {
			return "", fmt.Errorf("%s is missing", name)
		}
		return "", nil
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%s is not a string", name)
	}
	return s, nil
}

// runIDs returns the threadId and runId members, which a run's start and
// end must both have.
func (f fieldSet) runIDs() (thread, run string, err error) {
	if thread, err = f.str("threadId", true); err != nil {
		return "", "", err
	}
	if run, err = f.str("runId", true); err != nil {
		return "", "", err
	}
	return thread, run, nil
}

// toggleID opens or closes, as toggle does, the id in member idName, which
// must be there.
func (f fieldSet) toggleID(idName string, open, used map[string]bool, opening bool, what string) error {
	id, err := f.str(idName, true)
	if err != nil {
		return err
	}
	return toggle(open, used, id, opening, what)
}

// delta checks an event that adds a delta to the open what named by the
// id in member idName: the delta must be a string, and not empty, as this
// package promises.
func (f fieldSet) delta(idName string, open map[string]bool, what string) error {
	id, err := f.str(idName, true)
	if err != nil {
		return err
	}
	delta, err := f.str("delta", true)
	if err != nil {
		return err
	}
	if delta == "" {
		return errors.New("delta is empty")
	}
	if !open[id] {
		return fmt.Errorf("no open %s %q", what, id)
	}
	return nil
}

func checkInputEcho(raw json.RawMessage) error {
	var in fieldSet
	if err := json.Unmarshal(raw, &in); err != nil {
		return errors.New("is not an object")
	}
	for _, name := range []string{"threadId", "runId"} {
		if _, err := in.str(name, true); err != nil {
			return err
		}
	}
	var msgs []fieldSet
	if err := json.Unmarshal(in["messages"], &msgs); err != nil || in["messages"] == nil {
		return errors.New("messages is not an array")
	}
	for i, m := range msgs {
		for _, name := range []string{"id", "role"} {
			if _, err := m.str(name, true); err != nil {
				return fmt.Errorf("messages[%d]: %w", i, err)
			}
		}
	}
	return nil
}

func checkOutcome(raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	var o struct {
		Type       string            `json:"type"`
		Interrupts []json.RawMessage `json:"interrupts"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return errors.New("outcome is not an object")
	}
	switch o.Type {
	case "success":
		if o.Interrupts != nil {
			return errors.New("a success outcome carries interrupts")
		}
	case "interrupt":
		if len(o.Interrupts) == 0 {
			return errors.New("an interrupt outcome has no interrupts")
		}
		for i, raw := range o.Interrupts {
			var in fieldSet
			if json.Unmarshal(raw, &in) != nil {
				return fmt.Errorf("outcome.interrupts[%d] is not an object", i)
			}
			for _, name := range []string{"id", "reason"} {
				if s, err := in.str(name, true); err != nil || s == "" {
					return fmt.Errorf("outcome.interrupts[%d]: %s is missing or empty", i, name)
				}
			}
			for _, name := range []string{"message", "toolCallId", "expiresAt"} {
				if _, err := in.str(name, false); err != nil {
					return fmt.Errorf("outcome.interrupts[%d]: %w", i, err)
				}
			}
			if rs, ok := in["responseSchema"]; ok && (len(rs) == 0 || rs[0] != '{') {
				return fmt.Errorf("outcome.interrupts[%d]: responseSchema is not an object", i)
			}
		}
	default:
		return fmt.Errorf("outcome type %q is neither success nor interrupt", o.Type)
	}
	return nil
}

func checkUsage(raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	var us []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &us); err != nil {
		return errors.New("usage is not an array of objects")
	}
	for i, u := range us {
		for name, v := range u {
			if name == "model" || name == "provider" {
				continue
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("usage[%d].%s is not a count", i, name)
			}
		}
	}
	return nil
}

// applyOp applies one RFC 6902 operation of the kinds this package
// produces (add and replace; remove too) to doc.
func applyOp(doc any, op map[string]json.RawMessage) (any, error) {
	var kind, path string
	if json.Unmarshal(op["op"], &kind) != nil || json.Unmarshal(op["path"], &path) != nil {
		return nil, errors.New("op and path must be strings")
	}
	var value any
	raw, hasValue := op["value"]
	if hasValue {
		if err := json.Unmarshal(raw, &value); err != nil {
			return nil, err
		}
	}
	switch kind {
	case "add", "replace":
		if !hasValue {
			return nil, fmt.Errorf("%s has no value", kind)
		}
	case "remove":
	default:
		return nil, fmt.Errorf("op %q is not one this stream uses", kind)
	}
	if path == "" {
		if kind == "remove" {
			return nil, errors.New("cannot remove the whole document")
		}
		return value, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("path %q is not a JSON pointer", path)
	}
	tokens := strings.Split(path[1:], "/")
	for i, tok := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	parent := doc
	for _, tok := range tokens[:len(tokens)-1] {
		switch p := parent.(type) {
		case map[string]any:
			next, ok := p[tok]
			if !ok {
				return nil, fmt.Errorf("path %q: no member %q", path, tok)
			}
			parent = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(p) {
				return nil, fmt.Errorf("path %q: no index %q", path, tok)
			}
			parent = p[i]
		default:
			return nil, fmt.Errorf("path %q goes through a scalar", path)
		}
	}
	last := tokens[len(tokens)-1]
	switch p := parent.(type) {
	case map[string]any:
		if _, ok := p[last]; !ok && kind != "add" {
			return nil, fmt.Errorf("path %q: no member %q to %s", path, last, kind)
		}
		if kind == "remove" {
			delete(p, last)
		} else {
			p[last] = value
		}
		return doc, nil
	case []any:
		// An array's change replaces the slice, which its parent holds:
		// set it there again.
		var next []any
		switch {
		case kind == "add" && last == "-":
			next = append(p, value)
		default:
			i, err := strconv.Atoi(last)
			limit := len(p)
			if kind == "add" {
				limit++
			}
			if err != nil || i < 0 || i >= limit {
				return nil, fmt.Errorf("path %q: no index %q", path, last)
			}
			switch kind {
			case "add":
				next = append(p[:i:i], append([]any{value}, p[i:]...)...)
			case "replace":
				p[i] = value
				next = p
			case "remove":
				next = append(p[:i:i], p[i+1:]...)
			}
		}
		return setAt(doc, tokens[:len(tokens)-1], next)
	}
	return nil, fmt.Errorf("path %q goes through a scalar", path)
}

// setAt puts v at the path of tokens in doc.
func setAt(doc any, tokens []string, v any) (any, error) {
	if len(tokens) == 0 {
		return v, nil
	}
	switch p := doc.(type) {
	case map[string]any:
		child, err := setAt(p[tokens[0]], tokens[1:], v)
		if err != nil {
			return nil, err
		}
		p[tokens[0]] = child
		return p, nil
	case []any:
		i, err := strconv.Atoi(tokens[0])
		if err != nil || i < 0 || i >= len(p) {
			return nil, fmt.Errorf("no index %q", tokens[0])
		}
		child, err := setAt(p[i], tokens[1:], v)
		if err != nil {
			return nil, err
		}
		p[i] = child
		return p, nil
	}
	return nil, errors.New("path goes through a scalar")
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
