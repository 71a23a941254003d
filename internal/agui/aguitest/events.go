package aguitest

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentgate/agentgate/internal/agui"
)

// eventChecks is, for each event type the Checker knows, what checks an
// event's members and applies it. It is read only.
var eventChecks = map[agui.EventType]func(*Checker, fieldSet) error{
	agui.RunStarted:              (*Checker).runStarted,
	agui.RunFinished:             (*Checker).runFinished,
	agui.RunError:                (*Checker).runError,
	agui.StepStarted:             (*Checker).stepStarted,
	agui.StepFinished:            (*Checker).stepFinished,
	agui.TextMessageStart:        (*Checker).textMessageStart,
	agui.TextMessageContent:      (*Checker).textMessageContent,
	agui.TextMessageEnd:          (*Checker).textMessageEnd,
	agui.ToolCallStart:           (*Checker).toolCallStart,
	agui.ToolCallArgs:            (*Checker).toolCallArgs,
	agui.ToolCallEnd:             (*Checker).toolCallEnd,
	agui.ToolCallResult:          (*Checker).toolCallResult,
	agui.ReasoningStart:          (*Checker).reasoningStart,
	agui.ReasoningMessageStart:   (*Checker).reasoningMessageStart,
	agui.ReasoningMessageContent: (*Checker).reasoningMessageContent,
	agui.ReasoningMessageEnd:     (*Checker).reasoningMessageEnd,
	agui.ReasoningEnd:            (*Checker).reasoningEnd,
	agui.StateSnapshot:           (*Checker).stateSnapshot,
	agui.StateDelta:              (*Checker).stateDelta,
	agui.Custom:                  (*Checker).custom,
	agui.Raw:                     (*Checker).raw,
}

func (c *Checker) runStarted(f fieldSet) error {
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
	return nil
}

func (c *Checker) runFinished(f fieldSet) error {
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
	if err := c.nothingOpen(); err != nil {
		return err
	}
	c.started, c.ended = false, string(agui.RunFinished)
	return nil
}

// nothingOpen fails if a text message, tool call, reasoning span or
// message, or step is still open, as none may be when a run finishes.
func (c *Checker) nothingOpen() error {
	for _, kind := range []struct {
		what string
		open map[string]bool
	}{{"text messages", c.texts}, {"tool calls", c.tools}, {"reasoning spans", c.spans},
		{"reasoning messages", c.thoughts}, {"steps", c.steps}} {
		if len(kind.open) > 0 {
			return fmt.Errorf("%s are still open: %v", kind.what, keysOf(kind.open))
		}
	}
	return nil
}

func (c *Checker) runError(f fieldSet) error {
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
	return nil
}

func (c *Checker) stepStarted(f fieldSet) error {
	return f.toggleID("stepName", c.steps, nil, true, "step")
}

func (c *Checker) stepFinished(f fieldSet) error {
	return f.toggleID("stepName", c.steps, nil, false, "step")
}

func (c *Checker) textMessageStart(f fieldSet) error {
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
}

func (c *Checker) textMessageContent(f fieldSet) error {
	return f.delta("messageId", c.texts, "text message")
}

func (c *Checker) textMessageEnd(f fieldSet) error {
	return f.toggleID("messageId", c.texts, nil, false, "text message")
}

func (c *Checker) toolCallStart(f fieldSet) error {
	id, err := f.str("toolCallId", true)
	if err != nil {
		return err
	}
	if _, err := f.str("toolCallName", true); err != nil {
		return err
	}
	return toggle(c.tools, c.used, id, true, "tool call")
}

func (c *Checker) toolCallArgs(f fieldSet) error {
	return f.delta("toolCallId", c.tools, "tool call")
}

func (c *Checker) toolCallEnd(f fieldSet) error {
	return f.toggleID("toolCallId", c.tools, nil, false, "tool call")
}

func (c *Checker) toolCallResult(f fieldSet) error {
	id, err := f.str("messageId", true)
	if err != nil {
		return err
	}
	for _, name := range []string{"toolCallId", "content"} {
		if _, err := f.str(name, true); err != nil {
			return err
		}
	}
	if role, err := f.str("role", false); err != nil || (role != "" && role != "tool") {
		return fmt.Errorf("role must be tool (%v)", err)
	}
	if c.used[id] {
		return fmt.Errorf("message id %q is used again", id)
	}
	c.used[id] = true
	return nil
}

func (c *Checker) reasoningStart(f fieldSet) error {
	return f.toggleID("messageId", c.spans, c.used, true, "reasoning span")
}

func (c *Checker) reasoningEnd(f fieldSet) error {
	return f.toggleID("messageId", c.spans, nil, false, "reasoning span")
}

func (c *Checker) reasoningMessageStart(f fieldSet) error {
	id, err := f.str("messageId", true)
	if err != nil {
		return err
	}
	if role, err := f.str("role", true); err != nil || role != "reasoning" {
		return fmt.Errorf("role must be reasoning (%v)", err)
	}
	return toggle(c.thoughts, c.used, id, true, "reasoning message")
}

func (c *Checker) reasoningMessageContent(f fieldSet) error {
	return f.delta("messageId", c.thoughts, "reasoning message")
}

func (c *Checker) reasoningMessageEnd(f fieldSet) error {
	return f.toggleID("messageId", c.thoughts, nil, false, "reasoning message")
}

func (c *Checker) stateSnapshot(f fieldSet) error {
	raw, ok := f["snapshot"]
	if !ok {
		return errors.New("snapshot is missing")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	c.state, c.hasState = v, true
	return nil
}

// stateDelta applies the delta's operations in order to the state the
// stream built so far.
func (c *Checker) stateDelta(f fieldSet) error {
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
	return nil
}

func (c *Checker) custom(f fieldSet) error {
	if _, err := f.str("name", true); err != nil {
		return err
	}
	if _, ok := f["value"]; !ok {
		return errors.New("value is missing")
	}
	return nil
}

func (c *Checker) raw(f fieldSet) error {
	if _, ok := f["event"]; !ok {
		return errors.New("event is missing")
	}
	_, err := f.str("source", false)
	return err
}
