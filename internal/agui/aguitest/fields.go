package aguitest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

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
			if err := checkInterrupt(i, raw); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("outcome type %q is neither success nor interrupt", o.Type)
	}
	return nil
}

// checkInterrupt checks the interrupt at index i of an outcome.
func checkInterrupt(i int, raw json.RawMessage) error {
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

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
